"""The checks in the seeds' order, and the verdict their findings add up to.

``check_functions()`` imports each check module named in ``CHECK_ORDER`` (one that fails to
import raises); ``overall_verdict`` picks the
run's verdict from the findings, ``order_findings`` puts the evidence for it first, and
``doubted`` marks reassuring findings of a run whose reward the exploit findings doubt.
``rlvitals.judge.Judge`` runs them.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable

from .base import Finding, severity_rank
from .context import Context

__all__ = ["CHECK_ORDER", "check_functions", "doubted", "order_findings", "overall_verdict"]

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


def check_functions() -> list[tuple[str, Callable[[Context], list[Finding]]]]:
    """Each check of ``CHECK_ORDER`` with its ``check`` function. A check module that fails to
    import is an error, never a silent absence: a run judged without one of its checks would
    read as healthy where that check would have spoken."""
    out = []
    for name in CHECK_ORDER:
        try:
            module = importlib.import_module(f".{name}", __package__)
        except ImportError as exc:
            raise ImportError(
                f"check {name!r} (rlvitals.checks.{name}) failed to import: {exc}"
            ) from exc
        out.append((name, module.check))
    return out


# Verdicts that describe a symptom rather than a cause. (Guard stops, marked by a "guard" key
# in their evidence, are consequences: the run's verdict names what tripped the guard; a flat
# reward's level, marked by a "plateau_level" key, and findings marked "symptom" are symptoms
# whatever they are called.)
GENERIC_VERDICTS = {"not_learning", "plateau"}
# A flat reward's verdicts, by its level.
FLAT_VERDICTS = ("plateau", "not_learning", "too_hard")


def _symptom(f: Finding) -> bool:
    ev = f.evidence
    return (
        f.verdict in GENERIC_VERDICTS or "guard" in ev or "plateau_level" in ev or "symptom" in ev
    )


def overall_verdict(findings: list[Finding], steps: int) -> str:
    """The run's verdict: the first of its worst warn-or-fail findings in the seeds' order;
    otherwise what the reward and held-out checks say (learning, mastered, a flat reward's
    verdict said at info), else too early.

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
    # Past twenty updates a reward flat within its noise is a plateau, never "too early",
    # even where it is said at info (a young run, a slow start: DESIGN.md).
    flat = [f.verdict for f in findings if f.check == "reward" and f.verdict in FLAT_VERDICTS]
    return flat[0] if flat else "too_early"


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


def doubted(f: Finding) -> Finding:
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
