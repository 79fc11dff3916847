"""Healthy levels by setting (checks/levels.py): what a run's settings and model family make
normal for truncation, entropy and the KLs."""

from __future__ import annotations

import numpy as np
import pytest

from rlvitals.checks import run_checks
from rlvitals.checks.levels import expected_level, model_family
from rlvitals.model import RunData
from rlvitals.settings import RunSettings

NOW = 1_798_761_600.0
R1 = "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"


def test_model_family() -> None:
    assert model_family(RunSettings(model=R1)) == "thinking"
    assert model_family(RunSettings(model="Qwen/QwQ-32B")) == "thinking"
    assert model_family(RunSettings(model="Qwen/Qwen3-1.7B")) == "instruct"
    assert model_family(RunSettings()) is None and model_family(None) is None


def test_truncation_level_by_family_and_agentic_rise() -> None:
    lvl = expected_level(RunSettings(model=R1), "response/truncated_rate")
    assert lvl is not None and lvl.typical == 0.6 and lvl.high == 0.95
    assert "Rethinking-OPD #7" in lvl.source
    inst = expected_level(RunSettings(model="Qwen/Qwen3-1.7B"), "response/truncated_rate")
    assert inst is not None and inst.typical == 0.075 and inst.high is None
    agent = expected_level(RunSettings(multi_turn=True), "response/truncated_rate")
    assert agent is not None and agent.rising_expected and "OpenClaw-RL #104" in agent.source
    assert expected_level(RunSettings(), "response/truncated_rate") is None


def test_entropy_kl_and_mismatch_levels() -> None:
    assert expected_level(RunSettings(temperature=1.0), "train/entropy") is None
    low_t = expected_level(RunSettings(temperature=0.6), "train/entropy")
    assert low_t is not None and low_t.low is None and "0.6" in low_t.why
    no_kl = expected_level(RunSettings(kl_coef=0.0), "train/ref_kl")
    assert no_kl is not None and no_kl.rising_expected
    assert expected_level(RunSettings(kl_coef=0.04), "train/ref_kl") is None
    onp = expected_level(RunSettings(async_lag=0), "train/mismatch_kl")
    assert onp is not None and onp.high == 0.01
    lagged = expected_level(RunSettings(async_lag=2), "train/mismatch_kl")
    assert lagged is not None and lagged.high is None


def _truncating_run(settings: RunSettings | None) -> RunData:
    """60% of replies cut at the budget from the start while the reward rises: an R1-distilled
    model's normal (Rethinking-OPD #7), a non-thinking model's trouble."""
    data = RunData(source="mem", format="generic")
    steps = np.arange(30)
    rng = np.random.default_rng(0)
    data.metrics.extend("response/truncated_rate", steps, 0.6 + rng.uniform(-0.03, 0.03, 30))
    data.metrics.extend("reward/mean", steps, 0.3 + 0.01 * steps + rng.uniform(-0.01, 0.01, 30))
    data.metrics.extend("time", steps, 1_700_000_000.0 + 60.0 * steps)
    data.info["status"] = "finished"
    data.settings = settings
    return data


@pytest.mark.parametrize(
    ("model", "severity"),
    [(R1, "info"), ("Qwen/Qwen3-1.7B", "warn"), (None, "warn")],
)
def test_truncation_is_judged_against_the_model_family(model: str | None, severity: str) -> None:
    settings = RunSettings(model=model) if model else RunSettings()
    report = run_checks(_truncating_run(settings), now=NOW)
    f = next(f for f in report.findings if f.verdict == "out_of_room")
    assert f.severity == severity, f.title
    if severity == "info":
        assert f.title.startswith("normal for this model")
        assert "Rethinking-OPD" in f.evidence["expected_level"]["source"]
        assert report.verdict != "out_of_room"
