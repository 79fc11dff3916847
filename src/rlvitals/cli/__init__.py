"""One entry point, ``rlvitals``, with a subcommand per job.

Each subcommand lives in its own module here with its one-line ``HELP`` and
``register(subparsers)``; the command logic reads and judges, formatting lives in
``rlvitals.views``. Only the command given is registered whole and imports what it needs, so
``rlvitals --help`` loads the command modules alone (a test counts them). Errors a user can
cause (a bad path, a bad config, an unknown format) become one line on stderr and exit code 2,
never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import __version__
from ..errors import RlvitalsError

if TYPE_CHECKING:
    from ..model import RunData

__all__ = ["main"]

# Subcommand modules, in the order `rlvitals --help` lists them.
COMMANDS = [
    "check",
    "export",
    "query",
    "baseline",
    "metrics",
    "transcripts",
    "formats",
    "report",
    "watch",
    "serve",
    "demo",
    "train",
    "mcp",
]

EXIT_OK, EXIT_USAGE = 0, 2


def show_read_warnings(data: RunData, shown: int = 20) -> None:
    """A read run's notes and warnings on stderr (file and line each): the first ``shown``
    warnings and a count of the rest."""
    from ..safe import line

    for n in data.notes:
        print(f"note: {line(n)}", file=sys.stderr)
    for w in data.warnings[:shown]:
        print(f"warning: {line(w)}", file=sys.stderr)
    if len(data.warnings) > shown:
        print(f"warning: ... and {len(data.warnings) - shown} more", file=sys.stderr)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``command``, only that subcommand's arguments are declared (the others
    are named with their ``HELP``), so nothing a command does not need is imported."""
    parser = argparse.ArgumentParser(
        prog="rlvitals",
        description="Is your LLM RL run learning, stalled, exploited or drifting? And why.",
    )
    parser.add_argument("--version", action="version", version=f"rlvitals {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f".{name}", __name__)
        if command is None or name == command:
            module.register(sub)
        else:
            sub.add_parser(name, help=module.HELP)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # The command is the first word that is no option (``rlvitals`` itself takes no values).
    parser = build_parser(next((a for a in argv if not a.startswith("-")), ""))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_OK
    try:
        return int(args.func(args) or 0)
    except RlvitalsError as exc:
        from ..safe import line

        print(f"rlvitals {args.command}: error: {line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"rlvitals {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and closed: not an error of ours.
        sys.stderr.close()
        return EXIT_OK
