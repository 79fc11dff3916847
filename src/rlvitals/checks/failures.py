"""3. Failed attempts: a steady trickle is normal for cloud sandboxes; a burst means the
environment or the grader is broken.

Reads ``discard/rollouts/rollout_failed/<Exc>`` and ``grading_failed/<Exc>`` per update, as a
share of the update's attempts where the total is known. Each burst is its own finding, so an
early burst never hides a later one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Finding
from .context import Context, finding, round_sig
from .stats import MIN_WINDOW, episodes, read_words
from .thresholds import line, lines

NAME = "failures"


@lines
@dataclass(frozen=True)
class FailuresLines:
    """Where the failures check draws its lines."""

    failure_burst_warn: float = line(
        0.2,
        "share of an update's attempts failing (3 of 5 updates) that makes a burst",
        "the Loops seed (a steady trickle is normal, max_rollout_retries absorbs it; a burst "
        "means the environment or grader is broken): a fifth of the attempts",
    )
    failure_burst_fail: float = line(
        0.5, "share that makes a failing burst", "the Loops seed: most attempts failing"
    )
    failure_count_factor: float = line(
        5.0,
        "without attempt totals, failures this many times their usual count (median) make "
        "a burst ...",
        "science.md 6 (a shift several times the run's own level; counts are Poisson-like, "
        "so 5x the median is far past their noise)",
    )
    failure_count_min: float = line(
        3.0,
        "... and at least this many in one update",
        "science.md 6 takeaway 2 (3 of 5 points): three failures, never one",
    )


FAILED_PREFIXES = ("discard/rollouts/rollout_failed/", "discard/rollouts/grading_failed/")


def check(ctx: Context) -> list[Finding]:
    """Each burst of failing attempts (warn; fail past ``failure_burst_fail``), every update
    of a short log failing at once; failures in no burst are a trickle (info)."""
    got = _failed(ctx)
    if got is None:
        return []
    steps, per_reason, failed = got
    rate, hot, unit = _hot(ctx, steps, failed)
    spells = episodes(hot)
    short = unit == "share" and len(steps) < MIN_WINDOW and bool(hot.all())
    if short:
        spells = [(0, len(steps) - 1)]  # every update read has failing attempts: at once
    out = [_burst(ctx, steps, per_reason, rate, unit, short, start, end) for start, end in spells]
    return out or [_trickle(steps, per_reason, failed)]


def _failed(ctx: Context) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray] | None:
    """(steps, failed attempts per reason at those steps, failed in all), None where none
    failed."""
    names = [n for n in ctx.data.names("discard/rollouts/") if n.startswith(FAILED_PREFIXES)]
    if not names:
        return None
    steps = np.unique(np.concatenate([ctx.data.series(n).steps for n in names]))  # type: ignore[union-attr]
    per_reason = {}
    failed = np.zeros(len(steps))
    for n in names:
        s = ctx.finite(n)
        if s is None:
            continue
        col = np.zeros(len(steps))
        col[np.searchsorted(steps, s.steps)] = s.values
        per_reason[n.removeprefix("discard/rollouts/")] = col
        failed += col
    return (steps, per_reason, failed) if failed.any() else None


def _hot(ctx: Context, steps: np.ndarray, failed: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    """(rate, hot, unit): the share of each update's attempts that failed, hot past
    ``failure_burst_warn``, where the totals are known; else the count, hot well above the
    run's usual level (5x its median, at least 3)."""
    totals = ctx.attempts_per_step(steps)
    if totals is not None and np.isfinite(totals).any():
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.nan_to_num(np.where(totals > 0, failed / totals, np.nan), nan=0.0)
        return rate, rate >= ctx.thresholds.of(FailuresLines).failure_burst_warn, "share"
    typical = float(np.median(failed))
    th = ctx.thresholds.of(FailuresLines)
    line = max(th.failure_count_min, th.failure_count_factor * max(typical, 1.0))
    return failed, failed >= line, "count"


def _burst(
    ctx: Context,
    steps: np.ndarray,
    per_reason: dict[str, np.ndarray],
    rate: np.ndarray,
    unit: str,
    short: bool,
    start: int,
    end: int,
) -> Finding:
    """A burst of failing attempts at ``start..end``, named by the reason most of them gave."""
    th = ctx.thresholds.of(FailuresLines)
    seg = slice(start, end + 1)
    level = float(rate[seg].max())
    top = max(per_reason, key=lambda r: per_reason[r][seg].sum())
    breakdown = {r: int(c[seg].sum()) for r, c in sorted(per_reason.items()) if c[seg].sum() > 0}
    severe = unit == "share" and level >= th.failure_burst_fail
    stage = "grader" if top.startswith("grading_failed/") else "environment or agent"
    where = (
        f"{read_words(len(steps))}: failing attempts"
        if short
        else f"burst of failed attempts at steps {int(steps[start])}-{int(steps[end])}"
    )
    how = f", up to {level:.0%} of attempts" if unit == "share" else f", {level:.0f} in one update"
    return finding(
        NAME,
        "fail" if severe else "warn",
        "infra_failures",
        f"{where}: mostly {top}{how}",
        metric=f"discard/rollouts/{top}",
        first_step=int(steps[start]),
        last_step=int(steps[end]),
        peak=round_sig(level),
        unit=unit,
        threshold=th.failure_burst_warn if unit == "share" else None,
        reasons=breakdown,
        action=f"The {stage} is broken, not the policy: read the exceptions in "
        "rollouts.jsonl for these steps, fix it, and raise max_rollout_retries only for "
        "transient errors.",
    )


def _trickle(steps: np.ndarray, per_reason: dict[str, np.ndarray], failed: np.ndarray) -> Finding:
    """Failures in no burst: normal for sandboxes (info)."""
    total_failed = int(failed.sum())
    return finding(
        NAME,
        "info",
        "healthy",
        f"a trickle of failed attempts ({total_failed} over {len(steps)} updates): "
        "normal for sandboxes",
        metric=f"discard/rollouts/{max(per_reason, key=lambda r: per_reason[r].sum())}",
        total=total_failed,
        reasons={r: int(c.sum()) for r, c in sorted(per_reason.items()) if c.sum()},
        action="Nothing to do; max_rollout_retries absorbs it.",
    )
