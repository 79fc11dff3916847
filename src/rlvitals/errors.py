"""Every exception rlvitals raises, in one place.

The library raises these; the CLI turns each into one line on stderr and an exit code (2).
Messages say what was expected and what came.

    RlvitalsError
    ├── ConfigError            a config section or key is unknown, mistyped or out of range
    ├── ReadError              a file or record could not be read (names file and line)
    │   ├── UnknownFormatError no reader recognises the path
    │       └── RunFolderError a folder of several runs was given where one run is read
    ├── UsageError             the library was used wrongly (logging after close, step backwards)
    │   └── PathRefused        a path outside the folders an agent's server may read
    ├── RunStopped             a guard stopped the run (carries the stop reason)
    └── MissingExtraError      an optional extra is needed (names the pip install command)
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigError",
    "MissingExtraError",
    "PathRefused",
    "ReadError",
    "RlvitalsError",
    "RunFolderError",
    "RunStopped",
    "UnknownFormatError",
    "UsageError",
]


class RlvitalsError(Exception):
    """Base class of every error rlvitals raises on purpose."""


class ConfigError(RlvitalsError, ValueError):
    """A config section or key is unknown, has the wrong type or a bad value."""

    def __init__(self, message: str, *, section: str | None = None, key: str | None = None):
        where = ".".join(p for p in (section, key) if p)
        super().__init__(f"config [{where}]: {message}" if where else f"config: {message}")
        self.section = section
        self.key = key


class ReadError(RlvitalsError):
    """A file could not be read; the message names the file and, where known, the line."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        where = f"{path}:{line}" if path and line else (path or "")
        super().__init__(f"{where}: {message}" if where else message)
        self.path = path
        self.line = line
        self.detail = message


class UnknownFormatError(ReadError):
    """No reader recognises the file or directory."""


class RunFolderError(UnknownFormatError):
    """A folder holding several runs was given where one run is read; ``runs`` lists them."""

    def __init__(self, message: str, *, path: str | None = None, runs: list[str] | None = None):
        super().__init__(message, path=path)
        self.runs = list(runs or [])


class UsageError(RlvitalsError, RuntimeError):
    """The library was called wrongly, e.g. logging to a closed run or a step going backwards."""


class PathRefused(UsageError):
    """A path outside the folders ``rlvitals mcp`` was started with (its roots): not read."""


class RunStopped(RlvitalsError):
    """A guard stopped the run; ``reason`` is the config key that tripped, e.g.
    ``max_consecutive_unusable_groups``."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"run stopped by {reason}: {message}")
        self.reason = reason
        # The step record written just before the guard tripped (``log_step``), else None: a
        # loop that reports its updates counts this one too.
        self.record: dict[str, Any] | None = None


class MissingExtraError(RlvitalsError, ImportError):
    """An optional dependency is missing; the message names the extra and the one pip command
    that adds it to this install (``install_command``)."""

    def __init__(self, extra: str, what: str):
        super().__init__(f"{what} needs the '{extra}' extra: {install_command(extra)}")
        self.extra = extra


def install_command(extra: str, *, checkout: Any = None, direct_url: Any = None) -> str:
    """The pip command that adds ``extra`` to rlvitals as it is installed here: the checkout
    this code runs from (``pip install -e '/path/to/rlvitals[serve]'``, whatever the working
    folder), else where pip installed it from (PEP 610's ``direct_url.json``: a folder, a
    wheel, a git URL), else the package index. ``checkout`` and ``direct_url`` stand in for
    what is found (tests)."""
    import json
    import shlex
    from pathlib import Path
    from urllib.parse import unquote, urlparse

    if checkout is None:
        root = Path(__file__).resolve().parent.parent.parent  # src/rlvitals -> the checkout
        pyproject = root / "pyproject.toml"
        try:
            ours = pyproject.is_file() and 'name = "rlvitals"' in pyproject.read_text()
        except OSError:
            ours = False
        checkout = root if ours else False
    if checkout:
        return "pip install -e " + shlex.quote(f"{checkout}[{extra}]")
    if direct_url is None:
        from importlib import metadata

        try:
            raw = metadata.distribution("rlvitals").read_text("direct_url.json")
            direct_url = json.loads(raw) if raw else {}
        except (metadata.PackageNotFoundError, ValueError, OSError):
            direct_url = {}
    url = str(direct_url.get("url", ""))
    vcs = direct_url.get("vcs_info")
    if isinstance(vcs, dict) and url:
        return "pip install " + shlex.quote(f"rlvitals[{extra}] @ {vcs.get('vcs', 'git')}+{url}")
    if url.startswith("file://"):
        path = unquote(urlparse(url).path)
        dir_info = direct_url.get("dir_info")
        edit = "-e " if isinstance(dir_info, dict) and dir_info.get("editable") else ""
        return f"pip install {edit}" + shlex.quote(f"{path}[{extra}]")
    return "pip install " + shlex.quote(f"rlvitals[{extra}]")
