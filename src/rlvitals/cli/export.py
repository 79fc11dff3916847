"""``rlvitals export RUNS... -o OUT``: runs as Parquet tables (runs, steps, attempts, findings)
that DuckDB, Spark or a warehouse reads (docs/fleet.md)."""

from __future__ import annotations

import argparse
import sys

from ..errors import UsageError
from ._options import add_judge_args, judge_of, runs_of, source_of

HELP = "write runs as Parquet tables (runs, steps, attempts, findings)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "export",
        help=HELP,
        description="Read and judge runs (folders of runs are searched) and write OUT/runs, "
        "OUT/steps, OUT/attempts and OUT/findings as Parquet, one file per run in each, every "
        "row carrying its run. Needs the fleet extra (pyarrow, duckdb).",
    )
    p.add_argument("paths", nargs="+", metavar="RUN", help="runs or folders of runs")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="folder to write")
    add_fleet_options(p)
    add_judge_args(p)
    p.set_defaults(func=run)


def add_fleet_options(p: argparse.ArgumentParser) -> None:
    """``--jobs`` and ``--from``, shared by export and query."""
    p.add_argument(
        "--jobs", "-j", type=int, default=1, metavar="N", help="processes (0: one per core)"
    )
    p.add_argument(
        "--from",
        dest="source_format",
        default=None,
        metavar="NAME",
        help="source format of the runs, overriding sniffing (see `rlvitals formats`)",
    )


def expand(paths: list[str]) -> list[str]:
    """Every run under ``paths`` (as check finds them); an unknown path is a usage error naming
    it."""
    runs = runs_of(paths)
    if not runs:
        raise UsageError("no runs given")
    return runs


def run(args: argparse.Namespace) -> int:
    from ..fleet import export

    rows = export(
        expand(args.paths),
        args.output,
        jobs=args.jobs,
        source=source_of(args, ""),
        judge=judge_of(args),
    )
    from .. import safe

    bad = [r for r in rows if r.get("error")]
    for r in bad:
        print(f"rlvitals export: error: {safe.line(r['error'])}", file=sys.stderr)
    print(
        f"wrote {len(rows) - len(bad)} runs to {safe.line(args.output)} "
        "(runs, steps, attempts, findings)"
    )
    return 2 if bad else 0
