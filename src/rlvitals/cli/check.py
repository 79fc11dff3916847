"""``rlvitals check RUN...``: judge runs in the seeds' order; exit codes for CI.

A folder of runs is searched for every run under it (``rlvitals.fleet``); several runs are
judged in ``--jobs`` processes and shown one line each with a summary, one run in full."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..errors import UsageError
from ._options import add_judge_args, add_source_args, judge_of, source_of
from ._options import overrides as _overrides  # noqa: F401  (tests name it here)

if TYPE_CHECKING:
    from ..checks.base import Report
    from ..fleet.judging import Outcome

HELP = "judge whether runs are learning, stalled, exploited or drifting"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help=HELP,
        description="Read runs (any format rlvitals reads, finished or running) and judge them "
        "in the seeds' order: liveness, non-finite values, reward, rejected groups, failed "
        "attempts, episodes, sampler/trainer agreement, policy, transcripts, held-out. Exit "
        "code: 1 when --fail-on finds a finding at that level, 2 for a usage or input error, "
        "0 otherwise.",
    )
    p.add_argument(
        "paths",
        nargs="+",
        metavar="RUN",
        help="run directories, log files, or folders of runs (every run under them is judged)",
    )
    p.add_argument(
        "--format",
        choices=["text", "json", "markdown"],
        default="text",
        help="output format (default: text)",
    )
    p.add_argument("--json", action="store_true", help="same as --format json")
    add_source_args(p)
    p.add_argument(
        "--fail-on",
        choices=["warn", "fail"],
        default=None,
        help="exit 1 when a finding at this level (or worse) exists",
    )
    add_judge_args(p)
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=1,
        metavar="N",
        help="judge runs in N processes (0: one per core; default 1)",
    )
    p.add_argument(
        "--details",
        action="store_true",
        help="with several runs, print each run's findings in full, not one line a run",
    )
    p.set_defaults(func=run)


def _expand(paths: list[str]) -> tuple[list[str], list[str], list[Outcome]]:
    """The runs the paths name (folders searched), the files passed over, and an Outcome
    with the error line for each path that names no run."""
    from ..errors import ReadError
    from ..fleet.judging import Outcome
    from ..source import find_runs

    runs: list[str] = []
    skipped: list[str] = []
    missing: list[Outcome] = []
    for path in paths:
        try:
            found = find_runs(path)
        except ReadError as exc:
            missing.append(Outcome(path, error=str(exc)))
            continue
        runs.extend(r for r in found.runs if r not in runs)
        skipped.extend(found.skipped)
    return runs, skipped, missing


def run(args: argparse.Namespace) -> int:
    from ..checks import severity_rank
    from ..fleet import judge
    from ..safe import line
    from ..views.check import render_markdown, render_text
    from ..views.fleet import fleet_json, render_outcome_line, render_summary

    options = {"source": source_of(args, ""), "judge": judge_of(args, check_rules=False)}
    runs, skipped, outcomes = _expand(args.paths)
    if args.samples and len(runs) > 1:
        raise UsageError("--samples: expected one RUN (the dump belongs to one run)")
    if not runs and len(outcomes) == 1:
        raise UsageError(str(outcomes[0].error))  # nothing to judge: one error line, exit 2
    fmt = "json" if args.json else args.format
    # Several runs: one line each as it is judged, then a summary; one run: in full.
    lines = fmt == "text" and len(runs) + len(outcomes) > 1 and not args.details

    def show(o: Outcome) -> None:
        if lines:
            render_outcome_line(o, sys.stdout)
            sys.stdout.flush()
            if o.warning_count:
                print(
                    f"warning: {line(o.path)}: {o.warning_count} reader warnings, the first: "
                    f"{line(o.warnings[0]) if o.warnings else ''}",
                    file=sys.stderr,
                )
            return
        if o.error is not None:
            if fmt != "json":
                print(f"rlvitals check: error: {line(o.error)}", file=sys.stderr)
            return
        if fmt != "json":
            for w in o.warnings:
                print(f"warning: {line(w)}", file=sys.stderr)
            if o.warning_count > len(o.warnings):
                print(f"warning: ... and {o.warning_count - len(o.warnings)} more", file=sys.stderr)

    for o in outcomes:
        show(o)
    outcomes += judge(runs, jobs=args.jobs, on_outcome=show, **options)
    reports = [_report(o) for o in outcomes if o.report is not None]
    if fmt == "json":
        sys.stdout.write(fleet_json(outcomes) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(render_markdown(reports) + "\n")
    elif lines:
        print()
        render_summary(outcomes, sys.stdout)
    else:
        render_text(reports, sys.stdout)
    if skipped and fmt == "text":
        print(
            f"passed over {len(skipped)} files that no reader recognises (e.g. {skipped[0]})",
            file=sys.stderr,
        )
    if args.fail_on:
        bar = severity_rank(args.fail_on)
        if any(o.report is not None and severity_rank(o.worst) >= bar for o in outcomes):
            return 1
    if any(o.report is None for o in outcomes):
        return 2  # a run that could not be read: its error line was printed
    return 0


def _report(o: Outcome) -> Report:
    """A Report back from its dict form (what a worker process sends)."""
    from ..checks.base import Finding, Report

    d = o.report or {}
    findings = [Finding(**f) for f in d.get("findings", [])]
    return Report(
        source=d["source"],
        verdict=d["verdict"],
        findings=findings,
        info=d.get("info", {}),
        last_step=d.get("last_step"),
    )
