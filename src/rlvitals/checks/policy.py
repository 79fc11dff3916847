"""Policy and optimisation: entropy relative to the run's own start, trust region, gradients.

Entropy is never held against an absolute number: LLM token entropy is usually below 1 and
differs by model and task (peers that gate it absolutely miss real collapses and flag healthy
runs). It is judged as a ratio to the median of the run's first steps, together with its trend
and what the reward does meanwhile; shrinking replies are read beside it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model import Series
from .base import Finding
from .context import Context, Thresholds, finding, round_sig
from .stats import MIN_WINDOW, crossing, read_words, rolling_mean, short_level, start_level, trend

NAME = "policy"


def _entropy(ctx: Context) -> list[Finding]:
    th = ctx.thresholds
    name, s = ctx.series("sampling/entropy_estimate", "train/entropy")
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
    rtr = trend(since) if since is not None and len(since) >= MIN_WINDOW else None
    lo, hi = ctx.reward_bounds
    high = since is not None and len(since) and float(since.values.mean()) >= lo + 0.8 * (hi - lo)
    paying = (rtr is not None and rtr.rising) or bool(high)
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
            f"{rname or 'reward'} does not improve",
            action="The policy is collapsing onto one response per prompt: read the transcripts "
            "for repetition; use clip-higher (DAPO ε_high 0.28), an entropy bonus, KL-Cov or "
            "Clip-Cov, a higher sampling temperature, or restart from before this step.",
            **evidence,
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
    roll = rolling_mean(s.values)
    idx = crossing(s.values, ctx.thresholds.clip_frac_warn)
    if idx is None:
        return []
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
    return [
        finding(
            NAME,
            "info",
            "drift",
            f"{len(spikes)} gradient-norm spikes (over 8 robust σ and 3x the median), first at "
            f"step {int(s.steps[spikes[0]])}",
            metric="train/grad_norm",
            first_step=int(s.steps[spikes[0]]),
            median=round_sig(med),
            spikes=[int(x) for x in s.steps[spikes][:20]],
            action="Spikes that cluster with a rising sampler/trainer mismatch precede "
            "collapses; otherwise watch them.",
        )
    ]


def check(ctx: Context) -> list[Finding]:
    return _entropy(ctx) + _clip(ctx) + _grad_spikes(ctx)
