"""The checks on real runs users trained (issue 27): the wild corpus, read in place from
``../shared/corpus/wild`` (never copied here; skipped where it is absent). One test per class
of the issue, each on a real file where the rule fires and one where it stays quiet.

Trainer states are read with ``--from trl`` until the readers sniff them by content; the rest
as sniffed today."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlvitals.checks import run_checks
from rlvitals.cli import main
from rlvitals.readers import read

WILD = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "wild"

pytestmark = [
    pytest.mark.wild,
    pytest.mark.skipif(not WILD.is_dir(), reason=f"no wild corpus at {WILD}"),
]

VERL = "verl/dstack-configs_verl_demo_ppo_gsm8k_qwen7b.log"
UNSLOTH = "trl/unslothgrpo_checkpoint-250_trainer_state.json"
GEMMA = "trl/gemma3-rl-finetuning_checkpoint-250_trainer_state.json"
LEGALOOM = "trl/legaloom-env_training_log.json"
HOTPOT = "trl/hotpotqa-agent_grpo.log"
HOTPOT_V3 = "trl/hotpotqa-agent_grpo_v3.log"
TINYZERO = "tinyzero/tinyzero-reproduction_part-of-logs.md"
JSONL = "trl-reward-jsonl/agent-memory-redteam_{}_train_metrics.jsonl"


def judge(rel: str):
    path = WILD / rel
    if path.name.endswith("trainer_state.json"):
        return run_checks(read(str(path), "trl"))
    return run_checks(read(str(path)))


def warns(rep):
    return [f"{f.check}/{f.verdict}: {f.title}" for f in rep.at_least("warn")]


# -- a verdict for every run long enough to have one ----------------------------------------


def test_a_long_flat_reward_near_its_ceiling_is_mastered_and_fails_a_warn_gate(capsys):
    # 335 verl steps with the score flat at 0.94 were "not rising yet" (info), exit 0.
    rep = judge(VERL)
    assert rep.verdict == "mastered"
    (f,) = [f for f in rep.at_least("warn") if f.check == "reward"]
    ev = f.evidence
    assert (f.severity, ev["plateau_level"], ev["level_from"]) == (
        "warn",
        "ceiling",
        "94% of a score in [0, 1]",
    )
    assert abs(ev["first_mean"] - 0.948) < 0.002 and abs(ev["last_mean"] - 0.943) < 0.002
    assert abs(ev["z"]) < 2 and ev["noise_per_step"] > 0 and ev["updates"] == 335
    assert "reward flat (plateau)" in f.title
    assert main(["check", str(WILD / VERL), "--fail-on", "warn"]) == 1
    capsys.readouterr()


@pytest.mark.parametrize("stage", ["stage1_final", "stage2_final", "strict_stage2"])
def test_flat_rewards_of_150_to_250_steps_are_a_plateau_of_unknown_level(stage):
    # "rising slowly, not yet beyond noise" / "not rising yet" before; rewards of 0.4-2.9,
    # no group statistics: flat, the level unknown, so stuck.
    rep = judge(JSONL.format(stage))
    assert rep.verdict == "plateau", warns(rep)
    (f,) = rep.at_least("warn")
    assert f.evidence["plateau_level"] == "unknown" and abs(f.evidence["z"]) < 2


@pytest.mark.parametrize(
    "rel", [JSONL.format("strict_stage1"), HOTPOT_V3, GEMMA, UNSLOTH], ids=lambda r: r[:24]
)
def test_slow_real_learning_stays_learning_with_nothing_to_warn(rel):
    # The four healthy runs: reward rising 3.6 to 10.8 standard errors, over 25 to 250 logs.
    rep = judge(rel)
    assert rep.verdict == "learning" and not rep.at_least("warn"), warns(rep)
    assert not [f for f in rep.findings if "plateau_level" in f.evidence]


# -- collapse called by its name, gradient spikes by theirs ---------------------------------


def test_replies_collapsing_with_identical_rewards_are_collapse_and_no_signal_not_drift():
    # Completions 39-96 tokens, then 9 from step 6, reward_std 0 on most steps: "drift"
    # (from the gradient norm of the steps with no spread) before.
    rep = judge(LEGALOOM)
    assert rep.verdict in ("collapse", "no_signal"), warns(rep)
    f = next(f for f in rep.at_least("warn") if f.check == "policy")
    assert (f.verdict, f.first_step, f.metric) == ("collapse", 6, "response/length_mean")
    assert f.evidence["no_spread_share"] >= 0.5
    assert not [f for f in rep.findings if f.verdict in ("drift", "unstable")]
    # The identical rewards named too: no learning signal from step 6 (its label's onset).
    g = next(f for f in rep.at_least("warn") if f.check == "groups")
    assert (g.verdict, g.first_step) == ("no_signal", 6) and g.evidence["share"] >= 0.6
    # Quiet where replies shorten as a run learns (gemma3: 486 -> 367 tokens) and rewards vary.
    calm = judge(GEMMA)
    assert not [f for f in calm.findings if f.metric == "response/length_mean"]
    assert not [f for f in calm.findings if f.check == "groups"]


def test_gradient_spikes_are_unstable_updates_info_on_a_run_that_learns():
    # Unsloth GRPO: 4.86 at step 84 against a median of 0.41 while the reward climbs 0.27 ->
    # 1.59: a note. HotpotQA: 202 at record 50 (11x) with the KL to the reference past 2.
    calm = judge(UNSLOTH)
    (f,) = [f for f in calm.findings if f.verdict == "unstable"]
    assert (f.severity, f.first_step, f.evidence["learns_otherwise"]) == ("info", 84, True)
    hot = judge(HOTPOT)
    f = next(f for f in hot.at_least("warn") if f.verdict == "unstable")
    assert f.metric == "train/grad_norm" and f.evidence["learns_otherwise"] is False
    assert not [f for f in hot.findings if f.verdict == "drift" and f.metric == "train/grad_norm"]


def test_entropy_under_its_floor_in_an_excerpt_is_collapse():
    # TinyZero steps 383-399: actor/entropy_loss 0.003-0.008 with no start to hold it against.
    rep = judge(TINYZERO)
    f = next(f for f in rep.at_least("warn") if f.check == "policy")
    assert (f.verdict, f.first_step, f.evidence["line"]) == ("collapse", 383, 0.01)
    # Quiet on the verl run that also starts mid-run (step 101) at 0.02-0.04 nats.
    data = read(str(WILD / VERL))
    assert float(np.min(data.series("train/entropy").values)) >= 0.02
    assert not [f for f in run_checks(data).findings if f.check == "policy"]


def test_most_groups_at_one_reward_while_the_reward_stands_still_is_no_signal():
    # iitd-aaipl: frac_reward_zero_std >= 0.5 on 72% of records, the entropy holding at 65% of
    # its start: info before ("the policy still explores"); most groups teach nothing: warn,
    # a symptom (the run's verdict goes to the cause: replies cut from the start).
    rep = judge("trl/iitd-aaipl_checkpoint-500_trainer_state.json")
    g = next(f for f in rep.at_least("warn") if f.check == "groups")
    assert (g.verdict, g.evidence["symptom"]) == ("no_signal", True) and g.first_step <= 80
    assert rep.verdict == "out_of_room"


def test_a_format_reward_rising_while_replies_are_cut_from_the_start_is_not_an_exploit():
    # iitd-aaipl: 97% of replies hit the token limit from the first record; the valid-JSON
    # component rose to its ceiling while the game score did not. With the task out of reach
    # of what fits in the budget, that rise is the budget's consequence (info), not a
    # shortcut (the old code warned "exploit suspected" and made it the run's verdict).
    rep = judge("trl/iitd-aaipl_checkpoint-500_trainer_state.json")
    comp = next(
        f for f in rep.findings if f.check == "components" and f.verdict == "exploit_suspected"
    )
    assert comp.severity == "info" and comp.evidence["replies_cut_from_start"] is True
    room = next(f for f in rep.at_least("warn") if f.check == "episodes")
    assert room.verdict == "out_of_room" and room.evidence["start_level"] >= 0.5
    assert rep.verdict == "out_of_room"


def test_a_settled_kl_past_its_line_warns_only_beside_a_collapsed_policy(tmp_path):
    # TinyZero steps 383-399: KL to the reference 0.74-0.78 from the first record (no start to
    # tell a climb by) while the entropy sits under its floor and the reward does not rise:
    # the two corroborate each other (warn; info on the old code).
    rep = judge(TINYZERO)
    f = next(f for f in rep.findings if f.check == "reference")
    assert (f.severity, f.verdict, f.evidence["entropy_collapsed"]) == ("warn", "drift", True)
    # The same KL beside an entropy that holds is worth a look, no more (info).
    import json

    data = read(str(WILD / TINYZERO))
    kl, ent = data.series("train/ref_kl"), data.series("train/entropy")
    rew = data.series("reward/mean")
    path = tmp_path / "steps.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "step": int(s),
                    "train/ref_kl": float(k),
                    "train/entropy": 0.4,
                    "reward/mean": float(r),
                }
            )
            + "\n"
            for s, k, r in zip(kl.steps, kl.values, rew.values)
        )
    )
    assert len(ent) == len(kl) == len(rew)
    quiet = run_checks(read(str(path)))
    g = next(f for f in quiet.findings if f.check == "reference")
    assert (g.severity, g.verdict) == ("info", "drift") and not g.evidence.get("entropy_collapsed")
