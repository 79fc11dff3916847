"""Metric computations from the attempts a loop logs (METRICS.md).

Pure functions over one update's attempts: which attempts train and why the others do not
(``decide``), and the canonical step metrics (``step_metrics``). The writer calls them; tests
check them against values worked out by hand.

Notation: Δ = logp_trainer − logp_sampler per sampled token, w = exp(Δ).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

__all__ = [
    "Attempt",
    "Decision",
    "RunState",
    "decide",
    "mismatch_stats",
    "step_metrics",
]

# Δ above this is clamped before exp (as the Loops SDK does), so w stays finite.
MAX_LOG_RATIO = 80.0
# Distinct labels kept per metadata key; the rest are counted under "<key>/_other".
MAX_LABELS_PER_KEY = 64

NO_VARIANCE = "no_variance"
GROUP_TOO_SMALL = "group_too_small"
STALE = "stale"
UNVERSIONED = "unversioned"
UNFINISHED = "unfinished"


class Attempt:
    """One attempt as logged, plus what the update decides about it."""

    __slots__ = (
        "attempt_id",
        "discard_reason",
        "duration",
        "error",
        "group_id",
        "lag",
        "metadata",
        "mismatch",
        "policy_version",
        "response_tokens",
        "retries",
        "reward",
        "sampler_logprobs",
        "step",
        "task_id",
        "time",
        "trained",
        "transcript",
        "truncated",
    )

    def __init__(
        self,
        attempt_id: str,
        step: int,
        group_id: str,
        task_id: str,
        reward: float | None,
        policy_version: int | None,
        response_tokens: int,
        truncated: bool,
        metadata: dict[str, Any] | None,
        time: float,
        duration: float | None = None,
        error: str | None = None,
        retries: int = 0,
        sampler_logprobs: Any = None,
        transcript: list[dict[str, Any]] | None = None,
        discard_reason: str | None = None,
    ) -> None:
        self.attempt_id = attempt_id
        self.step = step
        self.group_id = group_id
        self.task_id = task_id
        self.reward = reward
        self.policy_version = policy_version
        self.response_tokens = response_tokens
        self.truncated = truncated
        self.metadata = metadata
        self.time = time
        self.duration = duration
        # error: a discard reason such as "rollout_failed/TimeoutError", set when the loop
        # passed an exception.
        self.error = error
        self.retries = retries
        self.sampler_logprobs = sampler_logprobs
        self.transcript = transcript
        # discard_reason set by the loop itself (explicit decision) or by ``decide``.
        self.discard_reason = discard_reason
        self.trained = False
        self.lag: int | None = None
        self.mismatch: dict[str, float] | None = None

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

    @property
    def trained_ids(self) -> list[str]:
        return [a.attempt_id for a in self.trained]

    @property
    def rejected_groups(self) -> list[str]:
        return [g for g, reason in self.groups.items() if reason is not None]


def decide(
    attempts: Sequence[Attempt],
    step: int,
    *,
    max_steps_off_policy: int,
    max_group_losses: int,
    explicit: Mapping[str, str | None] | None = None,
) -> Decision:
    """Decide which attempts of update ``step`` train, and why the others are discarded.

    Per attempt, in order: an attempt whose agent or grader raised is discarded with that
    reason; one without a policy version is ``unversioned``; one sampled more than
    ``max_steps_off_policy`` updates behind the trainer is ``stale``. Per group: more than
    ``max_group_losses`` such losses reject the group as ``group_too_small``; a group whose
    remaining attempts all scored the same is rejected as ``no_variance``. ``explicit`` maps
    attempt ids to a reason (or None for "trains"), overriding all of this for those attempts.
    """
    explicit = explicit or {}
    decision = Decision(step)
    by_group: dict[str, list[Attempt]] = {}
    for a in attempts:
        by_group.setdefault(a.group_id, []).append(a)
        # Trainer version during update s is s (FORMAT.md: update s trains version s).
        a.lag = None if a.policy_version is None else step - a.policy_version
        if a.attempt_id in explicit:
            a.discard_reason = explicit[a.attempt_id]
        elif a.discard_reason is None:
            if a.error is not None:
                a.discard_reason = a.error
            elif a.policy_version is None:
                a.discard_reason = UNVERSIONED
            elif a.lag is not None and a.lag > max_steps_off_policy:
                a.discard_reason = STALE

    for gid, members in by_group.items():
        decided_by_loop = all(a.attempt_id in explicit for a in members)
        if decided_by_loop:
            usable = [a for a in members if a.discard_reason is None]
            reason = None if usable else members[0].discard_reason
        else:
            losses = sum(1 for a in members if a.discard_reason is not None)
            usable = [a for a in members if a.discard_reason is None]
            reason = None
            if losses > max_group_losses:
                reason = GROUP_TOO_SMALL
            elif not usable or _all_same(a.reward for a in usable):
                reason = NO_VARIANCE if usable else GROUP_TOO_SMALL
            if reason is not None:
                for a in usable:
                    a.discard_reason = reason
                usable = []
        decision.groups[gid] = reason
        for a in members:
            a.trained = a.discard_reason is None
            (decision.trained if a.trained else decision.discarded).append(a)
    return decision


def _all_same(values: Iterable[float | None]) -> bool:
    it = iter(values)
    first = next(it, None)
    return all(v == first or (v != v and first != first) for v in it)


@dataclass
class RunState:
    """What the metrics of one update need from earlier updates."""

    reward_range: tuple[float, float] | None = None  # configured [lowest, highest]
    lowest: float = math.inf  # lowest and highest reward seen so far
    highest: float = -math.inf
    rollout_reasons: set[str] = field(default_factory=set)
    labels: dict[str, set[str]] = field(default_factory=dict)
    overflow_keys: set[str] = field(default_factory=set)

    def bounds(self) -> tuple[float, float]:
        """The run's bottom and top reward, for all-solved / none-solved."""
        if self.reward_range is not None:
            return self.reward_range
        if self.lowest < self.highest:
            return self.lowest, self.highest
        if self.lowest == self.highest:
            v = self.lowest
            return min(v, 0.0), max(v, 1.0)
        return 0.0, 1.0


