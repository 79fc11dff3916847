"""Policy and optimisation: entropy relative to the run's own start, trust region, gradients.

Entropy is never held against an absolute number: LLM token entropy is usually below 1 and
differs by model and task (peers that gate it absolutely miss real collapses and flag healthy
runs). It is judged as a ratio to the median of the run's first steps, together with its trend
and what the reward does meanwhile. Length and entropy are read together: entropy falling
while the reward rises is sharpening (info) only when the replies keep their length, the task
component (where the reward's components are logged) rises with the reward, and held-out does
not fall; otherwise it is a collapse onto a shortcut (warn, fail under a tenth of its start).
Replies collapsing to a fifth of their starting length while the reward rises are a shortcut on
their own: the reward pays for stopping early.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model import Series
from .base import Finding
from .context import ENTROPY, Context, Thresholds, finding, round_sig
from .heldout import heldout_change
from .stats import (
    MIN_WINDOW,
    crossing,
    noise_sigma,
    read_words,
    rolling_mean,
    short_level,
    start_level,
    trend,
)

NAME = "policy"


def _entropy(ctx: Context) -> list[Finding]:
    th = ctx.thresholds
    name, s = ctx.series(*ENTROPY)
    # The start is the median of the first five updates; three points past the line after
    # them are enough (the line is far from noise): a live run is judged from its eighth.
    if s is None or name is None or len(s) < MIN_WINDOW + 3:
        return []
    h0 = start_level(s.values, MIN_WINDOW)
    if not h0 > 0:
        return []
    rel = s.values / h0
    ratio = rolling_mean(rel)
    idx = crossing(rel, th.entropy_ratio_warn, above=False, points=True)
    fast = _falling_fast(s.steps, rel, th)
    if fast is not None and (idx is None or fast < idx):
        idx = fast
    if idx is None:
        return []
    step = int(s.steps[idx])
    tr = trend(s)
    low = float(np.nanmin(ratio))
    severe = low < th.entropy_ratio_fail
    _lname, length = ctx.series("response/length_mean")
    shrink = None
    if length is not None and len(length) >= 2 * MIN_WINDOW:
        l0 = start_level(length.values)
        l1 = float(length.values[-MIN_WINDOW:].mean())
        shrink = round_sig(l1 / l0) if l0 > 0 else None
    rep = ctx.finite("transcripts/repetition_rate")
    # Entropy bought reward: a policy sharpening while its reward still climbs is learning,
    # not collapsing (Cui et al.: most of a healthy run's entropy drop comes with its gains).
    rname, r = ctx.series("reward/mean_with_unusable", "reward/mean")
    since = r.since(step) if r is not None else None
    if r is not None and since is not None and len(since) < MIN_WINDOW:
        # A fall found in the last updates leaves too few since it to read the reward's
        # trend: read it from the five updates before, the window the fall is measured on
        # (a sharpening policy 4 updates from the end of its run is not "not improving").
        since = r.since(int(s.steps[max(0, idx - MIN_WINDOW)]))
    rtr = trend(since) if since is not None and len(since) >= MIN_WINDOW else None
    lo, hi = ctx.reward_bounds
    high = since is not None and len(since) and float(since.values.mean()) >= lo + 0.8 * (hi - lo)
    paying = (rtr is not None and rtr.rising) or bool(high)
    plateau = None
    late_n = max(PLATEAU_STEPS, len(r) // 3) if r is not None else 0
    if (
        paying
        and severe
        and r is not None
        and not high
        and since is not None
        and len(since) >= late_n
    ):
        # Under a tenth of its start, entropy has little left to give (science.md 2b, the
        # entropy-bound plateau): what counts then is whether the reward still rises now,
        # over the last third of the run, not since the fall began. Stopped below the top of
        # its range, exploration is spent.
        late = r.since(int(r.steps[len(r) - late_n]))
        lt = trend(late)
        if lt is None or not lt.rising:
            plateau = float(late.values.mean())
            paying = False
    evidence: dict[str, Any] = dict(
        metric=name,
        first_step=step,
        start_level=round_sig(h0),
        ratio_low=round_sig(low),
        line=th.entropy_ratio_warn,
        trend_z=round_sig(tr.z) if tr else None,
        length_ratio=shrink,
        repetition_rate_last=round_sig(float(rep.values[-1])) if rep is not None else None,
        reward_metric=rname,
        reward_trend_z_since=round_sig(rtr.z) if rtr else None,
    )
    # Sharpening stays info only when the rest agrees: replies not collapsing, the task
    # component (where logged) not flat, held-out not falling.
    task = ctx.components.task
    task_flat = task is not None and task.flat
    held = heldout_change(ctx, step)
    held_falling = held is not None and held["change"] < -2 * held["se"]
    short = shrink is not None and shrink <= ENTROPY_LENGTH
    evidence.update(
        task_component=task.name if task is not None else None,
        task_flat=task_flat,
        heldout=held,
    )
    disagree = [
        w
        for w, on in (
            (f"replies fell to {shrink:.0%} of their length" if shrink is not None else "", short),
            (f"its task component {task.name} stayed flat" if task is not None else "", task_flat),
            ("held-out falls", held_falling),
        )
        if on
    ]
    if paying and disagree:
        return [
            finding(
                NAME,
                "fail" if severe else "warn",
                "exploit_suspected",
                f"entropy collapse onto a shortcut: {name} at {low:.0%} of its start from "
                f"step {step} while {rname} rises, but {' and '.join(disagree)}: not "
                "sharpening",
                action="The policy narrowed onto something the reward pays for that is not "
                "the task: read the top-reward transcripts from this step, check the reward's "
                "components, and restart from before it with the shortcut closed.",
                **evidence,
            )
        ]
    if paying:
        return [
            finding(
                NAME,
                "info",
                "collapse",
                f"{name} at {low:.0%} of its start from step {step} while {rname} still rises "
                "or is high: the policy is sharpening on what it learned",
                action="Nothing yet: watch held-out scores and the transcripts for repetition; "
                "if reward stops rising at low entropy, exploration is spent.",
                **evidence,
            )
        ]
    return [
        finding(
            NAME,
            "fail" if severe else "warn",
            "collapse",
            f"entropy collapse: {name} at {low:.0%} of its start from step {step} "
            f"({h0:.3g} -> {float(s.values[-MIN_WINDOW:].mean()):.3g}) while "
            + (
                f"{rname} has stopped rising at {plateau:.3g}, below the top of its range"
                if plateau is not None
                else f"{rname or 'reward'} does not improve"
            ),
            action="The policy is collapsing onto one response per prompt: read the transcripts "
            "for repetition; use clip-higher (DAPO ε_high 0.28), an entropy bonus, KL-Cov or "
            "Clip-Cov, a higher sampling temperature, or restart from before this step.",
            **evidence,
        )
    ]


# Entropy under its warn ratio with replies at or under this share of their starting length:
# the two together are not sharpening.
ENTROPY_LENGTH = 0.5
# Replies at or under this share of their starting length (a fifth: from ten tokens to two)
# while the reward rises: a shortcut (science.md: a length drop over 30% within 10 steps is
# a collapse sign; a healthy run's replies may shorten by a third as it learns to stop).
LENGTH_COLLAPSE = 0.2


def _length_collapse(ctx: Context) -> list[Finding]:
    """Replies collapsing to a few tokens while the reward rises: the reward pays for
    stopping early (an empty or one-token answer the grader accepts, a brevity bonus)."""
    lname, length = ctx.series("response/length_mean")
    rname, r = ctx.series("reward/mean", "reward/mean_with_unusable")
    if length is None or r is None or len(length) < 2 * MIN_WINDOW or len(r) < 2 * MIN_WINDOW:
        return []
    l0 = start_level(length.values)
    l1 = float(length.values[-MIN_WINDOW:].mean())
    if not l0 > 0 or l1 / l0 > LENGTH_COLLAPSE:
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
            line=LENGTH_COLLAPSE,
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


def _falling_fast(steps: np.ndarray, rel: np.ndarray, th: Thresholds) -> int | None:
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


def _clip(ctx: Context) -> list[Finding]:
    s = ctx.finite("train/clip_frac")
    if s is None:
        return []
    line = ctx.thresholds.clip_frac_warn
    if short_level(s.values, line):
        level = float(s.values.mean())
        return [
            finding(
                NAME,
                "warn",
                "drift",
                f"{read_words(len(s))}: {level:.0%} of tokens clipped (line {line:.0%})",
                metric="train/clip_frac",
                first_step=int(s.steps[0]),
                level=round_sig(level),
                line=line,
                updates_read=len(s),
                action="Updates move the policy far from the sampler's: lower the learning "
                "rate or the number of minibatches per update, or check the sampler/trainer "
                "mismatch.",
            )
        ]
    if len(s) < MIN_WINDOW:
        return []
    # With several optimiser passes per batch (TRL num_iterations > 1) the first pass has a
    # ratio of exactly 1, so every other value is an exact 0 that measures nothing: only the
    # passes that can clip are read.
    zero = s.values == 0
    if 0.3 <= zero.mean() <= 0.7 and (~zero).sum() >= MIN_WINDOW:
        s = Series(s.steps[~zero], s.values[~zero])
    roll = rolling_mean(s.values)
    idx = crossing(s.values, ctx.thresholds.clip_frac_warn)
    if idx is None:
        return []
    if float(s.values[-MIN_WINDOW:].mean()) < ctx.thresholds.clip_frac_warn:
        # Judged by its course: saturated early, within the region now.
        return [
            finding(
                NAME,
                "info",
                "drift",
                f"the trust region saturated early ({float(np.nanmax(roll)):.0%} of tokens "
                f"clipped from step {int(s.steps[idx])}), {float(s.values[-MIN_WINDOW:].mean()):.0%}"
                f" over the last {MIN_WINDOW} updates",
                metric="train/clip_frac",
                first_step=int(s.steps[idx]),
                peak=round_sig(float(np.nanmax(roll))),
                line=ctx.thresholds.clip_frac_warn,
                action="Nothing to do now; if it comes back, lower the learning rate.",
            )
        ]
    return [
        finding(
            NAME,
            "warn",
            "drift",
            f"trust region saturated: {float(np.nanmax(roll)):.0%} of tokens clipped from step "
            f"{int(s.steps[idx])}",
            metric="train/clip_frac",
            first_step=int(s.steps[idx]),
            peak=round_sig(float(np.nanmax(roll))),
            line=ctx.thresholds.clip_frac_warn,
            action="Updates move the policy far from the sampler's: lower the learning rate or "
            "the number of minibatches per update, or check the sampler/trainer mismatch.",
        )
    ]


SPIKE_RATE = 0.01
# The reward read for a plateau under collapsed entropy: its last third, at least this many
# updates after the entropy fell (science.md 2b: Mann-Kendall over the last 50 steps).
PLATEAU_STEPS = 50


def _grad_spikes(ctx: Context) -> list[Finding]:
    s = ctx.finite("train/grad_norm")
    if s is None or len(s) < 4 * MIN_WINDOW:
        return []
    v = s.values
    med = float(np.median(v))
    mad = float(np.median(np.abs(v - med))) * 1.4826
    if mad <= 0 or med <= 0:
        return []
    spikes = np.flatnonzero((v > med + 8 * mad) & (v > 3 * med))
    if len(spikes) < 3:
        return []
    # Three or more such spikes are worth a look; at 1% of updates or more they are a
    # pattern, not bad luck (8 robust sigmas never happen in a healthy run that often).
    frequent = len(v) >= 100 and len(spikes) >= SPIKE_RATE * len(v)
    return [
        finding(
            NAME,
            "warn" if frequent else "info",
            "drift",
            f"{len(spikes)} gradient-norm spikes (over 8 robust σ and 3x the median), first at "
            f"step {int(s.steps[spikes[0]])}",
            metric="train/grad_norm",
            first_step=int(s.steps[spikes[0]]),
            median=round_sig(med),
            spikes=[int(x) for x in s.steps[spikes][:20]],
            spike_rate=round_sig(len(spikes) / len(v)),
            action="Spikes that cluster with a rising sampler/trainer mismatch precede "
            "collapses; otherwise watch them.",
        )
    ]


# A gradient norm this many times the median of the updates before it is an explosion, not
# noise: one is enough (the collapses of science.md 1 arrive as gradient-norm explosions; the
# peers' own spike scenario dates its onset at 10x). Healthy runs of the corpus and the
# reference trainer's 40-update runs peak at 2.6x and 4.4x their running median; a long run
# on a sharpened policy goes past it now and then (see the rate below).
EXPLOSION = 10.0
EXPLOSION_WINDOW = 50


def _grad_explosion(ctx: Context) -> list[Finding]:
    s = ctx.finite("train/grad_norm")
    if s is None or len(s) <= 2 * MIN_WINDOW:
        return []
    v = s.values
    # Each update against the median of the (up to) EXPLOSION_WINDOW updates before it: what
    # a live check knew at that step, following a norm that falls as training settles.
    w = EXPLOSION_WINDOW
    ref = np.full(len(v), np.nan)
    for i in range(2 * MIN_WINDOW, min(w, len(v))):
        ref[i] = np.median(v[:i])
    if len(v) > w:
        ref[w:] = np.median(np.lib.stride_tricks.sliding_window_view(v[:-1], w), axis=1)
    hits = np.flatnonzero((ref > 0) & (v >= EXPLOSION * ref))
    if not len(hits):
        return []
    # One is an alarm where explosions come at SPIKE_RATE of the updates so far or more (in
    # a run's first hundred updates, one is enough). A long run on a sharpened policy has a
    # heavy tail of its own (a rare sample of a token the policy all but ruled out; the
    # reference trainer's mastered three-digit run: 5 in its first 3,300 updates, up to 40x):
    # said, not warned.
    rates = np.arange(1, len(hits) + 1) / (hits + 1)
    alarm = np.flatnonzero(rates >= SPIKE_RATE)
    j = int(alarm[0]) if len(alarm) else 0
    i, later, first = int(hits[j]), len(hits), int(s.steps[hits[0]])
    med = float(ref[i])
    return [
        finding(
            NAME,
            "warn" if len(alarm) else "info",
            "drift",
            f"gradient norm exploded to {round_sig(float(v[i]))} at step {int(s.steps[i])}, "
            f"{float(v[i]) / med:.0f}x the median of the {min(i, w)} updates before"
            + (f" ({later} such updates in all" if later > 1 else "")
            + (f", the first at step {first}" if later > 1 and j else "")
            + (")" if later > 1 else "")
            + (
                ""
                if len(alarm)
                else f": {later} in {len(v)} updates, under {SPIKE_RATE:.0%} of them, the "
                "tail of a long run's noise"
            ),
            metric="train/grad_norm",
            first_step=int(s.steps[i]),
            level=round_sig(float(v[i])),
            median=round_sig(med),
            explosions=later,
            first_explosion=first,
            explosion_rate=round_sig(float(later / len(v))),
            line=EXPLOSION,
            action="Look at the batch of that step (a degenerate or very long sample) and the "
            "sampler/trainer mismatch around it; lower the learning rate or clip gradients "
            "harder if it repeats.",
        )
    ]


def check(ctx: Context) -> list[Finding]:
    explosion = _grad_explosion(ctx)
    # An explosion is the stronger reading of the same spikes: the spike count is not repeated.
    spikes = [] if explosion else _grad_spikes(ctx)
    return _entropy(ctx) + _length_collapse(ctx) + _clip(ctx) + explosion + spikes
