"""Findings about the importance ratio and the correction, beside the mismatch's own.

- The token ratio's mean off 1 on a run that samples on-policy (no designed lag): named by
  its cause (``mismatch_cause.explain``), truncated sampling first.
- A sequence correction that aggregates by sum and whose bounds bite: ``aggregation``.
- A correction weight logged after its bounds, pinned at them: ``post_clip_logging`` (info).
- A correction computed and logged that the Liger loss drops: ``dropped_correction``.
- The first update: its PPO ratio must be 1 and its clipping two-sided when the trainer's old
  log-probs and its training pass agree (verl-omni's common pitfalls).
- ``--set strict_agreement=1``: any nonzero mismatch, for runs built to be bitwise
  consistent (vLLM's batch-invariant kernels with TorchTitan read a KL of exactly 0.0).

Lines are ``CauseRules`` (``mismatch_cause.py``) with their sources.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model import Series
from ..settings import RunSettings
from .base import Finding
from .context import Context, finding, round_sig
from .mismatch_cause import Cause, CauseRules, annotate, explain, ratio_series, rules_of, settings
from .stats import MIN_WINDOW, first_sustained

__all__ = ["attribute", "ratio_findings"]

NAME = "agreement"
W_MEAN, W_MIN, W_MAX = "train/is_weight_mean", "train/is_weight_min", "train/is_weight_max"


def _designed_lag(ctx: Context, s: RunSettings) -> bool:
    """Whether the sampler runs behind by design (async): the ratio then holds the policy's
    own movement over the lag, not a disagreement."""
    if s.async_lag is not None and s.async_lag > 0:
        return True
    lag = ctx.finite("freshness/lag_mean")
    return lag is not None and float(np.median(lag.values)) >= 0.5


def _held(s: Series, bad: np.ndarray) -> int | None:
    """Index where ``bad`` holds on 3 of 5 updates (3 of 3 for a shorter log)."""
    if len(s) < 3:
        return None
    if len(s) < MIN_WINDOW:
        return 0 if bool(bad.all()) else None
    return first_sustained(bad)


def _with_cause(cause: Cause) -> dict[str, Any]:
    return cause.to_evidence()


def _ratio_off(ctx: Context, r: CauseRules, s: RunSettings, alarmed: bool) -> list[Finding]:
    """The raw token ratio's mean off 1 by ``ratio_line`` (3 of 5 updates), on-policy."""
    if _designed_lag(ctx, s):
        return []
    name, ratio = ratio_series(ctx, s)
    if ratio is None or name is None:
        return []
    off = np.abs(ratio.values - 1.0) >= r.ratio_line
    idx = _held(ratio, off)
    if idx is None:
        return []
    step = int(ratio.steps[idx])
    seg = ratio.since(step).values
    cause = explain(ctx, step, name)
    if alarmed and cause.name == "drift":
        return []  # the mismatch's own finding says it; an unexplained ratio adds nothing
    mean = float(np.mean(seg))
    title = (
        f"importance ratio off 1: {name} {mean:.3g} from step {step} (the line "
        f"{1 - r.ratio_line:g}-{1 + r.ratio_line:g}) — cause: {cause.words}"
    )
    if cause.qualified:
        title += f" ({cause.qualified})"
    # A warning where the run weights its loss by the ratio (a correction on): the bias then
    # scales the gradient; else the ratio is only a measurement of the two distributions.
    severity = "warn" if s.is_correction and not alarmed else "info"
    return [
        finding(
            NAME,
            severity,
            "drift",
            title,
            metric=name,
            first_step=step,
            action=cause.action,
            level=round_sig(mean),
            line=r.ratio_line,
            values=[round_sig(float(v)) for v in seg[:MIN_WINDOW]],
            **_with_cause(cause),
        )
    ]


