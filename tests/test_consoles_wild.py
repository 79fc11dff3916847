"""Console shapes hand-written loops print (issue 27, item 2): each read with its steps as
printed, its reward (or loss) back, and what cannot be told from a name left unmapped.

The files (``tests/data/handwritten/consoles``) are written by hand in the shape observed in
public loops (README.md there names where each was seen); steps run 41, 46, ... 66.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlvitals.readers import read

DIR = Path(__file__).parent / "data" / "handwritten" / "consoles"
STEPS = [41, 46, 51, 56, 61, 66]
# file -> (a canonical name and its value at step 41, names that must stay unmapped)
EXPECT = {
    "minimind_grpo.log": ("reward/group_std_mean", 0.3, {"KL", "AdvMean"}),
    "loguru.log": ("reward/mean", 0.2, {"KL", "Advantage"}),
    "accelerate_logger.log": ("reward/mean", 0.2, {"KL"}),
    "update_steps.log": ("train/loss", 0.1, {"value_loss"}),
    "step_pipe_colon.log": ("train/loss", 0.1, set()),
    "step_pipe_eq.log": ("reward/mean", 0.2, {"KL"}),
    "tag_it_words.log": ("train/lr", 0.0003, {"value_loss", "surrogate"}),
    "iter_of_spaced.log": ("response/length_mean", 100.0, {"val", "sur"}),
    "bracket_step.log": ("reward/mean", 0.2, {"kl"}),
    "step_words_pipe.log": ("train/lr", 0.0001, {"kl"}),
    "grpo_zero.log": ("train/entropy", 1.5, {"duration", "num_finished_episodes"}),
    "logging_episode_of.log": ("reward/mean", 0.2, set()),
    "caps_episode.log": ("reward/mean", 0.2, set()),
    "it_bracket_R.log": ("reward/mean", 0.2, {"KL"}),
    "epoch_iter.log": ("train/loss", 0.1, {"kl"}),
    "logging_timestamp.log": ("response/length_mean", 100.0, set()),
    "tag_epoch_padded.log": ("reward/mean", 0.2, {"pg", "v"}),
}


def test_every_fixture_is_listed() -> None:
    assert sorted(p.name for p in DIR.glob("*.log")) == sorted(EXPECT)
    readme = (DIR / "README.md").read_text()
    assert all(name in readme for name in EXPECT)


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_each_shape_is_read_with_its_steps_as_printed(name: str) -> None:
    metric, first, unmapped = EXPECT[name]
    run = read(DIR / name)
    assert run.format == "console", run.format  # not a framework's reader by loose words
    assert run.steps().tolist() == STEPS, (name, run.warnings)
    s = run.series(metric)
    assert s is not None and s.steps.tolist() == STEPS, (name, metric, run.unmapped)
    assert s.at(41) == pytest.approx(first)
    assert unmapped <= set(run.unmapped), (name, run.resolved)
    for key in unmapped:
        assert key not in run.resolved
    assert not run.info.get("steps_numbered")  # no step made up by the reader


def test_a_bare_kl_of_a_loop_is_not_taken_from_a_framework_table() -> None:
    # loss, reward, lr and kl are words every loop prints: they do not make the file TRL's,
    # whose bare ``kl`` is its KL to the reference.
    run = read(DIR / "step_words_pipe.log")
    assert "kl" in run.unmapped and not run.has("train/ref_kl")
    assert "which KL" in run.unmapped["kl"]


def test_a_held_out_line_between_steps_is_the_step_before() -> None:
    run = read(DIR / "grpo_zero.log")  # "\rEval success rate: 0.45" after step 51
    s = run.series("eval/eval/score")
    assert s.steps.tolist() == [51] and s.values.tolist() == [0.45]
    assert run.series("reward/mean").at(66) == pytest.approx(0.25)
