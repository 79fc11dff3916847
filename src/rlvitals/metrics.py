"""Metric computations from the attempts a loop logs (docs/metrics.md).

Pure functions over one update's attempts: which attempts train and why the others do not
(``decide``), and the canonical step metrics (``step_metrics``). The writer calls them; tests
check them against values worked out by hand.

Notation: Δ = logp_trainer − logp_sampler per sampled token, w = exp(Δ).

Decisions, in the order ``decide`` applies them:

1. Per attempt: one whose agent or grader raised keeps that reason
   (``rollout_failed/<Exc>``, ``grading_failed/<Exc>``); one without a policy version is
   ``unversioned`` (cut before its first model reply); one without a reward is ``ungraded``;
   one sampled more than ``max_steps_off_policy`` updates behind the trainer is ``stale``.
   These are the group's *losses*.
2. Per group: more than ``max_group_losses`` losses, or nothing left, reject the group as
   ``group_too_small``; remaining attempts that all scored the same reject it as
   ``no_variance``. The rejected group's remaining attempts carry the group's reason.
3. A loop's own decisions (``explicit``: attempt id -> reason, None = trains) are kept as given;
   the rules decide only the other attempts, judging each group with every member counted.

``discard/groups/<reason>`` counts rejected groups (``no_variance``, ``group_too_small``);
``discard/rollouts/<reason>`` counts attempts lost for a reason of their own, so no attempt
is counted twice.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import attrgetter, is_not, itemgetter
from typing import Any

import msgspec
import numpy as np

from .jsonio import clean

__all__ = [
    "GROUP_REASONS",
    "Attempt",
    "Decision",
    "EpisodeStats",
    "RunState",
    "decide",
    "mismatch_stats",
    "step_metrics",
]

# Δ above this is clamped before exp (as the Loops SDK does), so w stays finite.
MAX_LOG_RATIO = 80.0
MAX_META_DEPTH = 8  # metadata tables nested deeper are not read as rollout/<key> columns
# A sequence whose token-mean exp(|Δ|) (NeMo-RL's token_mult_prob_error, one sequence) is past
# this counts in ``train/mismatch_seq_over``: the line above which NeMo-RL plots a sample
# (nemo_rl/algorithms/grpo.py:3660-3673).
SEQ_TME_LINE = 1.05
# Distinct labels kept per metadata key; the rest are counted under "<key>/_other".
MAX_LABELS_PER_KEY = 64

NO_VARIANCE = "no_variance"
GROUP_TOO_SMALL = "group_too_small"
STALE = "stale"
UNVERSIONED = "unversioned"
UNGRADED = "ungraded"
UNFINISHED = "unfinished"
GROUP_REASONS = frozenset({NO_VARIANCE, GROUP_TOO_SMALL})


class Attempt(msgspec.Struct, gc=False, omit_defaults=True):
    """One attempt as logged, plus what the update decides about it.

    It is also the attempt's ``rollouts.jsonl`` record: the fields up to ``mismatch`` are the
    record's keys in docs/format.md order (``retries`` and ``mismatch`` only when set), and the
    writer encodes a whole update's attempts in one call. The fields after them are working
    data; the writer drops them (back to their defaults, which are not encoded) once the
    update is written, so written attempts hold no logprobs or transcripts.

    ``gc=False``: attempts hold only plain data (no reference cycles), and an update can keep
    hundreds of thousands of them alive; untracked, they cost the garbage collector nothing.
    """

    step: int
    attempt_id: str
    group_id: str
    task_id: str
    policy_version: int | None
    reward: float | None
    trained: bool
    discard_reason: str | None
    response_tokens: int
    truncated: bool
    lag: int | None
    time: float
    duration: float | None
    metadata: dict[str, Any]
    retries: int = 0
    # Set by ``step_metrics`` when both logprob arrays are known.
    mismatch: dict[str, float] | None = None
    # -- working data, not written --
    # "rollout_failed/TimeoutError" when the loop passed the exception that ended it.
    error: str | None = None
    sampler_logprobs: Any = None
    transcript: list[dict[str, Any]] | None = None
    # The loop's own discard reason given when it logged the attempt (kept across decides).
    given_reason: str | None = None

    @property
    def graded(self) -> bool:
        """It reached the grader and got a reward."""
        return self.error is None and self.reward is not None


@dataclass
class Decision:
    """What an update decided: the attempts it trains and the groups it rejected, in order."""

    step: int
    trained: list[Attempt] = field(default_factory=list)
    discarded: list[Attempt] = field(default_factory=list)
    # group id -> None (trained) or the rejection reason, in the order groups first appeared.
    groups: dict[str, str | None] = field(default_factory=dict)
    # group id -> every attempt of the group this update closes, trained or not.
    members: dict[str, list[Attempt]] = field(default_factory=dict)

    @property
    def trained_ids(self) -> list[str]:
        return [a.attempt_id for a in self.trained]

    @property
    def rejected_groups(self) -> list[str]:
        return [g for g, reason in self.groups.items() if reason is not None]

    def trained_groups(self) -> dict[str, list[Attempt]]:
        """Trained attempts by group, in the order groups first appeared (for advantages)."""
        out: dict[str, list[Attempt]] = {}
        for a in self.trained:
            out.setdefault(a.group_id, []).append(a)
        return out


def decide(
    attempts: Sequence[Attempt],
    step: int,
    *,
    max_steps_off_policy: int,
    max_group_losses: int,
    explicit: Mapping[str, str | None] | None = None,
) -> Decision:
    """Decide which attempts of update ``step`` train, and why the others are discarded.

    See the module docstring for the rules. The trainer's weight version during update ``step``
    is ``step`` (docs/format.md), so an attempt sampled with version ``v`` has lag ``step - v``.
    Deciding again (with other ``explicit`` decisions) starts afresh.
    """
    decision = Decision(step)
    by_group = decision.members
    for a in attempts:
        members = by_group.get(a.group_id)
        if members is None:
            by_group[a.group_id] = [a]
        else:
            members.append(a)
        v = a.policy_version
        reason = a.given_reason or a.error
        if v is None:
            a.lag = None
            if reason is None:
                reason = UNVERSIONED
        else:
            lag = a.lag = step - v
            if reason is None:
                if a.reward is None:
                    reason = UNGRADED
                elif lag > max_steps_off_policy:
                    reason = STALE
        a.discard_reason = reason
    if explicit:
        for a in attempts:
            if a.attempt_id in explicit:
                a.discard_reason = explicit[a.attempt_id]

    groups = decision.groups
    trained = decision.trained
    discarded = decision.discarded
    for gid, members in by_group.items():
        usable = [a for a in members if a.discard_reason is None]
        losses = len(members) - len(usable)
        if losses > max_group_losses or not usable:
            reason = GROUP_TOO_SMALL
        elif _all_same([a.reward for a in usable]):
            reason = NO_VARIANCE
        else:
            reason = None
        if not losses:  # the usual group: every member judged by the group alone
            if reason is None:
                for a in members:
                    a.trained = True
                trained.extend(members)
                groups[gid] = None
                continue
            if not explicit:
                for a in members:
                    a.discard_reason = reason
                    a.trained = False
                discarded.extend(members)
                groups[gid] = reason
                continue
        if reason is not None:
            for a in usable:
                if not (explicit and a.attempt_id in explicit):
                    a.discard_reason = reason
        greason: str | None = None
        any_trained = False
        for a in members:
            if a.discard_reason is None:
                a.trained = any_trained = True
                trained.append(a)
            else:
                a.trained = False
                discarded.append(a)
        if not any_trained:
            # Nothing of this group trains: a group reason carried by a member (the loop's
            # own, or the rule's), else the group lost too much.
            greason = next(
                (a.discard_reason for a in members if a.discard_reason in GROUP_REASONS),
                reason or GROUP_TOO_SMALL,
            )
        groups[gid] = greason
    return decision


def _all_same(values: list[float | None] | list[float]) -> bool:
    first = values[0]
    if first != first:  # NaN: the same only as other NaNs
        return all(v != v for v in values)
    return values.count(first) == len(values)  # type: ignore[arg-type]  # C-level


@dataclass
class RunState:
    """What the metrics of one update need from earlier updates."""

    reward_range: tuple[float, float] | None = None  # configured [lowest, highest]
    lowest: float = math.inf  # lowest and highest reward seen so far
    highest: float = -math.inf
    rollout_reasons: dict[str, None] = field(default_factory=dict)  # ordered set
    labels: dict[str, dict[str, None]] = field(default_factory=dict)
    overflow_keys: set[str] = field(default_factory=set)

    def bounds(self) -> tuple[float, float]:
        """The run's bottom and top reward, for all-solved / none-solved.

        The configured ``reward_range``; else the lowest and highest reward seen so far; while
        every reward seen is one value ``v``, the range is ``[min(v, 0), max(v, 1)]`` (so a run
        that has only seen zeros calls an all-zero group none-solved).
        """
        if self.reward_range is not None:
            return self.reward_range
        if self.lowest < self.highest:
            return self.lowest, self.highest
        if self.lowest == self.highest:
            v = self.lowest
            return min(v, 0.0), max(v, 1.0)
        return 0.0, 1.0


class EpisodeStats:
    """``rollout/<key>`` from episode metadata: one column of values per key.

    ``add_all`` takes an update's metadata at once: attempts that share keys (the usual case:
    an agent returns the same fields every episode) are transposed into columns by C-level
    calls (``itemgetter``, ``zip``), so Python touches each attempt a few times, not each value.
    ``add`` takes one attempt, value by value (odd metadata: nested tables, numpy scalars,
    non-finite numbers). ``metrics`` then classifies each column: numbers (and booleans, as
    0/1) are averaged, labels counted, nested tables become ``<key>/<subkey>``. Both also tell
    which metadata holds something plain JSON cannot spell (a non-finite float, a foreign
    object), so the writer cleans only those.
    """

    __slots__ = ("cols", "kinds")

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {}
        # key -> the types in its column, for columns only ``add_all`` filled (``metrics``
        # then need not look at every value again); ``add`` drops the entry.
        self.kinds: dict[str, set[type]] = {}

    def add(self, meta: Mapping[str, Any], prefix: str = "", depth: int = 0) -> bool:
        """Accumulate one attempt's metadata; True if it needs ``jsonio.clean`` to encode.
        Tables nested deeper than ``MAX_META_DEPTH`` (or holding themselves) are not read."""
        cols = self.cols
        odd = False
        if depth >= MAX_META_DEPTH:
            return True
        for key, v in meta.items():
            t = type(v)
            if t is float:
                if v - v != 0.0:  # NaN or ±inf
                    odd = True
            elif t is not str and t is not int and t is not bool:
                if v is None:
                    continue
                if isinstance(v, Mapping):
                    odd |= self.add(v, f"{prefix}{key}/", depth + 1)
                    continue
                odd = True
                v = _scalar(v)
                if v is None:
                    continue
            if prefix:
                key = f"{prefix}{key}"
            col = cols.get(key)
            if col is None:
                cols[key] = [v]
            else:
                col.append(v)
            if self.kinds:
                self.kinds.pop(key, None)
        return odd

    def add_all(self, metas: Sequence[Mapping[str, Any]]) -> list[int]:
        """Accumulate many attempts' metadata; the indices of those that need cleaning."""
        odd: list[int] = []
        if not metas:
            return odd
        # The usual case first: every attempt returned the same keys (in any order).
        keys = tuple(metas[0])
        if keys and len(set(map(len, metas))) == 1:
            try:  # one column per key, each by one C-level pass
                columns = [list(map(itemgetter(k), metas)) for k in keys]
            except KeyError:
                pass
            else:
                self._add_columns(keys, columns, range(len(metas)), metas, odd)
                return odd
        by_keys: dict[tuple[Any, ...], list[int]] = {}
        for i, m in enumerate(metas):
            if m:
                ks = tuple(m)
                idx = by_keys.get(ks)
                if idx is None:
                    by_keys[ks] = [i]
                else:
                    idx.append(i)
        for ks, idx in by_keys.items():
            group = [metas[i] for i in idx]
            self._add_rows(ks, list(map(itemgetter(*ks), group)), idx, group, odd)
        return odd

    def _add_rows(
        self,
        keys: tuple[Any, ...],
        rows: list[Any],
        idx: Sequence[int],
        group: Sequence[Mapping[str, Any]],
        odd: list[int],
    ) -> None:
        """Columns from ``rows`` (one value, or a tuple of values, per attempt)."""
        columns: list[Sequence[Any]] = list(zip(*rows)) if len(keys) > 1 else [rows]
        self._add_columns(keys, columns, idx, group, odd)

    def _add_columns(
        self,
        keys: tuple[Any, ...],
        columns: Sequence[Sequence[Any]],
        idx: Sequence[int],
        group: Sequence[Mapping[str, Any]],
        odd: list[int],
    ) -> None:
        """Columns of values, one per key of ``keys``, of the metadata ``group``."""
        all_kinds = []
        for col in columns:
            kinds = set(map(type, col))
            plain = kinds <= _PLAIN
            if plain and float in kinds:
                total = sum([v for v in col if type(v) is float] if len(kinds) > 1 else col)
                plain = total - total == 0.0  # else a NaN or an infinity (or an overflow)
            if not plain:  # value by value, flagging the metadata to clean
                odd.extend(i for i, m in zip(idx, group) if self.add(m))
                return
            all_kinds.append(kinds)
        cols = self.cols
        known = self.kinds
        for key, col, kinds in zip(keys, columns, all_kinds):
            values: Sequence[Any]
            if _NONE in kinds:
                values = [v for v in col if v is not None]
                kinds.discard(_NONE)
            else:
                values = col
            if values:
                mine = cols.get(key)
                if mine is None:
                    # A list of ours (a column built here) is kept; a tuple (zip's) copied.
                    cols[key] = values if isinstance(values, list) else list(values)
                    known[key] = kinds
                else:
                    mine.extend(values)
                    had = known.get(key)
                    if had is not None:
                        had |= kinds

    def metrics(self, state: RunState) -> dict[str, float]:
        """The ``rollout/*`` metrics: means, label counts (0 for labels seen earlier), rates."""
        out: dict[str, float] = {}
        known = self.kinds
        for key, col in self.cols.items():
            kinds = known.get(key)
            if kinds is None:
                kinds = set(map(type, col))
            if str in kinds:
                if len(kinds) > 1:
                    labels = Counter([v for v in col if type(v) is str])
                    numbers = [v for v in col if type(v) is not str]
                else:
                    labels, numbers = Counter(col), []
            else:
                labels, numbers = Counter(), col
            if numbers:
                out[f"rollout/{key}"] = _fmean(numbers)
            if labels:
                seen = state.labels.setdefault(str(key), {})
                other = 0
                for label, n in labels.items():
                    if label in seen or len(seen) < MAX_LABELS_PER_KEY:
                        seen[label] = None
                        out[f"rollout/{key}/{label}"] = float(n)
                    else:
                        other += n
                        state.overflow_keys.add(str(key))
                if other:
                    out[f"rollout/{key}/_other"] = float(other)
        # A label seen before but absent now counts 0, so a count reads 0 and not "unmeasured".
        for key, seen in state.labels.items():
            for label in seen:
                out.setdefault(f"rollout/{key}/{label}", 0.0)
            if key in state.overflow_keys:
                out.setdefault(f"rollout/{key}/_other", 0.0)
        return out