def _pinned(ctx: Context, s: RunSettings, r: CauseRules) -> dict[str, Any] | None:
    """Where the logged weight sits on its bounds on ``pinned_share`` of the updates: its min
    at 0 (masked) or at clip_min, or its max exactly at the cap; the shares, or None."""
    lo, hi = ctx.finite(W_MIN), ctx.finite(W_MAX)
    out: dict[str, Any] = {}
    if lo is not None and len(lo) >= 3:
        floor = {0.0} | ({s.is_cap_min} if s.is_cap_min else set())
        share = float(np.mean(np.isin(lo.values, list(floor))))
        if share >= r.pinned_share:
            out["min_at_bound_share"] = round_sig(share)
            out["min_bound"] = 0.0 if float(np.median(lo.values)) == 0.0 else s.is_cap_min
    if hi is not None and len(hi) >= 3 and s.is_cap is not None:
        share = float(np.mean(hi.values == s.is_cap))
        if share >= r.pinned_share:
            out["max_at_cap_share"] = round_sig(share)
            out["cap"] = s.is_cap
    return out or None


def _raw_beyond(ctx: Context) -> dict[str, Any]:
    """The raw token ratio's extremes, where the run logs them beside the corrected weight."""
    out: dict[str, Any] = {}
    for k in ("train/is_ratio_min", "train/is_ratio_max"):
        v = ctx.finite(k)
        if v is not None:
            out[k.rsplit("/", 1)[1].replace("is_", "raw_")] = round_sig(
                float(v.values.min() if k.endswith("min") else v.values.max())
            )
    return out


def _aggregation(ctx: Context, r: CauseRules, s: RunSettings) -> list[Finding]:
    """A sequence weight that is the product of its tokens' ratios, whose bounds bite: masked
    to 0 on most updates or its mean ``deflated`` under 1 (3 of 5)."""
    if s.is_level != "sequence" or s.is_aggregation != "sum":
        return []
    w, lo = ctx.finite(W_MEAN), ctx.finite(W_MIN)
    if w is None or len(w) < 3:
        return []
    pinned = _pinned(ctx, s, r) or {}
    low = w.values <= 1.0 - r.deflated
    idx = _held(w, low)
    zero_share = float(np.mean(lo.values == 0.0)) if lo is not None else 0.0
    if idx is None and zero_share < r.pinned_share:
        return []
    step = int(w.steps[idx if idx is not None else int(np.argmax(lo.values == 0.0))])  # type: ignore[union-attr]
    absd = ctx.finite("train/logprob_abs_diff")
    length = ctx.finite("response/length_mean")
    ev: dict[str, Any] = {
        "weight_mean": round_sig(float(np.mean(w.since(step).values))),
        "weight_min_zero_share": round_sig(zero_share),
    }
    per_seq = None
    if absd is not None and length is not None:
        d, n = float(np.mean(absd.since(step).values)), float(np.mean(length.since(step).values))
        per_seq = d * n
        ev.update(
            token_abs_diff=round_sig(d),
            mean_length=round_sig(n),
            length_times_abs_diff=round_sig(per_seq),
        )
    raw = ctx.finite("train/is_ratio_mean")
    if raw is not None:
        ev["token_ratio_mean"] = round_sig(float(np.mean(raw.since(step).values)))
    ev.update(pinned)
    o = s.origin.get("is_aggregation")
    arith = (
        f"; {ev['token_abs_diff']:.3g} per token over {ev['mean_length']:.3g} tokens is "
        f"{per_seq:.2g} nats per sequence (trl #4772: 0.012 x 100 gives 3.3)"
        if per_seq is not None
        else ""
    )
    cause = Cause(
        "aggregation",
        f"aggregation: each sequence's weight is the product of its tokens' ratios "
        f"({s.is_mode} at {s.is_cap:g}){arith}",
        "The sequence weight exp(sum of log-ratios) scales with length: long sequences leave "
        "the bounds and are masked or truncated although their tokens agree, so the update is "
        "down-weighted by length, not by any mismatch. Use a length-normalised weight "
        "(exp(mean): GSPO, trl PR #5815, NeMo-RL PR #2269 sequence_mean) or token-level "
        "correction; judge the mismatch by its per-token numbers.",
        {**ev, "setting_source": None if o is None else f"{o.key} in {o.source}"},
    )
    return [
        finding(
            NAME,
            "warn",
            "drift",
            f"sequence correction down-weights the batch: {W_MEAN} {ev['weight_mean']:.3g} "
            f"from step {step}, masked to 0 on {zero_share:.0%} of the updates — cause: "
            f"{cause.words}",
            metric=W_MEAN,
            first_step=step,
            action=cause.action,
            **_with_cause(cause),
        )
    ]


