"""``rlvitals baseline RUN... -o ranges.json``: healthy ranges from your own seeds."""

from __future__ import annotations

import argparse
import sys

from ..errors import UsageError
from ._options import add_source_args, read_source

HELP = "healthy ranges per metric from several healthy seeds"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "baseline",
        help=HELP,
        description="Read healthy runs of one setup (three seeds, say) and store per metric the "
        "range and mean over the first steps and the trend over each run; hold a new run "
        "against them with `rlvitals check RUN --baseline FILE`.",
    )
    p.add_argument("paths", nargs="+", metavar="RUN", help="healthy runs of the same setup")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write")
    p.add_argument(
        "--first",
        type=int,
        default=10,
        metavar="N",
        help="how many first steps make the early range (default 10)",
    )
    add_source_args(p, samples=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..baseline import build, save

    if len(args.paths) < 2:
        raise UsageError(
            "a baseline needs two or more healthy runs of one setup (seeds): from one run its "
            "ranges are that run's own values, with no spread between seeds to judge against"
        )
    runs = [read_source(p, args) for p in args.paths]
    base = build(runs, first=args.first)
    save(base, args.output)
    print(
        f"wrote {args.output}: {len(base['metrics'])} metrics from {len(runs)} run(s)",
        file=sys.stderr,
    )
    return 0
