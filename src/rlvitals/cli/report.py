"""``rlvitals report RUN... -o report.html``: one self-contained HTML file."""

from __future__ import annotations

import argparse
import sys

from ..errors import UsageError
from ._source import add_source_args, read_source


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="write a self-contained HTML report of runs (plots, findings, transcripts)",
        description="Judge runs and write one HTML file that opens offline: the verdict and "
        "findings in the seeds' order, the dashboard plots with each finding marked where it "
        "happened, healthy ranges shaded (--baseline), several runs overlaid, and the "
        "transcripts of the steps the findings point at. All run text is escaped.",
    )
    p.add_argument("paths", nargs="+", metavar="RUN", help="run directories or log files")
    p.add_argument(
        "-o", "--output", default="report.html", metavar="FILE", help="default: report.html"
    )
    p.add_argument(
        "--baseline",
        metavar="FILE",
        help="healthy ranges from `rlvitals baseline`: judged against and shaded on the plots",
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
    from ..baseline import load
    from ..checks import run_checks
    from ..jsonio import dumps
    from ..views.dashboard import baseline_ranges
    from ..views.report import render_report, report_payload, write_report

    if not args.json and not args.output:
        raise UsageError("-o: expected a file name")
    baseline = load(args.baseline) if args.baseline else None
    if args.samples and len(args.paths) > 1:
        raise UsageError("--samples: expected one RUN (the dump belongs to one run)")
    runs = []
    for path in args.paths:
        data = read_source(path, args, shown=5)
        runs.append((data, run_checks(data, baseline=baseline)))
    shading = baseline_ranges(baseline, args.baseline) if baseline else None
    if args.json:
        sys.stdout.write(dumps(report_payload(runs, baseline=shading)) + "\n")
        return 0
    html = render_report(runs, baseline=shading, title=args.title)
    write_report(args.output, html)
    worst = [f"{r.info.get('name') or r.source}: {r.verdict} ({r.worst})" for _, r in runs]
    print(f"wrote {args.output} ({len(html) // 1024} KiB): " + "; ".join(worst))
    return 0