def _post_clip(ctx: Context, r: CauseRules, s: RunSettings) -> list[Finding]:
    """The correction weight logged after its bounds, pinned at them (info: the number cannot
    show the mismatch beyond the bounds)."""
    if s.is_logged != "corrected" and not _known_post_clip(ctx):
        return []
    pinned = _pinned(ctx, s, r)
    if pinned is None:
        return []
    w = ctx.finite(W_MEAN)
    step = int(w.steps[0]) if w is not None else None
    where = []
    if "min_at_bound_share" in pinned:
        where.append(
            f"its min at {pinned['min_bound']:g} on {pinned['min_at_bound_share']:.0%} of "
            "the updates (masked ratios counted as 0: the mean is deflated by them)"
        )
    if "max_at_cap_share" in pinned:
        where.append(f"its max at the cap {pinned['cap']:g} on {pinned['max_at_cap_share']:.0%}")
    raw = _raw_beyond(ctx)
    cause = Cause(
        "post_clip_logging",
        "post-clip logging: the weight is logged after the correction's bounds, "
        + "; ".join(where),
        "Read the mismatch from the raw ratio or the per-token |Δ| (TRL: "
        "sampling_logp_difference; the raw ratio is trl PR #5243), not from the corrected "
        "weight: past its bounds it shows the bounds, not the mismatch.",
        {**pinned, **raw},
    )
    return [
        finding(
            NAME,
            "info",
            "drift",
            f"{W_MIN}/{W_MAX} pinned at the correction's bounds — cause: {cause.words}",
            metric=W_MIN,
            first_step=step,
            action=cause.action,
            **_with_cause(cause),
        )
    ]


def _known_post_clip(ctx: Context) -> bool:
    """Whether the run's weight keys are ones its framework logs after the bounds (the
    reliability table)."""
    from ..vocabulary.reliability import key_facts

    for k in (W_MIN, W_MAX, W_MEAN):
        src = ctx.data.original.get(k)
        if src and any(f.kind == "post_correction" for f in key_facts(ctx.data, src)):
            return True
    return False


def _version_before(version: str | None, limit: tuple[int, ...]) -> bool | None:
    """Whether ``version`` ("0.27.2") is before ``limit`` (None: not a version)."""
    if not version:
        return None
    parts: list[int] = []
    for p in version.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) < limit if parts else None


