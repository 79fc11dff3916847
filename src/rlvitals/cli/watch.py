"""``rlvitals watch RUN``: follow a live run in the terminal; alerts to a webhook."""

from __future__ import annotations

import argparse
import sys

from ._options import (
    add_judge_args,
    add_output_args,
    add_source_args,
    judge_of,
    one_run_of,
    outputs_of,
    source_of,
    throttle_of,
)

HELP = "follow a live run: step, key numbers, verdict; alerts on new findings"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "watch",
        help=HELP,
        description="Follow a running run in the terminal, reading only what it writes next: "
        "its step, key numbers and verdict, whether a slow phase is still making progress "
        "(heartbeats) or the run has stalled. Each new finding is posted once to --webhook "
        "(Slack-compatible JSON). Ends when the run's status is no longer 'running', with "
        "exit code 1 when a finding at --fail-on or worse remains (as `rlvitals check "
        "--fail-on`), 0 otherwise. Runs whose format records no status are followed until "
        "Ctrl-C. A run that does not exist yet is waited for; a run deleted and recreated "
        "while followed is followed again from its start.",
    )
    p.add_argument("path", metavar="RUN", help="run directory or log file")
    p.add_argument(
        "--fail-on",
        choices=["warn", "fail", "never"],
        default="fail",
        help="exit 1 at the end when a finding at this level or worse exists (default: fail)",
    )
    p.add_argument(
        "--interval",
        dest="poll_s",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="poll interval (default 1)",
    )
    add_source_args(p)
    p.add_argument(
        "--json", action="store_true", help="print JSON Lines events instead of a live view"
    )
    add_judge_args(
        p,
        baseline="healthy ranges from `rlvitals baseline`",
        stall_after="no step record or progress for this long means stalled "
        "(default: ten typical step intervals, at least 10 s)",
    )
    add_output_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..follow.watch import Watcher, watch

    judge = judge_of(args)
    outputs = outputs_of(args)
    try:
        watcher = Watcher(
            source_of(args, one_run_of(args.path)),
            judge,
            outputs,
            throttle_of(args, Watcher.THROTTLE),
            min_alert=args.alert_on,
            wait=True,
        )
    except BaseException:
        for out in outputs:
            out.close(0)
        raise
    return watch(
        watcher,
        console=Console(),
        fail_on=None if args.fail_on == "never" else args.fail_on,
        json_lines=args.json,
        out=sys.stdout,
    )
