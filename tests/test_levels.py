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


def _mid_run_low_entropy(temperature: float | None) -> RunData:
    """A log that starts mid-run (step 400) with the token entropy under 0.01 nats."""
    data = RunData(source="mem", format="generic")
    steps = np.arange(400, 430)
    rng = np.random.default_rng(1)
    data.metrics.extend("train/entropy", steps, 0.004 + rng.uniform(0, 0.001, 30))
    data.metrics.extend("reward/mean", steps, 0.5 + rng.uniform(-0.01, 0.01, 30))
    data.metrics.extend("time", steps, 1_700_000_000.0 + 60.0 * (steps - 400))
    data.info["status"] = "finished"
    data.settings = RunSettings(temperature=temperature)
    return data


@pytest.mark.parametrize("temperature", [0.6, 1.0, None])
def test_a_low_entropy_with_no_start_is_no_warning_at_any_temperature(temperature) -> None:
    """DESIGN: entropy is judged against the run's own start, never an absolute line; a log
    that starts mid-run at a low entropy has no start to fall from (nats depend on the
    vocabulary and the model)."""
    report = run_checks(_mid_run_low_entropy(temperature), now=NOW)
    entropy = [f for f in report.findings if f.metric == "train/entropy"]
    assert all(f.severity in ("ok", "info") for f in entropy), [f.title for f in entropy]


@pytest.mark.parametrize(("kl_coef", "noted"), [(0.0, True), (0.04, False), (None, False)])
def test_a_kl_no_term_holds_is_said_to_be_unheld(kl_coef: float | None, noted: bool) -> None:
    data = RunData(source="mem", format="generic")
    steps = np.arange(40)
    data.metrics.extend("train/ref_kl", steps, 0.05 * steps)
    data.metrics.extend("reward/mean", steps, 0.3 + 0.005 * steps)
    data.metrics.extend("time", steps, 1_700_000_000.0 + 60.0 * steps)
    data.info["status"] = "finished"
    data.settings = RunSettings(kl_coef=kl_coef)
    report = run_checks(data, now=NOW)
    f = next(f for f in report.findings if f.metric == "train/ref_kl")
    assert f.severity in ("warn", "fail")
    assert ("no KL term holds the policy" in f.title) is noted