def _dropped(ctx: Context, r: CauseRules, s: RunSettings) -> list[Finding]:
    """TRL before 0.29.0 with Liger's loss drops the vLLM correction it logs (Liger-Kernel
    PR #1088, trl PR #5031): a warning where the version says so and the weights depart from
    1, information where the run does not record its version."""
    if s.framework != "trl" or not s.liger or not s.is_correction:
        return []
    before = _version_before(s.framework_version, (0, 29, 0))
    if before is False:
        return []
    w, lo, hi = ctx.finite(W_MEAN), ctx.finite(W_MIN), ctx.finite(W_MAX)
    if w is None or len(w) < 3:
        return []
    departs = np.abs(w.values - 1.0) >= r.ratio_line
    for s_, bad in (
        (lo, lambda v: v <= 1.0 / r.weight_factor),
        (hi, lambda v: v >= r.weight_factor),
    ):
        if s_ is not None and np.array_equal(s_.steps, w.steps):
            departs = departs | bad(s_.values)
    idx = _held(w, np.asarray(departs, dtype=bool))
    if idx is None:
        return []
    step = int(w.steps[idx])
    gn = ctx.finite("train/grad_norm")
    ev: dict[str, Any] = {
        "framework_version": s.framework_version,
        "weight_mean": round_sig(float(np.mean(w.since(step).values))),
        "grad_norm_median": round_sig(float(np.median(gn.values))) if gn is not None else None,
    }
    version = f"TRL {s.framework_version}" if s.framework_version else "TRL (version not recorded)"
    cause = Cause(
        "dropped_correction",
        f"dropped correction: {version} with use_liger_kernel and the vLLM IS correction on: "
        "the Liger loss ignores the importance_sampling_ratio it logs",
        "Upgrade to TRL 0.29.0 or later with a Liger-Kernel that takes vllm_is_ratio (Liger "
        "PR #1088, trl PR #5031), or train without use_liger_kernel: without the correction "
        "the gradient was ~100x the corrected one in the report.",
        ev,
        "" if before else "the run does not record its TRL version; 0.29.0 fixed it",
    )
    return [
        finding(
            NAME,
            "warn" if before else "info",
            "drift",
            f"the vLLM correction is logged but not applied ({W_MEAN} {ev['weight_mean']:.3g} "
            f"from step {step}) — cause: {cause.words}",
            metric=W_MEAN,
            first_step=step,
            action=cause.action,
            **_with_cause(cause),
        )
    ]


def _first_update(ctx: Context) -> list[Finding]:
    """At the run's first update (a log that starts there), PPO's ratio is exactly 1 and its
    clipping two-sided when the old log-probs and the training pass agree; all clipping on
    the lower side with the ratio under 1 (0.99996) or an inflated PPO KL is a precision bug
    between them (verl-omni common pitfalls: ppo_kl ~1e-6 after the fix, 3.3e-5 in bypass
    mode)."""
    first = ctx.data.steps()
    if not len(first) or int(first[0]) > 1:
        return []
    step = int(first[0])
    vals = {
        k: (ctx.finite(k).at(step) if ctx.finite(k) is not None else None)  # type: ignore[union-attr]
        for k in (
            "train/ppo_ratio_mean",
            "train/ppo_kl",
            "train/clip_frac_low",
            "train/clip_frac_high",
            "train/clip_frac",
        )
    }
    low, high = vals["train/clip_frac_low"], vals["train/clip_frac_high"]
    if low is None and high == 0.0:
        low = vals["train/clip_frac"]  # every clip on the lower side: the total is the low
    ratio, kl = vals["train/ppo_ratio_mean"], vals["train/ppo_kl"]
    if low is None or high is None or high != 0.0 or low < FIRST_CLIP_LOW:
        return []
    signs = []
    if ratio is not None and ratio < 1.0 - FIRST_RATIO:
        signs.append(f"PPO ratio mean {ratio:.6g}")
    if kl is not None and kl > FIRST_PPO_KL:
        signs.append(f"PPO KL {kl:.2g}")
    if not signs:
        return []
    return [
        finding(
            NAME,
            "warn",
            "drift",
            f"first update off-policy: {', '.join(signs)} with all clipping on the lower side "
            f"({low:.2%} low, 0 high) at step {step}: the trainer's old log-probs and its "
            "training pass disagree",
            metric="train/clip_frac_low",
            first_step=step,
            action="At the first update the policy has not moved: its ratio must be 1. A ratio "
            "under 1 with one-sided clipping is a precision or kernel mismatch between the "
            "old-log-prob pass and the training pass (attention backend, dtype, fused kernels; "
            "verl-omni's common pitfalls). Make both passes run the same code in the same "
            "precision.",
            values_at_step={k.rsplit("/", 1)[1]: v for k, v in vals.items()},
            ratio_line=FIRST_RATIO,
            ppo_kl_line=FIRST_PPO_KL,
        )
    ]


