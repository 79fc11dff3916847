"""1. Reward the run can learn from.

The reward (``reward/mean_with_unusable``, every graded attempt's, where the run logs it;
else ``reward/mean``) read as means over five or more steps with its trend tested against its
own noise; ``reward/group_std_mean`` (the only spread GRPO learns from) falling toward zero while
the reward is still low means exploration stopped. Batch ``reward/std`` is not learning signal.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..model import Series
from .base import Finding
from .context import Context, fact, finding, round_sig
from .groups import group_shares
from .heldout import heldout_change
from .stats import MIN_WINDOW, crossing, noise_sigma, rolling_mean, start_level, trend

NAME = "reward"


def _learning_signal(ctx: Context) -> float | None:
    """Mean share of groups that carry signal, where known."""
    s = ctx.finite("groups/signal_fraction")
    if s is not None:
        return float(s.values.mean())
    g = ctx.finite("reward/group_std_mean")
    if g is not None:
        lo, hi = ctx.reward_bounds
        return 1.0 if float(g.values.mean()) > 0.05 * (hi - lo) else 0.0
    return None


# A plateau: the last PLATEAU_SHARE of the run (at least PLATEAU_MIN updates) without a
# trend (|z| < 2), no higher than the level reached before it, below the top of the reward's
# range, while groups still carry signal (rl-doctor's plateau: Mann-Kendall flat over the last
# 35% of the run; science.md 2b reads the last 50 steps).
PLATEAU_SHARE = 0.35
PLATEAU_MIN = 50


def _plateau(ctx: Context, name: str, s: Any) -> Finding | None:
    """Reward that rose, then stopped improving for the last third of a long run although
    groups still disagree: not learning any more (not a mastered run: its reward is at the
    top of its range, and its groups stop disagreeing). ``name``, ``s``: the reward the check
    reads (``_reward_series``)."""
    n = len(s)
    k = max(PLATEAU_MIN, int(PLATEAU_SHARE * n))
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
        and abs(tr.z) < 2.0
        and now <= best + margin / 2
        and level < lo + 0.8 * (hi - lo)
        and signal is not None
        and signal >= 0.3
    ):
        since = int(tail.steps[0])
        out = finding(
            NAME,
            "warn",
            "not_learning",
            f"stopped improving: {name} flat at {now:.3g} over the last {k} updates (from "
            f"step {since}; best {best:.3g} before), although {signal:.0%} of groups carry "
            "signal",
            metric=name,
            first_step=since,
            plateau_mean=round_sig(now),
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


# A reward flat over at least FLAT_MIN updates (its last quarter within FLAT_Z standard errors
# of its first, or below it) is a plateau, whatever the groups say: past twenty updates "too
# early to tell" is no answer (issue 27; the wild corpus's plateau rule is the same test).
FLAT_MIN = 20
FLAT_Z = 2.0
# Where a flat reward sits: in the top fifth of its range it is saturated, in the bottom fifth
# the tasks are too hard; from group statistics, most groups all solved or none solved.
LEVEL_EDGE = 0.2
GROUPS_EDGE = 0.5


def quarters(v: np.ndarray) -> dict[str, float]:
    """First- and last-quarter means (at least five points each) and their difference in
    standard errors (each quarter's own spread over its length: the wild corpus's rule)."""
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
        if a >= GROUPS_EDGE:
            return "ceiling", f"{a:.0%} of groups solved by every attempt", ev
        if z >= GROUPS_EDGE:
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
    if pos >= 1 - LEVEL_EDGE:
        return "ceiling", f"{pos:.0%} of {how}", ev
    if pos <= LEVEL_EDGE:
        return "floor", f"{pos:.0%} of {how}", ev
    return "middle", f"{pos:.0%} of {how}", ev


def _flat(ctx: Context, name: str, s: Series) -> Finding | None:
    """A reward flat within its noise over FLAT_MIN updates or more, not rising beyond noise
    (the learning rule) nor falling (the collapse rule): a plateau (warn), named by its level:
    near the ceiling saturated (``mastered``), near the floor ``too_hard``, else ``plateau``
    (stuck, or level unknown). Not when held-out rises beyond twice its error (held-out is the
    better witness)."""
    n = len(s)
    if n < FLAT_MIN:
        return None
    q = quarters(s.values)
    if not q["z"] < FLAT_Z:
        return None  # rising, not yet beyond noise: said as such
    held = heldout_change(ctx, int(s.steps[0]))
    if held is not None and held["change"] > 2 * held["se"]:
        return None
    level, how, ev = _plateau_level(ctx, s, int(s.steps[-int(q["n"])]))
    verdict, words, action = {
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
            "The reward does not move: check the learning rate (too low, or 0?), that updates "
            "reach the sampler's weights, that advantages are not zeroed, and whether the "
            "reward varies within groups (GRPO learns only from that).",
        ),
        "unknown": (
            "plateau",
            "level unknown (no group statistics, range unknown): stuck",
            "The reward does not move: check the learning rate (too low, or 0?), that updates "
            "reach the sampler's weights, that advantages are not zeroed, and whether the "
            "reward varies within groups (GRPO learns only from that).",
        ),
    }[level]
    noise = noise_sigma(s.values)
    zq = q["z"]
    return finding(
        NAME,
        "warn",
        verdict,
        f"reward flat (plateau) over {n} updates: {name} {q['first']:.3g} (first {q['n']}) -> "
        f"{q['last']:.3g} (last {q['n']}), {zq:+.1f} standard errors, noise {noise:.2g} per "
        f"update; level {how}, {words}",
        metric=name,
        first_step=int(s.steps[0]),
        plateau_level=level,
        level_from=how,
        first_mean=round_sig(q["first"]),
        last_mean=round_sig(q["last"]),
        quarter=q["n"],
        z=round_sig(zq) if math.isfinite(zq) else zq,
        z_line=FLAT_Z,
        noise_per_step=round_sig(noise),
        updates=n,
        window=[int(s.steps[0]), int(s.steps[-1])],
        heldout=held,
        action=action,
        **ev,
    )


def check(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
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
    n = len(s)
    if n < MIN_WINDOW:
        return [
            finding(
                NAME,
                "info",
                "too_early",
                f"{n} step(s) of {name}: too few for a trend (it needs {MIN_WINDOW})",
                metric=name,
                steps_seen=n,
                action="Wait for more updates; one step's reward says little.",
            )
        ]
    v = s.values
    lo, hi = ctx.reward_bounds
    head_n = max(MIN_WINDOW, min(10, n // 4))
    head = float(v[:head_n].mean())
    tail = float(v[-MIN_WINDOW:].mean())
    noise = noise_sigma(v)
    margin = ctx.reward_margin(noise)
    tr = trend(s)
    rose_idx = crossing(v, head + margin)
    fell_idx = crossing(v, head - margin, above=False)
    evidence: dict[str, Any] = dict(
        first_mean=round_sig(head),
        first_window=[int(s.steps[0]), int(s.steps[head_n - 1])],
        last_mean=round_sig(tail),
        noise_per_step=round_sig(noise),
        margin=round_sig(margin),
        trend_per_step=round_sig(tr.slope) if tr else None,
        trend_z=round_sig(tr.z) if tr else None,
    )
    rising = tr is not None and tr.rising and tail > head
    if name == "reward/mean_with_unusable":
        # Rejected groups cannot hide a rise of this one: one that came back is not learning.
        learning = rising or (rose_idx is not None and tail > head + margin / 2)
    else:  # a rise reward/mean gave back may be mastered groups leaving training
        learning = rising or rose_idx is not None
    falling = fell_idx is not None and tr is not None and tr.falling and tail < head - margin
    if falling:
        out.append(
            finding(
                NAME,
                "warn",
                "collapse",
                f"{name} fell from {head:.3g} ({_window(s, head_n)}) to {tail:.3g} "
                f"(last {MIN_WINDOW})",
                metric=name,
                first_step=int(s.steps[fell_idx]) if fell_idx is not None else None,
                action="The policy is getting worse at the training tasks: look at entropy, "
                "the sampler/trainer mismatch and gradient norms around the first step; lower "
                "the learning rate or restart from an earlier checkpoint.",
                **evidence,
            )
        )
    elif learning and _task_flat(ctx) is not None:
        task = _task_flat(ctx)
        assert task is not None
        out.append(
            finding(
                NAME,
                "info",
                "exploit_suspected",
                f"{name} rose from {head:.3g} to {tail:.3g}, but its task component "
                f"{task.name} stayed flat ({task.head:.3g} -> {task.tail:.3g}): not learning "
                "the task",
                metric=name,
                first_step=int(s.steps[rose_idx]) if rose_idx is not None else None,
                task_component=task.name,
                action="See the components finding: the rise comes from another part of the "
                "reward.",
                **evidence,
            )
        )
    elif learning and (plateau := _plateau(ctx, name, s)) is not None:
        out.append(plateau)
    elif learning:
        first = int(s.steps[rose_idx]) if rose_idx is not None else None
        if tail > head or first is None:
            words = f"rose from {head:.3g} ({_window(s, head_n)}) to {tail:.3g} (last {MIN_WINDOW})"
        else:  # it rose, then came back (groups solved by all are rejected, for one)
            words = (
                f"rose above {head:.3g} ({_window(s, head_n)}) from step {first}; "
                f"{tail:.3g} over the last {MIN_WINDOW}"
            )
        out.append(
            finding(
                NAME,
                "ok",
                "learning",
                f"learning: {name} {words}",
                metric=name,
                first_step=first,
                action="Confirm on held-out tasks and read the top transcripts: reward "
                "measures what the grader checks.",
                **evidence,
            )
        )
    else:
        signal = _learning_signal(ctx)
        enough = n >= ctx.thresholds.not_learning_min_steps
        # Not learning only without any hint of a rise: a slow, noisy climb is not flat.
        no_hint = (tr is None or tr.z < 1.0) and tail <= head + margin / 2
        if enough and no_hint and signal is not None and signal >= 0.3:
            out.append(
                finding(
                    NAME,
                    "warn",
                    "not_learning",
                    f"{name} flat over {_window(s)} ({head:.3g} -> {tail:.3g}) although "
                    f"{signal:.0%} of groups carry signal",
                    metric=name,
                    first_step=int(s.steps[0]),
                    signal_fraction=round_sig(signal),
                    action="Groups disagree, so GRPO has gradient, yet reward does not move: "
                    "check the learning rate (0?), that the update reaches the sampler's "
                    "weights, and that advantages are not zeroed.",
                    **evidence,
                )
            )
        elif (flat := _flat(ctx, name, s)) is not None:
            out.append(flat)
        else:
            hint = tr is not None and tr.z >= 1.0 and tail > head
            out.append(
                finding(
                    NAME,
                    "info",
                    "too_early",
                    f"{name} {'rising slowly, not yet beyond noise' if hint else 'not rising yet'}"
                    f" over {_window(s)} ({head:.3g} -> {tail:.3g})",
                    metric=name,
                    action="Read it as a mean over five or more steps; wait, or see the rejected "
                    "groups below for why there is no signal.",
                    **evidence,
                )
            )
    out.extend(_exploration(ctx, lo, hi))
    return out


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
    if not start > 0.02 * (hi - lo):
        return []
    roll = rolling_mean(g.values)
    idx = crossing(g.values, ctx.thresholds.group_std_floor * start, above=False)
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
            floor=round_sig(ctx.thresholds.group_std_floor * start),
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
