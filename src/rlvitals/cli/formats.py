"""``rlvitals formats [NAME...]``: the formats rlvitals reads and how each maps to canonical
names; ``rlvitals formats --explain FILE``: how each key of one file was mapped."""

from __future__ import annotations

import argparse
import sys

from ._options import add_source_args, read_source

HELP = "list the run formats rlvitals reads and their mapping tables"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "formats",
        help=HELP,
        description="List the formats rlvitals can read (in sniffing order). With NAME: that "
        "format's mapping table, source key -> canonical name, and what is left unmapped. "
        "With --explain FILE: read FILE and print each of its keys, the canonical name it "
        "maps to and the rule that mapped it (user mapping, table, synonym, tokens, "
        "canonical), then the keys left unmapped and why, and the metrics missing from a "
        "step on.",
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="formats to show in full")
    p.add_argument(
        "--explain", metavar="FILE", default=None, help="how each key of this run is mapped"
    )
    p.add_argument("--json", action="store_true", help="every format and table as JSON")
    add_source_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..views.formats import explain_json, explain_text, formats_json, formats_text

    if args.explain:
        data = read_source(args.explain, args, shown=5, require=False)
        if args.json:
            sys.stdout.write(explain_json(data) + "\n")
        else:
            explain_text(data, file=sys.stdout)
        return 0
    if args.json:
        sys.stdout.write(formats_json(args.names or None))
        sys.stdout.write("\n")
    else:
        formats_text(args.names or None, file=sys.stdout)
    return 0