# The first update's lines (verl-omni common pitfalls, 2026-05-22): the bug read 0.99996, 4e-5
# under 1; after the fix ppo_kl ~1e-6 without bypass and 3.3e-5 in bypass mode (vLLM against
# PyTorch attention), with ~1% and ~9% clipping: one-sided clipping at under half of 1% is
# too little to tell from chance.
# source: verl-omni common pitfalls (above): the bug read 0.99996, 4e-5 under 1.
FIRST_RATIO = 1e-5
# source: verl-omni common pitfalls (above): 3.3e-5 in bypass mode after the fix.
FIRST_PPO_KL = 3.3e-5
# source: verl-omni common pitfalls (above): one-sided clipping under half of 1% is chance.
FIRST_CLIP_LOW = 0.005

STRICT_METRICS = (
    ("train/mismatch_kl", 0.0),
    ("train/mismatch_k1", 0.0),
    ("train/logprob_abs_diff", 0.0),
    ("train/mismatch_tme", 1.0),
    ("train/is_ratio_mean", 1.0),
)


def _strict(ctx: Context) -> list[Finding]:
    """Any mismatch at all, for runs built to be bitwise consistent (``--set
    strict_agreement=1``): batch-invariant vLLM with TorchTitan logs a KL of exactly 0.0 at
    every step (vLLM blog, 2025-11-10)."""
    for name, exact in STRICT_METRICS:
        s = ctx.finite(name)
        if s is None:
            continue
        off = s.values != exact
        if not off.any():
            continue
        i = int(np.flatnonzero(off)[0])
        return [
            finding(
                NAME,
                "warn",
                "drift",
                f"strict agreement: {name} {s.values[i]:.3g} at step {int(s.steps[i])} where a "
                f"bitwise-consistent run reads exactly {exact:g} ({int(off.sum())} of {len(s)} "
                "updates)",
                metric=name,
                first_step=int(s.steps[i]),
                action="This run was declared bitwise consistent (--set strict_agreement=1): "
                "any difference is a bug. Check that the engine runs its batch-invariant "
                "kernels, the same attention backend and dtype as the trainer, and that the "
                "weights were synced before sampling.",
                value=round_sig(float(s.values[i])),
                expected=exact,
                updates_off=int(off.sum()),
            )
        ]
    return []


def ratio_findings(ctx: Context, r: CauseRules, found: list[Finding]) -> list[Finding]:
    """Every finding of this module for the run (``found``: the agreement check's own)."""
    s = settings(ctx)
    alarmed = any(f.severity in ("warn", "fail") for f in found)
    out = _aggregation(ctx, r, s)
    if not out:
        out += _post_clip(ctx, r, s)
    out += _ratio_off(ctx, r, s, alarmed or bool(out))
    out += _dropped(ctx, r, s)
    out += _first_update(ctx)
    if r.strict_agreement:
        out += _strict(ctx)
    return out


def attribute(ctx: Context, findings: list[Finding]) -> list[Finding]:
    """The agreement check's findings with their cause (drift and stale findings about the
    mismatch), and the findings of the ratio, the correction, the first update and strict
    agreement (``ratio_findings``). The hook the agreement check calls last."""
    for f in findings:
        if (
            f.verdict in ("drift", "stale_policy")
            and f.severity != "info"
            and f.first_step is not None
        ):
            cause = explain(ctx, f.first_step, f.metric)
            if cause.name == "stale_weights" or f.verdict == "drift":
                annotate(f, cause)
                if cause.name == "stale_weights":
                    f.verdict = "stale_policy"
    return findings + ratio_findings(ctx, rules_of(ctx), findings)
