"""Reward components: what the reward is made of, and which part of it is rising.

A reward summed from several functions (correctness, format, a length or "stop early" bonus,
penalties) can rise while the part that measures the task does not: the policy learned the
cheap component. Per component, its mean per update (TRL ``rewards/<f>/mean``, the canonical
``reward/component/<name>/mean``) and, where logged, its batch std. Each component's weight
in the total comes from fitting ``reward/mean`` on the components (least squares; TRL logs
them unweighted), else 1.

- A component other than the task's at its ceiling, or rising beyond its noise, while the
  task component stays flat: exploit suspected, naming the component (fail when it accounts
  for most of the reward's rise).
- The same after the task component stopped rising: a run that learned the task for a while,
  then bought the rest of its reward through another component (most of that component's
  rise, to its ceiling, comes after the task's plateau began). The proxy rising after the
  true objective has peaked is the signature of over-optimisation (Gao et al. 2022).
- The reward leaving its components behind: where the components explain the reward over
  the first half of the run (a least-squares fit, R² ≥ ``component_fit_r2``) and the reward then rises beyond
  that fit by more than its noise, a part of the reward no logged component accounts for is
  rising: an unlogged term (a length bonus, a judge's quirk). With reply length growing by
  half or more alongside it, it is the length exploit Singhal et al. (2023) found behind most
  of PPO's reward gain: exploit suspected.
- A component holding most of the reward's rise, or of its spread (what the advantages are
  made of), is reported (info), as is a dead component (constant: it adds nothing).

The task component is the one whose name says correctness (correct, accuracy, exact, match,
answer, solve, pass, verify, task, score, partial credit) and not format, length, brevity,
style, bonus or penalty; or else the only component that does not say the latter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import episodes, groups
from .base import Finding
from .composition import AUX, MEAN, Component, Components, CompositionLines, find_metrics, task_of
from .context import Context, finding, round_sig
from .heldout import heldout_change
from .policy import PolicyLines
from .reward import RewardLines, stuck_for
from .stats import (
    MARGIN_RANGE,
    MARGIN_SIGMAS,
    MIN_WINDOW,
    noise_sigma,
    read_words,
    start_level,
    trend,
)
from .thresholds import line, lines

NAME = "components"


@lines
@dataclass(frozen=True)
class ComponentsLines:
    """Where the components check draws its lines."""

    component_dominant: float = line(
        0.7,
        "share of the reward's rise (or spread) one component holds to dominate it",
        "rl-doctor's reward_composition (70% of recent variance warns)",
    )
    component_short_rise: float = line(
        0.2,
        "in a log of 3-4 updates, an auxiliary component's rise at every update that warns ...",
        "science.md 4 (format exploitation: the format share rises while correctness stays "
        "flat); a fifth of a [0, 1] score",
    )
    component_short_fall: float = line(
        2 / 3,
        "... while the task component falls at every update under this share of its first value",
        "science.md 4 (format exploitation); a third of the task score lost",
    )
    hidden_length_growth: float = line(
        1.5,
        "replies this many times longer beside a rise no component explains: the length "
        "exploit (fail)",
        "science.md 4 (Singhal et al. 2310.03716: most of PPO's reward gain is longer "
        "outputs); half again as long",
    )
    hidden_share: float = line(
        1 / 3,
        "the part no logged component explains holds at least this share of the reward's "
        "rise since",
        "science.md 4 (Singhal et al.: 70-90% of the gain from length); a third, well under "
        "their figure",
    )


# A component holding ``component_dominant`` of the reward's rise (or spread) dominates it
# (rl-doctor's reward_composition: 70% of recent variance is a warning).


@dataclass
class Late:
    """A component that rose to its ceiling after the task component's plateau began."""

    component: Component
    since: int  # the step the task component reached its plateau
    level: float  # the task component's level there
    before: float  # the component's level there
    share: float  # its share of the components' rise since then


