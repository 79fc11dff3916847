"""What ``rlvitals demo`` and ``rlvitals train`` share: the live view, the run, what follows it."""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from .. import safe
from ..errors import MissingExtraError, RlvitalsError
from ._options import add_judge_args, add_output_args, judge_of, outputs_of

DEFAULT_PORT = 8765


def add_run_options(p: argparse.ArgumentParser, *, lists_faults: bool = False) -> None:
    p.add_argument(
        "--quiet", "-q", action="store_true", help="no live view; print only the run directory"
    )
    p.add_argument("--no-check", action="store_true", help="do not judge the run when it ends")
    p.add_argument(
        "--serve",
        action="store_true",
        help="open the live dashboard on the output directory while the run trains (and after)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"with --serve: the dashboard's port (default {DEFAULT_PORT}, or a free one when "
        "that is taken)",
    )
    p.add_argument(
        "--linger",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --serve: keep the dashboard up this long after the run (default: until Ctrl-C)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the result as JSON: the run directory, reward and held-out first and last"
        + (" (with --list-faults: the faults)" if lists_faults else ""),
    )
    add_judge_args(p)
    add_output_args(p)


def load_trainer() -> Any:
    """``grpo.loop.train``, or one error line naming the extra when torch is missing."""
    from ..grpo import sleeping_threads

    sleeping_threads()  # before torch loads
    try:
        from ..grpo.loop import train
    except ImportError as exc:
        if getattr(exc, "name", "") == "torch" or "torch" in str(exc):
            raise MissingExtraError("train", "the reference trainer") from None
        raise
    return train


def run_trainer(config: Any, args: argparse.Namespace, *, steps: int) -> Path:
    """Run the reference trainer on ``config`` with a live view unless quiet; the run dir."""
    from ..jsonio import dumps
    from ..source import Source

    started = time.perf_counter()  # before torch loads: the wall time a user waits
    judge = judge_of(args)  # a bad --set, --baseline or --rules: one line now, before training
    train = load_trainer()
    from ..follow.train import TrainFollow, shown_by
    from ..outputs.console import LiveView
    from ..views.live import RunTally, summary

    stall = getattr(args, "stall_seconds", 20.0)
    args._stop_serving = None
    if getattr(args, "serve", False):
        from ..follow.hub import serve_in_background

        output = config["output"] if isinstance(config, dict) else config.output
        out_dir = Path(output["output_dir"] if isinstance(output, dict) else output.output_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        try:
            url, args._stop_serving = serve_in_background([out_dir], port=args.port, judge=judge)
        except RlvitalsError:
            if args.port != DEFAULT_PORT:
                raise  # a port the user chose: their call
            # The default port is taken (another dashboard): any free one will do.
            url, args._stop_serving = serve_in_background([out_dir], port=0, judge=judge)
        print(f"live dashboard: {url}", file=sys.stderr, flush=True)
    quiet = args.quiet or args.json
    # A warm start that gave up below its target is said once: the live view shows it as its
    # note, a quiet run as one line on stderr.
    from ..grpo.warmstart import WarmStartWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", WarmStartWarning)
        outputs = outputs_of(args)  # --webhook, --to: judged live, told as it trains
        if quiet:
            tally = RunTally(steps, started=started)
            follow = TrainFollow(judge, outputs, min_alert=args.alert_on) if outputs else None

            def on_event(kind: str, data: Any) -> None:
                tally.event(kind, data)
                if follow is not None:
                    follow.event(kind, data)

            try:
                run_dir = train(config, fault=args.fault, stall_seconds=stall, on_event=on_event)
                if follow is not None:
                    follow.end()
            finally:
                lost = follow.close() if follow is not None else 0
        else:
            view = LiveView(steps, started=started)
            shown = TrainFollow(judge, [view, *outputs], min_alert=args.alert_on)
            try:
                with view:
                    shows = shown_by(view, shown)
                    run_dir = train(config, fault=args.fault, stall_seconds=stall, on_event=shows)
                    shown.end()  # the verdict left on the screen is the ended run's
            finally:
                lost = shown.close(10.0)
            tally = view.tally
            view.console.print()
        if lost:
            print(f"warning: {lost} alert(s) not delivered", file=sys.stderr)
    for w in caught:
        if quiet and issubclass(w.category, WarmStartWarning):
            print(f"warning: {w.message}", file=sys.stderr)
        elif not issubclass(w.category, WarmStartWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if args.json:  # the judgement, as `rlvitals check --json` gives it
        report = judge(Source(str(run_dir)).read())
        out = {
            "run": str(run_dir),
            "fault": args.fault,
            "updates": tally.done,
            "reward_first5": tally.first5(),
            "reward_last5": tally.last5(),
            "heldout": [{"step": s, "score": v} for s, v in tally.evals],
            "verdict": report.verdict,
            "worst": report.worst,
            "findings": [f.to_dict() for f in report.findings],
        }
        sys.stdout.write(safe.json_for_terminal(dumps(out)) + "\n")
    elif args.quiet:
        print(run_dir)
    else:
        from rich.console import Console

        Console(stderr=True).print(summary(tally, str(run_dir), fault=args.fault))
        print(file=sys.stderr)
    return run_dir


def after_run(run_dir: Path, args: argparse.Namespace) -> int:
    """What follows a run: judge it with the checks, and with ``--serve`` keep the dashboard
    up (for ``--linger`` seconds, else until Ctrl-C)."""
    from ..source import Source

    stop = getattr(args, "_stop_serving", None)
    try:
        if not (args.no_check or args.json or args.quiet):
            from ..views.check import render_text

            report = judge_of(args)(Source(str(run_dir)).read())
            render_text([report], sys.stdout)
        if not (args.json or args.quiet):
            from ..views.live import next_steps

            command = "demo" if hasattr(args, "list_faults") else "train"
            print("\nnext:")
            for line in next_steps(str(run_dir), command=command, fault=args.fault):
                print("  " + line)
            sys.stdout.flush()
        if stop is not None:
            linger = args.linger
            print(
                "the live dashboard stays up "
                + (f"for {linger:g} s" if linger is not None else "until Ctrl-C"),
                file=sys.stderr,
                flush=True,
            )
            with contextlib.suppress(KeyboardInterrupt):
                threading.Event().wait(linger)  # None: until Ctrl-C
    finally:
        if stop is not None:
            stop()
            args._stop_serving = None
    return 0
