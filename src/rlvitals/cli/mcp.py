"""``rlvitals mcp``: the read-only tools for coding agents, over MCP's stdio transport."""

from __future__ import annotations

import argparse

from ._options import add_judge_args, judge_of

HELP = "serve read-only tools to a coding agent over MCP (stdio)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "mcp",
        help=HELP,
        description="Serve rlvitals to a coding agent as an MCP server on standard input and "
        "output: find_runs, check_run, read_metrics, list_transcripts and compare_runs, each "
        "read-only, each judging as `rlvitals check` does. Paths outside the roots are "
        "refused. Needs the mcp extra (pip install -e '.[mcp]'). See llms.txt.",
    )
    p.add_argument(
        "--root",
        dest="roots",
        action="append",
        default=None,
        metavar="DIR",
        help="a folder the tools may read (repeatable; default: the current folder); "
        "relative paths are taken from the first",
    )
    add_judge_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..agents import Roots, Tools
    from ..errors import MissingExtraError

    try:
        from ..agents.server import build_server
    except ImportError:  # pydantic comes with the mcp extra
        raise MissingExtraError("mcp", "rlvitals mcp") from None

    tools = Tools(Roots(args.roots or ["."]), judge_of(args))
    build_server(tools).run("stdio")
    return 0
