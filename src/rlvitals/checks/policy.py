"""Policy and optimisation: entropy relative to the run's own start, trust region, gradients.

Entropy is never held against an absolute number: LLM token entropy is usually below 1 and
differs by model and task (peers that gate it absolutely miss real collapses and flag healthy
runs). It is judged as a ratio to the median of the run's first steps, together with its trend
and what the reward does meanwhile. Length and entropy are read together: entropy falling
while the reward rises is sharpening (info) only when the replies keep their length, the task
component (where the reward's components are logged) rises with the reward, and held-out does
not fall; otherwise it is a collapse onto a shortcut (warn, fail under a tenth of its start).
Replies collapsing to ``length_collapse_ratio`` of their starting length while the reward
rises are a shortcut on their own: the reward pays for stopping early. Gradient-norm
explosions warn once they recur; a single one is a hypothesis (info).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import Series
from .base import Finding
from .context import ENTROPY, Context, finding, round_sig
from .heldout import heldout_change, heldout_in_unit
from .reference import METRIC as REF_KL
from .reference import ReferenceLines
from .reward import RewardLines, learns
from .stats import (
    MAD_SIGMA,
    MIN_WINDOW,
    Trend,
    crossing,
    noise_sigma,
    read_words,
    rolling_mean,
    short_level,
    start_level,
    trend,
)
from .thresholds import line, lines

NAME = "policy"


@lines
@dataclass(frozen=True)
class PolicyLines:
    """Where the policy check draws its lines."""

    entropy_ratio_warn: float = line(
        0.3,
        "entropy over its own start that warns (unless the reward pays for it)",
        "science.md 2 (Cui et al. 2505.22617: most of the entropy drop comes early, with the "
        "gains; judged against the run's own start)",
    )
    entropy_ratio_fail: float = line(
        0.1,
        "entropy over its own start that fails",
        "science.md 2 detector (b): H_t/H_0 < 0.1 triggers the entropy-bound plateau",
    )
    entropy_fast_ratio: float = line(
        0.6,
        "early warning: entropy over its start under this ...",
        "science.md 2 (c): early warning before the collapse line",
    )
    entropy_fast_slope: float = line(
        0.02,
        "... and log-entropy still falling faster than this per step (a significant trend)",
        "science.md 2 (c): the EWMA slope of log H < -0.02 per step",
    )
    entropy_length_ratio: float = line(
        0.5,
        "replies at or under this share of their start keep an entropy fall from reading as "
        "sharpening",
        "science.md 5 (a length drop over 30% in 10 steps is a collapse sign); half the "
        "length and the entropy together",
    )
    entropy_plateau_steps: int = line(
        50,
        "under entropy_ratio_fail, the reward read for a plateau over its last third, at "
        "least this many updates",
        "science.md 2 (b): the Mann-Kendall test on reward over the last 50 steps",
    )
    length_collapse_ratio: float = line(
        0.3,
        "replies at or under this share of their start: collapsed (while the reward rises, "
        "the reward pays for stopping early)",
        "families: operating point, precision 1.00 finished and live, recall 0.00 / 1.00 / "
        "1.00 (replies at 40% / 20% / 5% of their start); science.md 5 (a healthy run's "
        "replies may shorten by a third; real healthy runs end at 45-135% of their start)",
    )
    clip_frac_warn: float = line(
        0.2,
        "clipped share of tokens that warns",
        "rl-doctor's clip-saturation lines (10/20/40%); DAPO 2503.14476 (eps 0.2-0.28)",
    )
    clip_structural_zeros: float = line(
        0.3,
        "a clip share exact 0 on between this share and its complement of the updates is "
        "the first pass of several (TRL num_iterations > 1), read as nothing",
        "trl #3120 (the first pass's ratio is exactly 1); a half give or take sampling",
    )
    grad_spike_sigmas: float = line(
        8.0,
        "a gradient norm this many robust sigmas over the median (and grad_spike_median "
        "times it) is a spike",
        "science.md 6 (Shewhart's 3 sigma at ARL0 370 per step; 8 robust sigmas is far "
        "beyond a heavy tail's noise)",
    )
    grad_spike_median: float = line(
        3.0,
        "... and this many times the median",
        "science.md 1 (collapses arrive as gradient-norm explosions, not a noisy norm)",
    )
    grad_spike_min: int = line(
        3,
        "spikes before they are said at all",
        "science.md 6 takeaway 2 (3 of 5 points): three, never one",
    )
    grad_spike_rate: float = line(
        0.01,
        "share of updates with gradient-norm spikes (or explosions) that makes them a pattern",
        "science.md 6 (a false-alarm rate of 1 in ~500 steps is the detectors' design: at "
        "1% a spike is five times rarer luck)",
    )
    grad_explosion: float = line(
        10.0,
        "a gradient norm this many times the median of the updates before it: an explosion",
        "science.md 1 (Liu, Li et al.: collapses arrive as gradient-norm explosions); "
        "rl-doctor dates its spike scenario's onset at 10x",
    )
    grad_explosion_window: int = line(
        50,
        "updates before one whose median it is held against",
        "science.md 2b and 6 (a 50-step window for a level that moves as training settles)",
    )
    grad_explosion_recurring: int = line(
        3,
        "explosions that are unstable updates even on a run that learns",
        "science.md 6 takeaway 2 (3 points, never one: a single spike is a hypothesis, DESIGN.md); families: precision 1.00, recall 0.00 / 1.00 / 1.00 (2 spikes of 8x / 4 of 20x / 8 of 100x; at 2: 0.20 / 1.00 / 1.00)",
    )


def _entropy(ctx: Context) -> list[Finding]:
    """Entropy under its warn ratio of its own start (or falling fast towards it), told by
    what the reward did meanwhile: sharpening where the reward paid for it and the rest
    agrees, a collapse onto a shortcut where it paid but the replies, the task component or
    held-out disagree, else a collapse."""
    th = ctx.thresholds.of(PolicyLines)
    name, s = ctx.series(*ENTROPY)
    # The start is the median of the first five updates; three points past the line after
    # them are enough (the line is far from noise): a live run is judged from its eighth.
    if s is None or name is None or len(s) < MIN_WINDOW + 3:
        return []
    h0 = start_level(s.values, MIN_WINDOW)
    if not h0 > 0:
        return []
    idx = _entropy_onset(s.steps, s.values / h0, th)
    if idx is None:
        return []
    step = int(s.steps[idx])
    low = float(np.nanmin(rolling_mean(s.values / h0)))
    severe = low < th.entropy_ratio_fail
    shrink = _length_ratio(ctx)
    paid = _paid(ctx, s, idx, severe)
    tr = trend(s)
    rep = ctx.finite("transcripts/repetition_rate")
    evidence: dict[str, Any] = dict(
        metric=name,
        first_step=step,
        start_level=round_sig(h0),
        ratio_low=round_sig(low),
        line=th.entropy_ratio_warn,
        trend_z=round_sig(tr.z) if tr else None,
        length_ratio=shrink,
        repetition_rate_last=round_sig(float(rep.values[-1])) if rep is not None else None,
        reward_metric=paid.name,
        reward_trend_z_since=round_sig(paid.trend.z) if paid.trend else None,
    )
    disagree = _disagreements(ctx, shrink, paid, evidence)
    where = f"{name} at {low:.0%} of its start from step {step}"
    course = f"({h0:.3g} -> {float(s.values[-MIN_WINDOW:].mean()):.3g})"
    sev, verdict, title, action = _entropy_reading(paid, disagree, severe, where, course)
    return [finding(NAME, sev, verdict, title, action=action, **evidence)]


def _entropy_reading(
    paid: _Paid, disagree: list[str], severe: bool, where: str, course: str
) -> tuple[str, str, str, str]:
    """(severity, verdict, title, action) of an entropy fall: a collapse onto a shortcut where
    the reward paid for it but the rest disagrees, sharpening where it paid and the rest
    agrees (info), else a collapse (fail under ``entropy_ratio_fail``)."""
    sev = "fail" if severe else "warn"
    if paid.paying and disagree:
        return (
            sev,
            "exploit_suspected",
            f"entropy collapse onto a shortcut: {where} while {paid.name} rises, but "
            f"{' and '.join(disagree)}: not sharpening",
            SHORTCUT_ACTION,
        )
    if paid.paying:
        return (
            "info",
            "collapse",
            f"{where} while {paid.name} still rises or is high: the policy is sharpening "
            "on what it learned",
            SHARPENING_ACTION,
        )
    why = (
        f"{paid.name} has stopped rising at {paid.plateau:.3g}, below the top of its range"
        if paid.plateau is not None
        else f"{paid.name or 'reward'} does not improve"
    )
    return sev, "collapse", f"entropy collapse: {where} {course} while {why}", COLLAPSE_ACTION


SHORTCUT_ACTION = (
    "The policy narrowed onto something the reward pays for that is not the task: read the "
    "top-reward transcripts from this step, check the reward's components, and restart from "
    "before it with the shortcut closed."
)
SHARPENING_ACTION = (
    "Nothing yet: watch held-out scores and the transcripts for repetition; if reward stops "
    "rising at low entropy, exploration is spent."
)
COLLAPSE_ACTION = (
    "The policy is collapsing onto one response per prompt: read the transcripts for "
    "repetition; use clip-higher (DAPO ε_high 0.28), an entropy bonus, KL-Cov or Clip-Cov, a "
    "higher sampling temperature, or restart from before this step."
)


def _entropy_onset(steps: np.ndarray, rel: np.ndarray, th: PolicyLines) -> int | None:
    """Where entropy (over its start) went under its warn ratio (3 of 5), or earlier where it
    was already falling fast towards it (``_falling_fast``)."""
    idx = crossing(rel, th.entropy_ratio_warn, above=False, points=True)
    fast = _falling_fast(steps, rel, th)
    if fast is not None and (idx is None or fast < idx):
        return fast
    return idx


def _length_ratio(ctx: Context) -> float | None:
    """Replies over their last five updates as a share of their start (rounded)."""
    _lname, length = ctx.series("response/length_mean")
    if length is None or len(length) < 2 * MIN_WINDOW:
        return None
    l0 = start_level(length.values)
    l1 = float(length.values[-MIN_WINDOW:].mean())
    return round_sig(l1 / l0) if l0 > 0 else None


@dataclass
class _Paid:
    """What the reward did from the entropy's fall: whether it paid for it."""

    name: str | None
    trend: Trend | None
    heldout: dict[str, Any] | None
    heldout_falling: bool
    paying: bool
    plateau: float | None