def late_shortcut(comps: Components, dominant: float) -> Late | None:
    """The component other than the task's that made most of its rise, to its ceiling, after
    the task component stopped rising, holding ``dominant`` of the components' rise since;
    None if none did."""
    task = comps.task
    if task is None or not task.rose:
        return None
    v = task.mean.values
    c5 = np.convolve(v, np.ones(MIN_WINDOW) / MIN_WINDOW, mode="valid")
    hit = np.flatnonzero(c5 >= task.tail - task.margin)
    if not len(hit):
        return None
    since = int(task.mean.steps[int(hit[0]) + MIN_WINDOW - 1])
    if int((task.mean.steps > since).sum()) < 2 * MIN_WINDOW:
        return None  # too little run after the plateau began to tell
    gains: dict[str, float] = {}
    before: dict[str, float] = {}
    for c in comps.items:
        s = c.mean
        upto = s.values[s.steps <= since]
        if len(upto) < MIN_WINDOW:
            return None
        before[c.name] = float(upto[-MIN_WINDOW:].mean())
        gains[c.name] = c.weight * (c.tail - before[c.name])
    total = sum(g for g in gains.values() if g > 0)
    best: Late | None = None
    for c in comps.aux:
        after = c.tail - before[c.name]
        if not (c.at_ceiling and after > c.margin and after >= 0.5 * (c.tail - c.head)):
            continue
        share = gains[c.name] / total if total > 0 else 0.0
        if share >= dominant and (best is None or share > best.share):
            level = float(task.mean.values[task.mean.steps <= since][-MIN_WINDOW:].mean())
            best = Late(c, since, level, before[c.name], share)
    return best


@dataclass
class Hidden:
    """A part of the reward that no logged component accounts for, rising."""

    since: int  # the first step its five-update mean passed its margin
    gain: float  # its level over the last five updates
    share: float  # its share of the reward's rise since then
    r2: float  # how well the components explained the reward over the first half


def hidden_part(ctx: Context, comps: Components) -> Hidden | None:
    """The reward's rise beyond what its components explained over the first half of the
    run; None where they never explained it or the reward stays with them."""
    r = ctx.finite("reward/mean")
    if r is None or not comps.items:
        return None
    steps = r.steps
    for c in comps.items:
        steps = np.intersect1d(steps, c.mean.steps)
    n = len(steps)
    if n < 4 * MIN_WINDOW:
        return None
    X = np.column_stack([c.mean.values[np.searchsorted(c.mean.steps, steps)] for c in comps.items])
    y = r.values[np.searchsorted(r.steps, steps)]
    h = n // 2
    w, *_ = np.linalg.lstsq(X[:h], y[:h], rcond=None)
    var = float(((y[:h] - y[:h].mean()) ** 2).sum())
    if var <= 0 or not np.all(np.isfinite(w)) or np.any(w < -1e-6):
        return None
    resid = y - X @ w
    r2 = 1 - float((resid[:h] ** 2).sum()) / var
    if r2 < ctx.thresholds.of(CompositionLines).component_fit_r2:
        return None
    scale = max(1.0, float(np.abs(y).max()))
    margin = max(MARGIN_SIGMAS * noise_sigma(resid[:h]), MARGIN_RANGE * scale)
    c5 = np.convolve(resid, np.ones(MIN_WINDOW) / MIN_WINDOW, mode="valid")
    tail = float(resid[-MIN_WINDOW:].mean())
    if tail <= margin:
        return None
    i = int(np.flatnonzero(c5 > margin)[0])
    before = float(y[max(0, i - 1) : i + MIN_WINDOW - 1].mean()) if i else float(y[0])
    rise = float(y[-MIN_WINDOW:].mean()) - before
    if rise <= 0 or tail / rise < ctx.thresholds.of(ComponentsLines).hidden_share:
        return None
    return Hidden(int(steps[i + MIN_WINDOW - 1]), tail, tail / rise, r2)


