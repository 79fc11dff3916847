"""``rlvitals watch RUN``: follow a live run in the terminal; alerts to a webhook."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._source import add_source_args, open_kwargs


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "watch",
        help="follow a live run: step, key numbers, verdict; alerts on new findings",
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
        "--stall-after",
        type=float,
        default=None,
        metavar="SECONDS",
        help="no step record or progress for this long means stalled "
        "(default: ten typical step intervals, at least 10 s)",
    )
    p.add_argument(
        "--fail-on",
        choices=["warn", "fail", "never"],
        default="fail",
        help="exit 1 at the end when a finding at this level or worse exists (default: fail)",
    )
    p.add_argument(
        "--interval", type=float, default=1.0, metavar="SECONDS", help="poll interval (default 1)"
    )
    p.add_argument("--baseline", metavar="FILE", help="healthy ranges from `rlvitals baseline`")
    add_source_args(p)
    p.add_argument(
        "--json", action="store_true", help="print JSON Lines events instead of a live view"
    )
    add_judging_args(p)
    add_output_args(p)
    p.set_defaults(func=run)


def add_output_args(p: argparse.ArgumentParser) -> None:
    """``--webhook``, ``--output`` and ``--alert-on``: where new findings go (watch, serve)."""
    p.add_argument(
        "--webhook",
        metavar="URL",
        help="post each new finding here (Slack-compatible JSON; Discord's own body for a "
        "Discord webhook URL)",
    )
    p.add_argument(
        "--output",
        action="append",
        default=[],
        metavar="NAME[=ARG]",
        help="also hand each update to this output (repeatable): webhook=URL, slack=URL, "
        "discord=URL, or one an installed package registers (docs/outputs.md)",
    )
    p.add_argument(
        "--alert-on",
        choices=["info", "warn", "fail"],
        default="warn",
        help="lowest severity that counts as a new finding for the outputs (default: warn)",
    )


def build_outputs(args: argparse.Namespace) -> list[Any]:
    """The outputs ``--webhook`` and ``--output`` name, built now (a mistake is one error
    line at the start); on an error, those already built are closed."""
    from ..outputs import load_output

    specs = [f"webhook={args.webhook}"] if args.webhook else []
    specs += args.output
    built: list[Any] = []
    try:
        for spec in specs:
            built.append(load_output(spec))
    except BaseException:
        for out in built:
            out.close(0)
        raise
    return built


def add_judging_args(p: argparse.ArgumentParser) -> None:
    """``--set`` and ``--rules``, as ``rlvitals check`` takes them (watch and serve)."""
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a threshold (repeatable), as in `rlvitals check`; see docs/checks.md",
    )
    p.add_argument(
        "--rules",
        metavar="FILE",
        default=None,
        help="transcript flag rules for your task (TOML or JSON; see docs/transcripts.md)",
    )


def judging_options(args: argparse.Namespace) -> tuple[object, str | None]:
    """The thresholds and rules file of ``--set``/``--rules``, checked now (a mistake is one
    error line at the start, not a warning on every judgement)."""
    from ..transcripts.rules import load_rules
    from .check import _overrides

    thresholds = _overrides(args.set)
    if args.rules:
        load_rules(args.rules)
    return thresholds, args.rules


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..baseline import load
    from ..views.watch import Watcher, watch

    baseline = load(args.baseline) if args.baseline else None
    thresholds, rules = judging_options(args)
    outputs = build_outputs(args)
    try:
        watcher = Watcher(
            args.path,
            **open_kwargs(args),
            stall_after=args.stall_after,
            baseline=baseline,
            thresholds=thresholds,
            transcript_rules=rules,
            outputs=outputs,
            min_alert=args.alert_on,
            wait=True,
            samples=args.samples,
        )
    except BaseException:
        for out in outputs:
            out.close(0)
        raise
    return watch(
        watcher,
        console=Console(),
        interval=args.interval,
        fail_on=None if args.fail_on == "never" else args.fail_on,
        json_lines=args.json,
        out=sys.stdout,
    )