_NONE = type(None)
_PLAIN = frozenset({float, int, bool, str, _NONE})


def _scalar(v: Any) -> float | None:
    """A numpy/torch scalar (or a float subclass) as a float; None for anything else (an
    object whose attributes raise included)."""
    if isinstance(v, (int, float)):
        return float(v)
    try:
        item = getattr(v, "item", None)
        if not (callable(item) and getattr(v, "ndim", None) == 0):
            return None
        x = item()
    except Exception:
        return None
    if isinstance(x, bool):
        return 1.0 if x else 0.0
    if isinstance(x, (int, float)):
        return float(x)
    return None


def episode_stats(attempts: Iterable[Attempt]) -> EpisodeStats:
    """Episode stats of ``attempts``' metadata."""
    stats = EpisodeStats()
    stats.add_all([a.metadata for a in attempts])
    return stats


_retries = attrgetter("retries")
_tokens = attrgetter("response_tokens")
_duration = attrgetter("duration")
_truncated = attrgetter("truncated")
_lag = attrgetter("lag")
_metadata = attrgetter("metadata")
_sampler_logprobs = attrgetter("sampler_logprobs")


def _pstd(values: Sequence[float]) -> float:
    m = _fmean(values)
    return math.sqrt(_fmean([(v - m) * (v - m) for v in values]))