def _describe(c: Component) -> str:
    return f"{c.name} {c.head:.3g} -> {c.tail:.3g}"


def _short(ctx: Context) -> list[Finding]:
    """A short log (3 or 4 updates) is judged on its components only when every update moves
    the same way: an auxiliary share of [0, 1] rising by ``component_short_rise`` in all, at
    every update, while the task component falls at every update to under
    ``component_short_fall`` of its first value."""
    th = ctx.thresholds.of(ComponentsLines)
    series = {}
    for name, metric in sorted(find_metrics(ctx, MEAN).items()):
        s = ctx.finite(metric)
        if s is not None and 3 <= len(s) < MIN_WINDOW:
            series[name] = (metric, s)
    items = [Component(n, m, s, None) for n, (m, s) in series.items()]
    task = task_of(items) if len(items) >= 2 else None
    if task is None:
        return []
    t = task.mean.values
    if not (np.all(np.diff(t) < 0) and t[0] > 0 and t[-1] < th.component_short_fall * t[0]):
        return []
    for c in items:
        v = c.mean.values
        if c is task or not AUX.search(c.name) or len(v) != len(t):
            continue
        inside = bool(np.all((v >= 0) & (v <= 1)))
        if inside and np.all(np.diff(v) > 0) and v[-1] - v[0] >= th.component_short_rise:
            values = {
                n: [round_sig(float(x)) for x in xs] for n, xs in ((c.name, v), (task.name, t))
            }
            return [
                finding(
                    NAME,
                    "warn",
                    "exploit_suspected",
                    f"{read_words(len(v))}: reward component {c.name} rose at every update "
                    f"({v[0]:.3g} -> {v[-1]:.3g}) while the task component {task.name} fell "
                    f"at every update ({t[0]:.3g} -> {t[-1]:.3g})",
                    metric=c.metric,
                    first_step=int(c.mean.steps[1]),
                    component=c.name,
                    task_component=task.name,
                    values=values,
                    updates_read=len(v),
                    action=f"Too few updates for a trend, but every one says the same: read the "
                    f"top-reward transcripts; if {c.name} pays without the task, gate it on the "
                    "task reward or lower its weight before training further.",
                )
            ]
    return []


def check(ctx: Context) -> list[Finding]:
    """Which part of the reward rises: a shortcut component (rising while the task stays
    flat), else one that went on after the task's plateau, else one holding most of the rise;
    then a rise beyond every logged component, a component holding most of the spread, and
    dead components."""
    comps = ctx.components
    if not comps.items:
        return _short(ctx)
    ev = _evidence(comps)
    out = _shortcut(ctx, comps, ev) or _late(ctx, comps, ev) or _dominant(ctx, comps, ev)
    out.extend(_hidden(ctx, comps, ev))
    out.extend(_spread(comps, ev, ctx.thresholds.of(ComponentsLines).component_dominant))
    out.extend(_dead(comps))
    return out


def _evidence(comps: Components) -> dict[str, Any]:
    """What every components finding shows: each component's first and last level, weight
    and margin, and which is the task's."""
    return {
        "components": {
            c.name: {
                "first": round_sig(c.head),
                "last": round_sig(c.tail),
                "weight": round_sig(c.weight),
                "margin": round_sig(c.margin),
            }
            for c in comps.items
        },
        "task_component": comps.task.name if comps.task else None,
        "weights_fitted": comps.fitted,
    }


def _total_gain(comps: Components) -> float:
    return sum(c.gain for c in comps.items if c.gain > 0)


