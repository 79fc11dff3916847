"""TRL (GRPOTrainer and other HF Trainer loops): ``trainer_state.json`` and console dicts.

``trainer_state.json`` holds ``log_history``, one entry per logging event with its ``step``;
it is rewritten at each checkpoint, so it is read again whole when it changes. In an output
directory the root file (written at the end) is preferred, else the newest
``checkpoint-N/trainer_state.json``. A file is a trainer state by its content, whatever it is
called: a JSON object with a ``log_history`` list, or the bare list (``training_logs.json``,
``history.json``). A JSON list of step records that are not HF Trainer's (no ``epoch``,
``learning_rate`` or ``loss``) is the ``json`` format (``jsontables``: any JSON table). Each
entry goes through the one table layer (``tables``). Fields that are text (a loop's own ``phase_task_id``) are kept as the
run's labels (``info["labels"]``), never as metrics.

The console prints each logging event as a dict without a step: the dicts are numbered in
order from 1 (exact with ``logging_steps=1``; otherwise multiply by logging_steps). A dict with
ms-swift's ``global_step/max_steps`` uses that step. The end-of-training summary
(``train_runtime``) is kept in ``info``, not as a step.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..model import RunData
from ._format import Format, register
from .base import FileState, decode_json, open_binary, valid_step
from .mapping import Mapper, MappingTable, Rule, synonym
from .printed import brace_balance, parse_pairs
from .tables import Rows, Steps, step_rank, step_value
from .textlog import TextLogReader, head, sniff_files

__all__ = ["TRL", "TrlConsoleReader", "TrlStateReader"]

TRL = MappingTable(
    "trl",
    (
        synonym("reward"),
        synonym(
            "reward_std",
            "whole-batch std in current TRL (before mid-2025 it was the mean within-group std)",
        ),
        synonym(
            "frac_reward_zero_std",
            "share of samples whose group std is 0 (equal-size groups: share of groups)",
        ),
        synonym("completions/mean_length"),
        synonym("completion_length", "older versions"),
        synonym("completions/clipped_ratio"),
        synonym("entropy", "token mean of the full-distribution entropy"),
        Rule("kl", "train/ref_kl", "k3 to the reference; only when beta != 0"),
        synonym(
            "sampling/sampling_logp_difference/mean", "|old - vLLM logp|, vLLM IS correction on"
        ),
        synonym("clip_ratio/region_mean"),
        Rule("clip_ratio/low_mean", "train/clip_frac_low", "ratio under 1 - eps with A < 0"),
        Rule("clip_ratio/high_mean", "train/clip_frac_high", "ratio over 1 + eps with A > 0"),
        Rule(
            r"^sampling/importance_sampling_ratio/(min|mean|max)$",
            r"train/is_weight_\1",
            "logged after the correction's truncation or masking (trl #5231)",
        ),
        synonym("loss"),
        synonym("grad_norm"),
        synonym("learning_rate"),
        synonym("step_time"),
    ),
    (("clip_ratio/low_min, high_max", "the extremes over ranks of each side's share"),),
    (
        "TRL logs no group std: reward/group_std_mean is absent.",
        "Console dicts carry no step: they are numbered 1, 2, ... in order (exact with "
        "logging_steps=1); ms-swift's global_step/max_steps is used where present.",
    ),
)

_SUMMARY_KEYS = ("train_runtime", "train_samples_per_second", "total_flos")


class TrlStateReader:
    """``trainer_state.json``: the root file, else the newest checkpoint's that can be read
    (a newest one cut short by a job killed while saving falls back to the one before, with a
    warning). A file may hold the bare ``log_history`` list."""

    name = "trl"
    table = TRL

    def __init__(self, path: Path, *, extra_rules: tuple[Rule, ...] = ()) -> None:
        self.path = path
        self.run = RunData(source=str(path), format=self.name)
        self.extra_rules = extra_rules
        self.mapper = self._mapper()
        self._seen: tuple[tuple[Path, int, int], ...] | None = None

    def _mapper(self) -> Mapper:
        return Mapper(self.table, self.run, extra=self.extra_rules)

    def candidates(self) -> list[Path]:
        """The state files to try, best first."""
        if self.path.is_file():
            return [self.path]
        out = []
        root = self.path / "trainer_state.json"
        if root.is_file():
            out.append(root)
        found: list[tuple[int, Path]] = []
        for p in self.path.glob("checkpoint-*/trainer_state.json"):
            m = re.fullmatch(r"checkpoint-(\d+)", p.parent.name)
            if m:
                found.append((int(m.group(1)), p))
        out.extend(p for _, p in sorted(found, reverse=True))
        return out

    def file(self) -> Path | None:
        """The state file read (the first candidate)."""
        c = self.candidates()
        return c[0] if c else None

    def poll(self) -> bool:
        cands = self.candidates()
        key = []
        for p in cands:
            try:
                st = p.stat()
            except OSError:
                continue
            key.append((p, st.st_mtime_ns, st.st_size))
        if tuple(key) == self._seen:
            return False
        self._seen = tuple(key)
        problems: list[str] = []
        for p in cands:
            state = self._load(p, problems)
            if state is None:
                continue
            if problems:
                problems.append(f"{p}: read instead (an older checkpoint)")
            self._warn(problems)
            self._take(p, state)
            return True
        self._warn(problems)
        return False

    def _warn(self, problems: list[str]) -> None:
        # The file is read again whole each time it changes: say each problem once.
        self.run.warnings.extend(w for w in problems if w not in self.run.warnings)

    def _load(self, p: Path, problems: list[str]) -> dict[str, Any] | None:
        try:
            with open_binary(p) as f:
                raw = f.read()
        except OSError as exc:
            problems.append(f"{p}: cannot read ({exc.strerror or exc}); skipped")
            return None
        try:
            state, note = decode_json(raw)
        except ValueError as exc:
            problems.append(f"{p}: not valid JSON ({exc}); skipped")
            return None
        if note:
            problems.append(f"{p}: {note}")
        if isinstance(state, list):
            state = {"log_history": state}  # the bare list, saved under any name
        history = state.get("log_history") if isinstance(state, dict) else None
        if not isinstance(history, list):
            problems.append(
                f"{p}: expected a 'log_history' list (or a list of step records); skipped"
            )
            return None
        return state

    def _take(self, p: Path, state: dict[str, Any]) -> None:
        """Each entry of ``log_history`` through the table layer (``tables.Rows``): its
        ``step``, its numbers as values, its text as the run's labels; the end-of-training
        summary (``train_runtime``) kept in ``info``."""
        rows = Rows(self.run, self.mapper.add, str(p), steps=_STATE_STEPS)
        for i, entry in enumerate(state["log_history"]):
            step = entry.get("step") if isinstance(entry, dict) else None
            if isinstance(step, bool) or not isinstance(step, int) or valid_step(step) is None:
                self.run.warnings.append(
                    f"{p}: log_history[{i}]: expected an integer 'step' in 0..2**63-1; skipped"
                )
                continue
            if any(k in entry for k in _SUMMARY_KEYS):
                self.run.info.setdefault("summary", {}).update(entry)
                continue
            rows.row(entry, f"{p}: log_history[{i}]")
        for k in ("global_step", "max_steps", "logging_steps", "best_model_checkpoint"):
            if k in state:
                self.run.info[k] = state[k]


_STATE_STEPS = Steps("name", "step", why="step column 'step' (each log_history entry's)")


DICT_START = re.compile(r"\{\s*['\"](?:loss|reward|grad_norm|learning_rate|train_runtime)['\"]")


class TrlConsoleReader(TextLogReader):
    name = "trl-console"
    table = TRL

    def reset(self) -> None:
        super().reset()
        self._count = 0

    def accept(self, p: Path) -> bool:
        return bool(DICT_START.search(head(p)))

    def feed(self, st: FileState, text: str, p: Path, lineno: int) -> None:
        m = DICT_START.search(text)
        if m and brace_balance(text[: m.start()]) > 0:
            m = None  # a dict inside another ({"config": {"learning_rate": ...}}): not a record
        if m:
            self.start_dict(st, -1, text[m.start() :], p, lineno)
        else:
            self.continue_dict(st, text, p)

    def start_dict(self, st: FileState, step: int, text: str, p: Path, lineno: int) -> None:
        if st.pending is not None:
            self.run.warnings.append(
                f"{p}:{st.pending_line}: record not closed before the next one; read as far as "
                "it goes"
            )
            self.flush(st, p, final=True)
            st.pending = None
        st.pending, st.pending_step, st.pending_line = text, step, lineno
        st.extra["lines"] = 1
        if brace_balance(text) <= 0:
            self.end_pending(st, p)

    def flush(self, st: FileState, p: Path, *, final: bool) -> None:
        if not final or st.pending is None:
            return  # the step number is only known once the dict is complete
        values = parse_pairs(st.pending)
        if any(k in values for k in _SUMMARY_KEYS):
            self.run.info.setdefault("summary", {}).update(values)
            return
        # A step key of the dict (the table layer's names: ms-swift's global_step/max_steps
        # '12/100', a loop's own 'step'), the best-named first; never a metric.
        step = None
        for _, k in sorted((r, k) for k in values if (r := step_rank(k)) is not None):
            s = step_value(values.pop(k))
            if step is None and s is not None and s >= 0:
                step = s
        if step is None:
            step = self._count + 1
            # numbered by the reader (records in order), not printed by the file
            self.run.info["steps_numbered"] = self.run.info.get("steps_numbered", 0) + 1
        self._count = max(self._count, step)
        self.emit(step, values)


_STATE = re.compile(r'^\s*\{[\s\S]*?"log_history"\s*:\s*\[')
_LIST = re.compile(r"^\s*\[\s*\{")
_STEP_KEY = re.compile(r'"(?:step|global_step|_step|iteration|iter)"\s*:\s*\d')
_HF_KEYS = re.compile(r'"(?:epoch|learning_rate|loss|grad_norm)"\s*:')


def _first_record(text: str) -> str:
    """The text of the first object of a JSON list (as far as the head goes)."""
    start = text.find("{")
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return text[start:]


def json_kind(p: Path) -> str | None:
    """What a JSON file holds, by its content: ``"state"`` (an object with ``log_history``),
    ``"history"`` (a list of HF Trainer step records), ``"list"`` (a list of other step
    records), else None."""
    if p.suffix in (".jsonl", ".ndjson"):
        return None
    text = head(p, 1 << 20)
    if _STATE.match(text):
        return "state"
    if not _LIST.match(text):
        return None
    first = _first_record(text)
    if not _STEP_KEY.search(first):
        return None
    return "history" if len(_HF_KEYS.findall(first)) >= 2 else "list"


def _is_state(p: Path) -> bool:
    return json_kind(p) in ("state", "history")


def _sniff_state(path: Path) -> bool:
    if path.is_file():
        return _is_state(path)
    if not path.is_dir():
        return False
    if (path / "trainer_state.json").is_file():
        return True
    return any(True for _ in path.glob("checkpoint-*/trainer_state.json"))


register(
    Format(
        "trl",
        "TRL / HF Trainer trainer state (a JSON with log_history, or the bare list, whatever "
        "the file is called), or an output dir with checkpoints",
        _sniff_state,
        TrlStateReader,
        priority=10,
        table=TRL,
        kind="JSON",
        files="trainer_state.json, or any JSON holding log_history or the bare list",
        markers=("trainer_state.json",),
        marks=lambda d, names: any(
            (d / n / "trainer_state.json").is_file() for n in names if n.startswith("checkpoint-")
        ),
    )
)
register(
    Format(
        "trl-console",
        "TRL / HF Trainer console dicts ({'loss': ..., 'reward': ...}), numbered in order",
        lambda p: sniff_files(p, TrlConsoleReader.patterns, lambda f: DICT_START.search(head(f))),
        TrlConsoleReader,
        priority=38,
        table=TRL,
        kind="console log",
    )
)
