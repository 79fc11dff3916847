"""Each class of miss of issue 12 on a real run of the development corpus (benchmarks/corpus/:
runs made by other tools, labelled in manifest.toml), and console logs read by the real
console reader for the events between step lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlvitals import read
from rlvitals.checks import run_checks, severity_rank

CORPUS = Path(__file__).resolve().parents[1] / "benchmarks" / "corpus"
TRL = CORPUS / "peers" / "trl-keys.toml"  # rl-doctor's records use TRL's key names

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="benchmarks/corpus/ not here")


def judge(rel: str, **kw):
    return run_checks(read(str(CORPUS / rel), **kw))


def alarms(rep):
    return [f"{f.check}: {f.title}" for f in rep.at_least("warn")]


def test_a_dominating_auxiliary_reward_is_an_exploit_led_by_its_evidence():
    # TRL 1.16 GRPO: exact match plus a 'stop early' bonus weighted 2x; the policy emits EOS.
    rep = judge("trl/grpo-short-bonus")
    assert rep.verdict == "exploit_suspected", alarms(rep)
    top = rep.findings[0]
    assert top.check == "components" and top.evidence["component"] == "short_bonus"
    assert "exact" in top.title and top.severity == "fail"
    assert not [f for f in rep.findings if f.verdict in ("learning", "mastered")]
    ranks = [severity_rank(f.severity) for f in rep.findings]
    assert ranks == sorted(ranks, reverse=True)  # no reassurance before an alarm
    ent = next(f for f in rep.findings if f.metric == "train/entropy")
    assert ent.severity == "fail" and "not sharpening" in ent.title


def test_a_grader_loophole_shows_as_replies_collapsing_while_reward_rises():
    rep = judge("trl/grpo-loophole")
    assert rep.verdict in ("exploit_suspected", "collapse"), alarms(rep)
    assert any("stopping early" in f.title for f in rep.at_least("warn"))


def test_an_exploited_run_never_calls_its_reward_rise_learning_without_doubt():
    # The loophole run's reward rises (the reward check says so) while the grader pays for
    # prefixes: that reassurance is qualified, and the healthy runs keep theirs plain.
    rep = judge("trl/grpo-loophole")
    assert rep.verdict == "exploit_suspected"
    good = [f for f in rep.findings if f.verdict in ("learning", "mastered")]
    assert good and all("call into doubt" in f.title for f in good)
    assert all(f.evidence["doubted_by"] == "exploit_suspected" for f in good)
    healthy = judge("trl/grpo-healthy")
    assert not [f for f in healthy.findings if "doubt" in f.title]


@pytest.mark.parametrize(
    "rel, verdicts",
    [
        ("public/trl-3857-zero-std.log", {"no_signal"}),
        ("public/msswift-5890-truncation.log", {"out_of_room", "too_easy"}),
        # One normal update, then every group zero-variance with loss and gradient 0.
        ("public/memgen-33-zero-reward.log", {"no_signal"}),
        # Three updates: the format component rises at each while accuracy falls at each.
        ("public/openr1-255-format-dominates.log", {"exploit_suspected"}),
    ],
)
def test_a_short_pasted_log_is_judged_on_its_levels(rel, verdicts):
    rep = judge(rel)
    assert rep.verdict in verdicts, alarms(rep)
    assert rep.at_least("warn")
    assert all("update" in f.title and " read" in f.title for f in rep.at_least("warn"))


def test_a_few_groups_agreeing_by_chance_early_is_not_a_vanished_signal():
    # TRL, 4 groups an update: at step 3 all four happen to agree, the gradient is not 0.
    data = read(str(CORPUS / "trl/grpo-high-lr"))
    rep = run_checks(data.until(3))
    assert not [f for f in rep.findings if "vanished" in f.title], alarms(rep)


def test_a_null_reward_from_the_sink_is_named_non_finite():
    # TRL logs the reward function's NaN as null rewards (frac_reward_zero_std 0).
    rep = judge("trl/grpo-nan-reward/trainer_state.json")
    assert rep.verdict == "non_finite", alarms(rep)
    f = rep.findings[0]
    assert f.metric.startswith("reward") and f.first_step == 20
    assert not [g for g in rep.at_least("warn") if g.verdict in ("too_hard", "no_signal")]


def test_a_component_rising_after_the_task_plateaued_is_an_exploit():
    # rlprobe format_gaming: correctness learned, then flat from step 100 while the format
    # component ramps to its ceiling.
    rep = judge("peers/rlprobe/format_gaming-s5")
    assert rep.verdict == "exploit_suspected", alarms(rep)
    f = rep.findings[0]
    assert f.check == "components" and f.evidence["component"] == "format"
    assert 90 <= f.first_step <= 110 and "stopped rising" in f.title


def test_a_reward_leaving_its_components_with_length_is_an_exploit():
    # rlprobe reward_hack_length: from step 100 the reward tracks reply length, not the
    # correctness and format components that explained it before.
    rep = judge("peers/rlprobe/reward_hack_length-s5")
    assert rep.verdict == "exploit_suspected", alarms(rep)
    f = next(f for f in rep.findings if f.check == "components")
    assert f.severity == "fail" and "no logged component" in f.title and "grew" in f.title


@pytest.mark.parametrize("rel", ["peers/rlprobe/healthy-s5", "trl/grpo-two-weighted"])
def test_components_that_rise_together_raise_no_exploit(rel):
    rep = judge(rel)
    assert not [f for f in rep.at_least("warn") if f.check == "components"], alarms(rep)


def test_a_kl_no_larger_than_the_entropy_fall_is_sharpening_not_drift():
    # TRL, two weighted rewards, healthy: a random-init (near-uniform) reference, so the KL of
    # ~0.97 is the entropy's fall (3.78 -> 2.78) and nothing more.
    rep = judge("trl/grpo-two-weighted")
    f = next(f for f in rep.findings if f.check == "reference")
    assert f.severity == "info" and "entropy's fall" in f.title, alarms(rep)
    assert not rep.at_least("warn")


def test_a_kl_beyond_the_entropy_fall_is_still_drift():
    # rlprobe kl_blowup: KL to 3.5 while the entropy hardly moves.
    rep = judge("peers/rlprobe/kl_blowup-s5")
    f = next(f for f in rep.findings if f.check == "reference")
    assert f.severity == "fail" and f.verdict == "drift" and "entropy" not in f.title


def test_a_flaky_nan_reward_seen_only_in_the_completions_is_named_non_finite():
    # A grader returning NaN for ~30% of replies from step 15: TRL's nanmean keeps every
    # logged scalar finite; only the completions parquet holds the NaN.
    rep = judge("trl/grpo-flaky-nan")
    assert rep.verdict == "non_finite", alarms(rep)
    f = rep.findings[0]
    assert f.metric == "reward/nonfinite_count" and f.first_step == 15
    assert "sample dump" in f.title


def test_a_healthy_dump_counts_no_non_finite_reward():
    d = read(str(CORPUS / "trl/grpo-healthy"))
    s = d.series("reward/nonfinite_count")
    assert s is not None and len(s) and not s.values.any()
    assert not [f for f in run_checks(d).findings if f.check == "nonfinite"]


@pytest.mark.parametrize(
    "rel",
    [
        "trl/grpo-healthy",
        "trl/dr_grpo-healthy-iter2",
        "trl/rloo-healthy",
        "peers/rldoctor/healthy-s3/records.jsonl",
        "peers/rlwatch/healthy-phase-s0/metrics.db",
        "peers/rlprobe/healthy-s5",
    ],
)
def test_healthy_runs_from_other_tools_raise_nothing(rel):
    # The TRL ones truncate most replies at first (a random-init model) and stop soon after.
    # Judged as of their last record, as the benchmark does (rlwatch records no end state).
    data = read(str(CORPUS / rel))
    t = data.series("time")
    rep = run_checks(data, now=float(t.values[-1]) if t is not None and len(t) else None)
    assert not rep.at_least("warn"), alarms(rep)


def test_a_silent_store_with_no_end_state_is_stalled_or_ended():
    # rlwatch's store records no end state. A minute of silence after steps every 5 ms: a
    # warning naming both readings; read days later: information, and the run is judged on
    # what it logged (the healthy phase: learning).
    data = read(str(CORPUS / "peers/rlwatch/healthy-phase-s0/metrics.db"))
    last = float(data.series("time").values[-1])
    soon = run_checks(data, now=last + 60)
    f = next(f for f in soon.findings if f.check == "liveness")
    assert (f.severity, f.verdict) == ("warn", "stalled") and "stalled or ended" in f.title
    assert "records no end state" in f.title and f.evidence["end_state_recorded"] is False
    later = run_checks(data, now=last + 3 * 86400)
    f = next(f for f in later.findings if f.check == "liveness")
    assert f.severity == "info" and "stalled or ended" in f.title
    assert later.verdict == "learning" and not later.at_least("warn")


def test_gradient_explosions_are_unstable_once_they_recur_live_too():
    # rl-doctor's grad_spikes scenario: norms 90x their running median from step 52, seven in
    # all. One is a hypothesis (info, DESIGN.md); the third (step 78) makes them recur:
    # unstable updates, dated at the first.
    data = read(str(CORPUS / "peers/rldoctor/grad_spikes-s3/records.jsonl"))
    first = next(f for f in run_checks(data.until(52)).findings if "exploded" in f.title)
    assert (first.verdict, first.severity, first.first_step) == ("unstable", "info", 52)
    for rep in (run_checks(data), run_checks(data.until(78))):
        f = next(f for f in rep.at_least("warn") if "exploded" in f.title)
        assert (f.verdict, f.first_step, f.metric) == ("unstable", 52, "train/grad_norm")
    assert "spikes" not in " ".join(f.title for f in run_checks(data).findings)


def test_saturated_groups_are_mastered_and_said():
    # rl-doctor's saturated_groups scenario: held-out accuracy rises 0.43 -> 0.95 while the
    # share of zero-variance groups passes 0.5 at step 142 and 0.95 by step 220. Good news,
    # said as information dated near the onset, live too: a run that learned its tasks is no
    # failure (DESIGN.md: every healthy run stays quiet).
    path = CORPUS / "peers/rldoctor/saturated_groups-s3/records.jsonl"
    data = read(str(path), mapping=TRL)
    rep = run_checks(data)
    assert rep.verdict == "mastered", alarms(rep)
    f = next(f for f in rep.findings if f.check == "groups")
    assert f.verdict == "mastered" and 142 <= f.first_step <= 152 and "used up" in f.title
    assert not [f for f in run_checks(data.until(141)).findings if f.verdict == "mastered"]
    # (rl-doctor's records carry no clock: a prefix is judged at its file's time.)
    late = run_checks(data.until(160), now=path.stat().st_mtime)
    assert late.verdict == "mastered" and not late.at_least("warn")


def test_truncation_creeping_to_five_percent_is_said_not_warned():
    # rl-doctor's truncation scenario: completions/clipped_ratio climbs 0.5% -> 5% by step 101
    # (its label's onset). Healthy runs' shares creep to 10-11% as replies lengthen (the
    # families), so a creep warns from 15% (science.md 5's paging line) with the reward flat:
    # this one is under it, and nothing warns of room, live or finished.
    data = read(str(CORPUS / "peers/rldoctor/truncation-s3/records.jsonl"), mapping=TRL)
    for upto in (103, None):
        rep = run_checks(data if upto is None else data.until(upto))
        assert not [f for f in rep.at_least("warn") if f.verdict == "out_of_room"], alarms(rep)


def test_junk_pinned_at_one_score_is_not_mastered():
    # TRL with a 25x learning rate: replies turn to junk that all score exactly 0, after
    # slightly negative rewards. The reward "rose" by less than its spread: not tasks used up.
    rep = judge("trl/grpo-high-lr")
    assert rep.verdict == "collapse", alarms(rep)
    assert not [f for f in rep.at_least("warn") if f.verdict == "mastered"]


def test_a_gradient_norm_that_settles_is_no_explosion():
    # The same kind of run without the spikes: the norm falls from 0.55 to 0.31 as it settles.
    rep = judge("peers/rldoctor/healthy-s3/records.jsonl")
    assert not [f for f in rep.findings if f.metric == "train/grad_norm"]


def test_a_transient_truncated_start_is_not_out_of_room():
    rep = judge("trl/grpo-healthy")
    f = next(f for f in rep.findings if f.check == "episodes")
    assert f.severity == "info" and "transient" in f.title


def test_a_plateau_and_an_entropy_bound_plateau_are_told_apart():
    # rl-doctor's plateau: the reward rose, then levelled off from step ~63: said (a healthy
    # run's rise saturates too: the families), with the run read as learning.
    plateau = judge("peers/rldoctor/plateau-s3/records.jsonl")
    f = next(f for f in plateau.findings if "stopped improving" in f.title)
    assert (f.verdict, f.severity, plateau.verdict) == ("not_learning", "info", "learning")
    rep = judge("peers/rldoctor/entropy_collapse-s3/records.jsonl")
    assert rep.verdict == "collapse" and rep.findings[0].check == "policy"


def test_tasks_too_hard_are_the_cause_not_the_format_component_they_leave():
    rep = judge("peers/rldoctor/too_hard-s3/records.jsonl")
    assert rep.verdict == "too_hard", alarms(rep)
    f = next(f for f in rep.findings if f.check == "components")
    assert f.severity == "info" and f.evidence["tasks_too_hard"] is True


# -- events between the step lines, read by the console reader -----------------------------


def _log(tmp_path: Path, name: str, lines: list[str]) -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def _steps(n: int, t0: int = 0) -> list[str]:
    return [
        f"2026-12-01 10:{(t0 + i) // 6:02d}:{(t0 + i) % 6 * 10:02d} "
        f"{{'loss': 0.01, 'reward': {0.3 + 0.01 * i}, 'frac_reward_zero_std': 0.1}}"
        for i in range(n)
    ]


def test_a_traceback_after_the_last_step_line_is_a_crash(tmp_path):
    lines = [*_steps(6), "2026-12-01 10:01:00 Traceback (most recent call last):",
             '  File "train.py", line 10, in <module>', "torch.OutOfMemoryError: CUDA out of memory"]  # fmt: skip
    rep = run_checks(read(str(_log(tmp_path, "crash.log", lines)), format="console"))
    assert rep.verdict == "crashed"
    assert "out of memory" in rep.findings[0].title.lower()
    assert not [f for f in rep.findings if f.verdict == "stalled"]


def test_503s_for_minutes_after_the_last_step_mean_the_engine_died(tmp_path):
    err = [
        f"2026-12-01 10:{1 + k // 4:02d}:{k % 4 * 15:02d} ERROR 503 Service Unavailable"
        for k in range(16)
    ]
    rep = run_checks(read(str(_log(tmp_path, "dead.log", [*_steps(6), *err])), format="console"))
    f = rep.findings[0]
    assert f.check == "liveness" and "engine died" in f.title, [g.title for g in rep.findings]


def test_a_burst_of_503s_is_healthy(tmp_path):
    burst = [f"2026-12-01 10:00:{31 + k:02d} ERROR 503 Service Unavailable" for k in range(8)]
    lines = [*_steps(4), *burst, *_steps(4, t0=4)]
    rep = run_checks(read(str(_log(tmp_path, "burst.log", lines)), format="console"))
    assert not [f for f in rep.findings if "engine" in f.title]


def test_groups_agreeing_at_the_token_limit_are_out_of_room_not_mastered():
    # TRL 1.16, reward = reply length / 16 with 12 tokens allowed: every reply truncated, every
    # attempt 0.75. The groups agree at the score the limit allows: the limit is the cause;
    # and "different answers to one task rewarded" (every answer is right here) is a
    # hypothesis no number confirms, not EXPLOIT SUSPECTED (issue 27).
    rep = judge("trl/grpo-length-reward")
    assert rep.verdict == "out_of_room", alarms(rep)
    g = next(f for f in rep.findings if f.check == "groups" and f.verdict == "mastered")
    assert g.severity == "info" and g.evidence["truncated_share"] >= 0.5
    t = next(f for f in rep.findings if f.check == "transcripts")
    assert t.severity == "info" and "answers_disagree" in t.evidence["flags"]


@pytest.mark.parametrize("seed", [0, 1])
def test_an_entropy_collapse_after_a_healthy_rise_is_told_live_within_ten_updates(seed):
    # rlwatch's example: reward rises for 280 steps, then the entropy falls (2.8 -> 0.05) while
    # the reward stays flat. Replayed live, the whole run's earlier rise must not pass the fall
    # off as sharpening once ten updates since it can speak for themselves (the code before
    # read "sharpening" until 138 updates after the onset).
    data = read(str(CORPUS / "peers" / "rlwatch" / f"example-s{seed}" / "metrics.db"))
    times = data.series("time")
    rep = run_checks(data.until(290), now=float(times.at(290)))
    f = next(f for f in rep.at_least("warn") if f.check == "policy")
    assert f.verdict == "collapse" and "does not improve" in f.title, f.title
    assert rep.verdict == "collapse"
