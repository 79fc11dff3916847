"""5. Sampler/trainer agreement and freshness.

A healthy run keeps the mismatch KL near zero and the ESS near 1. A mismatch that grows step
after step means the sampler holds weights older than the trainer's (weight sync not applied):
a stale policy. A mismatch that jumps to a new level, or sits above the line, is numerical
drift (precision, kernels). Levels are judged against absolute lines from the literature and
against the run's own start, above a floor that ignores rounding noise. In async mode, the lag
between sampler and trainer versions and the share of attempts dropped as stale.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..model import Series
from .base import Finding
from .context import Context, finding, round_sig
from .stats import MIN_WINDOW, crossing, first_sustained, rolling_mean, start_level, trend

NAME = "agreement"


def _mismatch(ctx: Context) -> list[Finding]:
    th = ctx.thresholds
    name, s = ctx.series("train/mismatch_kl", "train/mismatch_k1", "train/logprob_abs_diff")
    if s is None or name is None or len(s) < MIN_WINDOW:
        return []
    v = np.abs(s.values) if name == "train/mismatch_k1" else s.values
    roll = rolling_mean(v)
    start = start_level(v)
    if name == "train/logprob_abs_diff":
        # |Δ| grows like the square root of k3: a 10x KL rise is about 3x in |Δ|.
        warn_line, fail_line = math.inf, math.inf
        rel_line = max(math.sqrt(th.mismatch_rise) * start, 0.02)
    else:
        warn_line = th.mismatch_kl_warn
        fail_line = th.mismatch_kl_fail if name == "train/mismatch_kl" else th.mismatch_k1_fail
        rel_line = max(th.mismatch_rise * start, th.mismatch_floor)
    i_abs = crossing(v, warn_line) if math.isfinite(warn_line) else None
    i_rel = crossing(v, rel_line)
    candidates = [i for i in (i_abs, i_rel) if i is not None]
    if not candidates:
        return []
    idx = min(candidates)
    step = int(s.steps[idx])
    peak = float(np.nanmax(roll))
    # The mismatch grows multiplicatively: test its trend on a log scale.
    seg = s.since(step)
    if name != "train/mismatch_k1":
        seg = Series(seg.steps, np.log(np.maximum(np.abs(seg.values), 1e-12)))
    tr = trend(seg) if len(seg) >= MIN_WINDOW else None
    growing = tr is not None and tr.rising and float(roll[-1]) >= 0.8 * peak
    _lag_name, lag = ctx.series("freshness/lag_mean")
    lag_rising = False
    if lag is not None and len(lag.since(step)) >= MIN_WINDOW:
        lt = trend(lag.since(step))
        lag_rising = lt is not None and lt.rising
    # Attempts dropped as stale, or the sampler's own version falling behind (the attempts
    # table keeps the lag of discarded attempts too), say the weights are old, not the numerics.
    stale_drops = ctx.finite("discard/rollouts/stale")
    dropped = stale_drops is not None and bool(stale_drops.since(step).values.sum() > 0)
    stale = growing or lag_rising or dropped or _sampler_lag_rising(ctx, step)
    severe = peak >= fail_line
    ess = ctx.finite("train/mismatch_ess_seq")
    ev: dict[str, Any] = dict(
        start_level=round_sig(start),
        peak=round_sig(peak),
        line=round_sig(warn_line if i_abs is not None and i_abs == idx else rel_line),
        absolute_line=None if math.isinf(warn_line) else warn_line,
        relative_line=round_sig(rel_line),
        trend_z_since=round_sig(tr.z) if tr else None,
        ess_seq_last=round_sig(float(ess.values[-MIN_WINDOW:].mean())) if ess is not None else None,
    )
    if stale:
        title = (
            f"stale policy: {name} grows step after step from step {step} "
            f"({start:.2g} at the start, {float(roll[-1]):.2g} now)"
        )
        action = (
            "The sampler is generating with older weights than the trainer's: check that "
            "the weight sync after each update reaches every engine replica (and that the "
            "version it reports is the version it holds)."
        )
        verdict = "stale_policy"
    else:
        title = f"sampler/trainer drift: {name} at {peak:.2g} from step {step} (start {start:.2g})"
        action = (
            "The two sides compute different probabilities for the same tokens: compare "
            "precisions (bf16 vs fp16/fp32), kernels and the engine version; use truncated "
            "importance sampling (TIS) or masked IS until it is fixed."
        )
        verdict = "drift"
    return [
        finding(
            NAME,
            "fail" if severe else "warn",
            verdict,
            title,
            metric=name,
            first_step=step,
            action=action,
            **ev,
        )
    ]


def _sampler_lag_rising(ctx: Context, step: int) -> bool:
    """Whether the lag of every attempt (trained or not) grows from ``step`` on."""
    a = ctx.data.attempts
    if a is None or not len(a):
        return False
    ok = (a.lag >= 0) & (a.step >= step)
    if ok.sum() < MIN_WINDOW:
        return False
    steps, inv = np.unique(a.step[ok], return_inverse=True)
    if len(steps) < 3:
        return False
    mean_lag = np.bincount(inv, weights=a.lag[ok]) / np.bincount(inv)
    return bool(mean_lag[-1] >= mean_lag[0] + 2)


def _ess(ctx: Context, already: bool) -> list[Finding]:
    th = ctx.thresholds
    out: list[Finding] = []
    for name, line, sev in (
        ("train/mismatch_ess", th.ess_token_fail, "fail"),
        ("train/mismatch_ess_seq", th.ess_seq_warn, "warn"),
    ):
        s = ctx.finite(name)
        if s is None or len(s) < MIN_WINDOW:
            continue
        roll = rolling_mean(s.values)
        idx = crossing(s.values, line, above=False)
        if idx is None or (already and sev == "warn"):
            continue
        out.append(
            finding(
                NAME,
                sev,
                "drift",
                f"{name} fell to {float(np.nanmin(roll)):.2f} from step {int(s.steps[idx])} "
                f"(line {line})",
                metric=name,
                first_step=int(s.steps[idx]),
                low=round_sig(float(np.nanmin(roll))),
                line=line,
                action="Importance weights are dominated by a few tokens or sequences: the "
                "update is effectively off-policy. Cap the ratios (TIS) or mask outliers, and "
                "find the source of the mismatch.",
            )
        )
        break
    return out


def _freshness(ctx: Context) -> list[Finding]:
    th = ctx.thresholds
    out: list[Finding] = []
    stale = ctx.finite("discard/rollouts/stale")
    cap = ctx.config_value("training", "max_steps_off_policy")
    if stale is not None and stale.values.any():
        totals = ctx.attempts_per_step(stale.steps)
        if totals is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                share = np.nan_to_num(np.where(totals > 0, stale.values / totals, np.nan))
            idx = first_sustained(share >= th.stale_share_warn)
            if idx is not None:
                lag = ctx.finite("freshness/lag_mean")
                out.append(
                    finding(
                        NAME,
                        "warn",
                        "stale_policy",
                        f"{float(share[idx:].max()):.0%} of attempts dropped as stale from step "
                        f"{int(stale.steps[idx])}: the sampler runs more than "
                        f"{cap if cap is not None else 'max_steps_off_policy'} updates behind",
                        metric="discard/rollouts/stale",
                        first_step=int(stale.steps[idx]),
                        peak_share=round_sig(float(share[idx:].max())),
                        line=th.stale_share_warn,
                        max_steps_off_policy=cap,
                        lag_mean_last=round_sig(float(lag.values[-1])) if lag is not None else None,
                        action="Sampling is wasted on attempts the trainer will not use: "
                        "sync weights more often, shrink the rollout queue, or raise "
                        "max_steps_off_policy with importance-sampling correction.",
                    )
                )
    return out


def check(ctx: Context) -> list[Finding]:
    out = _mismatch(ctx)
    out += _ess(ctx, already=bool(out))
    out += _freshness(ctx)
    return out
