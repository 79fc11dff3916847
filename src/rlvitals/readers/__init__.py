"""Readers: any framework's run, live or after the fact, into one canonical ``RunData``.

Each reader module holds one source format and its mapping table. A reader is incremental:
``poll()`` reads only the bytes that arrived since the last call (a last line still being
written is read on the next pass), so ``watch`` and ``serve`` cost time proportional to what is
new. ``read(path)`` is one poll of a sniffed reader.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..errors import UnknownFormatError
from ..model import RunData

__all__ = ["FORMATS", "Reader", "open_reader", "read", "register", "sniff"]


class Reader(Protocol):
    """An incremental reader of one run."""

    name: str
    run: RunData

    def poll(self) -> bool:
        """Read what is new since the last call; True if anything was."""
        ...


class Format:
    """A registered source format: its name, how to recognise it, how to read it."""

    def __init__(
        self,
        name: str,
        description: str,
        sniff: Callable[[Path], bool],
        factory: Callable[[Path], Reader],
        priority: int = 50,
    ) -> None:
        self.name = name
        self.description = description
        self.sniff = sniff
        self.factory = factory
        self.priority = priority


FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    """Add a format to the registry (reader modules call this at import)."""
    FORMATS[fmt.name] = fmt
    return fmt


def _load_all() -> None:
    # Import reader modules so they register themselves; kept lazy so `import rlvitals` is light.
    from . import native  # noqa: F401


def sniff(path: str | os.PathLike[str]) -> str:
    """The name of the format of ``path`` (a file or a directory)."""
    _load_all()
    p = Path(path)
    if not p.exists():
        raise UnknownFormatError("no such file or directory", path=str(p))
    for fmt in sorted(FORMATS.values(), key=lambda f: f.priority):
        if fmt.sniff(p):
            return fmt.name
    names = ", ".join(sorted(FORMATS))
    raise UnknownFormatError(
        f"not a run this version can read; known formats: {names} (use --format to choose)",
        path=str(p),
    )


def open_reader(path: str | os.PathLike[str], format: str | None = None) -> Reader:
    """An incremental reader for ``path``; ``format`` overrides sniffing."""
    _load_all()
    p = Path(path)
    if format is None:
        format = sniff(p)
    elif format not in FORMATS:
        raise UnknownFormatError(
            f"unknown format {format!r}; expected one of: {', '.join(sorted(FORMATS))}",
            path=str(p),
        )
    if not p.exists():
        raise UnknownFormatError("no such file or directory", path=str(p))
    return FORMATS[format].factory(p)


def read(path: str | os.PathLike[str], format: str | None = None) -> RunData:
    """Read a whole run (any known format) into the canonical model."""
    reader = open_reader(path, format)
    reader.poll()
    return reader.run
