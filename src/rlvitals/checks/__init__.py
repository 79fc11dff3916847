"""The ordered health checks: each reads the canonical RunData and returns Findings.

The order is the seeds' order of reading a run, earlier signals first because they catch
problems sooner: liveness, non-finite values, reward the run can learn from, rejected groups,
failed attempts, episode metrics, sampler/trainer agreement and freshness, the policy
(entropy, trust region), transcripts, held-out, and a user's own healthy ranges. Every check
runs in time linear in the run's length; the same code judges a finished run and a live one.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from collections.abc import Callable
from typing import Any

from ..model import RunData
from .base import SEVERITIES, VERDICTS, Finding, Report, severity_rank
from .context import Context, Thresholds
from .derive import derive

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

# Module names under rlvitals.checks, in the seeds' order.
CHECK_ORDER = [
    "liveness",
    "system",
    "nonfinite",
    "reward",
    "components",
    "groups",
    "failures",
    "episodes",
    "agreement",
    "policy",
    "reference",
    "transcripts",
    "text",
    "heldout",
    "baseline",
    "structural",
]


def _checks() -> list[tuple[str, Callable[[Context], list[Finding]]]]:
    out = []
    for name in CHECK_ORDER:
        try:
            module = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue  # a check family not shipped in this version
        out.append((name, module.check))
    return out


# Verdicts that describe a symptom rather than a cause. (Guard stops, marked by a "guard" key
# in their evidence, are consequences: the run's verdict names what tripped the guard; a flat
# reward's level, marked by a "plateau_level" key, and findings marked "symptom" are symptoms
# whatever they are called.)
GENERIC_VERDICTS = {"not_learning", "plateau"}


def _symptom(f: Finding) -> bool:
    ev = f.evidence
    return (
        f.verdict in GENERIC_VERDICTS or "guard" in ev or "plateau_level" in ev or "symptom" in ev
    )


def overall_verdict(findings: list[Finding], steps: int) -> str:
    """The run's verdict: the first of its worst warn-or-fail findings in the seeds' order;
    otherwise what the reward and held-out checks say (learning, mastered), else too early.

    Held-out scores rising beyond twice their error are learning even while the train reward
    is not yet beyond its own noise: held-out tasks are the better witness (reward/mean, the
    trained groups' reward, holds still as tasks are mastered and leave training), and with
    no alarm left there is nothing it could be flattering."""
    worst = max((f.severity for f in findings), key=severity_rank, default="ok")
    if severity_rank(worst) >= severity_rank("warn"):
        alarms = [f for f in findings if severity_rank(f.severity) >= severity_rank("warn")]
        # A symptom (reward flat) or a consequence (a guard stopped the run) yields to a
        # finding that names the cause, whatever their severities.
        causes = [f for f in alarms if not _symptom(f)]
        pool = causes or alarms
        top = max((f.severity for f in pool), key=severity_rank)
        return next(f.verdict for f in pool if f.severity == top)
    verdicts = {f.verdict for f in findings}
    if "mastered" in verdicts:
        return "mastered"
    if "learning" in {f.verdict for f in findings if f.check in ("reward", "heldout")}:
        return "learning"
    return "too_early"


def order_findings(findings: list[Finding], verdict: str) -> list[Finding]:
    """The findings in the order that serves the verdict: the warn-or-fail evidence for the
    run's verdict first, then by severity (worst first), each severity in the seeds' order
    and by step. An info finding that reads as reassurance (learning, mastered) never comes
    before an alarm."""
    rank = {name: i for i, name in enumerate(CHECK_ORDER)}

    def key(item: tuple[int, Finding]) -> tuple[int, int, int, int]:
        i, f = item
        sev = severity_rank(f.severity)
        lead = 0 if f.verdict == verdict and sev >= severity_rank("warn") else 1
        return (lead, -sev, rank.get(f.check, len(rank)), i)

    return [f for _i, f in sorted(enumerate(findings), key=key)]


# Verdicts whose findings read as good news about the reward.
REASSURING = ("learning", "mastered", "healthy")


def _doubted(f: Finding) -> Finding:
    """A reassuring ok/info finding of an exploited run, told that the reward it reads is
    the one the exploit findings doubt (a reward rising is not learning when the grader pays
    for something else). A "mastered" finding (the groups check's, or a guard stop read as
    one) loses its advice to keep the checkpoint: that is the reward's word too."""
    if f.verdict == "mastered":
        f = dataclasses.replace(
            f,
            action="The reward says these tasks are solved, but the exploit findings above "
            "call that reward into doubt: read the rewarded transcripts before keeping any "
            "checkpoint of this run.",
        )
    if f.severity not in ("ok", "info") or f.verdict not in REASSURING or f.check == "structural":
        return f  # (a metric zero by design says nothing about the reward)
    return dataclasses.replace(
        f,
        title=f"{f.title} (by the reward, which the exploit findings above call into doubt)",
        evidence={**f.evidence, "doubted_by": "exploit_suspected"},
    )


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
    """Judge a run: every check in order, then the overall verdict.

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
    ctx = Context(
        data,
        thresholds=thresholds or Thresholds(),
        now=time.time() if now is None else now,
        stall_after=stall_after,
        baseline=baseline,
        transcript_rules=transcript_rules,
    )
    derived = derive(ctx)
    findings: list[Finding] = []
    for name, check in _checks():
        if only and name not in only:
            continue
        found = check(ctx)
        found.sort(key=lambda f: (f.first_step is None, f.first_step or 0))
        findings.extend(found)
    verdict = overall_verdict(findings, ctx.step_count)
    if verdict == "exploit_suspected":
        findings = [_doubted(f) for f in findings]
    steps = ctx.step_count
    info = {
        k: data.info.get(k)
        for k in ("name", "status", "stop_reason", "run_id", "fault", "fault_step")
        if data.info.get(k) is not None
    }
    info["format"] = data.format
    info["steps"] = steps
    return Report(
        source=data.source,
        verdict=verdict,
        findings=order_findings(findings, verdict),
        info=info,
        last_step=data.last_step,
        series=derived,
    )
