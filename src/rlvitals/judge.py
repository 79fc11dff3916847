"""How a run is judged, decided once: the thresholds, the transcript rules, the baseline, the
stall time and the checks to run, for every front end (check, report, export, watch, serve,
the trainer, the hooks).

    judge = Judge(thresholds=Thresholds(clip_frac_warn=0.3), rules="my-rules.toml")
    report = judge(rlvitals.read("runs/my-run"))

Judging is pure: the same run judged twice gives the same report, and the run is never written
to. What judging itself had to say about the run's files (a torn transcript file, say) is in
``report.warnings``, once per report. ``rlvitals.checks.run_checks(data, **options)`` is
``Judge(**options)(data, now)``.

A ``Judge`` is built once, from the command's flags (``cli/_options.judge_of``) or from a
library caller's keywords (``judging``: ``check``, ``run_checks``, the fleet's ``judge`` and
the follow stage's default), and handed down whole.

The transcript rules are found in one place (``rules_file``): the rules file given
(``--rules``), else ``$RLVITALS_TRANSCRIPT_RULES``, else ``transcript-rules.toml`` (or
``.json``) in the run's folder, else the defaults.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .checks.base import Finding, Report
from .checks.context import RULES_ENV, RULES_FILES, Context, Thresholds
from .checks.derive import derive
from .checks.reliability import qualify
from .checks.verdict import check_functions, doubted, order_findings, overall_verdict
from .model import RunData
from .source import Source, run_dir

if TYPE_CHECKING:
    from .transcripts.rules import Rules

__all__ = ["Judge", "check", "judging", "load_run_rules", "rules_file"]


def rules_file(given: str | os.PathLike[str] | None, folder: Path | None) -> str | None:
    """The transcript rules file to use: ``given``, else ``$RLVITALS_TRANSCRIPT_RULES``, else
    ``transcript-rules.toml``/``.json`` in ``folder`` (the run's); None: the defaults."""
    if given:
        return os.fspath(given)
    env = os.environ.get(RULES_ENV)
    if env:
        return env
    if folder is not None:
        for name in RULES_FILES:
            if (folder / name).is_file():
                return str(folder / name)
    return None


def load_run_rules(given: str | os.PathLike[str] | None, folder: Path | None) -> Rules:
    """The transcript rules ``rules_file`` names, loaded (a bad file raises ConfigError naming
    the key), or the defaults."""
    from .transcripts.rules import Rules, load_rules

    path = rules_file(given, folder)
    return load_rules(path) if path else Rules()


@dataclass(frozen=True)
class Judge:
    """The judging options (``rlvitals check``'s ``--baseline``, ``--set``, ``--rules``,
    ``--stall-after``, ``--only``); calling it judges a run.

    Args:
        baseline: healthy ranges from ``rlvitals.baseline.build`` to hold runs against.
        thresholds: where the checks draw their lines (default: ``Thresholds()``).
        rules: a transcript rules file (docs/transcripts.md); default: see ``rules_file``.
        stall_after: seconds without a step record that make a running run stalled
            (default: ten typical step intervals, at least ten seconds).
        only: run only these checks (names from ``CHECK_ORDER``).
    """

    baseline: dict[str, Any] | None = None
    thresholds: Thresholds | None = None
    rules: str | None = None
    stall_after: float | None = None
    only: Sequence[str] | None = None

    def __call__(self, data: RunData, now: float | None = None) -> Report:
        """Judge ``data`` at ``now`` (default: the clock as the judging starts, so the time
        spent judging never reads as a stall): every check in order, then the verdict."""
        ctx = Context(
            data,
            thresholds=self.thresholds or Thresholds(),
            now=time.time() if now is None else now,
            stall_after=self.stall_after,
            baseline=self.baseline,
            transcript_rules=rules_file(self.rules, run_dir(data)),
        )
        derived = derive(ctx)
        findings: list[Finding] = []
        for name, check in check_functions():
            if self.only and name not in self.only:
                continue
            found = check(ctx)
            found.sort(key=lambda f: (f.first_step is None, f.first_step or 0))
            findings.extend(found)
        # Findings resting on a key known to mislead in this framework's version
        # (vocabulary/reliability.py): qualified or withheld; skipped updates named.
        findings = qualify(ctx, findings)
        verdict = overall_verdict(findings, ctx.step_count)
        if verdict == "exploit_suspected":
            findings = [doubted(f) for f in findings]
        info = {
            k: data.info.get(k)
            for k in ("name", "status", "stop_reason", "run_id", "fault", "fault_step")
            if data.info.get(k) is not None
        }
        info["format"] = data.format
        info["steps"] = ctx.step_count
        return Report(
            source=data.source,
            verdict=verdict,
            findings=order_findings(findings, verdict),
            info=info,
            last_step=data.last_step,
            series=derived,
            warnings=ctx.judging_warnings(),
        )


J = TypeVar("J")


def judging(judge: J | None = None, /, **options: Any) -> J | Judge:
    """The judge to use: ``judge`` when one is given (a ``Judge``, or any
    ``judge(data, now) -> Report``), else a ``Judge`` of the keyword ``options`` (baseline,
    thresholds, rules, stall_after, only; none: the defaults). The library's keyword
    conveniences build their ``Judge`` here, and only here."""
    return judge if judge is not None else Judge(**options)


def check(
    source: Source | str | os.PathLike[str], *, now: float | None = None, **options: Any
) -> Report:
    """Read a run and judge it: ``source`` is a path (any format rlvitals reads) or a
    ``Source``; ``options`` are ``Judge``'s (baseline, thresholds, rules, stall_after, only)."""
    src = source if isinstance(source, Source) else Source(os.fspath(source))
    return judging(**options)(src.read(), now)
