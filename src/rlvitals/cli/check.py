"""``rlvitals check RUN...``: judge runs in the seeds' order; exit codes for CI."""

from __future__ import annotations

import argparse
import sys

from ..baseline import load as load_baseline
from ..checks import CHECK_ORDER, Thresholds, run_checks, severity_rank
from ..errors import UsageError
from ..views.check import render_json, render_markdown, render_text
from . import add_run_option, read_run


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="judge whether runs are learning, stalled, exploited or drifting",
        description="Read runs (any format rlvitals reads, finished or running) and judge them "
        "in the seeds' order: liveness, non-finite values, reward, rejected groups, failed "
        "attempts, episodes, sampler/trainer agreement, policy, transcripts, held-out. Exit "
        "code: 1 when --fail-on finds a finding at that level, 2 for a usage or input error, "
        "0 otherwise.",
    )
    p.add_argument("paths", nargs="+", metavar="RUN", help="run directories or log files")
    p.add_argument(
        "--format",
        choices=["text", "json", "markdown"],
        default="text",
        help="output format (default: text)",
    )
    p.add_argument("--json", action="store_true", help="same as --format json")
    p.add_argument(
        "--from",
        dest="source_format",
        default=None,
        metavar="NAME",
        help="source format of the runs, overriding sniffing (see `rlvitals formats`)",
    )
    p.add_argument(
        "--fail-on",
        choices=["warn", "fail"],
        default=None,
        help="exit 1 when a finding at this level (or worse) exists",
    )
    p.add_argument(
        "--baseline",
        metavar="FILE",
        help="healthy ranges from `rlvitals baseline` to hold the runs against",
    )
    p.add_argument(
        "--stall-after",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a running run with no step record for this long is stalled "
        "(default: ten typical step intervals, at least 10 s)",
    )
    p.add_argument(
        "--only",
        action="append",
        choices=CHECK_ORDER,
        default=None,
        metavar="CHECK",
        help="run only this check (repeatable)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a threshold (repeatable); see docs/checks.md",
    )
    p.add_argument(
        "--rules",
        metavar="FILE",
        default=None,
        help="transcript flag rules for your task (TOML or JSON; see docs/transcripts.md)",
    )
    add_run_option(p)
    p.set_defaults(func=run)


def _overrides(pairs: list[str]) -> Thresholds:
    parsed = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(f"--set {pair!r}: expected NAME=VALUE")
        parsed[name.strip()] = value.strip()
    return Thresholds().with_overrides(parsed)


def run(args: argparse.Namespace) -> int:
    thresholds = _overrides(args.set)
    baseline = load_baseline(args.baseline) if args.baseline else None
    reports = []
    for path in args.paths:
        data = read_run(path, args.source_format, run=args.store_run)
        reports.append(
            run_checks(
                data,
                baseline=baseline,
                thresholds=thresholds,
                stall_after=args.stall_after,
                only=args.only,
                transcript_rules=args.rules,
            )
        )
    fmt = "json" if args.json else args.format
    if fmt == "json":
        sys.stdout.write(render_json(reports) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(render_markdown(reports) + "\n")
    else:
        render_text(reports, sys.stdout)
    if args.fail_on:
        line = severity_rank(args.fail_on)
        if any(severity_rank(r.worst) >= line for r in reports):
            return 1
    return 0
