"""The system layer: throughput, step time and rollout latency, where the run logs them.

A run that gets slower update after update (step time or attempt latency rising, tokens per
second falling) is heading for a stall or wasting its budget: a leaking rollout queue, a
sandbox pool running dry, memory fragmentation, a slower node. Judged by a significant trend
(autocorrelation-corrected) over the run together with the size of the change: the last five
updates against the first five, at least 1.5x (info), or 2x with 3 of 5 five-update means past
it and still worsening over the second half of the run (warn: a level shift, such as another
job landing on a shared machine, is reported, not alarmed), on a run past its first 30 updates
(RL-Insight's baseline window: before it, a live run cannot yet tell a level shift from a
slide, so it is said at info). One slow update is not a trend; a
slow start (compilation, warm caches) that gets faster is not a finding; nor are the timings of
updates that take a few milliseconds (a synthetic or replayed run), whose tokens per second
halve whenever the machine is busy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Finding
from .context import Context, finding, round_sig
from .stats import MIN_WINDOW, crossing, start_level, trend
from .thresholds import line, lines

NAME = "system"


@lines
@dataclass(frozen=True)
class SystemLines:
    """Where the system check draws its lines."""

    system_slower_info: float = line(
        1.5,
        "the last five updates this many times slower than the first five, with a "
        "significant trend: said (info)",
        "science.md 7 (RL-Insight charts step timing by phase so system regressions are not "
        "mistaken for learning problems); half again as slow is worth a note, no alarm",
    )
    system_slower_warn: float = line(
        2.0,
        "... this many times, held (3 of 5 five-update means) and still slowing over the "
        "second half: warns",
        "science.md 7 (RL-Insight's degradation association: 3 of 5 points above range); a "
        "doubling is a slowdown no scheduler noise gives",
    )
    system_baseline_updates: int = line(
        30,
        "a slowdown warns only on a run past this many updates (before, info): its start "
        "is still the baseline a degradation is told from",
        "science.md 7 (RL-Insight's degradation recipe fits its baseline on the first 30 "
        "steps before it confirms an event); DESIGN.md (a young run: say less)",
    )
    system_min_seconds: float = line(
        0.05,
        "updates starting under this many seconds: timer noise, not judged",
        "numerical guard: timer and scheduler jitter (a busy machine halves the rate of a "
        "few-millisecond update)",
    )


# (metric, words, True when a higher value is slower)
SIGNALS = (
    ("perf/step_seconds", "seconds per update", True),
    ("perf/tokens_per_second", "tokens per second", False),
    ("perf/sampling_seconds", "sampling seconds per update", True),
    ("perf/attempt_seconds_p90", "p90 attempt seconds", True),
)


def _millisecond_updates(ctx: Context) -> bool:
    """True where the run logs its update time and its updates start under
    ``system_min_seconds``."""
    s = ctx.finite("perf/step_seconds")
    if s is None or len(s) < MIN_WINDOW:
        return False
    return bool(
        start_level(s.values, MIN_WINDOW) < ctx.thresholds.of(SystemLines).system_min_seconds
    )


def check(ctx: Context) -> list[Finding]:
    th = ctx.thresholds.of(SystemLines)
    out: list[Finding] = []
    # Updates of a few milliseconds (a synthetic or replayed run): their timings, and the
    # throughputs divided by them, are timer and scheduler noise, not a system. One busy
    # moment of the machine halves such a run's tokens per second.
    tiny = _millisecond_updates(ctx)
    for metric, words, up_is_slow in SIGNALS:
        s = ctx.finite(metric)
        if s is None or len(s) < 2 * MIN_WINDOW:
            continue
        v = s.values if up_is_slow else 1.0 / np.maximum(s.values, 1e-12)
        start = start_level(v, MIN_WINDOW)
        if not start > 0 or (up_is_slow and start < th.system_min_seconds):
            continue  # updates of a few milliseconds: timer noise, not a system
        if tiny and not up_is_slow:
            continue  # a rate over an update of a few milliseconds
        now = float(np.median(v[-MIN_WINDOW:]))
        factor = now / start
        tr = trend(s)
        if tr is None or factor < th.system_slower_info:
            continue
        if not (tr.rising if up_is_slow else tr.falling):
            continue
        idx = crossing(v, th.system_slower_warn * start)
        # An alarm only for a slowdown still under way: rising over the second half of the
        # run too. A level shift (another job landing on the machine) is worth knowing, no
        # more.
        late = trend(s.since(int(s.steps[len(s) // 2])))
        going = late is not None and (late.rising if up_is_slow else late.falling)
        # A run still within its baseline window (its first system_baseline_updates) has
        # not shown a level to tell a degradation from a start-up that settles: info.
        grown = len(s) > th.system_baseline_updates
        severe = factor >= th.system_slower_warn and idx is not None and going and grown
        first = idx if idx is not None else crossing(v, th.system_slower_info * start)
        shown = (start, now) if up_is_slow else (1.0 / start, 1.0 / now)
        out.append(
            finding(
                NAME,
                "warn" if severe else "info",
                "slowing",
                f"the run slows down update after update: {words} {shown[0]:.3g} over the "
                f"first {MIN_WINDOW} updates, {shown[1]:.3g} over the last {MIN_WINDOW} "
                f"({factor:.1f}x slower)",
                metric=metric,
                first_step=int(s.steps[first]) if first is not None else None,
                first_level=round_sig(shown[0]),
                last_level=round_sig(shown[1]),
                slower_by=round_sig(factor),
                trend_z=round_sig(tr.z),
                line=th.system_slower_warn,
                action="Find the phase that grows (perf/*_seconds, the rollout workers' "
                "latency): a leaking queue, a sandbox pool running dry, a slower node or "
                "memory pressure; it ends as a stall if it goes on.",
            )
        )
    return out[:2]
