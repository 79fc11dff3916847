"""Each metric of METRICS.md against values worked out by hand on small updates."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvitals.metrics import (
    GROUP_TOO_SMALL,
    NO_VARIANCE,
    STALE,
    UNGRADED,
    UNVERSIONED,
    Attempt,
    EpisodeStats,
    RunState,
    decide,
    episode_stats,
    mismatch_stats,
    step_metrics,
)


def att(
    aid: str,
    group: str,
    reward: float | None,
    *,
    pv: int | None = 0,
    step: int = 0,
    error: str | None = None,
    tokens: int = 10,
    truncated: bool = False,
    metadata: dict | None = None,
    duration: float | None = None,
    retries: int = 0,
    sampler: list[float] | None = None,
    given: str | None = None,
) -> Attempt:
    return Attempt(
        step=step,
        attempt_id=aid,
        group_id=group,
        task_id=f"task-{group}",
        policy_version=pv,
        reward=reward,
        trained=False,
        discard_reason=None,
        response_tokens=tokens,
        truncated=truncated,
        lag=None,
        time=0.0,
        duration=duration,
        metadata=metadata or {},
        retries=retries,
        error=error,
        sampler_logprobs=sampler,
        given_reason=given,
    )


def run_update(attempts, step=0, *, max_off=2, max_losses=1, state=None, tlp=None, explicit=None):
    d = decide(
        attempts, step, max_steps_off_policy=max_off, max_group_losses=max_losses, explicit=explicit
    )
    m = step_metrics(d, attempts, state or RunState(), tlp)
    return d, m


# -- decide ------------------------------------------------------------------------------------


def test_group_whose_rewards_differ_trains_and_one_without_variance_is_rejected():
    a = [att(f"a{i}", "ga", r) for i, r in enumerate([1.0, 0.0, 1.0, 0.0])]
    b = [att(f"b{i}", "gb", 1.0) for i in range(4)]
    d = decide(a + b, 0, max_steps_off_policy=2, max_group_losses=1)
    assert d.groups == {"ga": None, "gb": NO_VARIANCE}
    assert d.trained_ids == ["a0", "a1", "a2", "a3"]
    assert [x.discard_reason for x in b] == [NO_VARIANCE] * 4
    assert d.rejected_groups == ["gb"]
    assert list(d.trained_groups()) == ["ga"]


def test_more_failures_than_max_group_losses_reject_the_group_as_too_small():
    def group():
        return [
            att("f1", "g", None, error="rollout_failed/TimeoutError"),
            att("f2", "g", None, error="grading_failed/ValueError"),
            att("ok1", "g", 1.0),
            att("ok2", "g", 0.0),
        ]

    strict = group()
    d = decide(strict, 0, max_steps_off_policy=2, max_group_losses=1)
    assert d.groups == {"g": GROUP_TOO_SMALL}
    assert [x.discard_reason for x in strict] == [
        "rollout_failed/TimeoutError",
        "grading_failed/ValueError",
        GROUP_TOO_SMALL,
        GROUP_TOO_SMALL,
    ]
    lenient = group()
    d = decide(lenient, 0, max_steps_off_policy=2, max_group_losses=2)
    assert d.groups == {"g": None}
    assert d.trained_ids == ["ok1", "ok2"]


def test_max_group_losses_zero_rejects_a_group_for_one_failure():
    g = [att("a", "g", 1.0), att("b", "g", 0.0), att("c", "g", None, error="rollout_failed/E")]
    d = decide(g, 0, max_steps_off_policy=2, max_group_losses=0)
    assert d.groups == {"g": GROUP_TOO_SMALL}
    assert d.trained == []


def test_unversioned_and_ungraded_attempts_are_losses_with_their_own_reason():
    g = [
        att("u", "g", 0.0, pv=None),
        att("n", "g", None),
        att("a", "g", 1.0),
        att("b", "g", 0.0),
    ]
    d = decide(g, 0, max_steps_off_policy=2, max_group_losses=2)
    assert [x.discard_reason for x in g] == [UNVERSIONED, UNGRADED, None, None]
    assert d.groups == {"g": None}
    assert g[0].lag is None


def test_async_attempts_older_than_max_steps_off_policy_are_stale():
    # Update 5 trains weights of version 5: version 3 has lag 2 (kept), version 2 lag 3.
    g = [att("v3", "g", 1.0, pv=3, step=5), att("v2", "g", 0.0, pv=2, step=5)]
    g += [att("v5", "g", 0.0, pv=5, step=5), att("v4", "g", 1.0, pv=4, step=5)]
    d = decide(g, 5, max_steps_off_policy=2, max_group_losses=1)
    assert [x.lag for x in g] == [2, 3, 0, 1]
    assert [x.discard_reason for x in g] == [None, STALE, None, None]
    assert d.trained_ids == ["v3", "v5", "v4"]


def test_a_group_that_lost_everything_is_too_small_even_within_max_group_losses():
    g = [att("a", "g", None, error="rollout_failed/E")]
    d = decide(g, 0, max_steps_off_policy=2, max_group_losses=3)
    assert d.groups == {"g": GROUP_TOO_SMALL}
    assert g[0].discard_reason == "rollout_failed/E"


def test_explicit_decisions_are_kept_and_the_rules_decide_the_rest():
    g = [att("a", "g", 1.0), att("b", "g", 1.0), att("c", "g", 1.0)]
    h = [att("x", "h", 1.0), att("y", "h", 0.0)]
    d = decide(
        g + h,
        0,
        max_steps_off_policy=2,
        max_group_losses=1,
        explicit={"a": None, "x": "filtered_by_length"},
    )
    # The loop trains "a" although its group has no variance; the others follow the rule.
    assert [x.discard_reason for x in g] == [None, NO_VARIANCE, NO_VARIANCE]
    assert d.groups["g"] is None
    # One explicit loss in h leaves a single usable attempt: no variance.
    assert [x.discard_reason for x in h] == ["filtered_by_length", NO_VARIANCE]
    assert d.groups["h"] == NO_VARIANCE


def test_deciding_again_starts_afresh():
    g = [att("a", "g", 1.0), att("b", "g", 0.0)]
    decide(g, 0, max_steps_off_policy=2, max_group_losses=1, explicit={"a": "mine"})
    assert g[0].discard_reason == "mine"
    d = decide(g, 0, max_steps_off_policy=2, max_group_losses=1)
    assert d.trained_ids == ["a", "b"]


def test_a_reason_given_when_logged_is_kept():
    g = [att("a", "g", 1.0, given="too_long"), att("b", "g", 0.0), att("c", "g", 1.0)]
    decide(g, 0, max_steps_off_policy=2, max_group_losses=1)
    assert [x.discard_reason for x in g] == ["too_long", None, None]


# -- step metrics on one hand-worked update --------------------------------------------------


def hand_update() -> list[Attempt]:
    """Update 4, max_steps_off_policy 2, max_group_losses 1 (worked out in the asserts)."""
    meta = {"termination_reason": "done"}
    return [
        # g1 trains: rewards 1 0 1 1, versions 4 4 3 2 -> lags 0 0 1 2.
        att("g1a", "g1", 1.0, pv=4, step=4, tokens=10, retries=2, duration=1.0, metadata=meta),
        att("g1b", "g1", 0.0, pv=4, step=4, tokens=20, duration=2.0),
        att("g1c", "g1", 1.0, pv=3, step=4, tokens=30, duration=3.0),
        att("g1d", "g1", 1.0, pv=2, step=4, tokens=40, truncated=True, duration=4.0),
        # g2: every reward 0.5 -> no_variance.
        *[att(f"g2{i}", "g2", 0.5, pv=4, step=4, tokens=10) for i in range(4)],
        # g3: two failures > 1 -> group_too_small; graded 1.0 and 0.0.
        att("g3a", "g3", None, pv=4, step=4, tokens=0, error="rollout_failed/TimeoutError"),
        att("g3b", "g3", None, pv=4, step=4, tokens=50, error="grading_failed/ValueError"),
        att("g3c", "g3", 1.0, pv=4, step=4, tokens=60),
        att("g3d", "g3", 0.0, pv=4, step=4, tokens=70),
        # g4: one unversioned (a loss within the limit), the rest all 0 -> no_variance.
        att("g4a", "g4", 0.0, pv=4, step=4, tokens=10),
        att("g4b", "g4", 0.0, pv=4, step=4, tokens=10),
        att("g4c", "g4", 0.0, pv=4, step=4, tokens=10),
        att("g4d", "g4", 0.0, pv=None, step=4, tokens=0),
        # g5: sampled at version 1, lag 3 > 2: both stale -> group_too_small.
        att("g5a", "g5", 1.0, pv=1, step=4, tokens=100, truncated=True),
        att("g5b", "g5", 0.0, pv=1, step=4, tokens=100),
    ]


def test_hand_worked_update_decisions():
    attempts = hand_update()
    d, _ = run_update(attempts, 4)
    assert d.groups == {
        "g1": None,
        "g2": NO_VARIANCE,
        "g3": GROUP_TOO_SMALL,
        "g4": NO_VARIANCE,
        "g5": GROUP_TOO_SMALL,
    }
    reasons = {a.attempt_id: a.discard_reason for a in attempts}
    assert reasons["g3a"] == "rollout_failed/TimeoutError"
    assert reasons["g3c"] == GROUP_TOO_SMALL
    assert reasons["g4d"] == UNVERSIONED
    assert reasons["g4a"] == NO_VARIANCE
    assert reasons["g5a"] == STALE


def test_hand_worked_update_reward_metrics():
    _, m = run_update(hand_update(), 4)
    # Trained: g1 = [1, 0, 1, 1]: mean 0.75, population std sqrt(0.1875).
    assert m["reward/mean"] == pytest.approx(0.75)
    assert m["reward/std"] == pytest.approx(math.sqrt(0.1875))
    assert m["reward/group_std_mean"] == pytest.approx(math.sqrt(0.1875))
    # Plus the graded attempts rejected with their group: g2 four 0.5s, g3 1.0 and 0.0, g4
    # three 0s (the unversioned one and the stale g5 attempts carry reasons of their own).
    assert m["reward/mean_with_unusable"] == pytest.approx((3 + 2 + 1 + 0) / 13)


def test_hand_worked_update_group_metrics():
    _, m = run_update(hand_update(), 4)
    assert m["groups/trained"] == 1
    assert m["groups/rejected"] == 4
    assert m["discard/groups/no_variance"] == 2
    assert m["discard/groups/group_too_small"] == 2
    # Bounds 0 and 1 (rewards seen: 0, 0.5, 1). None solved: g4 (all four graded at 0).
    assert m["groups/all_solved"] == 0
    assert m["groups/none_solved"] == 1
    # Rewards differ in g1, g3 (1 vs 0 among graded) and g5: 3 of 5 groups.
    assert m["groups/signal_fraction"] == pytest.approx(0.6)


def test_hand_worked_update_discards_responses_freshness():
    _, m = run_update(hand_update(), 4)
    assert m["discard/rollouts/rollout_failed/TimeoutError"] == 1
    assert m["discard/rollouts/grading_failed/ValueError"] == 1
    assert m["discard/rollouts/unversioned"] == 1
    assert m["discard/rollouts/stale"] == 2
    assert "discard/rollouts/no_variance" not in m
    assert m["rollouts/retries"] == 2
    # Responses: 16 attempts produced one (not the rollout failure, not the unversioned one);
    # tokens 100 + 40 + 180 + 30 + 200 = 550; two of them truncated.
    assert m["response/length_mean"] == pytest.approx(550 / 16)
    assert m["response/truncated_rate"] == pytest.approx(2 / 16)
    # Trained lags 0 0 1 2: mean 0.75, p90 at position 2.7 -> 1 + 0.7 * (2 - 1), max 2.
    assert m["freshness/lag_mean"] == pytest.approx(0.75)
    assert m["freshness/lag_p90"] == pytest.approx(1.7)
    assert m["freshness/lag_max"] == 2
    # Durations 1 2 3 4: p50 2.5, p90 3.7, p99 3.97.
    assert m["perf/attempt_seconds_p50"] == pytest.approx(2.5)
    assert m["perf/attempt_seconds_p90"] == pytest.approx(3.7)
    assert m["perf/attempt_seconds_p99"] == pytest.approx(3.97)
    assert m["rollout/termination_reason/done"] == 1


def test_lag_metrics_in_async_mode_match_numpy_percentiles():
    lags = [0, 1, 1, 2, 2, 2, 3, 0, 1, 2]
    g = [att(f"a{i}", "g", float(i % 2), pv=10 - lag, step=10) for i, lag in enumerate(lags)]
    _, m = run_update(g, 10, max_off=3)
    assert m["freshness/lag_mean"] == pytest.approx(np.mean(lags))
    assert m["freshness/lag_p90"] == pytest.approx(np.percentile(lags, 90))
    assert m["freshness/lag_max"] == 3


def test_discard_reasons_seen_before_count_zero_later():
    state = RunState()
    first = [att("a", "g", None, error="rollout_failed/E"), att("b", "g", 1.0)]
    first += [att("c", "g", 0.0)]
    run_update(first, 0, state=state)
    _, m = run_update(
        [att("d", "h", 1.0, step=1, pv=1), att("e", "h", 0.0, step=1, pv=1)], 1, state=state
    )
    assert m["discard/rollouts/rollout_failed/E"] == 0


def test_an_update_without_attempts_measures_counts_and_leaves_means_unmeasured():
    _, m = run_update([], 0)
    assert m["reward/mean"] is None
    assert m["groups/trained"] == 0
    assert m["groups/signal_fraction"] is None
    assert m["response/length_mean"] is None
    assert "freshness/lag_mean" not in m


# -- all solved / none solved -------------------------------------------------------------------


def test_all_solved_and_none_solved_use_the_runs_reward_bounds():
    g = [att("a", "top", 1.0), att("b", "top", 1.0)]
    g += [att("c", "bottom", 0.0), att("d", "bottom", 0.0)]
    g += [att("e", "mixed", 1.0), att("f", "mixed", 0.0)]
    _, m = run_update(g, 0)
    assert (m["groups/all_solved"], m["groups/none_solved"]) == (1, 1)
    assert m["groups/signal_fraction"] == pytest.approx(1 / 3)


def test_a_configured_reward_range_decides_what_solved_means():
    g = [att("a", "g", 1.0), att("b", "g", 1.0)]
    _, m = run_update(g, 0, state=RunState(reward_range=(0.0, 2.0)))
    assert (m["groups/all_solved"], m["groups/none_solved"]) == (0, 0)


def test_before_two_rewards_differ_the_bounds_are_zero_and_one():
    state = RunState()
    _, m = run_update([att("a", "g", 0.0), att("b", "g", 0.0)], 0, state=state)
    assert m["groups/none_solved"] == 1
    assert state.bounds() == (0.0, 1.0)
    _, m = run_update(
        [att("c", "h", 3.0, step=1, pv=1), att("d", "h", 3.0, step=1, pv=1)], 1, state=state
    )
    assert state.bounds() == (0.0, 3.0)
    assert m["groups/all_solved"] == 1


def test_failed_attempts_do_not_stop_a_group_being_all_solved():
    g = [att("a", "g", 1.0), att("b", "g", 1.0), att("c", "g", None, error="rollout_failed/E")]
    g += [att("d", "h", 0.0), att("e", "h", 1.0)]
    _, m = run_update(g, 0)
    assert m["groups/all_solved"] == 1


# -- episode metadata -----------------------------------------------------------------------------


def test_episode_numbers_average_labels_count_booleans_are_rates():
    metas = [
        {
            "termination_reason": "done",
            "turns": 3,
            "correctness": 1.0,
            "format": 0.5,
            "tool_error": False,
        },
        {
            "termination_reason": "max_turns",
            "turns": 12,
            "correctness": 0.0,
            "format": 1.0,
            "tool_error": True,
        },
        {
            "termination_reason": "done",
            "turns": 5,
            "correctness": 1.0,
            "format": 0.0,
            "tool_error": False,
            "note": None,
        },
    ]
    g = [att(f"a{i}", "g", float(i % 2), metadata=meta) for i, meta in enumerate(metas)]
    _, m = run_update(g, 0)
    assert m["rollout/turns"] == pytest.approx(20 / 3)
    assert m["rollout/termination_reason/done"] == 2
    assert m["rollout/termination_reason/max_turns"] == 1
    # Reward components, every one of them, not only the total.
    assert m["rollout/correctness"] == pytest.approx(2 / 3)
    assert m["rollout/format"] == pytest.approx(0.5)
    assert m["rollout/tool_error"] == pytest.approx(1 / 3)
    assert not any(k.startswith("rollout/note") for k in m)


def test_nested_metadata_and_numpy_scalars_become_metrics():
    metas = [{"grader": {"exact": 1, "partial": np.float32(0.5)}}, {"grader": {"exact": 0}}]
    stats = episode_stats([att(f"a{i}", "g", 0.0, metadata=x) for i, x in enumerate(metas)])
    out = stats.metrics(RunState())
    assert out["rollout/grader/exact"] == pytest.approx(0.5)
    assert out["rollout/grader/partial"] == pytest.approx(0.5)


def test_a_label_seen_before_counts_zero_when_absent():
    state = RunState()
    first = [att("a", "g", 1.0, metadata={"end": "max_turns"}), att("b", "g", 0.0)]
    run_update(first, 0, state=state)
    second = [
        att("c", "h", 1.0, step=1, pv=1, metadata={"end": "done"}),
        att("d", "h", 0.0, step=1, pv=1),
    ]
    _, m = run_update(second, 1, state=state)
    assert m["rollout/end/max_turns"] == 0
    assert m["rollout/end/done"] == 1


def test_labels_beyond_the_cap_are_counted_as_other():
    metas = [{"id": f"label-{i}"} for i in range(70)]
    stats = episode_stats([att(f"a{i}", "g", 0.0, metadata=x) for i, x in enumerate(metas)])
    out = stats.metrics(RunState())
    assert sum(1 for k in out if k.startswith("rollout/id/label-")) == 64
    assert out["rollout/id/_other"] == 6


def test_metadata_flags_what_plain_json_cannot_spell():
    s = episode_stats([])
    assert s.add({"a": 1.0, "b": "x", "c": True, "d": None}) is False
    assert s.add({"a": float("nan")}) is True
    assert s.add({"a": np.float64(1.0)}) is True
    assert s.add({"a": [1.0, float("nan")]}) is True  # a list: cleaned to be sure
    assert s.add({1: 2}) is False  # msgspec spells int keys as strings


# -- sampler / trainer agreement -----------------------------------------------------------------


def test_mismatch_metrics_on_known_logprobs():
    # Attempt A: Δ = [0, 0.5]; attempt B: Δ = [-0.5].
    pairs = [([-1.0, -2.0], [-1.0, -1.5]), ([-0.5], [-1.0])]
    m, per = mismatch_stats(pairs)
    e = math.e
    w = [1.0, e**0.5, e**-0.5]
    delta = [0.0, 0.5, -0.5]
    k3 = [wi - 1 - d for wi, d in zip(w, delta)]
    assert m["train/mismatch_kl"] == pytest.approx(sum(k3) / 3)
    assert m["train/mismatch_kl"] == pytest.approx(0.0850840, abs=1e-7)
    assert m["train/mismatch_k1"] == pytest.approx(0.0, abs=1e-15)
    assert m["train/logprob_abs_diff"] == pytest.approx(1 / 3)
    assert m["train/mismatch_ess"] == pytest.approx(sum(w) ** 2 / (3 * sum(x * x for x in w)))
    assert m["train/mismatch_ess"] == pytest.approx(0.8644352, abs=1e-7)
    seq = [e**0.5, e**-0.5]  # w per attempt = exp(ΣΔ)
    assert m["train/mismatch_ess_seq"] == pytest.approx(sum(seq) ** 2 / (2 * (e + 1 / e)))
    # Each sequence's ratio: its token mean of exp(|Δ|) (NeMo-RL's token_mult_prob_error).
    tme_a, tme_b = (1 + e**0.5) / 2, e**0.5
    assert per[0] == {
        "kl": pytest.approx(k3[1] / 2),
        "abs_diff": pytest.approx(0.25),
        "tokens": 2,
        "tme": pytest.approx(tme_a),
    }
    assert per[1] == {
        "kl": pytest.approx(k3[2]),
        "abs_diff": pytest.approx(0.5),
        "tokens": 1,
        "tme": pytest.approx(tme_b),
    }
    assert m["train/mismatch_tme"] == pytest.approx((1 + 2 * e**0.5) / 3)
    assert m["train/mismatch_seq_tme_max"] == pytest.approx(tme_b)
    assert m["train/mismatch_seq_tme_p50"] == pytest.approx((tme_a + tme_b) / 2)
    assert m["train/mismatch_seq_over"] == 1.0  # both sequences past 1.05


def test_mismatch_tail_counts_the_sequences_past_the_line():
    # Nine sequences agree to 1e-3 per token, one is off by 0.7 per token: the token-mean KL
    # stays small while a tenth of the sequences are far off, which the tail metrics show.
    ok = [([-1.0] * 20, [-1.001] * 20)] * 9
    off = [([-1.0] * 20, [-1.7] * 20)]
    m, per = mismatch_stats(ok + off)
    assert m["train/mismatch_seq_over"] == pytest.approx(0.1)
    assert m["train/mismatch_seq_tme_max"] == pytest.approx(math.exp(0.7))
    assert m["train/mismatch_seq_tme_p50"] == pytest.approx(math.exp(0.001))
    assert per[9]["tme"] == pytest.approx(math.exp(0.7)) and per[0]["tme"] < 1.01


def test_k1_has_the_sign_of_sampler_minus_trainer():
    m, _ = mismatch_stats([([-1.0, -1.0], [-1.5, -2.0])])  # trainer lower: Δ = -0.5, -1
    assert m["train/mismatch_k1"] == pytest.approx(0.75)
    assert m["train/logprob_abs_diff"] == pytest.approx(0.75)


def test_identical_logprobs_give_zero_kl_and_full_ess():
    lp = [-0.3, -1.2, -2.5]
    m, _ = mismatch_stats([(lp, list(lp)), (lp[:1], lp[:1])])
    assert m["train/mismatch_kl"] == 0
    assert m["train/mismatch_ess"] == pytest.approx(1.0)
    assert m["train/mismatch_ess_seq"] == pytest.approx(1.0)


def test_huge_log_ratios_are_clamped_so_weights_stay_finite():
    m, _ = mismatch_stats([([-500.0], [0.0]), ([-1.0], [-1.0])])
    assert math.isfinite(m["train/mismatch_kl"])
    assert 0 < m["train/mismatch_ess"] <= 1
    assert 0 < m["train/mismatch_ess_seq"] <= 1


def test_logprobs_as_numpy_arrays_match_lists():
    s = [[-1.0, -2.0], [-0.5]]
    t = [[-1.0, -1.5], [-1.0]]
    from_lists, _ = mismatch_stats(list(zip(s, t)))
    arrays = [(np.array(a, dtype=np.float32), np.array(b)) for a, b in zip(s, t)]
    from_arrays, _ = mismatch_stats(arrays)
    for k, v in from_lists.items():
        assert from_arrays[k] == pytest.approx(v, rel=1e-6)


def test_step_metrics_entropy_and_mismatch_over_the_update():
    a = att("a", "g", 1.0, sampler=[-1.0, -2.0])
    b = att("b", "g", 0.0, sampler=[-0.5])
    c = att("c", "g", 1.0, sampler=[-3.0])  # no trainer logprobs: entropy only
    _, m = run_update([a, b, c], 0, tlp={"a": [-1.0, -1.5], "b": [-1.0]})
    assert m["sampling/entropy_estimate"] == pytest.approx(6.5 / 4)
    assert m["train/mismatch_kl"] == pytest.approx(0.0850840, abs=1e-7)
    assert a.mismatch["tokens"] == 2 and c.mismatch is None


def test_trainer_logprobs_of_another_length_are_left_out():
    a = att("a", "g", 1.0, sampler=[-1.0, -2.0])
    b = att("b", "g", 0.0, sampler=[-0.5])
    _, m = run_update([a, b], 0, tlp={"a": [-1.0], "b": [-1.0]})
    assert m["train/mismatch_k1"] == pytest.approx(0.5)
    assert a.mismatch is None


finite = st.floats(min_value=-30, max_value=0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.tuples(finite, finite), min_size=1, max_size=6), min_size=1, max_size=5)
)
def test_k3_is_never_negative_and_ess_lies_in_zero_one(attempts):
    pairs = [([s for s, _ in a], [t for _, t in a]) for a in attempts]
    m, per = mismatch_stats(pairs)
    assert m["train/mismatch_kl"] >= 0
    assert all(p["kl"] >= 0 for p in per)
    assert 0 < m["train/mismatch_ess"] <= 1 + 1e-12
    assert 0 < m["train/mismatch_ess_seq"] <= 1 + 1e-12


def test_non_finite_rewards_are_compared_one_by_one():
    g = [att("a", "g", math.nan), att("b", "g", math.nan)]  # the same: no signal
    g += [att("c", "h", math.nan), att("d", "h", 1.0)]  # differ
    g += [att("e", "k", 1.0), att("f", "k", 1.0)]
    d, m = run_update(g, 0)
    assert d.groups == {"g": NO_VARIANCE, "h": None, "k": NO_VARIANCE}
    assert m["groups/signal_fraction"] == pytest.approx(1 / 3)
    assert m["groups/all_solved"] == 1  # k; bounds from the finite rewards: 0 and 1
    assert math.isnan(m["reward/mean"])


meta_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-5, 5),
    st.booleans(),
    st.sampled_from(["done", "max_turns", "error"]),
    st.none(),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 3), max_size=2),
)
metas_strategy = st.lists(
    st.dictionaries(st.sampled_from(["turns", "end", "score", "flag"]), meta_values, max_size=4),
    max_size=12,
)


def _same(x: dict, y: dict) -> bool:
    return x.keys() == y.keys() and all(
        x[k] == y[k] or (math.isnan(x[k]) and math.isnan(y[k])) for k in x
    )


@settings(max_examples=80, deadline=None)
@given(metas_strategy)
def test_columns_taken_at_once_match_attempt_by_attempt(metas):
    at_once = EpisodeStats()
    odd = at_once.add_all(metas)
    one_by_one = EpisodeStats()
    flagged = [i for i, m in enumerate(metas) if m and one_by_one.add(m)]
    assert sorted(odd) == flagged
    with np.errstate(all="ignore"):
        assert _same(at_once.metrics(RunState()), one_by_one.metrics(RunState()))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(meta_values, meta_values), min_size=1, max_size=10))
def test_columns_of_metadata_with_the_same_keys_match_attempt_by_attempt(pairs):
    metas = [{"x": x, "y": y} if i % 2 else {"y": y, "x": x} for i, (x, y) in enumerate(pairs)]
    at_once = EpisodeStats()
    odd = at_once.add_all(metas)
    one_by_one = EpisodeStats()
    flagged = [i for i, m in enumerate(metas) if one_by_one.add(m)]
    assert sorted(odd) == flagged
    with np.errstate(all="ignore"):
        assert _same(at_once.metrics(RunState()), one_by_one.metrics(RunState()))