def _shortcut(ctx: Context, comps: Components, ev: dict[str, Any]) -> list[Finding]:
    """A component other than the task's rising while the task component stays flat: exploit
    suspected (fail when it holds most of the rise). Tasks no attempt solves from the start,
    or replies cut at the token limit from the start, leave only the other components to
    learn: the difficulty is the cause (the groups and episodes checks name it), this its
    consequence (info)."""
    cut = comps.shortcut()
    if cut is None or comps.task is None:
        return []
    total = _total_gain(comps)
    share = cut.gain / total if total > 0 else 1.0
    ceiling = " to its ceiling" if cut.at_ceiling else ""
    hard = groups.from_start(ctx) == "too_hard"
    cut_short = episodes.cut_from_start(ctx)
    dominant = share >= ctx.thresholds.of(ComponentsLines).component_dominant
    task = comps.task
    backed = _backed(ctx, task, _rise_step(cut))
    sev = "info" if hard or cut_short or not backed else "fail" if dominant else "warn"
    return [
        finding(
            NAME,
            sev,
            "exploit_suspected",
            f"{'exploit suspected: ' if backed else ''}reward component {cut.name} rose"
            f"{ceiling} ({cut.head:.3g} -> {cut.tail:.3g}) while the task component "
            f"{_describe(task)} {'fell' if task.fell else 'stayed flat'}; {share:.0%} of the "
            f"reward's rise comes from {cut.name}" + ("" if backed else _hypothesis(ctx)),
            metric=cut.metric,
            first_step=_rise_step(cut),
            component=cut.name,
            gain_share=round_sig(share),
            at_ceiling=cut.at_ceiling,
            task_fell=task.fell,
            corroborated=backed,
            tasks_too_hard=hard,
            replies_cut_from_start=cut_short,
            action=f"The policy is buying reward through {cut.name}, not the task: read "
            "the top-reward transcripts, then lower that component's weight, cap it, or "
            "pay it only on correct answers (gate it on the task reward), and restart.",
            **ev,
        )
    ]


def _backed(ctx: Context, task: Component, since: int, level: float | None = None) -> bool:
    """Whether the numbers back a component's rise over a task component that did not rise
    (a heuristic alone is a hypothesis: DESIGN.md): the task component fell beyond its noise,
    the replies collapsed (``length_collapse_ratio`` of their start: the reward pays for
    stopping), held-out fell beyond its error since, or the task component (from ``level``,
    where given: where it stopped rising) has stayed flat from ``since`` for as long as a flat reward takes to be a stuck run
    (``flat_warn_updates``: a healthy run learns its format first and the task follows within
    a slow start's time), or the run ended with it flat; flat meaning evidently flat since
    (its fitted change, twice its error added, within its margin): a noisy task component
    that may be rising within its noise is not flat."""
    fell = task.fell if level is None else task.tail < level - task.margin
    if fell or _replies_collapsed(ctx) or _heldout_falls(ctx, since):
        return True
    if not stuck_for(ctx, since, int(task.mean.steps[-1])):
        return False
    seg = task.mean.since(since)
    tr = trend(seg) if len(seg) >= 2 * MIN_WINDOW else None
    if tr is None:
        return False
    # Evidently flat: its change over the stretch, with twice its error added, within the
    # margin a change beyond noise needs (an equivalence test, not a failed test of a rise).
    err = abs(tr.change / tr.z) if tr.z else 0.0
    return tr.change + 2 * err <= task.margin


def _replies_collapsed(ctx: Context) -> bool:
    """Replies over their last five updates at or under ``length_collapse_ratio`` of their
    start (the policy check's line)."""
    _n, length = ctx.series("response/length_mean")
    if length is None or len(length) < 2 * MIN_WINDOW:
        return False
    l0 = start_level(length.values)
    l1 = float(length.values[-MIN_WINDOW:].mean())
    return l0 > 0 and l1 / l0 <= ctx.thresholds.of(PolicyLines).length_collapse_ratio


def _heldout_falls(ctx: Context, since: int) -> bool:
    held = heldout_change(ctx, since)
    return held is not None and held["change"] < -2 * held["se"]


