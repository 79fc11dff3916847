"""``rlvitals train RUN.toml``: the reference GRPO trainer from a TOML config."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

from ..errors import UsageError
from ._trainer import add_run_options, after_run, run_trainer

HELP = "run the reference GRPO trainer from a TOML config"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ..grpo.faults import FAULTS

    p = sub.add_parser(
        "train",
        help=HELP,
        description="Run the reference GRPO trainer (CPU, PyTorch) from a TOML file: the "
        "writer's [output] [training] [rollout] sections plus the trainer's [model] [task] "
        "[optim] (see docs/trainer.md and examples/). Needs the 'train' extra (torch).",
    )
    p.add_argument("config", metavar="RUN.toml", help="the run's config file")
    p.add_argument(
        "--fault",
        metavar="NAME[@STEP]",
        default=None,
        help=f"inject a fault (docs/trainer.md says what each does): {', '.join(FAULTS)}",
    )
    p.add_argument(
        "--name",
        default=None,
        help="the run directory's name, over the config's [output] name (default there: "
        "unique, time-stamped)",
    )
    add_run_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..config import load_config
    from ..grpo.config import SECTIONS, unusable_guard
    from ..grpo.faults import parse_fault

    cfg = load_config(args.config, sections=SECTIONS)  # errors name the file, section, key
    if not _sets_guard(args.config):  # the guard in updates, as the demo's (grpo.demo)
        cfg.training.max_consecutive_unusable_groups = unusable_guard(
            cfg.section("task").tasks_per_step
        )
    if args.fault:
        parse_fault(args.fault)
    if args.name is not None:
        if not args.name or "/" in args.name or args.name in (".", ".."):
            raise UsageError(f"--name {args.name!r}: expected a directory name")
        cfg.section("output").name = args.name
    steps = cfg.section("optim").steps
    run_dir = run_trainer(cfg, args, steps=steps)
    return after_run(run_dir, args)


def _sets_guard(path: str) -> bool:
    """Whether the TOML at ``path`` (read once already) sets ``[training]
    max_consecutive_unusable_groups`` itself."""
    try:
        training = tomllib.loads(Path(path).read_text(encoding="utf-8")).get("training")
    except (OSError, ValueError):
        return True  # as read: leave the config as it is
    return isinstance(training, dict) and "max_consecutive_unusable_groups" in training