def _paid(ctx: Context, s: Series, idx: int, severe: bool) -> _Paid:
    """Entropy bought reward: a policy sharpening while its reward still climbs is learning,
    not collapsing (Cui et al.: most of a healthy run's entropy drop comes with its gains).
    Paying: the reward rising since the fall, or high (in the top share of a known range; of
    an observed range only where it was not there before entropy began to fall), or held-out
    (a score in [0, 1]) in its top share and not falling; or, while the updates since the fall
    are too few for a trend of their own (under two windows), rising beyond noise over the
    whole run (the reward check's learning) with held-out not falling. A fall found late in a
    run (a healthy seed on another CPU: reward 0.53 -> 0.73 at trend z 9, held-out 0.77 ->
    0.84, entropy at 53% of its start from update 31 of 40) is not "not improving"; past two
    windows what the reward did since decides, so a live run whose entropy falls after a
    healthy rise is told a collapse as it goes."""
    step = int(s.steps[idx])
    rname, r = ctx.series("reward/mean_with_unusable", "reward/mean")
    since = r.since(step) if r is not None else None
    if r is not None and since is not None and len(since) < MIN_WINDOW:
        # A fall found in the last updates leaves too few since it to read the reward's
        # trend: read it from the five updates before, the window the fall is measured on.
        since = r.since(int(s.steps[max(0, idx - MIN_WINDOW)]))
    rtr = trend(since) if since is not None and len(since) >= MIN_WINDOW else None
    lo, hi = ctx.reward_bounds
    edge = ctx.thresholds.of(RewardLines).plateau_level_edge
    top = hi - edge * (hi - lo)
    high = since is not None and len(since) and float(since.values.mean()) >= top
    if high and not ctx.reward_top_known and r is not None:
        # Against an observed range only, whose top is the run's own best (which a reward
        # that froze as entropy fell sits at: Context.reward_top_known), high counts where
        # the fall bought it: the reward was below that share before entropy began to fall.
        before = r.values[r.steps < _fall_start(ctx, s, idx)][-MIN_WINDOW:]
        high = not (len(before) and float(before.mean()) >= top)
    # Held-out where evaluated: falling, the entropy bought nothing real.
    held = heldout_change(ctx, step)
    held_falling = held is not None and held["change"] < -2 * held["se"]
    # Held-out scored in [0, 1] and in its top share since the fall: the entropy bought
    # real skill near the top of a known scale (where the train reward's top is unknown).
    held_high = (
        held is not None
        and heldout_in_unit(ctx, str(held["suite"]))
        and not held_falling
        and float(held["last"]) >= 1 - edge
    )
    few_since = since is not None and len(r.since(step)) < 2 * MIN_WINDOW  # type: ignore[union-attr]
    paying = (
        (rtr is not None and rtr.rising)
        or bool(high)
        or held_high
        or (few_since and learns(ctx) and not held_falling)
    )
    plateau = None
    if paying and severe and r is not None and not high and since is not None:
        plateau = _plateau(ctx, r, since)
    return _Paid(rname, rtr, held, held_falling, paying and plateau is None, plateau)


