"""1. Reward the run can learn from.

The reward (``reward/mean_with_unusable``, every graded attempt's, where the run logs it;
else ``reward/mean``) read as means over five or more steps with its trend tested against its
own noise; ``reward/group_std_mean`` (the only spread GRPO learns from) falling toward zero while
the reward is still low means exploration stopped. Batch ``reward/std`` is not learning signal.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import Series
from .base import Finding
from .context import Context, fact, finding, round_sig
from .groups import group_shares
from .heldout import heldout_change
from .stats import MARGIN_RANGE, MIN_WINDOW, crossing, noise_sigma, rolling_mean, start_level, trend
from .thresholds import line, lines

NAME = "reward"


@lines
@dataclass(frozen=True)
class RewardLines:
    """Where the reward check draws its lines."""

    not_learning_min_steps: int = line(
        30,
        "updates before a reward flat with no hint of a rise, while groups carry signal, is "
        "called not learning",
        "science.md 6 (MK and Theil-Sen need a window of 30 or more to see a drift of 1-2 sigma)",
    )
    plateau_share: float = line(
        0.35,
        "a reward that rose, then stayed flat over this last share of the run ...",
        "rl-doctor's plateau rule (Mann-Kendall flat over the last 35% of the run)",
    )
    plateau_min_steps: int = line(
        50,
        "... and at least this many updates, while groups carry signal: stopped improving",
        "science.md 2b (the entropy-bound plateau reads the Mann-Kendall trend over the last "
        "50 steps)",
    )
    flat_min_steps: int = line(
        20,
        "updates over which a reward flat within its noise is a plateau whatever the groups say",
        "DESIGN.md: past twenty updates every run gets a verdict",
    )
    flat_warn_updates: int = line(
        200,
        "a reward evidently flat from the start over this many updates (or over a run that "
        "has ended) is a stuck run (warn); flat over fewer, a young or slow-starting one (info)",
        "families: operating point over the lengths real runs have (20-2,000 updates, 20 seeds): "
        "precision 1.00 finished and 0.997 on prefixes past 20 (every rule; 0.989 at 120, where "
        "slow learners of long runs, rising with a time constant near their length, read stuck "
        "at 120-210 updates; 0.994 at 150, 0.996 at 175, no better at 300: the knee), plateau "
        "recall 0.70 / 0.80 / 0.95 from 150 to 300 (mild / moderate / gross; "
        "0.75 / 0.85 / 0.95 at 120); at 40-400 updates 1.00 and 0.9996, recall 0.60 / 0.80 / "
        "0.90 as at 120 (an HF Trainer state at max_steps read as ended); healthy slow starts "
        "stay flat 30-100 updates",
    )
    flat_z: float = line(
        2.0,
        "... its last quarter under this many standard errors above its first",
        "science.md 6 (a two-sample z test of the quarters' means at 5%); families: precision "
        "1.00 finished and 0.998 on prefixes from 1.5 to 3.0, plateau recall 0.60 / 0.80 / "
        "0.90 at 2",
    )
    plateau_level_edge: float = line(
        0.2,
        "a flat reward within this share of the top of its range is saturated, of the "
        "bottom too hard; a reward in the top share is high",
        "science.md 3 (a pass rate of 0.8 makes 17% of groups of 8 agree by chance: past it "
        "the groups, not the reward, say more)",
    )
    plateau_groups_edge: float = line(
        0.5,
        "... or, from group statistics, this share of groups all solved (none solved)",
        "science.md 3 (most groups: the effective fraction f under 0.5 warns)",
    )
    group_std_floor: float = line(
        0.25,
        "group spread below this share of its start while the reward is in the bottom half "
        "of its range: exploration stopped",
        "the Loops seed (group_std_mean falling toward zero while reward/mean is low); a "
        "quarter of its start",
    )
    signal_share: float = line(
        0.3,
        "groups carry signal when at least this share of them disagree",
        "science.md 3 (warn when the effective fraction f < 0.5, page when f < 0.2)",
    )
    signal_group_std: float = line(
        0.05,
        "without group counts, a mean group spread over this share of the reward's range "
        "carries signal",
        "science.md 3 (one disagreeing attempt in a group of 8 on a [0, 1] score gives a "
        "spread of 0.33; 0.05 is well under any group that disagrees)",
    )
    plateau_trend_z: float = line(
        2.0,
        "a reward that rose is flat over its last share when that share's trend is under "
        "this many standard errors",
        "science.md 6 (a trend verdict from an autocorrelation-corrected test; 2 standard "
        "errors, a 5% two-sided test)",
    )


def _learning_signal(ctx: Context) -> float | None:
    """Mean share of groups that carry signal, where known."""
    s = ctx.finite("groups/signal_fraction")
    if s is not None:
        return float(s.values.mean())
    g = ctx.finite("reward/group_std_mean")
    if g is not None:
        lo, hi = ctx.reward_bounds
        line = ctx.thresholds.of(RewardLines).signal_group_std
        return 1.0 if float(g.values.mean()) > line * (hi - lo) else 0.0
    return None


# Statuses of a run that has ended: its reward will not move any more.
ENDED = ("finished", "stopped", "crashed")


def stuck_for(ctx: Context, first: int, last: int) -> bool:
    """Whether a stretch from update ``first`` to ``last`` is long enough for a flat reward
    (or task component) over it to be evidence of a stuck run (warn) rather than of a young
    or slow-starting one (info): ``flat_warn_updates`` updates or more, longer than a healthy
    slow start stays flat, or a run that has ended."""
    th = ctx.thresholds.of(RewardLines)
    return last - first + 1 >= th.flat_warn_updates or ctx.status in ENDED


def evidently_flat(s: Series, margin: float) -> bool:
    """Whether ``s`` is evidently flat: its fitted change, twice its error added, within
    ``margin`` (an equivalence test: a slow rise its noise hides is not flat, and a
    stretch too short or too noisy to bound its change is not either)."""
    tr = trend(s) if len(s) >= 2 * MIN_WINDOW else None
    if tr is None:
        return False
    err = abs(tr.change / tr.z) if tr.z else 0.0
    return abs(tr.change) + 2 * err <= margin


def _young(ctx: Context, at_end: bool = True) -> str:
    """What an info finding on a flat reward adds: why it is not a warning yet."""
    n = ctx.thresholds.of(RewardLines).flat_warn_updates
    return (
        f"; not yet a stuck run: a healthy run's slow start stays flat this long (a warning "
        f"from {n} flat updates" + (", or when the run ends flat)" if at_end else ")")
    )


def _evidently_flat_since(s: Series, k: int, margin: float) -> int | None:
    """The first step of the longest tail of ``s`` (its last half, else its last ``k``
    updates) that is evidently flat: its fitted change, twice its error added, within
    ``margin`` (an equivalence test: a slow rise its noise hides is not flat). None if
    neither is."""
    for size in sorted({k, len(s) // 2}, reverse=True):
        if size <= len(s) and evidently_flat(Series(s.steps[-size:], s.values[-size:]), margin):
            return int(s.steps[-size])
    return None


def _plateau(ctx: Context, name: str, s: Any) -> Finding | None:
    """Reward that rose, then stopped improving for the last third of a long run although
    groups still disagree: not learning any more (not a mastered run: its reward is at the
    top of its range, and its groups stop disagreeing), said at info: a healthy run's rise
    saturates too. ``name``, ``s``: the reward the check reads (``_reward_series``)."""
    n = len(s)
    th = ctx.thresholds.of(RewardLines)
    k = max(th.plateau_min_steps, int(th.plateau_share * n))
    if n < 2 * k:
        return None
    out = None
    tail = Series(s.steps[-k:], s.values[-k:])
    tr = trend(tail)
    signal = _learning_signal(ctx)
    _ln, level_s = ctx.series("reward/mean_with_unusable", "reward/mean")
    lo, hi = ctx.reward_bounds
    level = float(level_s.values[-k:].mean()) if level_s is not None else float(tail.values.mean())
    before = rolling_mean(s.values[:-k])
    best = float(np.nanmax(before)) if np.isfinite(before).any() else -math.inf
    now = float(tail.values.mean())
    margin = ctx.reward_margin(noise_sigma(s.values))
    if (
        tr is not None
        and abs(tr.z) < th.plateau_trend_z
        and now <= best + margin / 2
        and level < hi - th.plateau_level_edge * (hi - lo)
        and signal is not None
        and signal >= th.signal_share
    ):
        since = int(tail.steps[0])
        # A run that learned and levelled off converged: the healthy families do (their
        # reward's rise saturates), so this is said, never warned.
        flat_from = _evidently_flat_since(s, k, margin)
        out = finding(
            NAME,
            "info",
            "not_learning",
            f"stopped improving: {name} flat at {now:.3g} over the last {k} updates (from "
            f"step {since}; best {best:.3g} before), although {signal:.0%} of groups carry "
            "signal",
            metric=name,
            first_step=since,
            plateau_mean=round_sig(now),
            flat_from=flat_from,
            best_before=round_sig(best),
            trend_z=round_sig(tr.z),
            signal_fraction=round_sig(signal),
            window=[since, int(tail.steps[-1])],
            action="The reward stopped rising well below the top of its range while groups "
            "still disagree: look at entropy (spent exploration), the learning rate schedule, "
            "and whether the tasks left are beyond the model; a curriculum or a higher "
            "temperature may restart it.",
        )
    return out


def _task_flat(ctx: Context) -> Any:
    """The task component when the run logs its reward's components and that one stayed
    flat (checks/components.py); else None."""
    comps = ctx.components
    task = comps.task
    return task if task is not None and task.flat else None


def _reward_series(ctx: Context) -> tuple[str, Series] | tuple[None, None]:
    """The reward every rule of this check reads (the plateau's too).

    Every graded attempt's reward where the run logs it over at least half as many updates as
    ``reward/mean``: as tasks are mastered their groups are rejected (all solved) and the
    trained groups left are the mixed ones, whose mean (reward/mean) holds still while the
    policy's level climbs (a healthy seed of the reference trainer: reward/mean 0.55 -> 0.59,
    every graded attempt 0.54 -> 0.72, held-out 0.81 -> 0.92).
    """
    got = ctx.series("reward/mean", "reward/mean_with_unusable")
    every = ctx.series("reward/mean_with_unusable")
    if every[1] is not None and (got[1] is None or len(every[1]) >= len(got[1]) // 2):
        return every
    return got


def quarters(v: np.ndarray) -> dict[str, float]:
    """First- and last-quarter means (at least five points each) and their difference in
    standard errors (each quarter's own spread over its length: a two-sample z test)."""
    q = max(MIN_WINDOW, len(v) // 4)
    a, b = v[:q], v[-q:]
    se = math.sqrt(float(a.var()) / len(a) + float(b.var()) / len(b))
    diff = float(b.mean() - a.mean())
    z = diff / se if se > 0 else (0.0 if diff == 0 else math.copysign(math.inf, diff))
    return dict(first=float(a.mean()), last=float(b.mean()), n=q, z=z, se=se)


def _plateau_level(ctx: Context, s: Series, since: int) -> tuple[str, str, dict[str, Any]]:
    """Where a flat reward sits: ("ceiling" | "floor" | "middle" | "unknown", how it was told,
    evidence). From the groups all solved / none solved where logged; else from the reward's
    range where it is evidently a score in [0, 1] (configured, or every value within it);
    else unknown."""
    got = group_shares(ctx)
    if got is not None and (got[1] is not None or got[2] is not None):
        _share, all_s, none_s, _m = got
        a = float(all_s.since(since).values.mean()) if all_s is not None else 0.0
        z = float(none_s.since(since).values.mean()) if none_s is not None else 0.0
        ev: dict[str, Any] = {"all_solved_share": round_sig(a), "none_solved_share": round_sig(z)}
        if a >= ctx.thresholds.of(RewardLines).plateau_groups_edge:
            return "ceiling", f"{a:.0%} of groups solved by every attempt", ev
        if z >= ctx.thresholds.of(RewardLines).plateau_groups_edge:
            return "floor", f"{z:.0%} of groups solved by no attempt", ev
        return "middle", f"{a:.0%} of groups all solved, {z:.0%} none solved", ev
    rr = ctx.config_value("rollout", "reward_range")
    if isinstance(rr, list) and len(rr) == 2:
        lo, hi, how = float(rr[0]), float(rr[1]), "its configured range"
    elif float(s.values.min()) >= 0.0 and float(s.values.max()) <= 1.0:
        lo, hi, how = 0.0, 1.0, "a score in [0, 1]"
    else:
        return "unknown", "its range is unknown", {}
    pos = (float(s.since(since).values.mean()) - lo) / (hi - lo) if hi > lo else math.nan
    ev = {"range": [lo, hi], "position_in_range": round_sig(pos)}
    edge = ctx.thresholds.of(RewardLines).plateau_level_edge
    if pos >= 1 - edge:
        return "ceiling", f"{pos:.0%} of {how}", ev
    if pos <= edge:
        return "floor", f"{pos:.0%} of {how}", ev
    return "middle", f"{pos:.0%} of {how}", ev


_STUCK = (
    "The reward does not move: check the learning rate (too low, or 0?), that updates "
    "reach the sampler's weights, that advantages are not zeroed, and whether the "
    "reward varies within groups (GRPO learns only from that)."
)
# A flat reward by its level: (verdict, words, action).
_PLATEAU_READS = {
    "ceiling": (
        "mastered",
        "near the top of its range: saturated, nothing left to learn from these tasks",
        "The tasks are used up: stop here, or go on with harder tasks (filter out solved "
        "prompts, a curriculum). Compute spent on more updates teaches nothing.",
    ),
    "floor": (
        "too_hard",
        "near the bottom of its range: the tasks are too hard for the policy",
        "Nothing is learned: easier tasks or a curriculum, a longer warm start or a larger "
        "group; and check the grader or answer parser is not rejecting right answers.",
    ),
    "middle": (
        "plateau",
        "mid-range: stuck",
        _STUCK,
    ),
    "unknown": (
        "plateau",
        "level unknown (no group statistics, range unknown): stuck",
        _STUCK,
    ),
}


def _flat(ctx: Context, c: Course) -> Finding | None:
    """A reward flat within its noise over ``flat_min_steps`` updates or more, not rising
    beyond noise (the learning rule) nor falling (the collapse rule): a plateau (warn), named
    by its level (``_PLATEAU_READS``): near the ceiling saturated (``mastered``), near the
    floor ``too_hard``, else ``plateau`` (stuck, or level unknown). Not when held-out rises
    beyond twice its error (held-out is the better witness)."""
    name, s = c.name, c.s
    n = len(s)
    if n < ctx.thresholds.of(RewardLines).flat_min_steps:
        return None
    q = quarters(s.values)
    if not q["z"] < ctx.thresholds.of(RewardLines).flat_z:
        return None  # rising, not yet beyond noise: said as such
    held = heldout_change(ctx, int(s.steps[0]))
    if held is not None and held["change"] > 2 * held["se"]:
        return None
    level, how, ev = _plateau_level(ctx, s, int(s.steps[-int(q["n"])]))
    verdict, words, action = _PLATEAU_READS[level]
    noise = noise_sigma(s.values)
    zq = q["z"]
    stuck = stuck_for(ctx, int(s.steps[0]), int(s.steps[-1])) and (
        ctx.status in ENDED or evidently_flat(s, ctx.reward_margin(noise))
    )
    return finding(
        NAME,
        "warn" if stuck else "info",
        verdict,
        f"reward flat (plateau) over {n} updates: {name} {q['first']:.3g} (first {q['n']}) -> "
        f"{q['last']:.3g} (last {q['n']}), {zq:+.1f} standard errors, noise {noise:.2g} per "
        f"update; level {how}, {words}" + ("" if stuck else _young(ctx)),
        metric=name,
        first_step=int(s.steps[0]),
        plateau_level=level,
        level_from=how,
        first_mean=round_sig(q["first"]),
        last_mean=round_sig(q["last"]),
        quarter=q["n"],
        z=round_sig(zq) if math.isfinite(zq) else zq,
        z_line=ctx.thresholds.of(RewardLines).flat_z,
        noise_per_step=round_sig(noise),
        updates=n,
        window=[int(s.steps[0]), int(s.steps[-1])],
        heldout=held,
        action=action,
        **ev,
    )


def check(ctx: Context) -> list[Finding]:
    """The reward's course, read the first way that holds (``_COURSE``), then whether the
    spread within groups fell away while the reward is still low."""
    name, s = _reward_series(ctx)
    if s is None or name is None:
        alt, _ = ctx.series("reward/std")
        return [
            finding(
                NAME,
                "info",
                "too_early",
                "no reward metric in this run" + (" (only batch reward/std)" if alt else ""),
                action="Log reward/mean (and reward/group_std_mean) per update; without them "
                "nothing can tell whether the run learns.",
            )
        ]
    if len(s) < MIN_WINDOW:
        return [
            finding(
                NAME,
                "info",
                "too_early",
                f"{len(s)} step(s) of {name}: too few for a trend (it needs {MIN_WINDOW})",
                metric=name,
                steps_seen=len(s),
                action="Wait for more updates; one step's reward says little.",
            )
        ]
    c = _course(ctx, name, s)
    out: list[Finding] = []
    for read in _COURSE:
        found = read(ctx, c)
        if found is not None:
            out.append(found)
            break
    if out and out[0].verdict == "learning":
        stopped = _plateau(ctx, c.name, c.s)
        out += [stopped] if stopped is not None else []
    lo, hi = ctx.reward_bounds
    return out + _exploration(ctx, lo, hi)


@dataclass
class Course:
    """The reward over the run: its first and last means, its noise and trend, where it first
    rose or fell beyond noise, and what that makes of it."""

    name: str
    s: Series
    head_n: int  # the first updates the start is read over
    head: float
    tail: float  # the mean of the last five
    margin: float  # a change beyond noise (Context.reward_margin)
    tr: Any
    rose_idx: int | None
    fell_idx: int | None
    learning: bool
    falling: bool
    evidence: dict[str, Any]


def _course(ctx: Context, name: str, s: Series) -> Course:
    v, n = s.values, len(s)
    head_n = max(MIN_WINDOW, min(10, n // 4))
    head = float(v[:head_n].mean())
    tail = float(v[-MIN_WINDOW:].mean())
    noise = noise_sigma(v)
    margin = ctx.reward_margin(noise)
    tr = trend(s)
    rose_idx = crossing(v, head + margin)
    fell_idx = crossing(v, head - margin, above=False)
    rising = tr is not None and tr.rising and tail > head
    if name == "reward/mean_with_unusable":
        # Rejected groups cannot hide a rise of this one: one that came back is not learning.
        learning = rising or (rose_idx is not None and tail > head + margin / 2)
    else:  # a rise reward/mean gave back may be mastered groups leaving training
        learning = rising or rose_idx is not None
    falling = fell_idx is not None and tr is not None and tr.falling and tail < head - margin
    evidence: dict[str, Any] = dict(
        first_mean=round_sig(head),
        first_window=[int(s.steps[0]), int(s.steps[head_n - 1])],
        last_mean=round_sig(tail),
        noise_per_step=round_sig(noise),
        margin=round_sig(margin),
        trend_per_step=round_sig(tr.slope) if tr else None,
        trend_z=round_sig(tr.z) if tr else None,
    )
    return Course(
        name, s, head_n, head, tail, margin, tr, rose_idx, fell_idx, learning, falling, evidence
    )


def _fell(ctx: Context, c: Course) -> Finding | None:
    """Fell beyond noise, with a falling trend: the policy is getting worse at the tasks."""
    if not c.falling:
        return None
    return finding(
        NAME,
        "warn",
        "collapse",
        f"{c.name} fell from {c.head:.3g} ({_window(c.s, c.head_n)}) to {c.tail:.3g} "
        f"(last {MIN_WINDOW})",
        metric=c.name,
        first_step=int(c.s.steps[c.fell_idx]) if c.fell_idx is not None else None,
        action="The policy is getting worse at the training tasks: look at entropy, "
        "the sampler/trainer mismatch and gradient norms around the first step; lower "
        "the learning rate or restart from an earlier checkpoint.",
        **c.evidence,
    )


def _rose_without_the_task(ctx: Context, c: Course) -> Finding | None:
    """Rose while its task component stayed flat: not learning the task."""
    task = _task_flat(ctx) if c.learning else None
    if task is None:
        return None
    return finding(
        NAME,
        "info",
        "exploit_suspected",
        f"{c.name} rose from {c.head:.3g} to {c.tail:.3g}, but its task component "
        f"{task.name} stayed flat ({task.head:.3g} -> {task.tail:.3g}): not learning "
        "the task",
        metric=c.name,
        first_step=int(c.s.steps[c.rose_idx]) if c.rose_idx is not None else None,
        task_component=task.name,
        action="See the components finding: the rise comes from another part of the reward.",
        **c.evidence,
    )


def _rose(ctx: Context, c: Course) -> Finding | None:
    """Rose beyond noise: learning (to confirm on held-out tasks and transcripts)."""
    if not c.learning:
        return None
    first = int(c.s.steps[c.rose_idx]) if c.rose_idx is not None else None
    if c.tail > c.head or first is None:
        words = (
            f"rose from {c.head:.3g} ({_window(c.s, c.head_n)}) to {c.tail:.3g} (last {MIN_WINDOW})"
        )
    else:  # it rose, then came back (groups solved by all are rejected, for one)
        words = (
            f"rose above {c.head:.3g} ({_window(c.s, c.head_n)}) from step {first}; "
            f"{c.tail:.3g} over the last {MIN_WINDOW}"
        )
    return finding(
        NAME,
        "ok",
        "learning",
        f"learning: {c.name} {words}",
        metric=c.name,
        first_step=first,
        action="Confirm on held-out tasks and read the top transcripts: reward "
        "measures what the grader checks.",
        **c.evidence,
    )


def _flat_with_signal(ctx: Context, c: Course) -> Finding | None:
    """Flat over ``not_learning_min_steps`` or more, without any hint of a rise (a slow,
    noisy climb is not flat), while groups carry signal: not learning."""
    th = ctx.thresholds.of(RewardLines)
    signal = _learning_signal(ctx)
    enough = len(c.s) >= th.not_learning_min_steps
    no_hint = (c.tr is None or c.tr.z < 1.0) and c.tail <= c.head + c.margin / 2
    if not (enough and no_hint and signal is not None and signal >= th.signal_share):
        return None
    stuck = stuck_for(ctx, int(c.s.steps[0]), int(c.s.steps[-1])) and (
        ctx.status in ENDED or evidently_flat(c.s, c.margin)
    )
    return finding(
        NAME,
        "warn" if stuck else "info",
        "not_learning",
        f"{c.name} flat over {_window(c.s)} ({c.head:.3g} -> {c.tail:.3g}) although "
        f"{signal:.0%} of groups carry signal" + ("" if stuck else _young(ctx)),
        metric=c.name,
        first_step=int(c.s.steps[0]),
        signal_fraction=round_sig(signal),
        action="Groups disagree, so GRPO has gradient, yet reward does not move: "
        "check the learning rate (0?), that the update reaches the sampler's "
        "weights, and that advantages are not zeroed.",
        **c.evidence,
    )


def _not_yet(ctx: Context, c: Course) -> Finding | None:
    """Neither rising beyond noise nor flat long enough to say: too early."""
    hint = c.tr is not None and c.tr.z >= 1.0 and c.tail > c.head
    return finding(
        NAME,
        "info",
        "too_early",
        f"{c.name} {'rising slowly, not yet beyond noise' if hint else 'not rising yet'}"
        f" over {_window(c.s)} ({c.head:.3g} -> {c.tail:.3g})",
        metric=c.name,
        action="Read it as a mean over five or more steps; wait, or see the rejected "
        "groups below for why there is no signal.",
        **c.evidence,
    )


# The reward's course, the first reading that holds: falling, rising (through another
# component, or learning: then whether it stopped improving is said beside it), flat while
# groups carry signal, a plateau, too early.
_COURSE: tuple[Callable[[Context, Course], Finding | None], ...] = (
    _fell,
    _rose_without_the_task,
    _rose,
    _flat_with_signal,
    _flat,
    _not_yet,
)


def _window(s: Series, k: int | None = None) -> str:
    """The first ``k`` points of ``s`` (all of them without ``k``) in words: ``first 10 steps``,
    or, where the log skips steps (TRL's ``logging_steps`` > 1), ``first 10 records, steps
    5-50``: a count of log records is never called a count of updates."""
    st = s.steps if k is None else s.steps[:k]
    n, a, b = len(st), int(st[0]), int(st[-1])
    lead = f"{n}" if k is None else f"first {n}"
    if b - a == n - 1:
        return f"{lead} steps"
    return f"{lead} records, steps {a}-{b}"


def _exploration(ctx: Context, lo: float, hi: float) -> list[Finding]:
    """Spread within groups falling to zero while reward is still low."""
    g = ctx.finite("reward/group_std_mean")
    rname, r = ctx.series("reward/mean_with_unusable", "reward/mean")
    if g is None or r is None or len(g) < 2 * MIN_WINDOW:
        return []
    start = start_level(g.values)
    if not start > MARGIN_RANGE * (hi - lo):
        return []
    roll = rolling_mean(g.values)
    idx = crossing(g.values, ctx.thresholds.of(RewardLines).group_std_floor * start, above=False)
    if idx is None:
        return []
    step = int(g.steps[idx])
    r_roll = rolling_mean(r.values)
    j = min(int(np.searchsorted(r.steps, step)), len(r) - 1)
    r_level = float(r_roll[j]) if not math.isnan(r_roll[j]) else float(r.values[j])
    if r_level >= lo + 0.5 * (hi - lo):
        return []  # spread gone because tasks are solved: the groups check says "mastered"
    return [
        finding(
            NAME,
            "warn",
            "exploration_stopped",
            f"exploration stopped: spread within groups fell to "
            f"{float(roll[idx]):.3g} (start {start:.3g}) while {rname} is only {r_level:.3g}",
            metric="reward/group_std_mean",
            first_step=step,
            start_level=round_sig(start),
            level=round_sig(float(roll[idx])),
            floor=round_sig(ctx.thresholds.of(RewardLines).group_std_floor * start),
            reward_level=round_sig(r_level),
            action="Every attempt at a task now does the same thing: raise the sampling "
            "temperature or the group size, add an entropy bonus or clip-higher, or restart "
            "from before this step.",
        )
    ]


@fact
def learns(ctx: Context) -> bool:
    """Whether this check reads the run as learning (its reward rising beyond noise), computed
    once per judging: for checks that judge a symptom less harshly on a run that learns."""
    return any(f.verdict == "learning" for f in check(ctx))


@fact
def falls(ctx: Context) -> bool:
    """Whether this check reads the run's reward as falling beyond noise (its collapse
    reading), computed once per judging."""
    return any(f.verdict == "collapse" for f in check(ctx))
