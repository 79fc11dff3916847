"""3. Failed attempts: a steady trickle is normal for cloud sandboxes; a burst means the
environment or the grader is broken.

Reads ``discard/rollouts/rollout_failed/<Exc>`` and ``grading_failed/<Exc>`` per update, as a
share of the update's attempts where the total is known. Each burst is its own finding, so an
early burst never hides a later one.
"""

from __future__ import annotations

import numpy as np

from .base import Finding
from .context import Context, finding, round_sig
from .stats import MIN_WINDOW, episodes, read_words

NAME = "failures"
FAILED_PREFIXES = ("discard/rollouts/rollout_failed/", "discard/rollouts/grading_failed/")


def check(ctx: Context) -> list[Finding]:
    names = [n for n in ctx.data.names("discard/rollouts/") if n.startswith(FAILED_PREFIXES)]
    if not names:
        return []
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
    if not failed.any():
        return []
    totals = ctx.attempts_per_step(steps)
    th = ctx.thresholds
    if totals is not None and np.isfinite(totals).any():
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(totals > 0, failed / totals, np.nan)
        rate = np.nan_to_num(rate, nan=0.0)
        hot = rate >= th.failure_burst_warn
        unit = "share"
    else:
        # No totals: a burst is a count well above the run's usual level.
        typical = float(np.median(failed))
        rate = failed
        hot = failed >= max(3.0, 5.0 * max(typical, 1.0))
        unit = "count"
    out: list[Finding] = []
    spells = episodes(hot)
    short = unit == "share" and len(steps) < MIN_WINDOW and bool(hot.all())
    if short:
        spells = [(0, len(steps) - 1)]  # every update read has failing attempts: at once
    for start, end in spells:
        seg = slice(start, end + 1)
        level = float(rate[seg].max())
        top = max(per_reason, key=lambda r: per_reason[r][seg].sum())
        breakdown = {
            r: int(c[seg].sum()) for r, c in sorted(per_reason.items()) if c[seg].sum() > 0
        }
        severe = unit == "share" and level >= th.failure_burst_fail
        stage = "grader" if top.startswith("grading_failed/") else "environment or agent"
        out.append(
            finding(
                NAME,
                "fail" if severe else "warn",
                "infra_failures",
                (
                    f"{read_words(len(steps))}: failing attempts"
                    if short
                    else f"burst of failed attempts at steps {int(steps[start])}-{int(steps[end])}"
                )
                + f": mostly {top}"
                + (
                    f", up to {level:.0%} of attempts"
                    if unit == "share"
                    else f", {level:.0f} in one update"
                ),
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
        )
    if not out:
        total_failed = int(failed.sum())
        out.append(
            finding(
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
        )
    return out