def _fall_start(ctx: Context, s: Series, idx: int) -> int:
    """The step entropy began to fall: where it first went under ``entropy_fast_ratio`` of
    its start (3 points of 5), else where it crossed its warn line (``idx``)."""
    rel = s.values / start_level(s.values, MIN_WINDOW)
    fast = crossing(
        rel, ctx.thresholds.of(PolicyLines).entropy_fast_ratio, above=False, points=True
    )
    return int(s.steps[min(idx, fast) if fast is not None else idx])


def _plateau(ctx: Context, r: Series, since: Series) -> float | None:
    """Under a tenth of its start, entropy has little left to give (science.md 2b, the
    entropy-bound plateau): what counts then is whether the reward still rises now, over the
    last third of the run (at least ``entropy_plateau_steps``), not since the fall began.
    Stopped below the top of its range, exploration is spent: the reward's level there."""
    late_n = max(ctx.thresholds.of(PolicyLines).entropy_plateau_steps, len(r) // 3)
    if len(since) < late_n:
        return None
    late = r.since(int(r.steps[len(r) - late_n]))
    lt = trend(late)
    return float(late.values.mean()) if lt is None or not lt.rising else None


def _disagreements(
    ctx: Context, shrink: float | None, paid: _Paid, evidence: dict[str, Any]
) -> list[str]:
    """Sharpening stays info only when the rest agrees: replies not collapsing (to
    ``entropy_length_ratio`` of their start), the task component (where logged) not flat,
    held-out not falling. The words of each that disagrees; the evidence gains what was
    read."""
    task = ctx.components.task
    task_flat = task is not None and task.flat
    short = shrink is not None and shrink <= ctx.thresholds.of(PolicyLines).entropy_length_ratio
    evidence.update(
        task_component=task.name if task is not None else None,
        task_flat=task_flat,
        heldout=paid.heldout,
    )
    return [
        w
        for w, on in (
            (f"replies fell to {shrink:.0%} of their length" if shrink is not None else "", short),
            (f"its task component {task.name} stayed flat" if task is not None else "", task_flat),
            ("held-out falls", paid.heldout_falling),
        )
        if on
    ]


# Replies at or under ``length_collapse_ratio`` of their starting length while the reward
# rises: a shortcut (science.md 5: a length drop over 30% within 10 steps is a collapse sign;
# a healthy run's replies may shorten by a third as it learns to stop).


def _length_collapse(ctx: Context) -> list[Finding]:
    """Replies collapsing to a few tokens while the reward rises: the reward pays for
    stopping early (an empty or one-token answer the grader accepts, a brevity bonus)."""
    lname, length = ctx.series("response/length_mean")
    rname, r = ctx.series("reward/mean", "reward/mean_with_unusable")
    if length is None or r is None or len(length) < 2 * MIN_WINDOW or len(r) < 2 * MIN_WINDOW:
        return []
    l0 = start_level(length.values)
    l1 = float(length.values[-MIN_WINDOW:].mean())
    if not l0 > 0 or l1 / l0 > ctx.thresholds.of(PolicyLines).length_collapse_ratio:
        return []
    task = ctx.components.task
    if task is not None and task.rose:
        return []  # replies got shorter while the task score rose: learning to stop
    v = r.values
    head_n = max(MIN_WINDOW, min(10, len(v) // 4))
    head, tail = float(v[:head_n].mean()), float(v[-MIN_WINDOW:].mean())
    margin = ctx.reward_margin(noise_sigma(v))
    if tail - head <= margin:
        return []
    idx = crossing(length.values, 0.5 * l0, above=False)  # onset: under half its start
    first = int(length.steps[idx]) if idx is not None else int(length.steps[-MIN_WINDOW])
    task_flat = task is not None and task.flat
    return [
        finding(
            NAME,
            "fail" if task_flat else "warn",
            "exploit_suspected",
            f"replies collapsed to {l1:.2g} tokens ({l1 / l0:.0%} of their start, {l0:.2g}) "
            f"while {rname} rose {head:.3g} -> {tail:.3g}"
            + (f" and the task component {task.name} stayed flat" if task_flat and task else "")
            + ": the reward pays for stopping early",
            metric=lname,
            first_step=first,
            length_start=round_sig(l0),
            length_last=round_sig(l1),
            length_ratio=round_sig(l1 / l0),
            line=ctx.thresholds.of(PolicyLines).length_collapse_ratio,
            reward_metric=rname,
            reward_first=round_sig(head),
            reward_last=round_sig(tail),
            margin=round_sig(margin),
            task_component=task.name if task is not None else None,
            action="Read the top-reward transcripts: an empty or one-token reply that the "
            "grader accepts, or a brevity bonus outweighing the task. Gate the bonus on a "
            "correct answer, or fix the grader, and restart.",
        )
    ]


# Replies at or under ``length_collapse_ratio`` of their start on most updates, while the
# reward does not rise: a collapse, corroborated where every attempt scored alike.


def _reply_collapse(ctx: Context) -> list[Finding]:
    """Replies falling under ``length_collapse_ratio`` of their start (median of the first five
    updates)
    on 3 of 5 updates and on most updates since, while the reward does not rise beyond noise
    (a rise is the shortcut rule's): collapse, warn where the rewards had no spread on most of
    those updates (every attempt scoring alike: nothing left to learn from), else info."""
    lname, length = ctx.series("response/length_mean")
    if length is None or len(length) < 2 * MIN_WINDOW or learns(ctx):
        return []
    l0 = start_level(length.values, MIN_WINDOW)
    if not l0 > 0:
        return []
    ratio = ctx.thresholds.of(PolicyLines).length_collapse_ratio
    line = ratio * l0
    idx = crossing(length.values, line, above=False, points=True)
    if idx is None:
        return []
    after = length.values[idx:]
    share = float((after < line).mean())
    if share < 0.5:
        return []
    dead = _no_spread(ctx, length.steps[idx:])
    dead_share = float(dead.mean())
    spread_known = any(ctx.finite(n) is not None for n in ("reward/group_std_mean", "reward/std"))
    sure = dead_share >= 0.5
    rname, _r = ctx.series("reward/mean_with_unusable", "reward/mean")
    return [
        finding(
            NAME,
            "warn" if sure else "info",
            "collapse",
            f"collapse: replies fell under {ratio:.0%} of their start ({l0:.3g} "
            f"tokens) from step {int(length.steps[idx])}, to a median of "
            f"{float(np.median(after)):.3g} ({share:.0%} of updates since under the line), "
            f"while {rname or 'the reward'} does not rise"
            + (
                f"; every attempt scored alike on {dead_share:.0%} of those updates"
                if sure
                else (
                    f"; rewards still varied on {1 - dead_share:.0%} of those updates"
                    if spread_known
                    else "; no reward spread logged to confirm"
                )
            ),
            metric=lname,
            first_step=int(length.steps[idx]),
            length_start=round_sig(l0),
            length_median_since=round_sig(float(np.median(after))),
            share_under_line=round_sig(share),
            line=ratio,
            no_spread_share=round_sig(dead_share) if spread_known else None,
            action="The policy settled on one short reply: read the transcripts from this "
            "step; raise the sampling temperature or the group size, add an entropy bonus, "
            "check the reward is not paying for stopping, or restart from before it.",
        )
    ]


def _falling_fast(steps: np.ndarray, rel: np.ndarray, th: PolicyLines) -> int | None:
    """Where entropy (``rel``: over its start) went under ``entropy_fast_ratio`` (3 points of
    5) while log-entropy, from the five updates before that to now, falls faster than
    ``entropy_fast_slope`` per step with a significant trend: a collapse under way, before it
    reaches the warn ratio (science.md, entropy 2c). A healthy run's entropy declines by a
    fraction of that, and a policy that sharpened early and then holds is no longer falling.
    (The slope of log(H/H0) is the slope of log H.)"""
    idx = crossing(rel, th.entropy_fast_ratio, above=False, points=True)
    if idx is None:
        return None
    lo = max(0, idx - MIN_WINDOW)
    vals = rel[lo:]
    ok = vals > 0
    seg = Series(steps[lo:][ok], np.log(vals[ok]))
    tr = trend(seg)
    if tr is None or not tr.falling or tr.slope > -th.entropy_fast_slope:
        return None
    return idx


CLIP = "train/clip_frac"
CLIP_ACTION = (
    "Updates move the policy far from the sampler's: lower the learning rate or the number of "
    "minibatches per update, or check the sampler/trainer mismatch."
)


def _clip(ctx: Context) -> list[Finding]:
    """The trust region saturated: the clipped share of tokens past ``clip_frac_warn`` (3 of 5
    updates; every update of a short log), a warning while it still is over the last five
    updates, else an early saturation (info). Saturated from the run's first updates and
    falling since (a significant falling trend): a transient start, as a new policy's replies
    cut at the token limit are (info), while it falls."""
    s = ctx.finite(CLIP)
    if s is None:
        return []
    line = ctx.thresholds.of(PolicyLines).clip_frac_warn
    if short_level(s.values, line):
        level = float(s.values.mean())
        return [
            finding(
                NAME,
                "warn",
                "drift",
                f"{read_words(len(s))}: {level:.0%} of tokens clipped (line {line:.0%})",
                metric=CLIP,
                first_step=int(s.steps[0]),
                level=round_sig(level),
                line=line,
                updates_read=len(s),
                action=CLIP_ACTION,
            )
        ]
    if len(s) < MIN_WINDOW:
        return []
    s = _clipping_passes(s, ctx.thresholds.of(PolicyLines).clip_structural_zeros)
    idx = crossing(s.values, line)
    if idx is None:
        return []
    peak = float(np.nanmax(rolling_mean(s.values)))
    last = float(s.values[-MIN_WINDOW:].mean())
    step = int(s.steps[idx])
    tr = trend(s)
    falling = idx < MIN_WINDOW and tr is not None and tr.falling
    # Judged by its course: saturated early and within the region now, or saturated from the
    # start and falling since.
    early = last < line or falling
    return [
        finding(
            NAME,
            "info" if early else "warn",
            "drift",
            f"the trust region saturated early ({peak:.0%} of tokens clipped from step {step}), "
            f"{last:.0%} over the last {MIN_WINDOW} updates"
            if early
            else f"trust region saturated: {peak:.0%} of tokens clipped from step {step}",
            metric=CLIP,
            first_step=step,
            peak=round_sig(peak),
            line=line,
            action="Nothing to do now; if it comes back, lower the learning rate."
            if early
            else CLIP_ACTION,
        )
    ]


def _clipping_passes(s: Series, share: float) -> Series:
    """With several optimiser passes per batch (TRL num_iterations > 1) the first pass has a
    ratio of exactly 1, so every other value is an exact 0 that measures nothing: only the
    passes that can clip are read (exact zeros on ``share`` to ``1 - share`` of the updates)."""
    zero = s.values == 0
    if share <= zero.mean() <= 1 - share and (~zero).sum() >= MIN_WINDOW:
        return Series(s.steps[~zero], s.values[~zero])
    return s


def _no_spread(ctx: Context, steps: np.ndarray) -> np.ndarray:
    """Per update at ``steps``, whether its rewards had no spread at all (``reward/group_std_mean``
    or the batch ``reward/std`` exactly 0: every attempt of every group scored the same), so
    GRPO had no advantage to follow; False where unknown."""
    out = np.zeros(len(steps), dtype=bool)
    for name in ("reward/group_std_mean", "reward/std"):
        z = ctx.finite(name)
        if z is None:
            continue
        _c, ia, ib = np.intersect1d(steps, z.steps, return_indices=True)
        out[ia] |= z.values[ib] == 0
    return out


def _grad_norm(ctx: Context) -> Series | None:
    """The gradient norm of the updates that had something to learn from: an update whose
    rewards had no spread moves the policy by its KL term alone, at a norm near 0 (a hundred
    times under the others') that is no reference for the updates that learn."""
    s = ctx.finite("train/grad_norm")
    if s is None:
        return None
    dead = _no_spread(ctx, s.steps)
    return Series(s.steps[~dead], s.values[~dead]) if dead.any() else s


def _otherwise(ctx: Context) -> tuple[bool, str]:
    """Whether gradient spikes are only a note (the run learns otherwise: its reward rises
    beyond noise and its KL to the reference stays under the reference check's line), with
    the words why."""
    line = ctx.thresholds.of(ReferenceLines).ref_kl_warn
    kl = ctx.finite(REF_KL)
    if kl is not None and len(kl) >= MIN_WINDOW and crossing(kl.values, line) is not None:
        return False, f"with the KL to the reference over {line}"
    if not learns(ctx):
        return False, "while the reward does not rise beyond noise"
    return True, "while the run learns (reward rising beyond noise)"


def _grad_spikes(ctx: Context) -> list[Finding]:
    s = _grad_norm(ctx)
    if s is None or len(s) < 4 * MIN_WINDOW:
        return []
    v = s.values
    th = ctx.thresholds.of(PolicyLines)
    med = float(np.median(v))
    mad = float(np.median(np.abs(v - med))) * MAD_SIGMA
    if mad <= 0 or med <= 0:
        return []
    spikes = np.flatnonzero(
        (v > med + th.grad_spike_sigmas * mad) & (v > th.grad_spike_median * med)
    )
    if len(spikes) < th.grad_spike_min:
        return []
    # Three or more such spikes are worth a look; at grad_spike_rate of the updates or more
    # (over at least as many updates as make one spike that rate) they are a pattern.
    rate = th.grad_spike_rate
    frequent = len(v) >= 1 / rate and len(spikes) >= rate * len(v)
    fine, why = _otherwise(ctx)
    return [
        finding(
            NAME,
            "warn" if frequent and not fine else "info",
            "unstable",
            f"unstable updates: {len(spikes)} gradient-norm spikes (over "
            f"{th.grad_spike_sigmas:g} robust σ and {th.grad_spike_median:g}x the median), first at step {int(s.steps[spikes[0]])}, {why}",
            metric="train/grad_norm",
            first_step=int(s.steps[spikes[0]]),
            median=round_sig(med),
            spikes=[int(x) for x in s.steps[spikes][:20]],
            spike_rate=round_sig(len(spikes) / len(v)),
            learns_otherwise=fine,
            action="Spikes that cluster with a rising sampler/trainer mismatch or KL precede "
            "collapses: lower the learning rate or clip gradients harder; otherwise watch them.",
        )
    ]


# A gradient norm ``grad_explosion`` times the median of the (up to) ``grad_explosion_window``
# updates before it is an explosion, not noise: the collapses of science.md 1 arrive as
# gradient-norm explosions; a long run on a sharpened policy goes past it now and then (see
# the rate below).


def _median_before(v: np.ndarray, w: int) -> np.ndarray:
    """Each update's reference: the median of the (up to) ``w`` updates before it, from the
    tenth on (NaN before): what a live check knew at that step, following a norm that falls as
    training settles."""
    ref = np.full(len(v), np.nan)
    for i in range(2 * MIN_WINDOW, min(w, len(v))):
        ref[i] = np.median(v[:i])
    if len(v) > w:
        ref[w:] = np.median(np.lib.stride_tricks.sliding_window_view(v[:-1], w), axis=1)
    return ref


def _grad_explosion(ctx: Context) -> list[Finding]:
    """Gradient norms ``grad_explosion`` times the median of the updates before them, where
    explosions come at ``grad_spike_rate`` of the updates so far or more: unstable updates,
    a warning once ``grad_explosion_recurring`` of them came (a single spike is a hypothesis
    until the numbers corroborate it: DESIGN.md), else information; rarer, the tail of a long
    run's noise (info)."""
    s = _grad_norm(ctx)
    if s is None or len(s) <= 2 * MIN_WINDOW:
        return []
    v = s.values
    w = ctx.thresholds.of(PolicyLines).grad_explosion_window
    ref = _median_before(v, w)
    th = ctx.thresholds.of(PolicyLines)
    hits = np.flatnonzero((ref > 0) & (v >= th.grad_explosion * ref))
    if not len(hits):
        return []
    # One is an alarm where explosions come at ``grad_spike_rate`` of the updates so far or
    # more (in a run's first hundred updates, one is enough). A long run on a sharpened policy
    # has a heavy tail of its own (a rare sample of a token the policy all but ruled out; the
    # reference trainer's mastered three-digit run: 5 in its first 3,300 updates, up to 40x):
    # said, not warned.
    rates = np.arange(1, len(hits) + 1) / (hits + 1)
    alarm = np.flatnonzero(rates >= th.grad_spike_rate)
    j = int(alarm[0]) if len(alarm) else 0
    i, later, first = int(hits[j]), len(hits), int(s.steps[hits[0]])
    med = float(ref[i])
    # Whether the run learns otherwise is said beside them; what warns is their recurring.
    fine, why = _otherwise(ctx)
    recurring = later >= th.grad_explosion_recurring
    if recurring:
        why = f"{later} explosions: recurring" + (", although the run learns" if fine else "")
    else:
        why += f"; a hypothesis until they recur ({th.grad_explosion_recurring} warn)"
    also = ""
    if later > 1:
        also = f" ({later} such updates in all" + (f", the first at step {first})" if j else ")")
    return [
        finding(
            NAME,
            "warn" if len(alarm) and recurring else "info",
            "unstable",
            f"unstable updates: gradient norm exploded to {round_sig(float(v[i]))} at step "
            f"{int(s.steps[i])}, {float(v[i]) / med:.0f}x the median of the {min(i, w)} updates "
            f"before{also}"
            + (
                f", {why}"
                if len(alarm)
                else f": {later} in {len(v)} updates, under {th.grad_spike_rate:.0%} of them, the "
                "tail of a long run's noise"
            ),
            metric="train/grad_norm",
            first_step=int(s.steps[i]),
            level=round_sig(float(v[i])),
            median=round_sig(med),
            explosions=later,
            first_explosion=first,
            explosion_rate=round_sig(float(later / len(v))),
            line=th.grad_explosion,
            learns_otherwise=fine,
            action="Look at the batch of that step (a degenerate or very long sample) and the "
            "sampler/trainer mismatch around it; lower the learning rate or clip gradients "
            "harder if it repeats.",
        )
    ]


def check(ctx: Context) -> list[Finding]:
    explosion = _grad_explosion(ctx)
    # An explosion is the stronger reading of the same spikes: the spike count is not repeated.
    spikes = [] if explosion else _grad_spikes(ctx)
    short = _length_collapse(ctx)
    return (
        _entropy(ctx)
        + short
        + ([] if short else _reply_collapse(ctx))
        + _clip(ctx)
        + explosion
        + spikes
    )