def _hypothesis(ctx: Context) -> str:
    """What an info finding on a component adds: why it is not a warning yet."""
    n = ctx.thresholds.of(RewardLines).flat_warn_updates
    return (
        "; a hypothesis: healthy runs learn a format or shaping term first and the task "
        f"after (a warning if the task component falls, stays flat {n} updates or until the "
        "run ends, the replies collapse, or held-out falls)"
    )


def _late(ctx: Context, comps: Components, ev: dict[str, Any]) -> list[Finding]:
    """The task component stopped rising, then another went on to its ceiling: the proxy
    rising after the true objective peaked (Gao et al. 2022), fail where the numbers back it
    (``_backed``: the task component fell from its level or held it as long as a stuck run's
    flat reward, ...), else a hypothesis (info; info too where the tasks were too hard from
    the start). Dated where that component's five-update mean first passed its
    level at the plateau by its margin."""
    late = late_shortcut(comps, ctx.thresholds.of(ComponentsLines).component_dominant)
    if late is None or comps.task is None:
        return []
    c = late.component
    hard = groups.from_start(ctx) == "too_hard"
    v = c.mean.values[c.mean.steps > late.since]
    c5 = np.convolve(v, np.ones(MIN_WINDOW) / MIN_WINDOW, mode="valid")
    hit = np.flatnonzero(c5 - late.before > c.margin)
    rise = c.mean.steps[c.mean.steps > late.since]
    first = int(rise[int(hit[0])]) if len(hit) else int(rise[0])
    # Gao et al.: the proxy rising after the true objective peaked. A task component that
    # fell from its level since, or held it with no hint of a rise for as long as a stuck
    # run's flat reward, backs it; one still rising within its noise does not.
    backed = _backed(ctx, comps.task, late.since, level=late.level)
    return [
        finding(
            NAME,
            "info" if hard or not backed else "fail",
            "exploit_suspected",
            f"{'exploit suspected: ' if backed else ''}the task component {comps.task.name} "
            f"stopped rising at step {late.since} ({late.level:.3g}, {comps.task.tail:.3g} "
            f"now) while reward component {c.name} went on to its ceiling ({late.before:.3g} "
            f"-> {c.tail:.3g}); {late.share:.0%} of the components' rise since then is "
            f"{c.name}" + ("" if backed else _hypothesis(ctx)),
            metric=c.metric,
            first_step=first,
            component=c.name,
            gain_share=round_sig(late.share),
            task_plateau_step=late.since,
            at_ceiling=True,
            corroborated=backed,
            tasks_too_hard=hard,
            action=f"After the task stopped improving the policy kept buying reward "
            f"through {c.name}: read the top-reward transcripts since step {late.since}, "
            "then cap that component or pay it only on correct answers, and restart "
            "from a checkpoint before the rise.",
            **ev,
        )
    ]


def _dominant(ctx: Context, comps: Components, ev: dict[str, Any]) -> list[Finding]:
    """A component other than the task's holding most of the reward's rise (info)."""
    total = _total_gain(comps)
    if total <= 0:
        return []
    top = max(comps.items, key=lambda c: c.gain)
    share = top.gain / total
    if (
        top is comps.task
        or not top.rose
        or share < ctx.thresholds.of(ComponentsLines).component_dominant
    ):
        return []
    if len(comps.items) <= 1:
        return []
    task = f"; the task component {_describe(comps.task)}" if comps.task is not None else ""
    return [
        finding(
            NAME,
            "info",
            "exploit_suspected",
            f"{share:.0%} of the reward's rise comes from {top.name} "
            f"({top.head:.3g} -> {top.tail:.3g}){task}",
            metric=top.metric,
            first_step=_rise_step(top),
            component=top.name,
            gain_share=round_sig(share),
            action=f"Most of the gain is {top.name}: make sure the task component "
            "keeps rising with it.",
            **ev,
        )
    ]


