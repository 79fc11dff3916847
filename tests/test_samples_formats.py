"""Every framework's sample dump, read into attempts whose group statistics match values
worked out by hand (fixtures: tests/data/samples/, written by each framework's own code)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from rlvitals.model import RunData
from rlvitals.readers import read
from rlvitals.readers.samples import find, open_samples

DATA = Path(__file__).parent / "data" / "samples"
SQRT_2_9 = math.sqrt(2 / 9)  # population std of {1, 0, 0}: mean 1/3, deviations 2/3, 1/3, 1/3


def at(run: RunData, name: str, step: int) -> float | None:
    s = run.series(name)
    return None if s is None else s.at(step)


def only_samples(d: Path) -> RunData:
    run = RunData(source=str(d), format="none")
    open_samples(d, run).poll(final=True)
    return run


def test_verl_rollout_dump_groups_by_input():
    run = read(DATA / "verl" / "metrics.jsonl", samples=DATA / "verl" / "rollout")
    a = run.attempts
    assert a is not None and len(a) == 12
    # Step 1: "2+2" scored 1, 0, 0 (learnable), "3+3" scored 1, 1, 1 (no variance, all solved).
    assert at(run, "reward/group_std_mean", 1) == pytest.approx(SQRT_2_9)
    assert at(run, "reward/mean_with_unusable", 1) == pytest.approx(4 / 6)
    assert at(run, "groups/signal_fraction", 1) == 0.5
    assert at(run, "groups/all_solved", 1) == 1 and at(run, "groups/none_solved", 1) == 0
    assert at(run, "discard/groups/no_variance", 1) == 1
    # Step 2: "2+2" all 0 (none solved), "3+3" 1, 0, 1.
    assert at(run, "reward/group_std_mean", 2) == pytest.approx(SQRT_2_9)
    assert at(run, "reward/mean_with_unusable", 2) == pytest.approx(2 / 6)
    assert at(run, "groups/none_solved", 2) == 1 and at(run, "groups/all_solved", 2) == 0
    # The file logger's own mean wins over ours (critic/score/mean -> reward/mean).
    assert at(run, "reward/mean", 1) == pytest.approx(4 / 6)
    # Trained: the learnable group of each step; the no-variance groups are rejected.
    rows = a.rows_at(1)
    assert a.trained[rows].tolist() == [True] * 3 + [False] * 3
    assert a.discard_reasons == ["no_variance"]
    assert a.policy_version.tolist() == [-1] * 12  # verl records no sampler version
    assert not run.has("freshness/lag_mean") and not run.has("rollouts/retries")
    # reward extra infos: numbers become rollout/<key>; text stays in the file.
    assert at(run, "rollout/acc", 1) == pytest.approx(4 / 6)
    assert not run.names("rollout/pred")
    texts = [t.final_text() for t in run.transcripts.iter_step(2)]
    assert texts[:3] == ["The answer is 5", "The answer is 3", "The answer is 1"]


def test_trl_output_dir_is_one_run_with_completions_as_attempts():
    run = read(DATA / "trl" / "output_dir")
    assert run.format == "trl"
    a = run.attempts
    assert a is not None and len(a) == 8
    # total reward = accuracy + short (weights 1): step 1 P1 1.5, 0.5 ; P2 0.5, 0.5.
    assert a.reward[a.rows_at(1)].tolist() == [1.5, 0.5, 0.5, 0.5]
    assert at(run, "reward/group_std_mean", 1) == pytest.approx(0.5)
    assert at(run, "reward/mean_with_unusable", 1) == pytest.approx(0.75)
    assert at(run, "groups/none_solved", 1) == 1  # 0.5 is the lowest total seen
    # Step 2: P1 1.5, 1.5 (all solved), P2 1.0, 0.5.
    assert at(run, "groups/all_solved", 2) == 1
    assert at(run, "reward/group_std_mean", 2) == pytest.approx(0.25)
    assert at(run, "reward/mean_with_unusable", 2) == pytest.approx(1.125)
    # TRL's own numbers stay theirs: reward -> reward/mean, 1 - frac_reward_zero_std.
    assert at(run, "reward/mean", 2) == pytest.approx(1.125)
    assert at(run, "groups/signal_fraction", 1) == pytest.approx(0.5)
    # reward components per attempt: rollout/<func>
    assert at(run, "rollout/accuracy", 1) == pytest.approx(0.25)
    assert at(run, "rollout/short", 2) == pytest.approx(0.375)
    t = next(iter(run.transcripts.iter_step(1)))
    assert (t.generations[0].prompt, t.final_text(), t.reward) == ("Count to three.", "1 2 3", 1.5)


def test_prime_rl_traces_all_and_effective():
    run = read(DATA / "prime-rl" / "output" / "metrics.jsonl")
    assert run.format == "prime-rl"
    a = run.attempts
    assert a is not None and len(a) == 4
    # g0 rewards 1, 0 (effective: trained); g1 1, 1 (not in effective: no variance).
    assert a.trained.tolist() == [True, True, False, False]
    assert at(run, "reward/group_std_mean", 1) == pytest.approx(0.5)
    assert at(run, "reward/mean_with_unusable", 1) == pytest.approx(0.75)
    assert at(run, "groups/all_solved", 1) == 1
    assert at(run, "response/length_mean", 1) == pytest.approx((5 + 7 + 3 + 3) / 4)
    assert at(run, "response/truncated_rate", 1) == pytest.approx(1 / 4)  # finish "length"
    assert a.policy_version.tolist() == [1, 1, 0, 0] and a.lag.tolist() == [0, 0, 1, 1]
    assert at(run, "freshness/lag_mean", 1) == 0.0  # trained attempts only
    assert at(run, "sampling/entropy_estimate", 1) == pytest.approx(0.25)
    t = list(run.transcripts.iter_step(1))
    assert "4 5 6 7 8 9 10" in t[1].final_text() and t[1].trained is True
    assert t[2].trained is False


def test_nemo_rl_train_data_mismatch_per_attempt():
    run = only_samples(DATA / "nemo-rl" / "logs")
    a = run.attempts
    assert a is not None and len(a) == 4
    # prompt tokens [1,2,3]: rewards 1, 0 ; [1,4,5]: 0, 0.
    assert at(run, "reward/group_std_mean", 1) == pytest.approx(0.5)
    assert at(run, "reward/mean_with_unusable", 1) == pytest.approx(0.25)
    assert at(run, "groups/none_solved", 1) == 1
    # Δ = prev - generation = +0.25, -0.25 on the two generated tokens of every sample.
    k3 = ((math.exp(0.25) - 1 - 0.25) + (math.exp(-0.25) - 1 + 0.25)) / 2
    assert at(run, "train/mismatch_kl", 1) == pytest.approx(k3)
    assert at(run, "train/logprob_abs_diff", 1) == pytest.approx(0.25)
    assert at(run, "train/mismatch_k1", 1) == pytest.approx(0.0, abs=1e-12)
    assert a.response_tokens.tolist() == [2, 2, 2, 2]
    assert not run.has("response/truncated_rate")  # the dump does not say
    t = next(iter(run.transcripts.iter_step(1)))
    assert t.final_text() == "4" and t.generations[0].prompt_text() == "What is 2+2?"


def test_tinker_rollout_summaries():
    run = read(DATA / "tinker" / "log" / "metrics.jsonl")
    a = run.attempts
    assert a is not None and len(a) == 8
    # group 0: 1, 0, 1, 1 (std sqrt(3/16)); group 1: all 0.
    assert at(run, "reward/group_std_mean", 0) == pytest.approx(math.sqrt(3 / 16))
    assert at(run, "reward/mean_with_unusable", 0) == pytest.approx(3 / 8)
    assert at(run, "groups/none_solved", 0) == 1
    assert at(run, "response/length_mean", 0) == pytest.approx((4 + 5 + 6 + 7) / 4)
    assert a.lag.tolist() == [0] * 8  # sampling_client_step 0 at iteration 0
    assert not run.has("response/truncated_rate")  # the summaries do not say
    assert at(run, "rollout/format", 0) == 1.0


def test_miles_debug_rollout_data():
    run = only_samples(DATA / "miles" / "dump")
    a = run.attempts
    assert a is not None and len(a) == 12
    # rollout 0: group 0 rewards 1, 0, 0, 1 ; group 1 all 1 ; sample 1 truncated.
    assert at(run, "reward/group_std_mean", 0) == pytest.approx(0.5)
    assert at(run, "groups/all_solved", 0) == 1
    assert at(run, "response/truncated_rate", 0) == pytest.approx(1 / 8)
    assert at(run, "rollout/status/truncated", 0) == 1
    # rollout 1: one group of zeros: no signal at all.
    assert at(run, "groups/signal_fraction", 1) == 0.0
    assert at(run, "groups/none_solved", 1) == 1
    assert a.policy_version.tolist() == [0] * 8 + [1] * 4
    t = list(run.transcripts.iter_step(0))
    assert t[1].final_text() == "answer 0.1" and t[1].generations[0].finish_reason == "length"


@pytest.mark.parametrize(
    ("log", "dump"),
    [
        ("trl/output_dir", "trl/output_dir/completions"),
        ("trl/output_dir/trainer_state.json", "trl/output_dir/completions"),
        ("prime-rl/output/metrics.jsonl", "prime-rl/output/rollouts"),
        ("tinker/log/metrics.jsonl", "tinker/log"),
        ("nemo-rl/logs/tensorboard", "nemo-rl/logs"),
        ("miles/dump/events", "miles/dump/rollout_data"),
    ],
)
def test_default_layout_is_found_beside_the_log(log, dump):
    got = find(DATA / log)  # a TensorBoard or events folder need not exist for the search
    assert got is not None
    assert got[0].resolve() == (DATA / dump).resolve()


def test_verl_dump_needs_the_flag():
    assert find(DATA / "verl" / "metrics.jsonl") is None
    assert read(DATA / "verl" / "metrics.jsonl").attempts is None


def test_attempts_table_group_sizes_feed_the_group_checks():
    run = read(DATA / "tinker" / "log" / "metrics.jsonl")
    a = run.attempts
    counts = np.bincount(a.group_code)
    assert counts.tolist() == [4, 4]
