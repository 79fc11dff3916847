"""A run directory coming into being: its name, its ``run.json``, created once.

Two processes starting the same run name must not both write into it: the directory's
``run.json`` is created exclusively and whole (a hard link, so never an empty file), and the
second process gets one clear error instead of interleaving its records with the first one's. A folder that is already there
without a ``run.json`` (made by hand, or by a shard writer that attached first) is taken.
"""

from __future__ import annotations

import platform
import sys
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import ConfigError, UsageError
from ..jsonio import create_exclusive, dumps
from ..schema import RUN_JSON

__all__ = ["create_run_dir", "now_iso", "unique_name", "versions"]


def now_iso() -> str:
    """The time now, ISO 8601 in UTC to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def unique_name() -> str:
    """A run name no other run has: ``run-<UTC time>-<random>``."""
    return f"run-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def versions(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a comparison must hold fixed: rlvitals, python, torch if loaded, the loop's own."""
    v: dict[str, Any] = {"rlvitals": __version__, "python": platform.python_version()}
    torch = sys.modules.get("torch")  # never import torch just to read its version
    if torch is not None:
        v["torch"] = getattr(torch, "__version__", None)
    v.update(extra or {})
    return v


def _cannot(d: Path, exc: OSError) -> ConfigError:
    return ConfigError(
        f"cannot create the run directory {d}: {exc.strerror or exc}",
        section="output",
        key="output_dir",
    )


def create_run_dir(d: Path, meta: Mapping[str, Any]) -> None:
    """Make ``d`` and write its ``run.json``, claiming the name for this process alone.

    Raises UsageError when another run already has the name, ConfigError (naming the folder
    and the system's reason: no space, no permission) when it cannot be created.
    """
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cannot(d, exc) from None
    path = d / RUN_JSON
    try:  # the name and run.json's whole content claimed at once: never an empty run.json
        create_exclusive(path, (dumps(meta, indent=2) + "\n").encode())
    except FileExistsError:
        raise UsageError(f"{d}: a run directory is already there; choose another name") from None
    except OSError as exc:
        raise _cannot(d, exc) from None
