"""``rlvitals query RUNS... "SQL"``: DuckDB over the tables runs, steps, attempts, findings."""

from __future__ import annotations

import argparse
import sys

from ..errors import UsageError
from ._options import source_of
from .export import add_fleet_options, expand

HELP = "SQL over runs (DuckDB): tables runs, steps, attempts, findings"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "query",
        help=HELP,
        description="Run an SQL query (DuckDB, embedded) over runs: a folder `rlvitals export` "
        "wrote, or runs and folders of runs (exported to a temporary folder first). Tables: "
        'runs, steps (one column per metric; quote names with a slash: "reward/mean"; a key '
        "that differs from another only in case is KEY#2, as SQL names ignore case), "
        "attempts, findings. Needs the fleet extra (pyarrow, duckdb). The SQL is DuckDB's, "
        "with your own rights: it can read any file you can (read_csv, read_text) and write "
        "one (COPY ... TO); run only SQL you would run yourself. DuckDB extensions are not "
        "installed or loaded unless --extensions is given.",
    )
    p.add_argument("items", nargs="+", metavar="RUN... SQL", help="runs, then the SQL statement")
    p.add_argument("--json", action="store_true", help="rows as JSON objects")
    p.add_argument(
        "--extensions",
        action="store_true",
        help="let DuckDB install and load the extensions a statement needs (fetched over "
        "the network); off by default",
    )
    add_fleet_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .. import safe
    from ..fleet import query
    from ..fleet.tables import is_export
    from ..jsonio import dumps
    from ..views.fleet import render_query

    if len(args.items) < 2:
        raise UsageError('expected runs, then an SQL statement: rlvitals query RUNS... "SQL"')
    *paths, sql = args.items
    if not (len(paths) == 1 and is_export(paths[0])):
        paths = expand(paths)
    result = query(
        paths,
        sql,
        jobs=args.jobs,
        extensions=args.extensions,
        source=source_of(args, ""),
    )
    if args.json:
        sys.stdout.write(safe.json_for_terminal(dumps(result.to_dict(), indent=2)) + "\n")
    else:
        render_query(result, sys.stdout)
    return 0
