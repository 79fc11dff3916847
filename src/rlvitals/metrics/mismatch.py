"""Sampler/trainer agreement from two sets of logprobs of the same tokens (docs/metrics.md).

Notation: Δ = logp_trainer − logp_sampler per sampled token, w = exp(Δ).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from ..jsonio import clean

if TYPE_CHECKING:
    from .decide import Attempt

__all__ = ["agreement", "mismatch_stats"]

# Δ above this is clamped before exp (as the Loops SDK does), so w stays finite.
MAX_LOG_RATIO = 80.0
# A sequence whose token-mean exp(|Δ|) (NeMo-RL's token_mult_prob_error, one sequence) is past
# this counts in ``train/mismatch_seq_over``: the line above which NeMo-RL plots a sample
# (nemo_rl/algorithms/grpo.py:3660-3673).
SEQ_TME_LINE = 1.05


def _concat(arrays: Sequence[Any], total: int) -> np.ndarray:
    """Per-attempt logprobs (lists, numpy arrays or torch tensors) as one float64 array."""
    first = arrays[0]
    if type(first) is list and all(type(x) is list for x in arrays):
        return np.fromiter(chain.from_iterable(arrays), np.float64, total)
    if isinstance(first, np.ndarray) and all(
        isinstance(x, np.ndarray) and x.ndim == 1 for x in arrays
    ):
        return np.concatenate(arrays, dtype=np.float64)  # one C call, any float dtype
    torch = sys.modules.get("torch")
    if torch is not None and all(isinstance(x, torch.Tensor) for x in arrays):
        joined = torch.cat([x.detach().reshape(-1) for x in arrays])
        return joined.to(device="cpu", dtype=torch.float64).numpy()
    parts = []
    for x in arrays:
        if torch is not None and isinstance(x, torch.Tensor):
            x = x.detach().to(device="cpu", dtype=torch.float64).numpy()
        parts.append(np.asarray(x, dtype=np.float64).reshape(-1))
    return np.concatenate(parts)


def mismatch_stats(
    pairs: Sequence[tuple[Any, Any]],
) -> tuple[dict[str, float], list[dict[str, float]]]:
    """Sampler/trainer agreement over attempts, from ``(sampler_logprobs, trainer_logprobs)``.

    Returns the step metrics (token-level k3, k1, |Δ| means, token ESS, sequence ESS) and, per
    pair, ``{"kl", "abs_diff", "tokens", "tme"}`` (``tme``: the token mean of exp(|Δ|), the
    sequence's ratio). Also the sequences' ratios as a distribution (``_seq_tail``). Pairs
    must have matching lengths.
    """
    if not pairs:
        return {}, []
    samplers = [s for s, _ in pairs]
    trainers = [t for _, t in pairs]
    return _mismatch(samplers, trainers)


def _mismatch(
    samplers: Sequence[Any],
    trainers: Sequence[Any],
    s_all: np.ndarray | None = None,
    lens: list[int] | None = None,
) -> tuple[dict[str, float], list[dict[str, float]]]:
    lengths = np.array(list(map(len, samplers)) if lens is None else lens, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return {}, [{"kl": math.nan, "abs_diff": math.nan, "tokens": 0} for _ in samplers]
    if s_all is None:
        s_all = _concat(samplers, total)
    t_all = _concat(trainers, total)
    delta = t_all - s_all  # (N,) Δ per token
    em1 = np.expm1(np.minimum(delta, MAX_LOG_RATIO))  # (N,) w - 1, exact for tiny Δ
    # Per attempt sums of k3 = w - 1 - Δ, |Δ| and Δ; the step means come from the same sums.
    nonempty = lengths > 0
    idx = (np.cumsum(lengths) - lengths)[nonempty]  # start of each non-empty attempt
    n = len(samplers)
    k3_sum = np.zeros(n)
    abs_sum = np.zeros(n)
    d_sum = np.zeros(n)
    tme_sum = np.zeros(n)
    absd = np.abs(delta)
    k3_sum[nonempty] = np.add.reduceat(em1 - delta, idx)
    abs_sum[nonempty] = np.add.reduceat(absd, idx)
    d_sum[nonempty] = np.add.reduceat(delta, idx)
    # exp(|Δ|) per token, NeMo-RL's token_mult_prob_error (1 = identical); its mean per
    # attempt is the sequence's ratio, the distribution the tail metrics describe.
    tme_sum[nonempty] = np.add.reduceat(np.exp(np.minimum(absd, MAX_LOG_RATIO)), idx)
    # k3 >= 0 in exact arithmetic; expm1 avoids the cancellation of exp(Δ) - 1 for small Δ
    # and the clamp removes what rounding is left, so the estimate is never negative.
    np.maximum(k3_sum, 0.0, out=k3_sum)
    with np.errstate(invalid="ignore", divide="ignore"):
        kl_a = k3_sum / lengths
        abs_a = abs_sum / lengths
        tme_a = tme_sum / lengths
    finite = bool(np.isfinite(kl_a).all() and np.isfinite(abs_a).all())
    finite = finite and bool(np.isfinite(tme_a).all())
    per = [
        {"kl": kl, "abs_diff": ad, "tokens": t, "tme": r}
        for kl, ad, t, r in zip(kl_a.tolist(), abs_a.tolist(), lengths.tolist(), tme_a.tolist())
    ]
    if not finite:
        # Empty attempts (0/0) or non-finite logprobs: spell them as the files do (docs/format.md),
        # since these dicts are written as the attempts' ``mismatch`` records.
        per = [clean(p) for p in per]
    w = em1 + 1.0  # Σw² from w itself: from w - 1 it cancels badly when w << 1
    sw = float(w.sum())
    sw2 = float(np.square(w).sum())  # not np.dot: BLAS threads cost more than they save here
    # Sequence ESS in log space: w_i = exp(a_i), a_i = ΣΔ over the attempt's tokens; the ratio
    # is unchanged by the shift exp(a_i - max a), which keeps every w_i finite.
    a = d_sum[nonempty]
    if np.all(np.isfinite(a)):
        ws = np.exp(a - a.max())
        ess_seq = min(1.0, float(ws.sum() ** 2 / (len(ws) * np.square(ws).sum())))
    else:
        ess_seq = math.nan
    out = {
        "train/mismatch_kl": float(k3_sum.sum()) / total,
        "train/mismatch_k1": -float(d_sum.sum()) / total,
        "train/logprob_abs_diff": float(abs_sum.sum()) / total,
        # (Σw)² <= n·Σw² (Cauchy-Schwarz): the min only removes rounding above 1.
        "train/mismatch_ess": min(1.0, sw * sw / (total * sw2)) if sw2 > 0 else math.nan,
        "train/mismatch_ess_seq": ess_seq,
    }
    out.update(_seq_tail(tme_sum, tme_a[nonempty], total))
    out.update(_token_ratio(w, absd))
    return out, per


def _token_ratio(w: np.ndarray, absd: np.ndarray) -> dict[str, float]:
    """The token ratio w = pi_trainer / pi_sampler as a distribution, raw: its mean (the kept
    probability mass when the sampler truncates: trl #6789), median, extremes, and the median
    |Δ| (a mean far above it is a tail of a few tokens, not every token moved)."""
    ok = np.isfinite(w)
    if not ok.all():
        w, absd = w[ok], absd[ok]
    if not len(w):
        return {}
    return {
        "train/is_ratio_mean": float(w.mean()),
        "train/is_ratio_median": float(np.median(w)),
        "train/is_ratio_min": float(w.min()),
        "train/is_ratio_max": float(w.max()),
        "train/logprob_abs_diff_p50": float(np.median(absd)),
    }


def _seq_tail(tme_sum: np.ndarray, seq: np.ndarray, total: int) -> dict[str, float]:
    """The distribution of the per-sequence ratio (token mean of exp(|Δ|)) over one update:
    the token mean (NeMo-RL's token_mult_prob_error), the median, p90 and maximum of the
    sequences' ratios and the share of sequences past ``SEQ_TME_LINE``. A mean hides a tenth
    of the sequences going far off (NVIDIA-NeMo/RL #2100); these show it."""
    seq = seq[np.isfinite(seq)]
    if not len(seq):
        return {}
    p50, p90 = np.percentile(seq, [50, 90]).tolist()
    return {
        "train/mismatch_tme": float(tme_sum.sum()) / total,
        "train/mismatch_seq_tme_p50": p50,
        "train/mismatch_seq_tme_p90": p90,
        "train/mismatch_seq_tme_max": float(seq.max()),
        "train/mismatch_seq_over": float(np.count_nonzero(seq > SEQ_TME_LINE)) / len(seq),
    }


def agreement(
    sampled: list[Attempt],
    trainer_logprobs: Mapping[str, Any] | None,
    problems: list[str] | None = None,
) -> dict[str, float | None]:
    """sampling/entropy_estimate over every sampled token, and the mismatch metrics over the
    attempts whose trainer logprobs match their sampled tokens in number."""
    m: dict[str, float | None] = {}
    samplers = [a.sampler_logprobs for a in sampled]
    lengths = list(map(len, samplers))
    total = sum(lengths)
    if total:
        s_all = _concat(samplers, total)
        m["sampling/entropy_estimate"] = -float(s_all.mean())
    if not trainer_logprobs:
        return m
    get = trainer_logprobs.get
    tl = [get(a.attempt_id) for a in sampled]
    found = len([t for t in tl if t is not None])  # not tl.count(None): arrays compare per item
    if found < len(trainer_logprobs) and problems is not None:
        mine = {a.attempt_id for a in sampled}
        stray = sorted(str(k) for k in trainer_logprobs if k not in mine)
        problems.append(
            f"{len(stray)} trainer logprobs for attempts without sampler logprobs in this update "
            f"(e.g. {stray[0]!r}); left out of the mismatch"
        )
    keep = [t is not None and len(t) == n for t, n in zip(tl, lengths)]
    kept = keep.count(True)
    if kept < found and problems is not None:
        a, t, n = next(
            (a, t, n) for a, t, n in zip(sampled, tl, lengths) if t is not None and len(t) != n
        )
        problems.append(
            f"attempt {a.attempt_id}: {len(t)} trainer logprobs for {n} sampled tokens; "
            "left out of the mismatch"
        )
    if not kept or not total:
        return m
    if kept == len(keep):
        owners, s_sub, trainers, lens = sampled, samplers, tl, lengths
        s_pairs: np.ndarray | None = s_all
    else:
        owners = [a for a, k in zip(sampled, keep) if k]
        s_sub = [s for s, k in zip(samplers, keep) if k]
        trainers = [t for t, k in zip(tl, keep) if k]
        lens = [n for n, k in zip(lengths, keep) if k]
        s_pairs = s_all[np.repeat(np.asarray(keep), lengths)]
    stats, per = _mismatch(s_sub, trainers, s_pairs, lens)
    m.update(stats)
    for a, p in zip(owners, per):
        a.mismatch = p
    return m
