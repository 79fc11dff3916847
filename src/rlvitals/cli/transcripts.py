"""``rlvitals transcripts RUN``: read the attempts worth reading, with the flags they raised."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UsageError
from ._options import add_source_args, read_source, source_of

HELP = "read the highest-reward attempts every few updates, with their flags"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "transcripts",
        help=HELP,
        description="Show a run's transcripts the way the seeds ask: the highest-reward "
        "attempts every few updates (or the lowest, one attempt by id, or those that raised a "
        "flag), with reward, policy version, lengths, whether each trained, and the flags "
        "raised on it (tampering with tests or the grader, hard-coded outputs, answer "
        "formats, repetition). Text is shown escaped; nothing in it is ever run.",
    )
    p.add_argument("path", metavar="RUN", help="run directory or log file")
    p.add_argument("--top", type=int, default=3, metavar="K", help="attempts per step (3)")
    p.add_argument(
        "--every",
        type=int,
        default=None,
        metavar="N",
        help="every N-th update (default: about 8 steps spread over the run)",
    )
    p.add_argument("--step", type=int, default=None, metavar="S", help="only update S")
    p.add_argument("--attempt", default=None, metavar="ID", help="one attempt, in full")
    p.add_argument("--lowest", action="store_true", help="the lowest-reward attempts instead")
    p.add_argument(
        "--flag",
        default=None,
        metavar="NAME",
        help="the attempts that raised this flag ('*': any flag)",
    )
    p.add_argument(
        "--rules",
        default=None,
        metavar="FILE",
        help="a rules file (TOML or JSON) for your task; default: $RLVITALS_TRANSCRIPT_RULES, "
        "else transcript-rules.toml in the run directory if present (docs/transcripts.md)",
    )
    p.add_argument(
        "--chars",
        type=int,
        default=600,
        metavar="N",
        help="characters of each text shown (head and tail; 600)",
    )
    p.add_argument("--full", action="store_true", help="show every text whole")
    p.add_argument("--no-prompts", action="store_true", help="show replies only")
    p.add_argument("--json", action="store_true", help="print the selection as JSON")
    add_source_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..judge import load_run_rules
    from ..readers.remote import is_url
    from ..source import run_dir
    from ..transcripts.browse import browse
    from ..transcripts.store import TranscriptStore
    from ..views.transcripts import render_json, render_text

    path = Path(args.path)
    if not is_url(args.path) and not path.exists():
        raise UsageError(f"{path}: no such run directory")
    data = read_source(args.path, args, require=False)
    store = source_of(args, args.path).transcripts(data)
    if store is None:  # none there: browse says how to have them
        store = TranscriptStore(path)
    payload = browse(
        store,
        load_run_rules(args.rules, run_dir(data) or store.run_dir),  # as the checks find them
        data,
        top=args.top,
        every=args.every,
        step=args.step,
        attempt=args.attempt,
        lowest=args.lowest,
        flag=args.flag,
    )
    if args.json:
        sys.stdout.write(render_json(payload) + "\n")
    else:
        render_text(
            payload,
            sys.stdout,
            chars=None if args.full else max(40, args.chars),
            prompts=not args.no_prompts,
        )
    return 0
