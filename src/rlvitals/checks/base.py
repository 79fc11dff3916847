"""What a check says: Findings, their severities and verdicts, and the Report of a run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model import Series

__all__ = ["SEVERITIES", "VERDICTS", "Finding", "Report", "severity_rank"]

# ok < info < warn < fail
SEVERITIES = ("ok", "info", "warn", "fail")

# Verdicts a finding (and a run) can have, with the words a person reads.
VERDICTS: dict[str, str] = {
    "learning": "learning",
    "too_early": "too early to tell",
    "no_signal": "no learning signal",
    "too_easy": "tasks too easy",
    "too_hard": "tasks too hard",
    "mastered": "tasks mastered",
    "exploration_stopped": "exploration stopped",
    "not_learning": "reward flat despite learning signal",
    "plateau": "reward flat (plateau)",
    "unstable": "unstable updates",
    "infra_failures": "failing attempts",
    "out_of_room": "running out of room",
    "drift": "drifting",
    "stale_policy": "stale policy",
    "exploit_suspected": "exploit suspected",
    "collapse": "collapse",
    "slowing": "run slowing down",
    "stalled": "stalled",
    "crashed": "crashed",
    "non_finite": "non-finite values",
    "healthy": "healthy",
}


def severity_rank(severity: str) -> int:
    """0 for ok up to 3 for fail."""
    return SEVERITIES.index(severity)


@dataclass
class Finding:
    """One thing a check saw.

    Attributes:
        check: the check that saw it (``liveness``, ``reward``, ``groups``...).
        severity: ``ok``, ``info``, ``warn`` or ``fail``.
        verdict: one of ``VERDICTS``.
        title: one line a person reads first.
        metric: the metric the evidence is about (None for run-level findings).
        first_step: the step where the problem first showed (None when not tied to a step).
        evidence: what was seen and what it was held against: values, steps, window, threshold
            or healthy range; plain JSON-able data.
        action: what to do next, in plain words.
        detail: a longer explanation (optional).
        steps: steps to mark on plots (first_step and others worth a look).
    """

    check: str
    severity: str
    verdict: str
    title: str
    metric: str | None = None
    first_step: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    action: str = ""
    detail: str = ""
    steps: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity: expected one of {SEVERITIES} (not {self.severity!r})")
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict: expected one of {list(VERDICTS)} (not {self.verdict!r})")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Report:
    """The judgement of one run: its verdict and the findings behind it, the evidence for the
    worst first.

    ``series`` holds what the checks derived while judging (transcript flag rates, the
    within-step reward-length correlation), by canonical name, for views to draw beside the
    run's own series; the run itself is never written to. ``warnings`` are what judging found
    wrong with the run's files (a torn transcript file), one line each, beside the reader's
    own ``RunData.warnings``."""

    source: str
    verdict: str
    findings: list[Finding]
    info: dict[str, Any] = field(default_factory=dict)
    last_step: int | None = None
    series: dict[str, Series] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def worst(self) -> str:
        """The highest severity among the findings (``ok`` when there are none)."""
        return max((f.severity for f in self.findings), key=severity_rank, default="ok")

    def at_least(self, severity: str) -> list[Finding]:
        """The findings at ``severity`` or worse."""
        r = severity_rank(severity)
        return [f for f in self.findings if severity_rank(f.severity) >= r]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "verdict": self.verdict,
            "verdict_text": VERDICTS[self.verdict],
            "worst": self.worst,
            "last_step": self.last_step,
            "info": self.info,
            "findings": [f.to_dict() for f in self.findings],
        }
