"""rlvitals: is your LLM RL run learning, stalled, exploited or drifting, and why.

The public surface is small: ``Run`` and ``load_config`` to write a run directory from a
training loop, ``read`` to load any framework's run into the canonical model, ``check`` to
judge a run into a ``Report`` of ``Finding``s. ``Source`` (what to read), ``Judge`` (how to
judge) and ``Follower`` (a live run, read and judged as it grows) are the stages the commands
are built of. Heavy parts (torch, the web server) load only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Config",
    "Finding",
    "Follower",
    "Judge",
    "Report",
    "Run",
    "RunData",
    "Source",
    "__version__",
    "attach",
    "check",
    "load_config",
    "read",
]

if TYPE_CHECKING:
    from .checks.base import Finding, Report
    from .config import Config, load_config
    from .follow import Follower
    from .judge import Judge, check
    from .model import RunData
    from .readers import read
    from .source import Source
    from .writer import Run, attach

_LAZY = {
    "Config": ("config", "Config"),
    "load_config": ("config", "load_config"),
    "Run": ("writer", "Run"),
    "attach": ("writer", "attach"),
    "RunData": ("model", "RunData"),
    "read": ("readers", "read"),
    "check": ("judge", "check"),
    "Judge": ("judge", "Judge"),
    "Report": ("checks.base", "Report"),
    "Finding": ("checks.base", "Finding"),
    "Source": ("source", "Source"),
    "Follower": ("follow", "Follower"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlvitals' has no attribute {name!r}")
