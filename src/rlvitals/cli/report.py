"""``rlvitals report RUN... -o report.html``: one self-contained HTML file."""

from __future__ import annotations

import argparse
import sys

from ..errors import UsageError
from ._options import (
    add_judge_args,
    add_source_args,
    judge_of,
    read_source,
    runs_of,
    show_judging_warnings,
)

HELP = "write a self-contained HTML report of runs (plots, findings, transcripts)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help=HELP,
        description="Judge runs and write one HTML file that opens offline: the verdict and "
        "findings in the seeds' order, the dashboard plots with each finding marked where it "
        "happened, healthy ranges shaded (--baseline), several runs overlaid, and the "
        "transcripts of the steps the findings point at. All run text is escaped.",
    )
    p.add_argument(
        "paths",
        nargs="+",
        metavar="RUN",
        help="run directories, log files, or folders of runs (every run under them, as check "
        "finds them)",
    )
    p.add_argument(
        "-o", "--output", default="report.html", metavar="FILE", help="default: report.html"
    )
    add_judge_args(
        p,
        baseline="healthy ranges from `rlvitals baseline`: judged against and shaded on the plots",
    )
    add_source_args(p)
    p.add_argument("--title", default=None, help="the page title")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the report's data (runs, series, findings, transcripts) as JSON instead",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..jsonio import dumps
    from ..views.dashboard import baseline_ranges
    from ..views.report import render_report, report_payload, write_report

    if not args.json and not args.output:
        raise UsageError("-o: expected a file name")
    judge = judge_of(args)
    baseline = judge.baseline
    # A folder: every run under it, as check finds them (a run named twice is shown twice).
    paths = [run for path in args.paths for run in runs_of([path])]
    if args.samples and len(paths) > 1:
        raise UsageError("--samples: expected one RUN (the dump belongs to one run)")
    runs = []
    for path in paths:
        data = read_source(path, args, shown=5)
        report = judge(data)
        show_judging_warnings(data, report)
        runs.append((data, report))
    shading = baseline_ranges(baseline, args.baseline) if baseline else None
    if args.json:
        from ..safe import json_for_terminal

        sys.stdout.write(json_for_terminal(dumps(report_payload(runs, baseline=shading))) + "\n")
        return 0
    html = render_report(runs, baseline=shading, title=args.title)
    write_report(args.output, html)
    from .. import safe

    worst = [f"{r.info.get('name') or r.source}: {r.verdict} ({r.worst})" for _, r in runs]
    shown = "; ".join(worst[:5]) + (f"; and {len(worst) - 5} more" if len(worst) > 5 else "")
    print(safe.line(f"wrote {args.output} ({len(html) // 1024} KiB): {shown}"))
    return 0