def _dead(comps: Components) -> list[Finding]:
    """A component that never varies (over updates, or within every update): it adds nothing
    to the advantages."""
    out: list[Finding] = []
    for c in comps.items:
        v = c.mean.values
        flat_std = c.std is not None and float(np.max(np.abs(c.std.values))) <= 1e-9
        if float(v.max() - v.min()) > 1e-9 and not flat_std:
            continue
        out.append(
            finding(
                NAME,
                "info",
                "no_signal",
                metric=c.metric,
                title=f"dead reward component: {c.name} is constant at {float(v.mean()):.3g}"
                + (" within every update" if flat_std else "")
                + ": it adds nothing to the advantages",
                component=c.name,
                value=round_sig(float(v.mean())),
                action="A component that never varies teaches nothing: check that it is "
                "computed (a grader returning a constant) or drop it.",
            )
        )
    return out


def _hidden(ctx: Context, comps: Components, ev: dict[str, Any]) -> list[Finding]:
    part = hidden_part(ctx, comps)
    if part is None:
        return []
    _lname, length = ctx.series("response/length_mean")
    grew = None
    if length is not None and len(length) >= 2 * MIN_WINDOW:
        at = length.values[length.steps <= part.since]
        if len(at):
            l0 = float(at[-MIN_WINDOW:].mean())
            grew = float(length.values[-MIN_WINDOW:].mean()) / l0 if l0 > 0 else None
    longer = grew is not None and grew >= ctx.thresholds.of(ComponentsLines).hidden_length_growth
    with_length = f", while replies grew {grew:.1f}x" if longer else ""
    return [
        finding(
            NAME,
            "fail" if longer else "warn",
            "exploit_suspected",
            f"exploit suspected: the reward rose beyond its components from step {part.since}"
            f"{with_length}: {part.gain:.3g} of it ({part.share:.0%} of the reward's rise "
            f"since) is in no logged component ({', '.join(c.name for c in comps.items)} "
            f"explained it until then, R² {part.r2:.2f})",
            metric="reward/mean",
            first_step=part.since,
            unexplained=round_sig(part.gain),
            unexplained_share=round_sig(part.share),
            length_ratio=round_sig(grew) if grew is not None else None,
            action="Something outside the logged components is paying reward"
            + (" for length: read the longest top-reward replies" if longer else "")
            + "; log every term of the reward, and cap or remove the one that is rising.",
            **ev,
        )
    ]


def _spread(comps: Components, ev: dict[str, Any], dominant: float) -> list[Finding]:
    """A component other than the task's holding ``dominant`` of the reward's spread over the
    last updates (info)."""
    have = [c for c in comps.items if c.std is not None and len(c.std) >= MIN_WINDOW]
    if len(have) < 2 or len(have) != len(comps.items):
        return []
    var = {c.name: (c.weight**2) * float(np.mean(c.std.values[-MIN_WINDOW:] ** 2)) for c in have}  # type: ignore[union-attr]
    total = sum(var.values())
    if total <= 0:
        return []
    name = max(var, key=lambda k: var[k])
    share = var[name] / total
    if share < dominant or (comps.task is not None and name == comps.task.name):
        return []
    return [
        finding(
            NAME,
            "info",
            "exploit_suspected",
            f"{name} holds {share:.0%} of the reward's spread over the last {MIN_WINDOW} "
            "updates: the advantages are mostly made of it",
            component=name,
            variance_share=round_sig(share),
            action="GRPO learns from within-group differences; if they are mostly "
            f"{name}, the policy learns {name}: check its weight.",
            **ev,
        )
    ]


def _rise_step(c: Component) -> int:
    """The first update where the component's five-update mean passed its start by its
    margin (its first step if it never did)."""
    v = c.mean.values
    c5 = np.convolve(v, np.ones(MIN_WINDOW) / MIN_WINDOW, mode="valid")
    hit = np.flatnonzero(c5 - c.head > c.margin)
    i = int(hit[0]) if len(hit) else 0
    return int(c.mean.steps[i])