# Population std of a group's rewards by the rewards themselves: groups repeat the same few
# reward tuples (8 binary rewards have 256), and _pstd (exact sums) depends only on the values.
_PSTD_CACHE: dict[tuple[float, ...], float] = {}


def _pstd_of(values: list[float]) -> float:
    key = tuple(values)
    std = _PSTD_CACHE.get(key)
    if std is None:
        std = _pstd(values)
        if len(_PSTD_CACHE) >= 4096:
            _PSTD_CACHE.clear()
        _PSTD_CACHE[key] = std
    return std


def _mean(values: Sequence[float]) -> float | None:
    return _fmean(values) if values else None


def _fmean(values: Sequence[float]) -> float:
    """The exact-sum mean (``math.fsum``) of a non-empty sequence, never raising: an
    intermediate overflow divides first, and ``inf + -inf`` is NaN."""
    n = len(values)
    try:
        return math.fsum(values) / n
    except OverflowError:
        return math.fsum([v / n for v in values])
    except ValueError:  # inf and -inf among them
        return math.nan


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values (numpy's default method)."""
    n = len(sorted_values)
    pos = (n - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    lo_v, hi_v = sorted_values[lo], sorted_values[hi]
    return lo_v + (hi_v - lo_v) * frac if frac else float(lo_v)


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
    return out, per


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


def step_metrics(
    decision: Decision,
    attempts: Sequence[Attempt],
    state: RunState,
    trainer_logprobs: Mapping[str, Any] | None = None,
    problems: list[str] | None = None,
    odd: list[Attempt] | None = None,
) -> dict[str, float | None]:
    """The canonical metrics of one update from its attempts and decision.

    ``attempts`` are every attempt the update closes, trained or discarded. Updates ``state``
    (reward bounds, discard reasons and labels seen) and sets each attempt's ``mismatch`` where
    both sampler and trainer logprobs are known. ``problems``: where to say what was left out
    (trainer logprobs of the wrong length); ``odd``: where to put the attempts whose metadata
    needs ``jsonio.clean`` to be written losslessly.

    Which attempts each metric reads:
    - reward/mean, reward/std, freshness/*: the trained attempts.
    - groups/*, reward/group_std_mean, reward/mean_with_unusable: the groups (see docs/metrics.md);
      all_solved / none_solved / signal_fraction judge each group's graded attempts.
    - response/length_mean, response/truncated_rate: attempts that produced a response (not
      rollout failures, not unversioned), so a burst of failures does not read as shorter
      replies.
    - rollout/*, sampling/entropy_estimate, rollouts/retries, perf/attempt_seconds_*: all.
    """
    m: dict[str, float | None] = {}
    trained = decision.trained
    rewards = [a.reward for a in trained if a.reward is not None]
    m["reward/mean"] = _mean(rewards)
    m["reward/std"] = _pstd(rewards) if rewards else None

    by_group = decision.members
    if sum(map(len, by_group.values())) != len(attempts):  # decided over other attempts
        by_group = {}
        for a in attempts:
            by_group.setdefault(a.group_id, []).append(a)
    # Every group's graded rewards, their lowest and highest; they also move the run's bounds.
    # Groups whose graded rewards are all finite are judged by their extremes, (lowest,
    # highest) in ``ranges``; the others (NaN, infinities) value by value, from ``odd_groups``.
    ranges: list[tuple[float, float]] = []
    odd_groups: list[list[float]] = []
    lo, hi = state.lowest, state.highest
    group_stds = []
    with_unusable = list(rewards)
    reasons = decision.groups
    for gid, members in by_group.items():
        reason = reasons.get(gid)
        if reason is None:
            trained_rewards = [r for a in members if a.trained and (r := a.reward) is not None]
            if trained_rewards:
                group_stds.append(_pstd_of(trained_rewards))
        else:
            with_unusable.extend(
                [
                    r
                    for a in members
                    if a.discard_reason == reason
                    and (r := a.reward) is not None
                    and a.error is None
                ]
            )
        graded = [r for a in members if (r := a.reward) is not None and a.error is None]
        if not graded:
            continue
        total = sum(graded)
        if total - total == 0.0:  # no NaN or infinity: min and max are exact
            gmin, gmax = min(graded), max(graded)
            if gmin < lo:
                lo = gmin
            if gmax > hi:
                hi = gmax
            ranges.append((gmin, gmax))
        else:
            finite = [r for r in graded if r - r == 0.0]
            if finite:
                lo, hi = min(lo, *finite), max(hi, *finite)
            odd_groups.append(graded)
    state.lowest, state.highest = lo, hi
    bottom, top = state.bounds()

    # A group whose extremes are equal scored one value: all solved at the top, none at the
    # bottom; the others carry signal.
    same_values = [gmin for gmin, gmax in ranges if gmin == gmax]
    all_solved = same_values.count(top)
    none_solved = same_values.count(bottom) if bottom != top else 0
    signal = len(ranges) - len(same_values)
    for graded in odd_groups:
        if all(x == top for x in graded):
            all_solved += 1
        elif all(x == bottom for x in graded):
            none_solved += 1
        if not _all_same(graded):
            signal += 1
    m["reward/group_std_mean"] = _mean(group_stds)
    m["reward/mean_with_unusable"] = _mean(with_unusable)
    rejected = decision.rejected_groups
    m["groups/trained"] = float(len(decision.groups) - len(rejected))
    m["groups/rejected"] = float(len(rejected))
    m["groups/all_solved"] = float(all_solved)
    m["groups/none_solved"] = float(none_solved)
    m["groups/signal_fraction"] = signal / len(by_group) if by_group else None
    group_reasons: dict[str, int] = dict.fromkeys(sorted(GROUP_REASONS), 0)
    for gid in rejected:
        greason = decision.groups[gid]
        assert greason is not None
        group_reasons[greason] = group_reasons.get(greason, 0) + 1
    for greason, n in group_reasons.items():
        m[f"discard/groups/{greason}"] = float(n)

    attempt_reasons: dict[str, int] = {}
    for a in decision.discarded:
        areason = a.discard_reason
        if areason is not None and areason not in GROUP_REASONS:
            attempt_reasons[areason] = attempt_reasons.get(areason, 0) + 1
    state.rollout_reasons.update(dict.fromkeys(attempt_reasons))
    # Every reason seen in the run so far: 0 this update is a measured zero, not a gap.
    for areason in state.rollout_reasons:
        m[f"discard/rollouts/{areason}"] = float(attempt_reasons.get(areason, 0))
    m["rollouts/retries"] = float(sum(map(_retries, attempts)))

    responded = [  # produced a response: not cut before its first reply, its agent did not raise
        a
        for a in attempts
        if a.policy_version is not None
        and ((e := a.error) is None or not e.startswith("rollout_failed/"))
    ]
    lengths = list(map(_tokens, responded))
    m["response/length_mean"] = _fmean(lengths) if lengths else None
    m["response/truncated_rate"] = (
        sum(map(_truncated, responded)) / len(lengths) if lengths else None
    )

    lags = list(map(_lag, trained))
    if None in lags:
        lags = [x for x in lags if x is not None]
    lags.sort()
    if lags:
        m["freshness/lag_mean"] = _fmean(lags)
        m["freshness/lag_p90"] = _percentile(lags, 0.9)
        m["freshness/lag_max"] = float(lags[-1])

    durations = sorted([d for d in map(_duration, attempts) if d is not None and d - d == 0.0])
    if durations:
        m["perf/attempt_seconds_p50"] = _percentile(durations, 0.5)
        m["perf/attempt_seconds_p90"] = _percentile(durations, 0.9)
        m["perf/attempt_seconds_p99"] = _percentile(durations, 0.99)

    # Any sampler logprobs at all? Compared by identity (C-level), never by value: arrays.
    sampled = (
        [a for a in attempts if a.sampler_logprobs is not None]
        if any(map(is_not, map(_sampler_logprobs, attempts), repeat(None)))
        else []
    )
    if sampled:
        m.update(_agreement(sampled, trainer_logprobs, problems))
    elif trainer_logprobs and problems is not None:
        problems.append(
            f"{len(trainer_logprobs)} trainer logprobs but no attempt of this update has sampler "
            "logprobs; left out of the mismatch"
        )

    episodes = EpisodeStats()
    metas = list(map(_metadata, attempts))
    dirty = episodes.add_all(metas)
    if odd is not None:
        odd.extend(attempts[i] for i in dirty)
    m.update(episodes.metrics(state))
    return m


def _agreement(
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
