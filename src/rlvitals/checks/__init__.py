"""The ordered health checks: each reads the canonical RunData and returns Findings.

The order is the seeds' order of reading a run, earlier signals first because they catch
problems sooner: liveness, non-finite values, reward the run can learn from, rejected groups,
failed attempts, episode metrics, sampler/trainer agreement and freshness, the policy
(entropy, trust region), transcripts, held-out, and a user's own healthy ranges. Every check
runs in time linear in the run's length; the same code judges a finished run and a live one.
``rlvitals.judge.Judge`` runs them (``checks/verdict.py`` holds their order and the verdict).
"""

from __future__ import annotations

from typing import Any

from ..model import RunData
from .base import SEVERITIES, VERDICTS, Finding, Report, severity_rank
from .context import Thresholds
from .verdict import CHECK_ORDER, order_findings

__all__ = [
    "CHECK_ORDER",
    "SEVERITIES",
    "VERDICTS",
    "Finding",
    "Report",
    "Thresholds",
    "order_findings",
    "run_checks",
    "severity_rank",
]


def run_checks(
    data: RunData,
    *,
    baseline: dict[str, Any] | None = None,
    thresholds: Thresholds | None = None,
    now: float | None = None,
    stall_after: float | None = None,
    only: list[str] | None = None,
    transcript_rules: str | None = None,
) -> Report:
    """Judge a run: every check in order, then the overall verdict. The same as
    ``rlvitals.judge.Judge(...)(data, now)``: pure, the run is never written to.

    Args:
        data: the run (``rlvitals.read(path)``), finished or still running.
        baseline: healthy ranges from ``rlvitals.baseline.build`` to hold the run against.
        thresholds: where the checks draw their lines (defaults documented in Thresholds).
        now: the time to judge liveness at (default: the clock as the judging starts, so
            the time spent judging, minutes for a long run's transcripts, never reads as a
            stall).
        stall_after: seconds without a step record that make a running run stalled
            (default: ten typical step intervals, at least ten seconds).
        only: run only these checks (names from CHECK_ORDER).
        transcript_rules: a rules file tuning the transcript flags for your task
            (docs/transcripts.md); default: $RLVITALS_TRANSCRIPT_RULES or
            transcript-rules.toml in the run directory.
    """
    from ..judge import judging

    judge = judging(
        baseline=baseline,
        thresholds=thresholds,
        rules=transcript_rules,
        stall_after=stall_after,
        only=only,
    )
    return judge(data, now)
