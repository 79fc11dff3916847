"""verl: the console's ``step:N - key:value - ...`` lines and the file logger's JSONL.

The console prints one line per step (under Ray with a ``(TaskRunner pid=...)`` prefix);
terminals and pasted logs wrap it mid-token, so lines that continue the ``key:value`` pattern
are joined back without a separator. The file logger writes ``{"step": N, "data": {...}}``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ._format import Format, register
from .base import FileState
from .generic import JsonlMetricsReader
from .mapping import MappingTable, Rule, synonym
from .printed import parse_number
from .tables import Rows, Steps
from .textlog import TextLogReader, head, search_deep, sniff_files

__all__ = ["VERL", "VerlConsoleReader", "VerlJsonlReader"]

VERL = MappingTable(
    "verl",
    (
        synonym("critic/score/mean", "sequence score, before the in-reward KL"),
        synonym("response_length/mean"),
        synonym("response_length/clip_ratio"),
        synonym("actor/entropy"),
        Rule("actor/entropy_loss", "train/entropy", "aggregate token entropy (older versions)"),
        Rule("actor/kl_loss", "train/ref_kl", "estimator: kl_loss_type (k1/k2/k3)"),
        Rule(
            "critic/kl",
            "train/ref_kl",
            "in-reward KL penalty runs (TinyZero, verl 0.1-0.3): ray_trainer.py "
            "apply_kl_penalty's mean kl_penalty(old_log_prob, ref_log_prob), k1 by default",
        ),
        synonym("rollout_corr/k3_kl", "k3, actor vs rollout"),
        synonym("rollout_corr/kl", "k1 = mean(rollout - old logp)"),
        Rule("actor/pg_clipfrac", "train/clip_frac"),
        Rule("actor/ppo_kl", "train/ppo_kl"),
        Rule("actor/grad_norm", "train/grad_norm"),
        Rule("actor/lr", "train/lr"),
        Rule("actor/loss", "train/loss"),
        synonym("actor/pg_loss", "where actor/loss is not logged"),
        synonym("timing_s/step"),
        synonym("timing_s/gen"),
        synonym("timing_s/reward"),
        synonym("timing_s/update_actor"),
        Rule(r"^val-core/(.+)/acc/mean@\d+$", r"eval/\1/score", "held-out validation"),
        Rule(r"^val-core/(.+)/reward/mean@\d+$", r"eval/\1/score", "where acc is absent"),
    ),
    (
        (
            "training/rollout_probs_diff_*",
            "|Δp| on probabilities, not |Δlogp|: train/logprob_abs_diff stays absent",
        ),
        ("critic/rewards/mean", "reward after the in-reward KL penalty"),
        ("actor/reward_kl_penalty", "in-reward KL penalty, not the KL itself"),
        ("rollout_corr/rollout_is_eff_sample_size", "ESS of clamped IS weights; not mapped"),
        ("perf/throughput", "tokens per second per GPU"),
        ("critic/advantages/*", "mean/max/min only; no std"),
    ),
    ("verl core logs no group std and no zero-variance groups.",),
)

STEP = re.compile(r"(?:^|\s)step:(\d+) - (.*)$", re.M)
_CONT = re.compile(r"^\s?\S*(?: - ?\S+)*(?: -)?\s*$")


def _is_continuation(text: str) -> bool:
    t = text.strip()
    return bool(t) and (":" in t or t[0] in "0123456789.-e") and bool(_CONT.match(text))


def _verl_pairs(text: str, *, complete: bool) -> dict[str, Any]:
    parts = text.split(" - ")
    if not complete and parts:
        parts = parts[:-1]
    out: dict[str, Any] = {}
    for part in parts:
        key, sep, val = part.strip().rpartition(":")
        if not sep or not key:
            continue
        v = parse_number(val)
        if v is not None:
            out[key] = v
    return out


class VerlConsoleReader(TextLogReader):
    name = "verl"
    table = VERL

    def accept(self, p: Path) -> bool:
        return bool(search_deep(p, STEP))

    def feed(self, st: FileState, text: str, p: Path, lineno: int) -> None:
        m = STEP.search(text)
        if m:
            self.end_pending(st, p)
            st.pending, st.pending_step, st.pending_line = m.group(2), int(m.group(1)), lineno
            st.extra["lines"] = 1
            return
        if st.pending is not None and _is_continuation(text):
            st.pending += text
            st.extra["lines"] = st.extra.get("lines", 1) + 1
            if st.extra["lines"] > 50:
                self.end_pending(st, p)
            return
        self.end_pending(st, p)

    def flush(self, st: FileState, p: Path, *, final: bool) -> None:
        # The line is complete once read; a wrapped continuation arriving later re-emits the
        # joined record, whose values overwrite these at the same step.
        if st.pending is None or st.pending_step is None:
            return
        self.emit(st.pending_step, _verl_pairs(st.pending, complete=True))

    def end_file(self, st: FileState) -> None:
        # A verl record ends with its line; one open at the end of a file is complete.
        self.end_pending(st, st.path)
        super().end_file(st)  # the events still open (a traceback at the end)


class VerlJsonlReader(JsonlMetricsReader):
    """verl's file logger: ``{"step": N, "data": {...}}`` per line.

    The logger opens its file with mode "w", so a resumed run truncates it: the file shrinks
    and is read again from its start (``base.FileReader``), never as garbage.
    """

    name = "verl-jsonl"
    table = VERL

    def accept(self, p: Path) -> bool:
        return _is_verl_jsonl(p)

    def row(self, rec: dict[str, Any], p: Path, lineno: int) -> None:
        step = rec.get("step")
        data = rec.get("data")
        if isinstance(step, bool) or not isinstance(step, int) or not isinstance(data, dict):
            self.run.warnings.append(
                f'{p}:{lineno}: expected {{"step": int, "data": {{...}}}}; skipped'
            )
            return
        self.rows(p).row({**data, "step": step}, f"{p}:{lineno}")

    def rows(self, p: Path) -> Rows:
        t = self._tables.get(p)
        if t is None:
            t = self._tables[p] = Rows(self.run, self._adder(p), str(p), steps=_STEPS)
        return t


_STEPS = Steps("name", "step", why="step column 'step' (verl's file logger)")


def _is_verl_jsonl(p: Path) -> bool:
    t = head(p, 64 << 10)
    return bool(re.match(r'\s*\{\s*"step"\s*:\s*\d+\s*,\s*"data"\s*:\s*\{', t))


register(
    Format(
        "verl",
        "verl console log (step:N - key:value - ...)",
        lambda p: sniff_files(p, VerlConsoleReader.patterns, lambda f: search_deep(f, STEP)),
        VerlConsoleReader,
        priority=32,
        table=VERL,
        kind="console log",
        sample_dirs=(r"global_step_?\d+",),  # its checkpoints beside the log
    )
)
register(
    Format(
        "verl-jsonl",
        'verl file logger JSONL ({"step": N, "data": {...}})',
        lambda p: sniff_files(p, ("*.jsonl",), _is_verl_jsonl),
        VerlJsonlReader,
        priority=20,
        table=VERL,
        kind="JSONL",
    )
)
