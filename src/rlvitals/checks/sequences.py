"""The sampler/trainer mismatch per sequence: the share of each update's sequences whose ratio
(token mean of exp(|Δ|), NeMo-RL's token_mult_prob_error per sequence) is past a line, and the
attempts furthest past it.

The writer logs the share past its own line, 1.05 (``train/mismatch_seq_over``), and keeps
each attempt's ratio in its record (``mismatch.tme``). At that line the logged share is read;
at another (``mismatch_seq_line``) it is recounted from the attempts' own ratios where the run
keeps them. Read by the agreement check (the tail) and the text check (gibberish with the
tail past its line).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import Series
from .context import Context, fact, round_sig
from .thresholds import line, lines

__all__ = ["LOGGED_SEQ_LINE", "SEQ_OVER", "SeqShares", "cite", "seq_shares"]

# The line the writer counts ``train/mismatch_seq_over`` past (the metrics' SEQ_TME_LINE,
# NeMo-RL's plotting line); ``mismatch_seq_line`` at another value recounts the share.
# source: NeMo-RL's token_mult_prob_error plotting line (its code plots a sample past 1.05)
LOGGED_SEQ_LINE = 1.05
# The per-sequence tail (metrics._seq_tail): share of sequences past that line, their ratios.
SEQ_OVER = "train/mismatch_seq_over"


@lines
@dataclass(frozen=True)
class SequencesLines:
    """Where the per-sequence mismatch is counted."""

    mismatch_seq_line: float = line(
        LOGGED_SEQ_LINE,
        "a sequence's ratio (token mean of exp(|Δ|)) past which it counts in the tail share; "
        "at 1.05 the logged train/mismatch_seq_over is read, at another line the share is "
        "recounted from the attempts' own ratios",
        "NeMo-RL's plotting line for token_mult_prob_error (its code plots a sample past 1.05)",
    )


@dataclass
class SeqShares:
    """Each update's share of sequences past the sequence line, and where it came from."""

    series: Series | None
    line: float  # the sequence ratio the share counts past
    recounted: int | None = None  # attempts whose own ratios were counted (None: the logged share)
    unavailable: bool = False  # another line was set, but the run keeps no per-attempt ratios

    def evidence(self, asked: float) -> dict[str, Any]:
        """Which share a finding read, where a line other than the writer's was asked for."""
        if asked == LOGGED_SEQ_LINE:
            return {}
        if self.recounted is not None:
            return {"seq_share_from": "attempts", "attempts_counted": self.recounted}
        return {"seq_share_from": SEQ_OVER, "seq_line_asked": asked}


@fact
def seq_shares(ctx: Context) -> SeqShares:
    """The share of each update's sequences whose ratio (token mean of exp(|Δ|)) is past
    ``mismatch_seq_line``. At the writer's own line (1.05) the logged share; at another line
    recounted from the attempts' own ratios (their records' ``mismatch.tme``) where the run
    keeps them, else the logged share, marked ``unavailable``."""
    line = ctx.thresholds.of(SequencesLines).mismatch_seq_line
    logged = ctx.finite(SEQ_OVER)
    if line == LOGGED_SEQ_LINE:
        return SeqShares(logged, line)
    ratios = _seq_ratios(ctx)
    if not ratios:
        return SeqShares(logged, LOGGED_SEQ_LINE, unavailable=True)
    steps = sorted(ratios)
    shares = [float(np.count_nonzero(ratios[k] > line)) / len(ratios[k]) for k in steps]
    counted = sum(len(r) for r in ratios.values())
    return SeqShares(Series(np.array(steps, dtype=np.int64), np.array(shares)), line, counted)


def _seq_ratio(rec: dict[str, Any]) -> float | None:
    """An attempt record's sequence ratio (``mismatch.tme``), where a finite number."""
    mm = rec.get("mismatch")
    r = mm.get("tme") if isinstance(mm, dict) else None
    if isinstance(r, (int, float)) and not isinstance(r, bool) and math.isfinite(r):
        return float(r)
    return None


def _seq_ratios(ctx: Context) -> dict[int, np.ndarray]:
    """Per update the run has reached, its attempts' sequence ratios; empty where the run
    keeps none (not the native format, or written before the writer kept them)."""
    t = ctx.data.attempts
    if t is None or not len(t) or not t.files:
        return {}
    from ..errors import RlvitalsError
    from ..readers import load_attempt_record

    last = ctx.data.last_step
    out: dict[int, np.ndarray] = {}
    for step in t.steps().tolist():
        if last is not None and step > last:
            continue
        rows = t.rows_at(int(step))
        got: list[float] = []
        for i in range(rows.start, rows.stop):
            try:
                r = _seq_ratio(load_attempt_record(ctx.data, i))
            except (RlvitalsError, OSError):
                continue
            if r is not None:
                got.append(r)
        if got:
            out[int(step)] = np.array(got)
    return out


# Attempts a tail finding cites (its sequences furthest past the line), read from the run's
# own attempt records where it has them, over the first updates from the onset.
CITE = 8
CITE_STEPS = 2
CITE_ROWS = 5000


def cite(ctx: Context, steps: np.ndarray, line: float) -> list[dict[str, Any]]:
    """The attempts of ``steps`` whose sequence ratio (their record's ``mismatch.tme``) is past
    ``line``, furthest first: ``{"step", "attempt_id", "seq_ratio"}`` (native runs from their
    attempt records, a framework's sample dump from the ratios its reader kept)."""
    t = ctx.data.attempts
    dumped = ctx.data.info.get("mismatch_ratios")  # a sample dump's (readers/samples/base.py)
    if isinstance(dumped, dict) and dumped:
        kept = [e for st in steps[:CITE_STEPS].tolist() for e in dumped.get(int(st), [])]
        kept = sorted((e for e in kept if e["seq_ratio"] > line), key=lambda e: -e["seq_ratio"])
        return kept[:CITE]
    if t is None or not len(t) or not t.files:
        return []
    from ..errors import RlvitalsError
    from ..readers import load_attempt_record

    got: list[dict[str, Any]] = []
    for step in steps[:CITE_STEPS].tolist():
        rows = t.rows_at(int(step))
        for i in range(rows.start, min(rows.stop, rows.start + CITE_ROWS)):
            try:
                rec = load_attempt_record(ctx.data, i)
            except (RlvitalsError, OSError):
                return got
            mm = rec.get("mismatch")
            r = mm.get("tme") if isinstance(mm, dict) else None
            if isinstance(r, (int, float)) and r > line and "attempt_id" in rec:
                got.append(
                    {"step": int(step), "attempt_id": str(rec["attempt_id"]), "seq_ratio": r}
                )
    got.sort(key=lambda e: -float(e["seq_ratio"]))
    return [{**e, "seq_ratio": round_sig(float(e["seq_ratio"]))} for e in got[:CITE]]
