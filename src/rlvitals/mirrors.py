"""Mirrors of the step records to other trackers (Weights & Biases).

A mirror gets every step record as written and is told when the run ends. Logging switched off
is a null object, so the writer never branches on it; a mirror that fails is the writer's to
catch (it warns once and the records stay on disk).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import MissingExtraError

__all__ = ["NullMirror", "WandbMirror", "import_wandb"]


class NullMirror:
    """Logging to W&B switched off: a null object, so the loop never branches on it."""

    def log(self, record: Mapping[str, Any]) -> None:
        pass

    def finish(self, status: str) -> None:
        pass


def import_wandb() -> Any:
    try:
        import wandb
    except ImportError:
        raise MissingExtraError("wandb", "[output] wandb_project") from None
    return wandb


class WandbMirror:
    """Mirrors every step record to a Weights & Biases run (``WANDB_MODE=offline`` works)."""

    def __init__(self, wandb: Any, project: str, name: str, config: dict[str, Any], run_dir: Path):
        self._run = wandb.init(
            project=project,
            name=name,
            config=config,
            dir=os.environ.get("WANDB_DIR") or str(run_dir),
            reinit="finish_previous",
        )

    def log(self, record: Mapping[str, Any]) -> None:
        data = {}
        for k, v in record.items():
            if k == "step" or v is None:
                continue
            if isinstance(v, str):  # our spelling of non-finite numbers
                v = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.get(
                    v, v
                )
            data[k] = v
        self._run.log(data, step=int(record["step"]))

    def finish(self, status: str) -> None:
        self._run.finish(exit_code=0 if status == "finished" else 1)
