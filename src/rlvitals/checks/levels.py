"""Healthy levels by setting: what a run's settings and model family make normal.

``expected_level(settings, metric)`` gives, for truncation, entropy and the KLs, the level a
healthy run with these settings sits at and the level past which it is not normal, each with
its source; None where the settings do not change what the checks hold the metric against.
The checks call it (``apply_levels`` does, after them, for the findings of checks that do not
yet: a truncation finding under the family's normal level is made information with the
reason; one in multi-turn agentic RL, where truncation rising early is expected, says so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..settings import RunSettings
from .base import Finding
from .context import Context

__all__ = ["Level", "apply_levels", "expected_level", "model_family"]


@dataclass(frozen=True)
class Level:
    """A healthy level: ``typical`` (where a healthy run sits), ``high`` (past it is not
    normal; None: the check's own lines hold), ``low`` (under it is not normal),
    ``rising_expected`` (a rise is normal for this setting), why, and its source."""

    metric: str
    why: str
    source: str
    typical: float | None = None
    high: float | None = None
    low: float | None = None
    rising_expected: bool = False


# Models distilled from or trained as long reasoners (their replies run to the budget).
_THINKING = re.compile(
    r"r1-distill|deepseek-r1|-thinking|qwq|openthinker|skywork-or1|"
    r"openreasoning|reasoning",
    re.I,
)

TRUNCATION = "response/truncated_rate"
# source: Thinking-Space/Rethinking-OPD #7 (TRUNCATION_SOURCE): a non-thinking 1.7B at about
# 0.075, an R1-distilled 1.5B around 0.6, 98-99% extremely high.
THINKING_TYPICAL = 0.6
# source: Rethinking-OPD #7 (as above): past 0.95 is not normal even for a long reasoner.
THINKING_HIGH = 0.95
# source: Rethinking-OPD #7 (as above): a non-thinking model.
INSTRUCT_TYPICAL = 0.075
# source: tinker-cookbook: training is stable when the sampler-trainer KL < 0.01 (the
# agreement check's mismatch_kl_warn).
ON_POLICY_KL_HIGH = 0.01
TRUNCATION_SOURCE = (
    "Thinking-Space/Rethinking-OPD #7 (2026-05-22): about 0.075 for a non-thinking model "
    "(Qwen3-1.7B-SFT), around 0.6 for DeepSeek-R1-Distill-Qwen-1.5B, 98-99% extremely high"
)
AGENTIC_SOURCE = (
    "Gen-Verse/OpenClaw-RL #104 (2026-06-15): truncation rising from early in training is "
    "expected, the model learning to spend more interactions"
)


def model_family(settings: RunSettings | None) -> str | None:
    """``thinking`` (a long reasoner), ``instruct`` (any other named model), or None."""
    if settings is None or not settings.model:
        return None
    return "thinking" if _THINKING.search(settings.model) else "instruct"


def expected_level(settings: RunSettings | None, metric: str) -> Level | None:
    """The healthy level of ``metric`` for a run with ``settings`` (module docstring)."""
    if metric == TRUNCATION:
        return _truncation(settings)
    if metric in ("train/entropy", "sampling/entropy_estimate"):
        return _entropy(settings, metric)
    if metric == "train/ref_kl":
        return _ref_kl(settings)
    if metric == "train/mismatch_kl":
        return _mismatch_kl(settings)
    return None


def _truncation(s: RunSettings | None) -> Level | None:
    family = model_family(s)
    agentic = bool(s is not None and s.multi_turn)
    if family == "thinking":
        return Level(
            TRUNCATION,
            "a long reasoner's replies run to the budget",
            TRUNCATION_SOURCE,
            typical=THINKING_TYPICAL,
            high=THINKING_HIGH,
            rising_expected=agentic,
        )
    if family == "instruct":
        return Level(
            TRUNCATION,
            "a non-thinking model mostly stops in time",
            TRUNCATION_SOURCE,
            typical=INSTRUCT_TYPICAL,
            rising_expected=agentic,
        )
    if agentic:
        return Level(TRUNCATION, "multi-turn agentic RL", AGENTIC_SOURCE, rising_expected=True)
    return None


def _entropy(s: RunSettings | None, metric: str) -> Level | None:
    """Below temperature 1 the sampling distribution is sharpened by construction: its
    entropy sits low from the start, so only its fall against its own start is judged (as
    the policy check judges every run: no absolute entropy line)."""
    if s is None or s.temperature is None or s.temperature >= 1.0:
        return None
    return Level(
        metric,
        f"sampling at temperature {s.temperature:g} (< 1) sharpens the "
        "distribution: its entropy sits low from the start by construction",
        "the definition of temperature sampling (logits divided by T < 1)",
        low=None,
    )


def _ref_kl(s: RunSettings | None) -> Level | None:
    if s is None or s.kl_coef is None or s.kl_coef > 0:
        return None
    return Level(
        "train/ref_kl",
        "no KL term holds the policy to the reference (coefficient "
        "0): the KL to it grows as the policy learns",
        "trl grpo_trainer.py (the KL "
        "term only with beta != 0); verl use_kl_loss / use_kl_in_reward",
        rising_expected=True,
    )


def _mismatch_kl(s: RunSettings | None) -> Level | None:
    if s is None or s.async_lag is None:
        return None
    if s.async_lag > 0:
        return Level(
            "train/mismatch_kl",
            f"the sampler runs {s.async_lag} update(s) behind by "
            "design: the KL holds the policy's own movement, judged against its own "
            "start",
            "the agreement check's designed-lag rule (checks/agreement.py)",
            rising_expected=False,
        )
    return Level(
        "train/mismatch_kl",
        "on-policy sampling: the KL is the numerics' only",
        "tinker: stable when KL < 0.01 (checks/agreement.py AgreementLines.mismatch_kl_warn)",
        high=ON_POLICY_KL_HIGH,
    )


def apply_levels(ctx: Context, findings: list[Finding]) -> list[Finding]:
    """Findings held against the run's expected levels (module docstring): truncation by the
    model family; a KL to the reference said to be unheld where no KL term holds it."""
    s = ctx.data.settings
    for f in findings:
        if f.metric == "train/ref_kl" and f.severity in ("warn", "fail"):
            kl = expected_level(s, "train/ref_kl")
            if kl is not None:
                f.title += f" [note: {kl.why}]"
                f.evidence["expected_level"] = {"why": kl.why, "source": kl.source}
    lvl = expected_level(s, TRUNCATION)
    if lvl is None:
        return findings
    for f in findings:
        if (
            f.verdict != "out_of_room"
            or f.metric != TRUNCATION
            or f.severity not in ("warn", "fail")
        ):
            continue
        level = f.evidence.get("level")
        ev = {
            "expected_level": {
                "typical": lvl.typical,
                "high": lvl.high,
                "why": lvl.why,
                "source": lvl.source,
                "rising_expected": lvl.rising_expected,
            }
        }
        f.evidence.update(ev)
        if lvl.high is not None and isinstance(level, (int, float)) and level < lvl.high:
            f.severity = "info"
            f.title = (
                f"normal for this model ({lvl.why}: about {lvl.typical:.0%}, past "
                f"{lvl.high:.0%} is not): {f.title}"
            )
        elif lvl.rising_expected:
            f.title += f" [note: expected to rise in multi-turn agentic RL; {lvl.source}]"
    return findings
