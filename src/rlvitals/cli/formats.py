"""``rlvitals formats [NAME...]``: the formats rlvitals reads and how each maps to canonical
names."""

from __future__ import annotations

import argparse
import sys

from ..views.formats import formats_json, formats_text


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "formats",
        help="list the run formats rlvitals reads and their mapping tables",
        description="List the formats rlvitals can read (in sniffing order). With NAME: that "
        "format's mapping table, source key -> canonical name, and what is left unmapped.",
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="formats to show in full")
    p.add_argument("--json", action="store_true", help="every format and table as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.json:
        sys.stdout.write(formats_json(args.names or None))
        sys.stdout.write("\n")
    else:
        formats_text(args.names or None, file=sys.stdout)
    return 0
