"""``rlvitals metrics RUN``: the step series of a run, typed."""

from __future__ import annotations

import argparse
import sys

from ..views.series import metrics_json, metrics_text
from . import add_run_option, read_run


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "metrics",
        help="print a run's metrics over its steps",
        description="Print the step series of a run (any format rlvitals reads), the way one "
        "greps a number over the steps, but typed. Without --metric: every canonical metric.",
    )
    p.add_argument("path", metavar="RUN", help="run directory or log file")
    p.add_argument(
        "--metric",
        "-m",
        action="append",
        default=[],
        metavar="NAME",
        help="a metric to show (repeatable); a name ending in / selects every metric under it",
    )
    p.add_argument(
        "--from",
        "--format",
        dest="fmt",
        default=None,
        metavar="FORMAT",
        help="source format, overriding sniffing (see `rlvitals formats`); --from as in the "
        "other commands",
    )
    p.add_argument(
        "--mapping",
        default=None,
        metavar="FILE",
        help='TOML or JSON of canonical name = "source key" rules, ahead of the format\'s own',
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"steps": [...], "metrics": {name: [values...]}}, null where not measured',
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="include the source's original keys, not only canonical names",
    )
    add_run_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    data = read_run(
        args.path, args.fmt, mapping=getattr(args, "mapping", None), shown=100, run=args.store_run
    )
    if args.json:
        sys.stdout.write(metrics_json(data, args.metric, include_original=args.all))
        sys.stdout.write("\n")
    else:
        metrics_text(data, args.metric, include_original=args.all, file=sys.stdout)
    return 0
