"""``demo_run``: one call to a finished (or deliberately broken) run directory.

The settings a demo run uses beyond the trainer's defaults: full transcripts, a heartbeat
every half second, a sampler checkpoint scored on held-out tasks every 5 updates, and the
writer's unusable-groups guard counted in updates (``grpo.config.unusable_guard``: 3 updates'
worth of groups rather than the writer's default of 100 groups, which at 160 groups per update
stops a broken run within one update, before its transcripts show what broke it). Other code
(the checks' tests, the detection benchmark) calls ``demo_run`` to get real runs quickly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .config import TaskConfig, unusable_guard
from .loop import Event, train

__all__ = ["demo_config", "demo_run"]


def demo_config(
    output_dir: str | os.PathLike[str],
    *,
    name: str | None = None,
    seed: int = 0,
    steps: int = 40,
    mode: str = "sync",
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The config of a demo run, as a dict shaped like the TOML (``overrides`` merged in)."""
    cfg: dict[str, dict[str, Any]] = {
        "output": {
            "output_dir": os.fspath(output_dir),
            "name": name,
            "trace": "full",
            "progress_every_seconds": 0.5,
            "sampler_checkpoint_every": 5,
        },
        "training": {"mode": mode},
        "optim": {"seed": seed, "steps": steps},
    }
    for section, values in (overrides or {}).items():
        cfg.setdefault(section, {}).update(values)
    groups = cfg.get("task", {}).get("tasks_per_step", TaskConfig.tasks_per_step)
    if isinstance(groups, int):  # else the config's validation names the bad value
        cfg["training"].setdefault("max_consecutive_unusable_groups", unusable_guard(groups))
    return cfg


def demo_run(
    output_dir: str | os.PathLike[str],
    name: str | None = None,
    fault: str | None = None,
    fault_step: int | None = None,
    seed: int = 0,
    steps: int = 40,
    mode: str = "sync",
    *,
    stall_seconds: float = 8.0,
    cache: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    on_event: Event | None = None,
) -> Path:
    """Run the reference trainer quietly; returns the run directory.

    Args:
        output_dir: where the run directory goes (``<output_dir>/<name>``).
        name: the run directory's name (default: unique, time-stamped).
        fault: a fault name (``rlvitals demo --list-faults``), optionally ``NAME@STEP``.
        fault_step: the update the fault starts at (default: the fault's own).
        seed: seeds everything; the same seed at the same thread count gives the same run on
            the same kind of CPU.
        steps: GRPO updates. mode: ``"sync"`` or ``"async"``.
        stall_seconds: how long the ``stall`` fault hangs before the run is abandoned (long
            enough against a slow, shared machine's step time for the hang to stand out).
        cache: warm-start cache directory (default ``$RLVITALS_CACHE`` or ~/.cache/rlvitals).
        overrides: section -> key -> value over the demo's config (e.g. ``{"task":
            {"tasks_per_step": 16}}``).
        on_event: progress callback (see ``loop.train``).
    """
    cfg = demo_config(output_dir, name=name, seed=seed, steps=steps, mode=mode, overrides=overrides)
    return train(
        cfg,
        fault=fault,
        fault_step=fault_step,
        stall_seconds=stall_seconds,
        cache=Path(cache) if cache is not None else None,
        on_event=on_event,
    )