def _pstd(values: Sequence[float]) -> float:
    n = len(values)
    if n == 0:
        return math.nan
    m = math.fsum(values) / n
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / n)


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _as_array(x: Any) -> np.ndarray:
    detach = getattr(x, "detach", None)
    if callable(detach):  # a torch tensor
        x = detach().cpu().float().numpy()
    return np.asarray(x, dtype=np.float64).reshape(-1)


def mismatch_stats(
    pairs: Sequence[tuple[Any, Any]],
) -> tuple[dict[str, float], list[dict[str, float]]]:
    """Sampler/trainer agreement over attempts, from ``(sampler_logprobs, trainer_logprobs)``.

    Returns the step metrics (token-level k3, k1, |Δ| means, token ESS, sequence ESS) and, per
    pair, ``{"kl", "abs_diff", "tokens"}``. Pairs must have matching lengths.
    """
    if not pairs:
        return {}, []
    lengths = np.fromiter((len(s) for s, _ in pairs), dtype=np.int64, count=len(pairs))
    total = int(lengths.sum())
    if total == 0:
        return {}, [{"kl": math.nan, "abs_diff": math.nan, "tokens": 0} for _ in pairs]
    if all(isinstance(s, list) for s, _ in pairs) and all(isinstance(t, list) for _, t in pairs):
        s_all = np.fromiter(chain.from_iterable(s for s, _ in pairs), np.float64, total)
        t_all = np.fromiter(chain.from_iterable(t for _, t in pairs), np.float64, total)
    else:
        s_all = np.concatenate([_as_array(s) for s, _ in pairs])
        t_all = np.concatenate([_as_array(t) for _, t in pairs])
    delta = t_all - s_all  # (N,) Δ per token
    w = np.exp(np.minimum(delta, MAX_LOG_RATIO))
    k3 = w - 1.0 - delta
    absd = np.abs(delta)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    nonempty = lengths > 0
    idx = starts[nonempty]
    # Per attempt sums (reduceat needs non-empty segments).
    k3_sum = np.zeros(len(pairs))
    abs_sum = np.zeros(len(pairs))
    d_sum = np.zeros(len(pairs))
    k3_sum[nonempty] = np.add.reduceat(k3, idx)
    abs_sum[nonempty] = np.add.reduceat(absd, idx)
    d_sum[nonempty] = np.add.reduceat(delta, idx)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_kl = k3_sum / lengths
        per_abs = abs_sum / lengths
    per = [
        {"kl": float(per_kl[i]), "abs_diff": float(per_abs[i]), "tokens": int(lengths[i])}
        for i in range(len(pairs))
    ]
    sw, sw2 = float(w.sum()), float((w * w).sum())
    # Sequence ESS in log space: w_i = exp(a_i), a_i = ΣΔ over the attempt's tokens.
    a = d_sum[nonempty]
    if np.all(np.isfinite(a)):
        ws = np.exp(a - a.max())
        ess_seq = float(ws.sum() ** 2 / (len(ws) * (ws * ws).sum()))
    else:
        ess_seq = math.nan
    out = {
        "train/mismatch_kl": float(k3.mean()),
        "train/mismatch_k1": float(-delta.mean()),
        "train/logprob_abs_diff": float(absd.mean()),
        "train/mismatch_ess": sw * sw / (total * sw2) if sw2 > 0 else math.nan,
        "train/mismatch_ess_seq": ess_seq,
    }
    return out, per


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values (numpy's default method)."""
    n = len(sorted_values)
    pos = (n - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def _episode_metrics(attempts: Sequence[Attempt], state: RunState) -> dict[str, float]:
    """``rollout/<key>`` from episode metadata: numbers averaged, labels counted, bools rates."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    labels: dict[str, dict[str, int]] = {}

    def visit(prefix: str, meta: Mapping[str, Any]) -> None:
        for key, value in meta.items():
            name = f"{prefix}{key}"
            if isinstance(value, bool):
                sums[name] = sums.get(name, 0.0) + (1.0 if value else 0.0)
                counts[name] = counts.get(name, 0) + 1
            elif isinstance(value, (int, float)):
                sums[name] = sums.get(name, 0.0) + value
                counts[name] = counts.get(name, 0) + 1
            elif isinstance(value, str):
                bucket = labels.setdefault(name, {})
                bucket[value] = bucket.get(value, 0) + 1
            elif isinstance(value, Mapping):
                visit(f"{name}/", value)
            else:
                item = getattr(value, "item", None)  # numpy / torch scalars
                if callable(item) and getattr(value, "ndim", 1) == 0:
                    try:
                        sums[name] = sums.get(name, 0.0) + float(item())
                        counts[name] = counts.get(name, 0) + 1
                    except (TypeError, ValueError):
                        pass

    for a in attempts:
        if a.metadata:
            visit("", a.metadata)
    out = {f"rollout/{k}": sums[k] / counts[k] for k in sums}
    for key, bucket in labels.items():
        seen = state.labels.setdefault(key, set())
        other = 0
        for label, n in bucket.items():
            if label in seen or len(seen) < MAX_LABELS_PER_KEY:
                seen.add(label)
                out[f"rollout/{key}/{label}"] = float(n)
            else:
                other += n
                state.overflow_keys.add(key)
        if other:
            out[f"rollout/{key}/_other"] = float(other)
    # A label seen before but absent now counts 0, so a rate reads 0 and not "unmeasured".
    for key, seen in state.labels.items():
        for label in seen:
            out.setdefault(f"rollout/{key}/{label}", 0.0)
    return out


def step_metrics(
    decision: Decision,
    attempts: Sequence[Attempt],
    state: RunState,
    trainer_logprobs: Mapping[str, Any] | None = None,
) -> dict[str, float | None]:
    """The canonical metrics of one update from its attempts and decision.

    Updates ``state`` (reward bounds, discard reasons and labels seen) and sets each attempt's
    ``mismatch`` where both sampler and trainer logprobs are known.
    """
    m: dict[str, float | None] = {}
    trained = decision.trained
    rewards = [a.reward for a in trained if a.reward is not None]
    m["reward/mean"] = _mean(rewards)
    m["reward/std"] = _pstd(rewards) if rewards else None

    by_group: dict[str, list[Attempt]] = {}
    for a in attempts:
        by_group.setdefault(a.group_id, []).append(a)
    graded_all = [a.reward for a in attempts if a.graded]
    for r in graded_all:
        if r is not None and r == r:
            state.lowest = min(state.lowest, r)
            state.highest = max(state.highest, r)
    bottom, top = state.bounds()

    group_stds = []
    with_unusable = list(rewards)
    all_solved = none_solved = signal = completed = 0
    for gid, members in by_group.items():
        reason = decision.groups.get(gid)
        graded = [a.reward for a in members if a.graded and a.reward is not None]
        if reason is None:
            group_stds.append(
                _pstd([a.reward for a in members if a.trained and a.reward is not None])
            )
        elif reason in (NO_VARIANCE, GROUP_TOO_SMALL):
            with_unusable.extend(
                a.reward
                for a in members
                if a.graded and a.reward is not None and a.discard_reason == reason
            )
        completed += 1
        if graded:
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
    m["groups/signal_fraction"] = signal / completed if completed else None
    group_reasons: dict[str, int] = {NO_VARIANCE: 0, GROUP_TOO_SMALL: 0}
    for gid in rejected:
        greason = decision.groups[gid]
        assert greason is not None
        group_reasons[greason] = group_reasons.get(greason, 0) + 1
    for greason, n in group_reasons.items():
        m[f"discard/groups/{greason}"] = float(n)

    attempt_reasons: dict[str, int] = {}
    for a in decision.discarded:
        areason = a.discard_reason
        if areason is not None and areason not in group_reasons:
            attempt_reasons[areason] = attempt_reasons.get(areason, 0) + 1
    state.rollout_reasons.update(attempt_reasons)
    for areason in state.rollout_reasons:
        m[f"discard/rollouts/{areason}"] = float(attempt_reasons.get(areason, 0))
    m["rollouts/retries"] = float(sum(a.retries for a in attempts))

    lengths = [float(a.response_tokens) for a in attempts if a.response_tokens is not None]
    m["response/length_mean"] = _mean(lengths)
    m["response/truncated_rate"] = (
        sum(1 for a in attempts if a.truncated) / len(attempts) if attempts else None
    )

    lags = sorted(a.lag for a in trained if a.lag is not None)
    if lags:
        m["freshness/lag_mean"] = math.fsum(lags) / len(lags)
        m["freshness/lag_p90"] = _percentile(lags, 0.9)
        m["freshness/lag_max"] = float(lags[-1])

    durations = sorted(a.duration for a in attempts if a.duration is not None)
    if durations:
        m["perf/attempt_seconds_p50"] = _percentile(durations, 0.5)
        m["perf/attempt_seconds_p90"] = _percentile(durations, 0.9)
        m["perf/attempt_seconds_p99"] = _percentile(durations, 0.99)

    sampled = [a.sampler_logprobs for a in attempts if a.sampler_logprobs is not None]
    if sampled:
        if all(isinstance(s, list) for s in sampled):
            n = sum(len(s) for s in sampled)
            total = math.fsum(chain.from_iterable(sampled))
        else:
            arrays = [_as_array(s) for s in sampled]
            n = sum(len(x) for x in arrays)
            total = float(sum(x.sum() for x in arrays))
        if n:
            m["sampling/entropy_estimate"] = -total / n

    if trainer_logprobs:
        pairs, owners = [], []
        for a in attempts:
            t = trainer_logprobs.get(a.attempt_id)
            if t is None or a.sampler_logprobs is None:
                continue
            if len(t) != len(a.sampler_logprobs):
                continue  # the writer warns about this before calling
            pairs.append((a.sampler_logprobs, t))
            owners.append(a)
        stats, per = mismatch_stats(pairs)
        m.update(stats)
        for a, p in zip(owners, per):
            a.mismatch = p

    m.update(_episode_metrics(attempts, state))
    return m
