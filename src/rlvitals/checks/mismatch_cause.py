"""Why the sampler and the trainer disagree: the mismatch's cause, named with its numbers.

The agreement check says *that* the mismatch rose; this module says *why*, from the run's own
settings (``rlvitals.settings``) and the shape of the mismatch, one of:

- ``truncated_sampling``: the engine samples with top-p/top-k/min-p and reports log-probs
  renormalised over the kept tokens, so each token's ratio pi_trainer / pi_sampler is the kept
  mass (at most 1) and its mean sits below 1 (trl #6789, PR #7269: top_p 0.8 gives 0.896);
- ``stale_weights``: the mismatch rises with the lag (the sampler on older weights), or
  attempts are dropped as stale;
- ``precision_tail``: the trainer and the engine compute in different precisions, most tokens
  agree (the median token ratio stays at 1) and a tail of uncertain tokens, spread over most
  sequences, does not (martingale: fp32 trainer, bf16 engine, mean |log r| 0.8-1.0 with the
  median ratio 1.0000);
- ``aggregation``: a sequence-level correction whose weight is the product of its tokens'
  ratios (exp(sum)): it scales with length and its bounds bite although the tokens agree (trl
  #4772: 0.012 x 100 tokens gives 3.3; PR #5815: 0.569 against 0.993);
- ``post_clip_logging``: the ratio is logged after the correction's bounds, pinned at them
  (trl #5231);
- ``dropped_correction``: the correction is computed and logged but the Liger loss ignores it
  (Liger-Kernel PR #1088, TRL PR #5031: TRL before 0.29.0);
- ``drift``: none of these; the numbers that ruled each out are kept.

Each finding gets ``cause`` and ``cause_evidence`` in its evidence, the cause in its title and
what to do in its action (``annotate``). The lines are ``CauseRules``, each with its source; the
findings of their own (the ratio off 1, the first update, strict agreement) and the hook the
agreement check calls are in ``ratio_findings.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model import Series
from ..settings import RunSettings, settings_of
from .base import Finding
from .context import Context, fact, round_sig
from .stats import MIN_WINDOW
from .thresholds import line, lines

__all__ = [
    "CAUSES",
    "Cause",
    "CauseRules",
    "annotate",
    "explain",
    "ratio_series",
    "rules_of",
    "settings",
]

CAUSES = (
    "truncated_sampling",
    "stale_weights",
    "precision_tail",
    "aggregation",
    "post_clip_logging",
    "dropped_correction",
    "drift",
)


@lines
@dataclass(frozen=True)
class CauseRules:
    """Where the cause analysis draws its lines, each with its source."""

    ratio_line: float = line(
        0.02,
        "the token ratio's mean off 1 by this much (3 of 5 updates) is off",
        "trl #6789, PR #5815, NVIDIA-NeMo/RL PR #2269: control runs sit within 0.007 of 1 "
        "(0.995, 0.993, 0.9999); the smallest truncation reported moves it 0.035 (top_k 20)",
    )
    kept_mass_slack: float = line(
        0.05,
        "truncation: the ratio mean stays at or above top_p less this slack",
        "a bf16 engine's rounding: token ratios reach 1.06-1.11 at top_p 1 (the reference "
        "trainer, docs/trainer.md)",
    )
    truncation_max_ratio: float = line(
        1.1,
        "truncation: no token's ratio passes 1 by more than the engine's rounding",
        "measurement: the reference trainer at top_p 1, ratio max 1.06-1.11 (bf16 rounding)",
    )
    median_one: float = line(
        1e-3,
        "precision tail: the median token ratio within this of 1",
        "measurement: martingale's fp32 trainer / bf16 engine, median ratio 1.0000 with mean "
        "|log r| 0.8-1.0 (field-2026-12-07.md §2)",
    )
    tail_factor: float = line(
        10.0,
        "precision tail: the mean |delta| at least this many times its median",
        "measurement: the reference trainer's float8 engine 40x (bf16: 50x); an order of "
        "magnitude tells a tail from every token moved",
    )
    spread_seq_p50: float = line(
        1.01,
        "precision tail spread over the sequences: the median sequence's ratio past this",
        "measurement: the reference trainer, float8 engine 1.03, one hot replica of ten 1.002",
    )
    spread_share: float = line(
        0.25,
        "... or this share of the sequences past 1.05",
        "measurement: the reference trainer, float8 engine 35-42%, one hot replica of ten 10%",
    )
    lag_rho: float = line(
        0.6,
        "stale weights: the lag and the mismatch rank together (Spearman) at least this much",
        "numerical guard: a strong rank correlation (Cohen's convention: 0.5 is large), the "
        "lag rising by at least one update (an update behind is the least a stale engine can be)",
    )
    pinned_share: float = line(
        0.6,
        "the logged weight pinned at a bound on this share of updates is logged after the bounds",
        "trl #5231 (ratios logged after clipping): most updates pinned, not a tail",
    )
    deflated: float = line(
        0.1,
        "a mean weight this far under 1 (3 of 5 updates) down-weights the batch",
        "NVIDIA-NeMo/RL PR #2269: a correction read 0.0596",
    )
    weight_factor: float = line(
        2.0,
        "a correction matters when some token's weight is at half or double",
        "TRL's default cap is 3, verl's threshold 2: dropping such a weight changes the update",
    )
    strict_agreement: int = line(
        0,
        "1: the run is built to be bitwise consistent; any mismatch is a finding",
        "docs/checks.md: off unless the user declares the run bitwise consistent "
        "(batch-invariant vLLM with TorchTitan logs a KL of exactly 0.0)",
    )


@dataclass
class Cause:
    """A named cause, the numbers that decided it, and what to do."""

    name: str
    words: str
    action: str
    evidence: dict[str, Any] = field(default_factory=dict)
    qualified: str = ""  # why it is named without all its evidence (a setting not said...)

    def to_evidence(self) -> dict[str, Any]:
        out = {"cause": self.name, "cause_evidence": self.evidence}
        if self.qualified:
            out["cause_qualified"] = self.qualified
        return out


def rules_of(ctx: Context) -> CauseRules:
    """The cause analysis's lines (``--set NAME=VALUE`` reaches each)."""
    return ctx.thresholds.of(CauseRules)


