"""``rlvitals metrics RUN``: the step series of a run, typed."""

from __future__ import annotations

import argparse
import os
import sys

from ._options import add_source_args, read_source

HELP = "print a run's metrics over its steps"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "metrics",
        help=HELP,
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
    add_source_args(p)
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="output format, as in `rlvitals check` (default: text; the source's format is --from)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='same as --format json: {"steps": [...], "metrics": {name: [values...]}}, null '
        "where not measured",
    )
    p.add_argument(
        "--config",
        action="store_true",
        help="print the run's own settings instead: what its config files say about "
        "sampling (temperature, top_p, top_k, min_p), precision, epochs, loss aggregation, "
        "importance-sampling correction, KL, lengths and lag, each with the file and key it "
        "came from, and the settings no file says",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="include the source's original keys, not only canonical names",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..views.series import metrics_json, metrics_text

    if args.config:
        return _config(args)
    data = read_source(args.path, args, shown=100)
    if args.json or args.format == "json":
        sys.stdout.write(metrics_json(data, args.metric, include_original=args.all))
        sys.stdout.write("\n")
    else:
        metrics_text(data, args.metric, include_original=args.all, file=sys.stdout)
    return 0


def _config(args: argparse.Namespace) -> int:
    """``--config``: the run's own settings; a folder of config files and no logs yet (a run
    that has not logged a step) is read too."""
    from ..errors import UnknownFormatError
    from ..settings import read_settings, settings_of
    from ..views.settings import settings_json, settings_text

    try:
        s = settings_of(read_source(args.path, args, shown=100, require=False))
    except UnknownFormatError:
        if not os.path.isdir(args.path):
            raise  # a file no reader reads, or no such path: the usual one line
        s = read_settings(None, args.path)
    if args.json:
        sys.stdout.write(settings_json(s) + "\n")
    else:
        settings_text(s, sys.stdout)
    return 0
