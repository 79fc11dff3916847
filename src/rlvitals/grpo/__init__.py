"""The reference GRPO trainer: a small but real RL loop on the CPU, healthy or broken on demand.

A character-level transformer trained from scratch learns additions (some behind a lookup
tool, multi-turn) with GRPO, and writes its run through rlvitals' own writer. It exists so
every check can be seen working on real runs: ``faults.py`` breaks it in each way the seeds
describe. Needs the ``train`` extra (torch); this package imports torch only when a run starts, and sets
``OMP_WAIT_POLICY=PASSIVE`` before that unless it is set (see below).

    from rlvitals.grpo import demo_run
    run_dir = demo_run("runs", fault="grader_exploit")

Modules, in the order a run uses them: ``config`` (the [model] [task] [optim] sections),
``tasks``, ``model``, ``warmstart``, ``sampler`` and ``agent`` (episodes), ``grader``,
``trainer`` (the GRPO update), ``faults``, ``loop`` (the instrumented loop), ``demo``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

# OpenMP threads that spin while they wait make torch 10-100x slower when another process holds
# a core (measured here: 1.2 s instead of 0.016 s for a small rollout on 2 shared cores). Read
# once, when torch loads: so set before it, and only if the user has not chosen.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .faults import FAULTS, parse_fault

if TYPE_CHECKING:
    from .demo import demo_config, demo_run
    from .loop import train

__all__ = ["FAULTS", "demo_config", "demo_run", "parse_fault", "train"]

_LAZY = {"demo_run": "demo", "demo_config": "demo", "train": "loop"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        from ..errors import MissingExtraError

        try:
            import torch  # noqa: F401
        except ImportError:
            raise MissingExtraError("train", "the reference trainer") from None
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlvitals.grpo' has no attribute {name!r}")
