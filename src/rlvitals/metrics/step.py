"""The canonical step metrics of one update from its attempts and decision (``step_metrics``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, is_not
from typing import Any

from .decide import GROUP_REASONS, Attempt, Decision
from .episodes import EpisodeStats
from .mismatch import agreement
from .stats import all_same, fmean, mean, percentile, pstd, pstd_of

__all__ = ["RunState", "step_metrics"]


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


_retries = attrgetter("retries")
_tokens = attrgetter("response_tokens")
_duration = attrgetter("duration")
_truncated = attrgetter("truncated")
_lag = attrgetter("lag")
_metadata = attrgetter("metadata")
_sampler_logprobs = attrgetter("sampler_logprobs")


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
    trained = decision.trained
    rewards = [a.reward for a in trained if a.reward is not None]
    m: dict[str, float | None] = {
        "reward/mean": mean(rewards),
        "reward/std": pstd(rewards) if rewards else None,
    }
    m.update(_group_metrics(decision, attempts, rewards, state))
    m.update(_discard_metrics(decision, state))
    m["rollouts/retries"] = float(sum(map(_retries, attempts)))
    m.update(_response_metrics(attempts))
    m.update(_lag_metrics(trained))
    m.update(_latency_metrics(attempts))
    m.update(_sampling_metrics(attempts, trainer_logprobs, problems))
    m.update(_episode_metrics(attempts, state, odd))
    return m


def _group_metrics(
    decision: Decision, attempts: Sequence[Attempt], rewards: list[float], state: RunState
) -> dict[str, float | None]:
    """reward/group_std_mean, reward/mean_with_unusable and groups/*, over the groups of
    ``attempts``; moves the run's reward bounds (``state``)."""
    by_group = decision.members
    if sum(map(len, by_group.values())) != len(attempts):  # decided over other attempts
        by_group = {}
        for a in attempts:
            by_group.setdefault(a.group_id, []).append(a)
    group_stds, with_unusable, ranges, odd_groups = _scan_groups(decision, by_group, rewards, state)
    all_solved, none_solved, signal = _solved(ranges, odd_groups, *state.bounds())
    rejected = decision.rejected_groups
    return {
        "reward/group_std_mean": mean(group_stds),
        "reward/mean_with_unusable": mean(with_unusable),
        "groups/trained": float(len(decision.groups) - len(rejected)),
        "groups/rejected": float(len(rejected)),
        "groups/all_solved": float(all_solved),
        "groups/none_solved": float(none_solved),
        "groups/signal_fraction": signal / len(by_group) if by_group else None,
    }


def _scan_groups(
    decision: Decision,
    by_group: dict[str, list[Attempt]],
    rewards: list[float],
    state: RunState,
) -> tuple[list[float], list[float], list[tuple[float, float]], list[list[float]]]:
    """One pass over the groups: the reward std of each trained group, the rewards of trained
    attempts plus the graded attempts of rejected groups, and every group's graded rewards,
    which also move the run's bounds (``state``). Groups whose graded rewards are all finite
    are given by their extremes, (lowest, highest) in ``ranges``; the others (NaN,
    infinities) value by value, in ``odd_groups``."""
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
                group_stds.append(pstd_of(trained_rewards))
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
    return group_stds, with_unusable, ranges, odd_groups


def _solved(
    ranges: list[tuple[float, float]], odd_groups: list[list[float]], bottom: float, top: float
) -> tuple[int, int, int]:
    """(all solved, none solved, with signal): groups that scored only the run's top, only its
    bottom, and more than one value."""
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
        if not all_same(graded):
            signal += 1
    return all_solved, none_solved, signal


def _discard_metrics(decision: Decision, state: RunState) -> dict[str, float | None]:
    """discard/groups/<reason> (rejected groups) and discard/rollouts/<reason> (attempts lost
    for a reason of their own), every reason seen in the run so far included."""
    m: dict[str, float | None] = {}
    group_reasons: dict[str, int] = dict.fromkeys(sorted(GROUP_REASONS), 0)
    for gid in decision.rejected_groups:
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
    return m


def _response_metrics(attempts: Sequence[Attempt]) -> dict[str, float | None]:
    """response/*, over the attempts that produced a response."""
    responded = [  # produced a response: not cut before its first reply, its agent did not raise
        a
        for a in attempts
        if a.policy_version is not None
        and ((e := a.error) is None or not e.startswith("rollout_failed/"))
    ]
    lengths = list(map(_tokens, responded))
    return {
        "response/length_mean": fmean(lengths) if lengths else None,
        "response/truncated_rate": (
            sum(map(_truncated, responded)) / len(lengths) if lengths else None
        ),
    }


def _lag_metrics(trained: list[Attempt]) -> dict[str, float | None]:
    """freshness/lag_*, over the trained attempts that have a policy version."""
    lags = list(map(_lag, trained))
    if None in lags:
        lags = [x for x in lags if x is not None]
    lags.sort()
    if not lags:
        return {}
    return {
        "freshness/lag_mean": fmean(lags),
        "freshness/lag_p90": percentile(lags, 0.9),
        "freshness/lag_max": float(lags[-1]),
    }


def _latency_metrics(attempts: Sequence[Attempt]) -> dict[str, float | None]:
    """perf/attempt_seconds_*, over the attempts with a finite duration."""
    durations = sorted([d for d in map(_duration, attempts) if d is not None and d - d == 0.0])
    if not durations:
        return {}
    return {
        "perf/attempt_seconds_p50": percentile(durations, 0.5),
        "perf/attempt_seconds_p90": percentile(durations, 0.9),
        "perf/attempt_seconds_p99": percentile(durations, 0.99),
    }


def _sampling_metrics(
    attempts: Sequence[Attempt],
    trainer_logprobs: Mapping[str, Any] | None,
    problems: list[str] | None,
) -> dict[str, float | None]:
    """sampling/entropy_estimate and the mismatch metrics (``mismatch.agreement``)."""
    # Any sampler logprobs at all? Compared by identity (C-level), never by value: arrays.
    sampled = (
        [a for a in attempts if a.sampler_logprobs is not None]
        if any(map(is_not, map(_sampler_logprobs, attempts), repeat(None)))
        else []
    )
    if sampled:
        return agreement(sampled, trainer_logprobs, problems)
    if trainer_logprobs and problems is not None:
        problems.append(
            f"{len(trainer_logprobs)} trainer logprobs but no attempt of this update has sampler "
            "logprobs; left out of the mismatch"
        )
    return {}


def _episode_metrics(
    attempts: Sequence[Attempt], state: RunState, odd: list[Attempt] | None
) -> dict[str, float]:
    """rollout/*, from every attempt's metadata; ``odd`` gets the attempts whose metadata
    needs cleaning."""
    episodes = EpisodeStats()
    metas = list(map(_metadata, attempts))
    dirty = episodes.add_all(metas)
    if odd is not None:
        odd.extend(attempts[i] for i in dirty)
    return episodes.metrics(state)
