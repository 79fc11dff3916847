"""The reference GRPO trainer: a small but real RL loop on the CPU, healthy or broken on demand.

A character-level transformer trained from scratch learns additions (some behind a lookup
tool, multi-turn) with GRPO, and writes its run through rlvitals' own writer. It exists so
every check can be seen working on real runs: ``faults.py`` breaks it in each way the seeds
describe. Needs the ``train`` extra (torch); this package imports torch only when a run starts, and
sets ``OMP_WAIT_POLICY=PASSIVE`` just before that unless it is set (``sleeping_threads``), never
when it is imported.

    from rlvitals.grpo import demo_run
    run_dir = demo_run("runs", fault="grader_exploit")

Modules, in the order a run uses them: ``config`` (the [model] [task] [optim] sections),
``tasks``, ``model``, ``warmstart``, ``sampler`` and ``agent`` (episodes), ``grader``,
``trainer`` (the GRPO update), ``faults``, ``loop`` (the instrumented loop), ``demo``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .faults import FAULTS, parse_fault

if TYPE_CHECKING:
    from .demo import demo_config, demo_run
    from .loop import train

__all__ = ["FAULTS", "demo_config", "demo_run", "parse_fault", "sleeping_threads", "train"]


def sleeping_threads() -> None:
    """``OMP_WAIT_POLICY=PASSIVE`` unless the user chose: OpenMP threads that spin while they
    wait make torch 10-100x slower when another process holds a core (measured here: 1.2 s
    instead of 0.016 s for a small rollout on 2 shared cores). Read once, when torch loads: the
    trainer's loaders call this just before they import it (this package's ``train`` and
    ``demo_run``, ``rlvitals demo`` and ``train``); a program that imports ``grpo.loop``
    itself sets its own."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


_LAZY = {"demo_run": "demo", "demo_config": "demo", "train": "loop"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        from ..errors import MissingExtraError

        sleeping_threads()
        try:
            import torch  # noqa: F401
        except ImportError:
            raise MissingExtraError("train", "the reference trainer") from None
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlvitals.grpo' has no attribute {name!r}")
