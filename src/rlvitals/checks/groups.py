"""2. Rejected groups: groups whose attempts all scored the same teach GRPO nothing.

High at the start: the tasks are too easy (all solved) or too hard (none solved) for the
starting model. Rising later: mastered (all solved, reward high) or collapsed (none solved);
``reward/mean_with_unusable`` tells which. The observed share is held against the share
expected from the pass rate alone, p^G + (1-p)^G.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import Series
from .base import Finding
from .context import ENTROPY, Context, fact, finding, round_sig
from .episodes import EpisodesLines
from .stats import (
    MIN_WINDOW,
    crossing,
    first_sustained,
    noise_sigma,
    read_words,
    rolling_mean,
    short_level,
    start_level,
)
from .thresholds import line, lines

NAME = "groups"


@lines
@dataclass(frozen=True)
class GroupsLines:
    """Where the groups check draws its lines."""

    rejected_warn: float = line(
        0.6,
        "share of groups with no variance (all attempts scoring alike) that warns",
        "science.md 3 (warn when the effective fraction f < 0.5 for 5 steps); the peers warn "
        "at 0.5 and page at 0.75",
    )
    rejected_fail: float = line(
        0.9,
        "share of groups with no variance that fails",
        "science.md 3 (z_all0 > 0.9 suggests a broken reward or parser; page when f < 0.2)",
    )
    rejected_excess: float = line(
        0.3,
        "later, without an all/none-solved breakdown: a no-variance share this far over "
        "p^G + (1-p)^G is no signal",
        "science.md 3 (an excess over the expected share means rewards more deterministic "
        "than the pass rate implies)",
    )
    rejected_entropy_held: float = line(
        0.5,
        "groups agreeing while the entropy holds at this share of its start: the tasks "
        "split, not exploration stopped",
        "science.md 2 (healthy runs keep more than half their entropy through their first "
        "gains; the collapse line is 0.3)",
    )
    rejected_min_groups: int = line(
        16,
        "groups of one update all agreeing that say the signal vanished in a short log with "
        "no gradient norm",
        "science.md 3: at a pass rate of 0.9, 43% of groups of 8 agree by chance; all of 16 "
        "groups with probability 1e-6, all of 4 (a TRL test run) 3%",
    )
    default_group_size: float = line(
        4.0,
        "group size assumed for p^G + (1-p)^G where the attempts do not say (the smallest "
        "GRPO group, which gives the largest expected share)",
        "DESIGN.md, precision first: the smallest group in common use gives the largest "
        "expected share, so the fewest alarms",
    )


def group_shares(ctx: Context) -> tuple[Series, Series | None, Series | None, str] | None:
    """Per-step share of groups with no variance, and of all-solved / none-solved groups."""
    trained = ctx.finite("groups/trained")
    rejected = ctx.finite("groups/rejected")
    nv = ctx.finite("discard/groups/no_variance")
    if trained is not None and rejected is not None:
        steps = np.intersect1d(trained.steps, rejected.steps)
        total = (
            trained.values[np.searchsorted(trained.steps, steps)]
            + rejected.values[np.searchsorted(rejected.steps, steps)]
        )
        ok = total > 0
        steps, total = steps[ok], total[ok]
        if nv is not None:
            num = np.zeros(len(steps))
            _common, ia, ib = np.intersect1d(steps, nv.steps, return_indices=True)
            num[ia] = nv.values[ib]
            metric = "discard/groups/no_variance"
        else:
            num = rejected.values[np.searchsorted(rejected.steps, steps)]
            metric = "groups/rejected"

        def share(name: str) -> Series | None:
            x = ctx.finite(name)
            if x is None:
                return None
            common, ia, ib = np.intersect1d(steps, x.steps, return_indices=True)
            return Series(common, x.values[ib] / total[ia])

        return (
            Series(steps, num / total),
            share("groups/all_solved"),
            share("groups/none_solved"),
            metric,
        )
    sf = ctx.finite("groups/signal_fraction")
    if sf is not None:
        return Series(sf.steps, 1.0 - sf.values), None, None, "groups/signal_fraction"
    return None


def _group_size(ctx: Context) -> float | None:
    a = ctx.data.attempts
    if a is None or not len(a):
        return None
    counts = np.bincount(a.group_code[a.group_code >= 0])
    counts = counts[counts > 0]
    return float(np.median(counts)) if len(counts) else None


def _expected_share(ctx: Context, p: float) -> float | None:
    g = _group_size(ctx)
    if g is None or not 0 <= p <= 1:
        return None
    return float(p**g + (1 - p) ** g)


def _reward_improved(ctx: Context, step: int) -> tuple[bool | None, str | None]:
    """Whether the reward (rejected groups included) now, over the latest five updates from
    ``step`` on, is above its level over the run's first five, beyond noise; None without a
    reward. Now, not at ``step``: the groups may stop disagreeing while the reward is still
    climbing (tasks being mastered), and a live run is judged on what it has reached."""
    rname, r = ctx.series("reward/mean_with_unusable", "reward/mean")
    if r is None or len(r) < 2 * MIN_WINDOW:
        return None, rname
    head = float(r.values[:MIN_WINDOW].mean())
    i = int(np.searchsorted(r.steps, step))
    after = r.values[max(i, len(r) - MIN_WINDOW) :]
    if not len(after):
        return None, rname
    return bool(float(after.mean()) > head + ctx.reward_margin(noise_sigma(r.values))), rname


def _rose_past_spread(ctx: Context) -> bool:
    """Whether the reward (rejected groups included) rose, from its first five updates to its
    latest five, by at least half the spread of rewards at the start (``reward/std``, else
    the mean group spread): a rise as large as the differences between attempts, not a drift
    within them."""
    _, r = ctx.series("reward/mean_with_unusable", "reward/mean")
    _, spread = ctx.series("reward/std", "reward/group_std_mean")
    if r is None or spread is None or len(r) < 2 * MIN_WINDOW or not len(spread):
        return False
    rise = float(r.values[-MIN_WINDOW:].mean() - r.values[:MIN_WINDOW].mean())
    return rise >= 0.5 * float(np.median(spread.values[:MIN_WINDOW]))


def _mean_at(s: Series | None, start: int, end: int) -> float | None:
    if s is None:
        return None
    m = (s.steps >= start) & (s.steps <= end)
    return float(s.values[m].mean()) if m.any() else None


def _pass_rate(ctx: Context, start: int, end: int) -> float | None:
    _, r = ctx.series("reward/mean_with_unusable", "reward/mean")
    level = _mean_at(r, start, end)
    if level is None:
        return None
    lo, hi = ctx.reward_bounds
    return (level - lo) / (hi - lo) if hi > lo else None


def _rate_is_a_pass_rate(ctx: Context) -> bool:
    """Whether the reward's level can be read as a pass rate for p^G + (1-p)^G: a configured
    range, or rewards within [0, 1]. A reward outside it with no configured range (summed
    components, shaped rewards) says from its observed range only which way it leans."""
    return ctx.reward_top_known


def _which(
    ctx: Context, all_s: Series | None, none_s: Series | None, start: int, end: int
) -> tuple[str, str, dict[str, Any]]:
    """("too_easy"|"too_hard", words, evidence) from all/none-solved shares or reward level."""
    a = _mean_at(all_s, start, end)
    z = _mean_at(none_s, start, end)
    p = _pass_rate(ctx, start, end)
    ev: dict[str, Any] = {
        "all_solved_share": None if a is None else round_sig(a),
        "none_solved_share": None if z is None else round_sig(z),
        "pass_rate": None if p is None else round_sig(p),
    }
    if a is not None and z is not None and a + z > 0:
        easy = a >= z
    elif p is not None and _rate_is_a_pass_rate(ctx):
        easy = p >= 0.5
    else:
        return "no_signal", "every attempt in a group scores the same", ev
    if easy:
        return "too_easy", "every attempt solves them", ev
    return "too_hard", "no attempt solves them", ev


def _last_mean(ctx: Context, name: str, n: int = MIN_WINDOW) -> float:
    s = ctx.finite(name)
    return float(s.values[-n:].mean()) if s is not None and len(s) else 0.0


def cause(ctx: Context, verdict: str, what: str, *, later: bool) -> tuple[str, str]:
    """Why the groups of the last updates were rejected, from their discards: stale attempts,
    failed attempts, or groups all solved / none solved (from the start: too easy / too
    hard; ``later``, after groups had trained: mastered / collapse). ``(verdict, what)`` when
    none of these says. For liveness, when the unusable-groups guard stopped a run."""
    stale = _last_mean(ctx, "discard/rollouts/stale")
    failed = sum(
        _last_mean(ctx, n)
        for n in ctx.data.names("discard/rollouts/")
        if n.startswith(("discard/rollouts/rollout_failed/", "discard/rollouts/grading_failed/"))
    )
    all_solved = _last_mean(ctx, "groups/all_solved")
    none_solved = _last_mean(ctx, "groups/none_solved")
    if stale > 0 and stale >= failed:
        return "stale_policy", "its attempts were dropped as stale"
    if failed > 0:
        return "infra_failures", "its attempts failed"
    if all_solved > none_solved:
        if later:
            return "mastered", "every attempt solved its task, after the run had learned"
        return "too_easy", "every attempt solved its task"
    if none_solved > 0:
        if later:
            return "collapse", "no attempt solved its task any more"
        return "too_hard", "no attempt solved its task"
    return verdict, what


@fact
def from_start(ctx: Context) -> str | None:
    """``too_easy`` / ``too_hard`` when most groups are rejected from the start (what this
    check says first), else None. For the components check: with no task solved, any other
    component is the only thing left to learn, and difficulty is the cause."""
    for f in check(ctx):
        if (
            f.first_step is not None
            and f.evidence.get("window")
            and f.verdict in ("too_easy", "too_hard")
        ):
            return f.verdict
    return None


def _vanished(
    ctx: Context, share: Series, all_s: Series | None, none_s: Series | None, metric: str
) -> list[Finding]:
    """A short log whose latest update has every group rejected after updates that trained:
    the signal vanished (science.md: no signal is f = 0). A level at its extreme, judged on
    the one update that shows it; the updates before say the tasks were not the cause."""
    v = share.values
    if (
        len(v) < 2
        or v[-1] < 1.0
        or float(v[:-1].max()) >= ctx.thresholds.of(GroupsLines).rejected_warn
    ):
        return []
    step = int(share.steps[-1])
    at = {
        name: None if (s := ctx.finite(name)) is None else s.at(step)
        for name in ("train/grad_norm", "groups/trained", "groups/rejected")
    }
    norm = at["train/grad_norm"]
    logged, zero_grad = norm is not None, norm == 0.0
    # A few groups can all agree by chance (4 groups of a TRL test run); the gradient says
    # whether anything trained, else enough groups must have agreed.
    groups = (at["groups/trained"] or 0.0) + (at["groups/rejected"] or 0.0)
    if not zero_grad and (logged or groups < ctx.thresholds.of(GroupsLines).rejected_min_groups):
        return []
    _, words, ev = _which(ctx, all_s, none_s, step, step)
    return [
        finding(
            NAME,
            "warn",
            "no_signal",
            f"{read_words(len(v))}: every group of the latest (step {step}) rejected ({words}"
            + (", gradient norm 0" if zero_grad else "")
            + f") after {float(v[:-1].mean()):.0%} before it: the learning signal vanished",
            metric=metric,
            first_step=step,
            share=1.0,
            before=round_sig(float(v[:-1].mean())),
            updates_read=len(v),
            zero_gradient=zero_grad,
            action="A reward that stopped varying at once is a bug more often than the tasks: "
            "check the reward function and the loss (a GRPO loss stuck at 0), then the grader "
            "on a few transcripts.",
            **ev,
        )
    ]


def check(ctx: Context) -> list[Finding]:
    """High from the start: too easy or too hard for the starting model. Rising later: the
    first reading of the spell below that holds (``_LATER``, in order)."""
    got = group_shares(ctx)
    if got is None:
        return _identical(ctx)
    share, all_s, none_s, metric = got
    # The start is read over its first five updates; before five exist, a share over many
    # groups is judged at once if every update read is past the line (short_level).
    if len(share) < MIN_WINDOW and not short_level(
        share.values, ctx.thresholds.of(GroupsLines).rejected_warn
    ):
        return _vanished(ctx, share, all_s, none_s, metric)
    start = _from_start(ctx, share, all_s, none_s, metric)
    if start is not None:
        return [start]
    spell = _spell(ctx, share, all_s, none_s, metric)
    if spell is None:
        return []
    for read in _LATER:
        found = read(ctx, spell)
        if found is not None:
            return [found]
    return []


def _from_start(
    ctx: Context, share: Series, all_s: Series | None, none_s: Series | None, metric: str
) -> Finding | None:
    """Most groups rejected over the first five updates (or every update of a shorter log):
    the tasks are too easy or too hard for the starting model."""
    th = ctx.thresholds.of(GroupsLines)
    n, v = len(share), share.values
    short = n < MIN_WINDOW
    head_n = min(MIN_WINDOW, n)
    head = float(v[:head_n].mean())
    if not head >= th.rejected_warn:
        return None
    s0, s1 = int(share.steps[0]), int(share.steps[head_n - 1])
    verdict, words, ev = _which(ctx, all_s, none_s, s0, s1)
    p = ev.get("pass_rate")
    expected = _expected_share(ctx, p) if p is not None else None
    sev = "fail" if head >= th.rejected_fail else "warn"
    return finding(
        NAME,
        sev,
        verdict,
        (f"{read_words(n)}: " if short else "")
        + f"{head:.0%} of groups rejected {'' if short else 'from the start '}"
        f"({words}): GRPO learns nothing from groups whose attempts all score the same",
        metric=metric,
        first_step=s0,
        share=round_sig(head),
        window=[s0, s1],
        updates_read=n,
        threshold=th.rejected_fail if sev == "fail" else th.rejected_warn,
        expected_share=None if expected is None else round_sig(expected),
        group_size=_group_size(ctx),
        action=(
            "Size tasks so attempts disagree: harder tasks, filter out solved ones "
            "(Skywork-OR1), or dynamic sampling (DAPO)."
            if verdict == "too_easy"
            else "Size tasks so attempts disagree: easier tasks or a curriculum, a "
            "longer warm start, a larger group; and check the grader or answer parser is "
            "not rejecting right answers."
        ),
        **ev,
    )


@dataclass
class Spell:
    """Most groups rejected later in the run, after a healthy start: from where, how many, and
    what the run says about them, for the readings below to weigh."""

    metric: str
    step: int  # the first step of the first sustained spell past the line
    end: int  # the last of the five updates it is read over
    level: float  # the highest five-update mean share over them
    verdict: str  # too_easy / too_hard from the breakdown or the pass rate, else no_signal
    ev: dict[str, Any]
    pass_rate: float | None
    improved: bool | None  # the reward (rejected groups included) risen beyond noise
    rname: str | None
    promoted: bool  # too_easy read off the reward's rise alone (no breakdown, no pass rate)


def _spell(
    ctx: Context, share: Series, all_s: Series | None, none_s: Series | None, metric: str
) -> Spell | None:
    """The first sustained spell of the share above the line after a healthy start."""
    v = share.values
    idx = crossing(v, ctx.thresholds.of(GroupsLines).rejected_warn)
    if idx is None:
        return None
    roll = rolling_mean(v)
    step = int(share.steps[idx])
    end = int(share.steps[min(len(share) - 1, idx + MIN_WINDOW - 1)])
    level = float(np.nanmax(roll[idx : idx + MIN_WINDOW])) if idx < len(roll) else float(v[idx])
    verdict, _words, ev = _which(ctx, all_s, none_s, step, end)
    improved, rname = _reward_improved(ctx, step)
    ev["reward_improved"] = improved
    # Which groups agree is unknown, but the reward (rejected groups included) rose beyond
    # noise: groups that stop disagreeing as the reward climbs are being solved.
    promoted = verdict == "no_signal" and bool(improved)
    return Spell(
        metric,
        step,
        end,
        level,
        "too_easy" if promoted else verdict,
        ev,
        ev.get("pass_rate"),
        improved,
        rname,
        promoted,
    )


def _beyond_pass_rate(ctx: Context, sp: Spell) -> Finding | None:
    """Far more groups without variance than the pass rate gives (p^G + (1-p)^G; G from the
    attempts, else 4, the smallest GRPO group, which gives the largest share): rewards are
    more deterministic than the pass rate implies (science.md 3: a format gate, a grader
    giving one value per prompt, a policy that stopped exploring). Not mastered: mastering
    drives the pass rate, and so the expected share, up with it. Only where the run does not
    say which groups were all solved or none solved: tasks of mixed difficulty (some always
    solved, some never) raise the share above what the mean pass rate gives, and that
    breakdown tells them apart (mastered / too hard below)."""
    p = sp.pass_rate
    g = _group_size(ctx) or ctx.thresholds.of(GroupsLines).default_group_size
    if p is None or not 0 <= p <= 1 or not _rate_is_a_pass_rate(ctx):
        return None
    expected = float(p**g + (1 - p) ** g)
    excess = ctx.thresholds.of(GroupsLines).rejected_excess
    breakdown = (
        sp.ev.get("all_solved_share") is not None or sp.ev.get("none_solved_share") is not None
    )
    if breakdown or not sp.level > expected + excess:
        return None
    return finding(
        NAME,
        "warn",
        "no_signal",
        f"no learning signal: from step {sp.step}, {sp.level:.0%} of groups give every "
        f"attempt the same reward, where a pass rate of {p:.0%} gives {expected:.0%} "
        f"(p^G + (1-p)^G, G={g:g})",
        metric=sp.metric,
        first_step=sp.step,
        share=round_sig(sp.level),
        expected_share=round_sig(expected),
        group_size=g,
        excess_line=excess,
        action="Rewards are more deterministic than the pass rate implies: look for a "
        "grader that gives one value per prompt or a format gate, and at entropy (a "
        "policy that stopped exploring); dynamic sampling (DAPO) only hides it.",
        **sp.ev,
    )


def _solved_by_another_part(ctx: Context, sp: Spell) -> Finding | None:
    """Groups solved by every attempt while the task component stayed flat: every attempt
    earns the same reward through another component, not mastered."""
    task = ctx.components.task
    if sp.verdict != "too_easy" or sp.improved is False or task is None or not task.flat:
        return None
    return finding(
        NAME,
        "info",
        "exploit_suspected",
        f"from step {sp.step}, {sp.level:.0%} of groups score the same on every attempt, "
        f"but the task component {task.name} stayed flat ({task.head:.3g} -> "
        f"{task.tail:.3g}): not mastered",
        metric=sp.metric,
        first_step=sp.step,
        share=round_sig(sp.level),
        task_component=task.name,
        action="Every attempt earns the same reward through another component: see "
        "the components finding.",
        **sp.ev,
    )


def _mastered(ctx: Context, sp: Spell) -> Finding | None:
    """Good news, said as information: the tasks are used up. Each all-solved group costs its
    sampling and teaches nothing, and the fewer groups left carry a noisier gradient (DAPO;
    science.md 3: a rising all-solved share means the curriculum is exhausted). The run is
    done, or needs harder tasks; a run that learned its tasks is no failure (DESIGN.md:
    every healthy run stays quiet)."""
    if sp.verdict != "too_easy" or sp.improved is False:
        return None
    # Read off the reward alone (no all-solved breakdown, no pass rate), a rise smaller than
    # the spread the attempts had at the start could be junk that scores one value (a wrecked
    # policy pinned at 0 after slightly negative rewards): said, not warned.
    sure = not sp.promoted or _rose_past_spread(ctx)
    # Groups that agree while most replies are cut at the token limit agree at the score the
    # limit allows (every reply truncated, every attempt one score): the limit is the cause,
    # said by the episodes check.
    cut = _mean_at(ctx.finite("response/truncated_rate"), sp.step, sp.end)
    capped = cut is not None and cut >= ctx.thresholds.of(EpisodesLines).room_level
    return finding(
        NAME,
        "info",
        "mastered",
        (
            f"mastered: from step {sp.step}, {sp.level:.0%} of groups solved by every attempt"
            if not sp.promoted
            else f"mastered, read off the reward's rise: from step {sp.step}, {sp.level:.0%} "
            "of groups give every attempt one reward (the log does not say whether they "
            "passed or failed, nor where the reward's top is)"
        )
        + (
            f", but {cut:.0%} of replies hit the token limit: they agree at the score "
            "the limit allows (see the episodes finding)"
            if capped and cut is not None
            else ": the tasks are used up, and those groups cost their sampling and teach nothing"
            if sure
            else ""
        ),
        metric=sp.metric,
        first_step=sp.step,
        share=round_sig(sp.level),
        threshold=ctx.thresholds.of(GroupsLines).rejected_warn,
        truncated_share=None if cut is None else round_sig(cut),
        action="Stop here (the checkpoint from this step on has learned these tasks), "
        "or go on with harder tasks: filter out solved prompts (Skywork-OR1) or sample "
        "dynamically (DAPO). Read reward/mean_with_unusable, not reward/mean, for the "
        "real level.",
        **sp.ev,
    )


def _not_yet_solvable(ctx: Context, sp: Spell) -> Finding | None:
    """Most groups solved by no attempt while the reward improves: tasks the policy cannot do
    yet, nothing wrong with the run."""
    if sp.verdict != "too_hard" or not sp.improved:
        return None
    return finding(
        NAME,
        "info",
        "too_hard",
        f"from step {sp.step}, {sp.level:.0%} of groups rejected, most solved by no attempt, "
        f"while {sp.rname} improves: tasks the policy cannot do yet",
        metric=sp.metric,
        first_step=sp.step,
        share=round_sig(sp.level),
        action="Nothing is wrong with the run; those tasks teach nothing until some "
        "attempts solve them: a curriculum or dynamic sampling spends less on them.",
        **sp.ev,
    )


def _collapse(ctx: Context, sp: Spell) -> Finding | None:
    """Most groups solved by no attempt while the reward does not improve: a collapse."""
    if sp.verdict != "too_hard":
        return None
    return finding(
        NAME,
        "warn",
        "collapse",
        f"collapse: from step {sp.step}, {sp.level:.0%} of groups rejected, most solved by "
        f"no attempt, while {sp.rname or 'the reward'} does not improve",
        metric=sp.metric,
        first_step=sp.step,
        share=round_sig(sp.level),
        action="Look at entropy, transcripts and the sampler/trainer mismatch around "
        "this step; restart from an earlier checkpoint with a lower learning rate.",
        **sp.ev,
    )


def _tasks_split(ctx: Context, sp: Spell) -> Finding | None:
    """Groups agreeing while the policy's entropy holds: the attempts still disagree token by
    token, and the tasks split by kind instead. Still, most groups teach nothing while the
    reward stands still: no signal from them, a warning, and a symptom that yields the run's verdict
    to its cause (the episodes check's budget, a component)."""
    held = _entropy_held(ctx, sp.step)
    if held is None:
        return None
    ename, ratio = held
    return finding(
        NAME,
        "warn",
        "no_signal",
        f"no learning signal from most groups: from step {sp.step}, {sp.level:.0%} of groups "
        f"have one reward for every attempt while {sp.rname or 'the reward'} does not "
        f"improve; {ename} holds at {ratio:.0%} of its start, so the policy still "
        "explores: the tasks split into ones every attempt solves and ones none does",
        metric=sp.metric,
        symptom=True,
        first_step=sp.step,
        share=round_sig(sp.level),
        threshold=ctx.thresholds.of(GroupsLines).rejected_warn,
        entropy_metric=ename,
        entropy_ratio=round_sig(ratio),
        entropy_held_line=ctx.thresholds.of(GroupsLines).rejected_entropy_held,
        action="Look at which tasks no attempt solves (a budget too short for them, a "
        "tool or a format they fail on) and at the episodes findings.",
        **sp.ev,
    )


def _exploration_stopped(ctx: Context, sp: Spell) -> Finding | None:
    """What is left: the attempts at a task stopped disagreeing before the tasks were
    mastered, the policy became deterministic."""
    p = sp.pass_rate
    return finding(
        NAME,
        "warn",
        "exploration_stopped",
        f"exploration stopped: from step {sp.step}, {sp.level:.0%} of groups have one reward "
        f"for every attempt while {sp.rname or 'the reward'} does not improve (pass rate "
        f"{'unknown' if p is None else f'{p:.0%}'})",
        metric=sp.metric,
        first_step=sp.step,
        share=round_sig(sp.level),
        threshold=ctx.thresholds.of(GroupsLines).rejected_warn,
        action="The attempts at a task stopped disagreeing before the tasks were "
        "mastered: the policy became deterministic. Raise the temperature or the group "
        "size, add an entropy bonus or clip-higher, or restart from before this step.",
        **sp.ev,
    )


# How a later spell of rejected groups reads, the first that holds: mastering is read from
# the reward with the rejected groups counted (the seeds): groups stop disagreeing because
# easy tasks are now always solved (reward up), or because the policy stopped exploring
# (reward not up).
_LATER: tuple[Callable[[Context, Spell], Finding | None], ...] = (
    _beyond_pass_rate,
    _solved_by_another_part,
    _mastered,
    _not_yet_solvable,
    _collapse,
    _tasks_split,
    _exploration_stopped,
)


def _identical(ctx: Context) -> list[Finding]:
    """Without group counts: updates whose reward spread is exactly 0 (``reward/group_std_mean``,
    else the batch ``reward/std``: every attempt of every group scored the same), on 3 of 5
    updates and on most updates from there: no learning signal, a warning once ten such
    updates came (two windows; science.md 3: no signal is f = 0), said at info before."""
    name, z = ctx.series("reward/group_std_mean", "reward/std")
    if z is None or name is None or len(z) < MIN_WINDOW:
        return []
    dead = z.values == 0
    idx = first_sustained(dead)
    if idx is None:
        return []
    share = float(dead[idx:].mean())
    if share < 0.5:
        return []
    step = int(z.steps[idx])
    # Two five-update windows of updates without spread before it warns: a young spell of a
    # few (a sparse reward's start, every attempt scoring 0) is said, not warned.
    sure = int(dead[idx:].sum()) >= 2 * MIN_WINDOW
    g = ctx.finite("train/grad_norm")
    norm = None
    if g is not None:
        _c, ia, _ib = np.intersect1d(g.steps, z.steps[idx:][dead[idx:]], return_indices=True)
        norm = float(np.median(g.values[ia])) if len(ia) else None
    return [
        finding(
            NAME,
            "warn" if sure else "info",
            "no_signal",
            f"no learning signal: from step {step}, every attempt scored the same ({name} 0) "
            f"on {share:.0%} of updates"
            + (f", the gradient norm {norm:.2g} on them" if norm is not None else "")
            + ": GRPO has no advantage to follow on those updates",
            metric=name,
            first_step=step,
            share=round_sig(share),
            updates=int(dead[idx:].sum()),
            grad_norm_median_on_them=None if norm is None else round_sig(norm),
            action="Every group agreeing on every update is a reward that stopped varying: "
            "read a few transcripts and the reward function (a format gate, one reply the "
            "policy collapsed onto), raise the temperature or the group size.",
        )
    ]


def _entropy_held(ctx: Context, step: int) -> tuple[str, float] | None:
    """(metric, ratio) where the policy's entropy since ``step`` is still
    ``rejected_entropy_held`` of
    its start or more (median of the first updates against the mean since), else None (not
    logged, too short, or fallen: a policy that may have stopped exploring)."""
    name, s = ctx.series(*ENTROPY)  # finite values only
    if s is None or name is None or len(s) < 2 * MIN_WINDOW:
        return None
    h0 = start_level(s.values, MIN_WINDOW)
    since = s.since(step)
    if not h0 > 0 or len(since) < MIN_WINDOW:
        return None
    ratio = float(since.values.mean()) / h0
    return (name, ratio) if ratio >= ctx.thresholds.of(GroupsLines).rejected_entropy_held else None