@fact
def settings(ctx: Context) -> RunSettings:
    """The run's settings, read once per judging."""
    return settings_of(ctx.data)


def mean_since(s: Series | None, step: int, n: int = MIN_WINDOW) -> float | None:
    """The mean of ``s`` over its first ``n`` values from ``step`` on (None: none there)."""
    if s is None:
        return None
    seg = s.since(step).values[:n]
    return float(np.mean(seg)) if len(seg) else None


def _rho(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (0 where either is constant)."""
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


def lag_series(ctx: Context) -> tuple[str, Series] | tuple[None, None]:
    """The lag per update, as fully as the run keeps it: the largest lag among all its
    attempts (trained or dropped), else the logged max, else the mean."""
    a = ctx.data.attempts
    if a is not None and len(a):
        ok = a.lag >= 0
        if ok.sum():
            steps, inv = np.unique(a.step[ok], return_inverse=True)
            mx = np.full(len(steps), -1.0)
            np.maximum.at(mx, inv, a.lag[ok].astype(float))
            return "attempts' lag (max per update)", Series(steps.astype(np.int64), mx)
    name, s = ctx.series("freshness/lag_max", "freshness/lag_mean")
    return (name, s) if name is not None and s is not None else (None, None)


def _stale(ctx: Context, mismatch: Series, step: int, r: CauseRules) -> Cause | None:
    name, lag = lag_series(ctx)
    stale_drops = ctx.finite("discard/rollouts/stale")
    dropped = 0.0 if stale_drops is None else float(stale_drops.since(step).values.sum())
    ev: dict[str, Any] = {"stale_attempts_dropped": dropped}
    rising = False
    if lag is not None:
        seg = lag.since(max(int(lag.steps[0]), step - 1))
        both = np.intersect1d(seg.steps, mismatch.steps)
        if len(both) >= 3:
            lv = seg.values[np.isin(seg.steps, both)]
            mv = mismatch.values[np.isin(mismatch.steps, both)]
            rho = _rho(lv, mv)
            rising = float(lv[-1] - lv[0]) >= 1.0 and _rho(both.astype(float), lv) >= r.lag_rho
            ev.update(
                lag_metric=name,
                lag_start=round_sig(float(lv[0])),
                lag_now=round_sig(float(lv[-1])),
                rho_lag_mismatch=round_sig(rho),
            )
            rising = rising and rho >= r.lag_rho
    if not (rising or dropped > 0):
        return None
    why = (
        f"the lag rose {ev['lag_start']:g} -> {ev['lag_now']:g} with the mismatch "
        f"(rank correlation {ev['rho_lag_mismatch']:.2f})"
        if rising
        else f"{dropped:g} attempts dropped as stale since step {step}"
    )
    return Cause(
        "stale_weights",
        f"stale weights: {why}",
        "The sampler generates with older weights than the trainer: check that the weight "
        "sync after each update reaches every engine replica (a replica that failed its "
        "refit keeps its old version), and that max_steps_off_policy is what you meant.",
        ev,
    )


def _truncation(ctx: Context, s: RunSettings, step: int, r: CauseRules) -> Cause | None:
    trunc = s.truncated_sampling()
    ratio_name, ratio = ratio_series(ctx, s)
    mean = mean_since(ratio, step)
    ev: dict[str, Any] = {**trunc, "ratio_metric": ratio_name}
    if mean is not None:
        ev["ratio_mean"] = round_sig(mean)
    top = mean_since(ctx.finite("train/is_ratio_max"), step)
    if top is not None:
        ev["ratio_max"] = round_sig(top)
    if not trunc:
        return None
    if mean is not None and mean > 1.0 - r.ratio_line:
        return None  # the ratio says the truncation costs nothing measurable
    if mean is not None and "top_p" in trunc and mean < trunc["top_p"] - r.kept_mass_slack:
        return None  # below the least mass top-p keeps: something else too
    if top is not None and top > r.truncation_max_ratio:
        return None  # tokens the trainer finds likelier than the sampler: not truncation
    said = ", ".join(f"{k} {v:g}" for k, v in trunc.items())
    o = s.origin.get(next(iter(trunc)))
    ev["setting_source"] = None if o is None else f"{o.key} in {o.source}"
    mean_words = (
        f"the ratio mean {mean:.3g} is the kept mass"
        if mean is not None
        else ("the run logs no token ratio to confirm it")
    )
    return Cause(
        "truncated_sampling",
        f"truncated sampling ({said}): {mean_words}",
        "The engine's log-probs are renormalised over the tokens top-p/top-k/min-p keep, the "
        "trainer's are over the whole vocabulary: every token's ratio is the kept mass, which "
        "scales its gradient. Sample the training rollouts at top_p 1 and top_k 0 (keep them "
        "for evaluation), or have the trainer score the same truncated distribution (vLLM "
        "return_sampling_mask, trl PR #7269).",
        ev,
        "" if mean is not None else "no ratio logged",
    )


def ratio_series(ctx: Context, s: RunSettings) -> tuple[str | None, Series | None]:
    """The token ratio's mean as the run logs it raw: ``train/is_ratio_mean``, else the
    correction weight's mean where the run logs it before its bounds, or after them on
    updates where they did not bite (min above 0, max under the cap)."""
    name, raw = ctx.series("train/is_ratio_mean")
    if raw is not None:
        return name, raw
    w = ctx.finite("train/is_weight_mean")
    if w is None or s.is_level != "token":
        return None, None  # a sequence weight, or one whose level the run does not say
    if s.is_logged == "raw":
        return "train/is_weight_mean", w
    lo, hi = ctx.finite("train/is_weight_min"), ctx.finite("train/is_weight_max")
    if lo is None or hi is None:
        return None, None
    cap = s.is_cap if s.is_cap is not None else math.inf
    ok_steps = lo.steps[(lo.values > 0)]
    ok_steps = np.intersect1d(ok_steps, hi.steps[hi.values < cap])
    keep = np.isin(w.steps, ok_steps)
    if keep.sum() < 3:
        return None, None
    return "train/is_weight_mean", Series(w.steps[keep], w.values[keep])


def _precision(ctx: Context, s: RunSettings, step: int, r: CauseRules) -> Cause | None:
    pair = s.dtype_pair()
    ev: dict[str, Any] = {"dtype_pair": None if pair is None else f"{pair[0]}/{pair[1]}"}
    med = mean_since(ctx.finite("train/is_ratio_median"), step)
    mean_abs = mean_since(ctx.finite("train/logprob_abs_diff"), step)
    med_abs = mean_since(ctx.finite("train/logprob_abs_diff_p50"), step)
    seq_p50 = mean_since(ctx.finite("train/mismatch_seq_tme_p50"), step)
    share = mean_since(ctx.finite("train/mismatch_seq_over"), step)
    for k, v in (
        ("median_ratio", med),
        ("mean_abs_diff", mean_abs),
        ("median_abs_diff", med_abs),
        ("seq_ratio_p50", seq_p50),
        ("seq_share_past_1.05", share),
    ):
        if v is not None:
            ev[k] = round_sig(v)
    if pair is None or pair[0] == pair[1]:
        return None
    checks: list[bool] = []
    if med is not None:
        checks.append(abs(med - 1.0) <= r.median_one)
    if mean_abs is not None and med_abs is not None:
        checks.append(mean_abs >= r.tail_factor * max(med_abs, 1e-12))
    if seq_p50 is not None or share is not None:
        checks.append((seq_p50 or 1.0) >= r.spread_seq_p50 or (share or 0.0) >= r.spread_share)
    if checks and not all(checks):
        return None
    shape = (
        f"the median token ratio {med:.4f} while the mean |Δ| is {mean_abs / max(med_abs or 1e-12, 1e-12):.0f}x "
        "its median, over most sequences"
        if med is not None and mean_abs is not None and med_abs is not None
        else "the run logs no median to tell a tail from every token moved"
    )
    return Cause(
        "precision_tail",
        f"precision tail ({pair[0]} trainer, {pair[1]} engine): {shape}",
        "Most tokens agree and a tail of uncertain ones does not: run the trainer's log-prob "
        "pass in the engine's precision (bf16 autocast: 0.0001-0.027 nats where fp32 gave "
        "0.8-1.0, martingale's finding), or the engine in the trainer's; keep truncated or "
        "masked IS until they match. It is not a failed weight sync: the median would move.",
        ev,
        "" if checks else "no median or per-sequence numbers logged",
    )


def _drift(ctx: Context, s: RunSettings, step: int, ruled: dict[str, Any]) -> Cause:
    share = mean_since(ctx.finite("train/mismatch_seq_over"), step)
    seq_p50 = mean_since(ctx.finite("train/mismatch_seq_tme_p50"), step)
    where = ""
    if share is not None and seq_p50 is not None and seq_p50 < rules_of(ctx).spread_seq_p50:
        where = (
            f"; held in {share:.0%} of the sequences while the median sequence agrees "
            "(one replica, one kind of prompt)"
        )
    pair = s.dtype_pair()
    said = (
        "same precision"
        if pair and pair[0] == pair[1]
        else (f"{pair[0]}/{pair[1]}" if pair else "precisions not said")
    )
    trunc = (
        "truncation said but not the ratio's shape"
        if s.truncated_sampling()
        else "no truncation said"
    )
    lag = "lag flat" if ruled.get("lag") == "flat" else "no lag logged"
    return Cause(
        "drift",
        f"drift with none of the named causes ({said}, {trunc}, {lag}){where}",
        "The two sides compute different probabilities for the same tokens and neither the "
        "settings nor the lag explain it: compare kernels and engine versions, check that the "
        "weights each engine replica holds are the version it reports, and read the attempts "
        "furthest off; use truncated or masked IS until it is fixed.",
        {"ruled_out": ruled, "dtype_pair": said},
        "" if s.origin else "the run's settings were not found (rlvitals metrics RUN --config)",
    )


def explain(ctx: Context, step: int, metric: str | None) -> Cause:
    """The cause of a mismatch found from ``step`` on (``metric``: the series it was found
    in), the first that the settings and the numbers support, in the order of the module
    docstring; ``drift`` with what ruled each out."""
    r = rules_of(ctx)
    s = settings(ctx)
    _name, mm = ctx.series(
        metric or "train/mismatch_kl", "train/mismatch_kl", "train/logprob_abs_diff"
    )
    ruled: dict[str, Any] = {}
    tr = _truncation(ctx, s, step, r)
    if tr is not None:
        return tr
    ruled["truncation"] = s.truncated_sampling() or "none said"
    if mm is not None:
        st = _stale(ctx, mm, step, r)
        if st is not None:
            return st
        ruled["lag"] = "flat" if lag_series(ctx)[1] is not None else "not logged"
    pr = _precision(ctx, s, step, r)
    if pr is not None:
        return pr
    pair = s.dtype_pair()
    ruled["precision"] = (
        "same"
        if pair and pair[0] == pair[1]
        else ("pair differs but the mismatch is not a spread tail" if pair else "not said")
    )
    return _drift(ctx, s, step, ruled)


def annotate(f: Finding, cause: Cause) -> Finding:
    """``f`` with its cause in its evidence, title and action."""
    f.evidence.update(cause.to_evidence())
    f.title = f"{f.title} — cause: {cause.words}"
    if cause.qualified:
        f.title += f" ({cause.qualified})"
    if cause.name != "drift":  # the check's own action is already the one for drift
        f.action = cause.action
    return f
