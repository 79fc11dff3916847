"""The reward climbing faster than the task allows: its rise over five updates against the
run's own early noise and early rate of rise (the Loops seed: "a reward that climbs faster
than the task allows" is the usual sign of a shortcut in the grader). Read by the transcripts
check (said at info, a hypothesis on its own) and the held-out check (with held-out far behind
the train reward, the two numbers back each other).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import Series
from .context import Context, fact, round_sig
from .stats import MIN_WINDOW, noise_sigma, trend
from .thresholds import line, lines

__all__ = ["JumpLines", "reward_jump"]


@lines
@dataclass(frozen=True)
class JumpLines:
    """Where a reward jump is drawn."""

    jump_sigmas: float = line(
        5.0,
        "a reward rise over five updates this many early-noise errors above the early rate "
        "of rise ...",
        "the Loops seed (a reward that climbs faster than the task allows); science.md 6: "
        "beyond 3 sigma, with room for a run's faster phases",
    )
    jump_range: float = line(
        0.1,
        "... and at least this share of the reward's range: it climbed faster than the task allows",
        "science.md 4 (Anthropic 2511.18397: hack rate stays low ~50 steps then jumps to "
        "> 99%); a tenth of the range in ten updates",
    )


@fact
def reward_jump(ctx: Context) -> dict[str, Any] | None:
    """The first step where the reward rose over MIN_WINDOW steps faster than the run's early
    noise and early rate of rise allow, with the figures; None if it never did."""
    out = None
    name, r = ctx.series("reward/mean_with_unusable", "reward/mean")
    w = MIN_WINDOW
    if r is not None and len(r) >= 4 * w:
        v = r.values
        early_n = max(2 * w, len(v) // 5)
        sigma = noise_sigma(v[:early_n])
        tr = trend(Series(r.steps[:early_n], v[:early_n]))
        rate = max(0.0, tr.slope) if tr is not None else 0.0
        lo, hi = ctx.reward_bounds
        th = ctx.thresholds.of(JumpLines)
        c = np.cumsum(np.concatenate(([0.0], v)))
        t = np.arange(w, len(v) - w + 1)
        before = (c[t] - c[t - w]) / w
        after = (c[t + w] - c[t]) / w
        # At the early rate the two windows' means differ by the rate times the distance
        # between the windows' centres (w steps apart when every step is logged).
        cs = np.cumsum(np.concatenate(([0.0], r.steps.astype(float))))
        centres = ((cs[t + w] - cs[t]) - (cs[t] - cs[t - w])) / w
        allowed = rate * centres + th.jump_sigmas * sigma * math.sqrt(2 / w)
        jump = after - before
        hot = (jump > allowed) & (jump >= th.jump_range * (hi - lo))
        if sigma > 0 and hot.any():
            # The step of the biggest jump in the first spell over the line: where the rise is.
            lo = int(np.flatnonzero(hot)[0])
            cold = np.flatnonzero(~hot[lo:])
            hi = lo + (int(cold[0]) if len(cold) else len(hot) - lo)
            i = lo + int(np.argmax((jump - allowed)[lo:hi]))
            out = dict(
                step=int(r.steps[t[i]]),
                metric=name,
                before=round_sig(float(before[i])),
                after=round_sig(float(after[i])),
                jump=round_sig(float(jump[i])),
                allowed=round_sig(float(allowed[i])),
                early_noise=round_sig(sigma),
                early_rate_per_step=round_sig(rate),
            )
    return out
