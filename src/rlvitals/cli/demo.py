"""``rlvitals demo``: a real GRPO run on the CPU, healthy or broken on demand, shown live."""

from __future__ import annotations

import argparse
import json
import sys

from ._trainer import add_run_options, after_run, load_trainer, run_trainer

HELP = "train the tiny reference GRPO trainer on the CPU (healthy, or with a fault)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ..grpo.faults import FAULTS

    p = sub.add_parser(
        "demo",
        help=HELP,
        description="Warm-start and train a small transformer with GRPO on additions (some "
        "with a lookup tool), writing a run directory through rlvitals' own writer, with the "
        "key numbers live in the terminal; then judge the run. --fault breaks it in one of "
        "the ways the seeds describe. Needs the 'train' extra (torch).",
    )
    p.add_argument(
        "--fault",
        metavar="NAME[@STEP]",
        default=None,
        help=f"inject a fault from update STEP (default: its own); one of: {', '.join(FAULTS)}",
    )
    p.add_argument("--list-faults", action="store_true", help="say what each fault does and exit")
    p.add_argument("--seed", type=int, default=0, help="seed of everything (default 0)")
    p.add_argument("--steps", type=int, default=40, help="GRPO updates (default 40)")
    p.add_argument(
        "--mode",
        choices=["sync", "async"],
        default="sync",
        help="async: the sampler runs an update ahead on older weights",
    )
    p.add_argument(
        "--output-dir", default="runs", metavar="DIR", help="parent of the run directory (runs)"
    )
    p.add_argument("--name", default=None, help="the run directory's name (default: unique)")
    p.add_argument(
        "--stall-seconds",
        type=float,
        default=20.0,
        metavar="S",
        help="with --fault stall: how long the run hangs before it is abandoned (default 20)",
    )
    add_run_options(p, lists_faults=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..grpo.faults import parse_fault

    if args.list_faults:
        return _list_faults(args.json)
    if args.fault:
        parse_fault(args.fault)  # a bad name is a usage error before any work
    load_trainer()  # torch loads here, not at CLI start; without it, one line naming the extra
    from ..grpo.demo import demo_config

    cfg = demo_config(
        args.output_dir, name=args.name, seed=args.seed, steps=args.steps, mode=args.mode
    )
    run_dir = run_trainer(cfg, args, steps=args.steps)
    return after_run(run_dir, args)


def _list_faults(as_json: bool) -> int:
    from ..grpo.faults import describe

    rows = describe()
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    from rich.console import Console

    from ..views.live import fault_table

    Console().print(fault_table(rows))
    return 0
