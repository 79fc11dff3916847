"""``rlvitals.integrations.miles.log_rollout`` with objects shaped exactly like Miles' Sample
(tests/miles_sample.py, copied from radixark/miles miles/utils/types.py)."""

from __future__ import annotations

import math
import warnings
from types import SimpleNamespace

import pytest

from miles_sample import Sample, make
from rlvitals.integrations import miles
from rlvitals.readers import read


@pytest.fixture
def args(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVITALS_OUTPUT_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("RLVITALS_RUN_NAME", raising=False)
    yield SimpleNamespace(reward_key=None, wandb_group="grpo-math", dump_details=None)
    miles.close()


def test_log_rollout_writes_samples_as_attempts(args, tmp_path):
    # rollout 0: group 0 rewards 1, 0, 0, 1 (one truncated), group 1 all 1
    s0 = [make(0, i, r, version=0) for i, r in enumerate([1.0, 0.0, 0.0, 1.0])]
    s0 += [make(1, 4 + i, 1.0, version=0) for i in range(4)]
    s0[1].status = Sample.Status.TRUNCATED
    assert miles.log_rollout(0, args, s0, {"rollout/raw_reward": 0.75}, 12.5) is False
    # rollout 1: one aborted sample, one removed, weights one version behind
    s1 = [make(0, i, r, version=0, length=2) for i, r in enumerate([1.0, 0.0, 1.0, 0.0])]
    s1[2].status = Sample.Status.ABORTED
    s1[3].remove_sample = True
    assert miles.log_rollout(1, args, s1, {}, 3.0) is False
    miles.close()
    run = read(tmp_path / "runs" / "grpo-math")
    a = run.attempts
    assert len(a) == 12
    s = run.series
    assert s("reward/group_std_mean").at(0) == pytest.approx(0.5)  # std of 1, 0, 0, 1
    assert s("groups/all_solved").at(0) == 1
    assert s("response/truncated_rate").at(0) == pytest.approx(1 / 8)
    assert s("rollout/raw_reward").at(0) == 0.75
    assert s("perf/sampling_seconds").at(0) == 12.5
    # sampler logprobs -0.5 per token: the entropy estimate
    assert s("sampling/entropy_estimate").at(0) == pytest.approx(0.5)
    # rollout 1: lag 1 (version 0 trained in update 1), the aborted one failed
    assert s("freshness/lag_mean").at(1) == 1.0
    assert s("discard/rollouts/rollout_failed/aborted").at(1) == 1
    reasons = {a.discard_reasons[c] for c in a.discard_code[a.step == 1] if c >= 0}
    assert {"rollout_failed/aborted", "removed"} <= reasons
    assert run.info["status"] == "finished"
    t = (tmp_path / "runs" / "grpo-math" / "transcripts" / "step-000000.json").read_text()
    assert "answer 0.1" in t and "question 0" in t


def test_dict_reward_read_at_reward_key(args, tmp_path):
    args.reward_key = "acc"
    s = [make(0, i, 0.0) for i in range(2)]
    s[0].reward = {"acc": 1.0, "format": 0.2}
    s[1].reward = {"acc": 0.0, "format": 0.2}
    miles.log_rollout(0, args, s, None, None)
    miles.close()
    run = read(tmp_path / "runs" / "grpo-math")
    assert run.attempts.reward.tolist() == [1.0, 0.0]


def test_a_broken_call_warns_and_never_raises(args):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        assert miles.log_rollout("x", args, [make(0, 0, 1.0)], {}, 1.0) is False
        assert miles.log_rollout(0, args, [object()], {}, 1.0) is False
    assert any("rlvitals" in str(w.message) for w in got)


def test_a_rollout_id_going_backwards_is_skipped(args, tmp_path):
    miles.log_rollout(3, args, [make(0, 0, 1.0), make(0, 1, 0.0)], {}, 1.0)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        miles.log_rollout(2, args, [make(0, 0, 1.0)], {}, 1.0)
    assert any("already written" in str(w.message) for w in got)
    miles.close()
    run = read(tmp_path / "runs" / "grpo-math")
    assert run.attempts.step.tolist() == [3, 3]
    assert not math.isnan(run.series("reward/mean").at(3))
