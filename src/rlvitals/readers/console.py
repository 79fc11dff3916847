"""Any console log: records found by their shape (``shapes.py``), whatever printed them.

Registered last among the console formats, so a framework's own reader wins where it fits;
this one reads what none of them recognises (NeMo-RL, torchforge, DeepSpeed-Chat, LlamaFactory,
Marin, mlx-lm, OpenPipe ART, TRL's PPOTrainer, a notebook's table, a pasted fragment...).
Keys are mapped by the framework table whose keys the log's first records match best (two
keys at least), then by canonical name; the rest are kept under their own names.

Lines that are not records become ``RunData.events`` (tracebacks, errors, OOM, 5xx, refused
connections) for the liveness check; log timestamps give each step its ``time`` and
``info["log_last_time"]`` the last time any line was stamped. ``info["key_table"]`` names the
table chosen, ``info["records_by_step_source"]`` counts records by where their step came from
(``marker``, ``block``, ``column``, ``bar``, ``order``).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Set
from pathlib import Path
from typing import Any

from . import keys as _keys
from ._format import FORMATS, Format, register
from .base import FileState, decode_text
from .mapping import Mapper, MappingTable, Rule, synonym
from .shapes import Record, ShapeParser, add_events
from .textlog import (
    TextLogReader,
    bar_under,
    clean_line,
    deep_lines,
    file_date,
    head,
    sniff_files,
)

__all__ = ["CONSOLE", "ConsoleReader", "looks_like_records"]

_IDENTITY = Rule(r"^(.+)$", r"\1", "a key that already is a canonical name is taken as such")
CONSOLE = MappingTable(
    "console",
    (_IDENTITY,),
    (("anything else", "kept under its own name; map it with --mapping FILE"),),
    (
        "Records are found by shape: k: v, k=v, dicts (Python or JSON), markdown / HTML / "
        "box-drawing tables, tqdm postfixes; a record without a step takes its order.",
        "Keys of a known framework are mapped by that framework's table (chosen from the "
        "first records' keys).",
    ),
)


# Tables of frameworks that have no reader of their own: their printed names, by meaning.
# The console reader picks one of these (or a reader's table) from the first records' keys.
NEMO_RL = MappingTable(
    "nemo-rl",
    (
        Rule("Avg Total Reward", "reward/mean", "with dynamic sampling: before filtering"),
        Rule("Avg Reward", "reward/mean", "grpo.py:3715"),
        Rule("Mean Generation Length", "response/length_mean", "tokens per sample"),
        Rule(
            "Generation KL Error",
            "train/mismatch_kl",
            "kl(P_gen || P_train) per token, reference_policy_kl_type (loss_functions.py:414)",
        ),
        Rule("Loss", "train/loss"),
        Rule("Total step time", "perf/step_seconds"),
        Rule("generation", "perf/sampling_seconds", "timing section"),
        Rule("policy_training", "perf/training_seconds", "timing section"),
        Rule("E2E (Tokens/sec)", "perf/tokens_per_second", "per group (all GPUs)"),
        Rule("Accuracy", "eval/val/score", "📊 Validation Results"),
    ),
    (
        ("Average response length", "validation replies, not training"),
        ("Samples processed", "validation sample count"),
        ("Avg Filtered Reward", "reward of the groups kept by dynamic sampling only"),
    ),
    ("NeMo-RL prints each step as a block under '===== Step N/M ====='.",),
)
DEEPSPEED_CHAT = MappingTable(
    "deepspeed-chat",
    (
        Rule("average reward score", "reward/mean", "step3 main.py: mean reward-model score"),
        Rule("Average reward score", "reward/mean", "newer spelling"),
        synonym("act_loss", "actor (policy) loss"),
        Rule("Actor Loss", "train/loss", "newer spelling"),
        Rule("E2E latency", "perf/step_seconds"),
        Rule("Generate time", "perf/sampling_seconds"),
        Rule("Training time", "perf/training_seconds"),
    ),
    (("cri_loss", "critic (value) loss: no canonical name"),),
)
MLX_LM = MappingTable(
    "mlx-lm",
    (
        Rule("Total rewards mean", "reward/mean"),
        Rule("Total rewards std", "reward/std", "whole batch"),
        Rule("Train loss", "train/loss"),
        Rule("Learning Rate", "train/lr"),
        Rule("Tokens/sec", "perf/tokens_per_second"),
        Rule("Peak mem", "perf/peak_memory_gb"),
        Rule("Val total_rewards_mean", "eval/val/score", "validation reward"),
    ),
    (
        ("KL", "KL to the reference; its estimator was not read from source"),
        ("Val kl", "validation"),
        ("Val loss", "validation"),
        ("Grouped rewards std", "how it is reduced over groups was not read from source"),
    ),
)
TORCHFORGE = MappingTable(
    "torchforge",
    (
        Rule("grpo_loss/kl_divergence_mean", "train/ref_kl", "apps/grpo loss: k3 to the reference"),
        Rule("grpo_loss/advantage_std", "train/advantage_std"),
        Rule("grpo_loss/total_loss", "train/loss"),
        Rule("episode/avg_response_tokens", "response/length_mean"),
        Rule("main/rollout/std_advantage", "train/advantage_std", "older name"),
        synonym("buffer/sample/avg_sampled_policy_age", "policy versions"),
        synonym("buffer/sample/max_sampled_policy_age"),
        Rule("main_perf/continuous_training/total_duration_avg_s", "perf/step_seconds"),
    ),
    (
        ("grpo_loss/kl_divergence_max", "a max, not the mean"),
        ("^buffer/evict/.*_policy_staleness$", "of evicted samples, not of trained ones"),
    ),
)
TRL_PPO = MappingTable(
    "trl-ppo",
    (
        synonym("objective/scores", "the reward model's score (before the KL penalty)"),
        Rule("policy/entropy_avg", "train/entropy", "token mean, during the update"),
        Rule("policy/approxkl_avg", "train/ppo_kl"),
        Rule("policy/clipfrac_avg", "train/clip_frac"),
        synonym("lr"),
    ),
    (
        ("objective/kl", "k1 to the reference summed over the sequence, not a token mean"),
        ("objective/entropy", "-logprobs summed over the sequence at rollout"),
        ("objective/rlhf_reward", "score minus the KL penalty"),
        ("objective/non_score_reward", "the KL penalty term"),
    ),
)
ART = MappingTable(
    "art",
    (
        synonym("reward", "gather bar: mean over the trajectories so far"),
        Rule("completion_tokens", "response/length_mean", "gather bar: mean per trajectory"),
        synonym("loss", "train bar"),
        synonym("grad_norm"),
        synonym("entropy"),
    ),
    (("exceptions", "rollouts that raised, a mean per trajectory"),),
    ("ART's records are its tqdm bars: one gather and one train bar per step.",),
)
CONSOLE_TABLES = (NEMO_RL, DEEPSPEED_CHAT, MLX_LM, TORCHFORGE, TRL_PPO, ART)


def _score(table: MappingTable, keys: Set[str]) -> int:
    """Keys of ``keys`` the table's rules name; a key two namespaces deep counts twice (it is
    specific to its framework, ``reward`` is not)."""
    score = 0
    for r in table.rules:
        if r.is_pattern:
            pat = re.compile(r.source)
            score += any(pat.match(k) for k in keys)
        elif r.source in keys:
            score += 2 if r.source.count("/") >= 2 else 1
    return score


def _plain(key: str) -> bool:
    """A one-word lower-case key any loop prints (``loss``, ``kl``, ``reward``, ``lr``): no
    evidence of a framework (``reward_std``, ``completion_length`` are)."""
    return re.fullmatch(r"[a-z]+[0-9]*", key) is not None


def framework_table(keys: Set[str]) -> tuple[str, MappingTable] | None:
    """The registered framework table that names the most of ``keys`` (at least two)."""
    best: tuple[int, str, MappingTable] | None = None
    seen: set[int] = set()
    candidates = [(t.name, t) for t in CONSOLE_TABLES]
    for fmt in sorted(FORMATS.values(), key=lambda f: f.priority):
        table = getattr(fmt.factory, "table", None) or fmt.table
        if table is not None:
            candidates.append((fmt.name, table))
    for name, table in candidates:
        if id(table) in seen or table.name in ("generic", "rlvitals", "console"):
            continue
        seen.add(id(table))
        score = _score(table, keys)
        if score >= 2 and (best is None or score > best[0]):
            best = (score, name, table)
    return None if best is None else (best[1], best[2])


class ConsoleReader(TextLogReader):
    """Reads records of any shape from console logs (a file, or a directory's logs)."""

    name = "console"
    table = CONSOLE
    events_from_lines = False  # its own parser reads the events with the records
    patterns = ("*.log", "*.txt", "*.out", "*.err", "*.md", "*.html", "*.ipynb")

    def __init__(self, path: Path, *, extra_rules: tuple[Rule, ...] = ()) -> None:
        super().__init__(path, extra_rules=extra_rules)
        self._extra = extra_rules
        self.mapper = Mapper(self.table, self.run, extra=extra_rules)
        self._decided = False
        self._held: list[Record] = []
        self._timed: set[int] = set()
        self._printed: set[int] = set()
        self._numbered: set[int] = set()

    def accept(self, p: Path) -> bool:
        return looks_like_records(p)

    def line(self, st: FileState, raw: bytes, lineno: int) -> None:
        if b"\r" in raw and b"%|" in raw and not st.extra.get("ipynb"):
            # A record drawn over a progress bar: the bar's position, read first.
            bar = bar_under(decode_text(raw))
            if bar is not None:
                self._parser(st, st.path).feed(bar, lineno)
        super().line(st, raw, lineno)

    def _parser(self, st: FileState, p: Path) -> ShapeParser:
        parser = st.extra.get("shapes")
        if parser is None:
            parser = st.extra["shapes"] = ShapeParser(str(p), file_date(p))
            st.extra["ipynb"] = p.suffix == ".ipynb"
        return parser

    def feed(self, st: FileState, text: str, p: Path, lineno: int) -> None:
        parser = self._parser(st, p)
        if st.extra["ipynb"]:
            # A notebook is JSON written whole: its outputs are read once it closes.
            buf = st.extra.setdefault("notebook", [])
            buf.append(text)
            if text.rstrip() == "}":
                try:
                    nb = json.loads("\n".join(buf))
                except (ValueError, RecursionError):
                    return
                buf.clear()
                for i, line in enumerate(notebook_output_lines(nb), 1):
                    parser.feed(clean_line(line), i)
                self._take(parser)
            return
        parser.feed(text, lineno)
        self._take(parser)

    def finish(self) -> None:
        """The files are complete: close records, tables and tracebacks still open."""
        for p, st in self._states.items():
            parser = st.extra.get("shapes")
            if parser is not None and st.extra.get("notebook"):
                # The notebook's last line had no newline: read the whole file.
                st.extra["notebook"] = []
                for i, line in enumerate(notebook_output_lines(_load_notebook(p)), 1):
                    parser.feed(clean_line(line), i)
            if parser is not None:
                parser.finish()
                self._take(parser)
        super().finish()

    def _take(self, parser: ShapeParser) -> None:
        records, events = parser.drain()
        if parser.stray:
            self.run.info["stray_records"] = parser.stray
        if parser.warnings:
            self.run.warnings.extend(parser.warnings)
            parser.warnings.clear()
        if records:
            if self._decided:
                for rec in records:
                    self._record(rec)
            else:
                # The key table is chosen from the first records: held until two steps or
                # 40 keys are in (or the poll ends, see derive).
                self._held.extend(records)
                steps = {r.step for r in self._held}
                if len(steps) >= 2 or sum(len(r.values) for r in self._held) >= 40:
                    self._release()
        add_events(self.run, events)
        if parser.last_time is not None:
            last = self.run.info.get("log_last_time")
            if last is None or parser.last_time > last:
                self.run.info["log_last_time"] = parser.last_time

    def derive(self) -> None:
        """After each poll: records held to choose the key table are mapped now (and, when
        a sample is read to recognise the file, the stepless records its parsers hold)."""
        if self.sample_bytes is not None:
            for st in self._states.values():
                parser = st.extra.get("shapes")
                if parser is not None:
                    parser.settle()
                    self._take(parser)
        if self._held:
            self._release()

    def _release(self) -> None:
        held, self._held = self._held, []
        if not self._decided:
            self._decide(held)
        for rec in held:
            self._record(rec)

    def _decide(self, records: list[Record]) -> None:
        self._decided = True
        keys: set[str] = set()
        for rec in records:
            keys.update(rec.values)
        hit = framework_table(keys)
        self.run.info["key_table"] = None if hit is None else hit[0]
        if hit is not None:
            rules = hit[1].rules
            if _score(hit[1], {k for k in keys if not _plain(k)}) < 2:
                # Chosen on plain words any loop prints (loss, reward, lr, kl): a name the
                # framework gives one meaning and the words do not (a bare kl is its KL to the
                # reference in TRL, any KL elsewhere) is not taken from its table.
                rules = tuple(r for r in rules if r.is_pattern or not _keys.is_kl_like(r.source))
            table = MappingTable(hit[1].name, (*rules, _IDENTITY), hit[1].unmapped)
            self.mapper = Mapper(table, self.run, extra=self._extra)

    def _record(self, rec: Record) -> None:
        counts = self.run.info.setdefault("records_by_step_source", {})
        counts[rec.how] = counts.get(rec.how, 0) + 1
        if rec.how in ("order", "bar"):  # numbered by the reader, not printed by the file
            if rec.step not in self._printed:
                self._numbered.add(rec.step)
        else:
            self._printed.add(rec.step)
            self._numbered.discard(rec.step)
        self.run.info["steps_numbered"] = len(self._numbered)
        self.mapper.add(rec.step, rec.values)
        if rec.time is not None and rec.step not in self._timed and "time" not in rec.values:
            self._timed.add(rec.step)
            self.run.metrics.add(rec.step, "time", rec.time)


def notebook_output_lines(nb: Any) -> Iterator[str]:
    """The text lines of a Jupyter notebook's cell outputs: streams, HTML (else plain text)
    results, and errors as a traceback block. Cell sources are not read."""
    cells = nb.get("cells") if isinstance(nb, dict) else None
    for cell in cells if isinstance(cells, list) else ():
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        for out in outputs if isinstance(outputs, list) else ():
            if not isinstance(out, dict):
                continue
            kind = out.get("output_type")
            if kind == "stream":
                text: Any = out.get("text", "")
            elif kind == "error":
                yield "Traceback (most recent call last):"
                for line in out.get("traceback") or ():
                    yield from ("  " + t for t in str(line).split("\n"))
                yield f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"
                continue
            else:
                data = out.get("data") or {}
                text = data.get("text/html") or data.get("text/plain") or ""
            if isinstance(text, list):
                text = "".join(str(t) for t in text)
            yield from str(text).split("\n")


def _load_notebook(p: Path) -> Any:
    try:
        if p.stat().st_size > 256 << 20:
            return None
        return json.loads(p.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None


def looks_like_records(p: Path) -> bool:
    """Whether the start of ``p`` holds at least one metric record of any shape."""
    return _head_keys(p) is not None


def console_table_of(p: Path) -> str | None:
    """The console key table the start of ``p`` matches (``nemo-rl``...), else None."""
    keys = _head_keys(p)
    if not keys:
        return None
    hit = framework_table(keys)
    if hit is None or hit[1] not in CONSOLE_TABLES:
        return None
    if hit[1] is ART and "%|" not in head(p):
        return None  # ART's records are tqdm bars; its keys alone are words any loop prints
    return hit[1].name


@functools.lru_cache(maxsize=64)
def _head_keys_cached(path: str, size: int, mtime: float) -> frozenset[str] | None:
    p = Path(path)
    if p.suffix == ".ipynb":
        return _keys_in([clean_line(t) for t in notebook_output_lines(_load_notebook(p))], p)
    keys = _keys_in(head(p).split("\n"), p)
    if keys is None and (deep := deep_lines(p)) is not None:
        keys = _keys_in(deep, p)  # none in the head: further on, as search_deep looks
    return keys


def _keys_in(lines: list[str], p: Path) -> frozenset[str] | None:
    """The metric keys of the first records (three steps) among ``lines``, if any."""
    parser = ShapeParser(str(p), file_date(p))
    keys: set[str] = set()
    steps: set[int] = set()
    for i, line in enumerate(lines[:4000], 1):
        parser.feed(line, i)
        for rec in parser.records:
            keys.update(rec.values)
            steps.add(rec.step)
        parser.records.clear()
        if len(steps) >= 3:
            break
    else:
        parser.finish()
        for rec in parser.records:
            keys.update(rec.values)
    return frozenset(keys) if keys else None


def _head_keys(p: Path) -> frozenset[str] | None:
    try:
        st = p.stat()
    except OSError:
        return None
    return _head_keys_cached(str(p), st.st_size, st.st_mtime)


def _reader_for(table: MappingTable) -> type[ConsoleReader]:
    """A console reader whose key table is ``table`` from the first record on."""

    def init(self: ConsoleReader, path: Path, *, extra_rules: tuple[Rule, ...] = ()) -> None:
        ConsoleReader.__init__(self, path, extra_rules=extra_rules)
        self._decided = True
        self.run.info["key_table"] = table.name
        self.mapper = Mapper(
            MappingTable(table.name, (*table.rules, _IDENTITY), table.unmapped),
            self.run,
            extra=extra_rules,
        )

    return type(
        f"{table.name.title().replace('-', '')}ConsoleReader",
        (ConsoleReader,),
        {"name": table.name, "table": table, "__init__": init},
    )


_DESCRIPTIONS = {
    "nemo-rl": "NeMo-RL console (===== Step N/M ===== blocks of '• Name: value' lines)",
    "deepspeed-chat": "DeepSpeed-Chat step-3 console (epoch: e|step: s|act_loss: ... lines)",
    "mlx-lm": "mlx-lm GRPO console (Iter N: Train loss x, Total rewards mean y, ...)",
    "torchforge": "torchforge console backend (=== METRICS STEP N === blocks)",
    "trl-ppo": "TRL PPOTrainer console dicts (objective/*, policy/*, loss/*)",
    "art": "OpenPipe ART console (gather and train tqdm bars with metric postfixes)",
}
for _i, _table in enumerate(CONSOLE_TABLES):
    register(
        Format(
            _table.name,
            _DESCRIPTIONS[_table.name] + "; read by shape",
            functools.partial(
                lambda p, name: sniff_files(
                    p, ConsoleReader.patterns, lambda f: console_table_of(f) == name
                ),
                name=_table.name,
            ),
            _reader_for(_table),
            priority=94,
            table=_table,
            kind="console log",
        )
    )

register(
    Format(
        "console",
        "any console log: step markers (step N/M, [step N], iter N, update N, Step N |, "
        "steps=N/M, [it N], Episode N/M, epoch=N alone, "
        "Epoch:[e/E] then (i/N)) and key/value pairs, dicts, tables, tqdm postfixes, in markdown "
        "fences or among sample printouts (Marin, LlamaFactory, MiniMind, notebooks, pasted "
        "fragments, hand-written loops, any framework by shape)",
        lambda p: sniff_files(p, ConsoleReader.patterns, looks_like_records),
        ConsoleReader,
        priority=95,
        table=CONSOLE,
        kind="console log",
        files="a console log (or a directory of them), a pasted fragment, a notebook table",
        suffixes=(".log", ".txt", ".out", ".err", ".md"),
    )
)
