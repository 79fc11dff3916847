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
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import UnknownFormatError
from ..model import RunData

if TYPE_CHECKING:
    from .mapping import MappingTable

__all__ = [
    "FORMATS",
    "Format",
    "Reader",
    "find_attempt",
    "formats",
    "load_attempt_record",
    "open_reader",
    "read",
    "register",
    "sniff",
]


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
        factory: Callable[..., Reader],
        priority: int = 50,
        *,
        table: MappingTable | None = None,
        kind: str = "",
        files: str = "",
    ) -> None:
        self.name = name
        self.description = description
        self.sniff = sniff
        self.factory = factory
        self.priority = priority
        self.table = table  # the mapping table shown by `rlvitals formats` and docs/formats.md
        self.kind = kind  # "run directory", "console log", "JSONL", "event files", ...
        self.files = files  # what to point it at


FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    """Add a format to the registry (reader modules call this at import)."""
    FORMATS[fmt.name] = fmt
    return fmt


def _load_all() -> None:
    # Import reader modules so they register themselves; kept lazy so `import rlvitals` is light.
    from . import (  # noqa: F401
        areal,
        console,
        generic,
        miles,
        mlflow,
        native,
        openrlhf,
        primerl,
        skyrl,
        tensorboard,
        tinker,
        trackio,
        trl,
        verl,
        wandb,
    )


def formats() -> list[Format]:
    """Every registered format, in sniffing order."""
    _load_all()
    return sorted(FORMATS.values(), key=lambda f: f.priority)


def _local(path: str | os.PathLike[str]) -> Path:
    # A tracking URI (``sqlite:///mlflow.db``, ``file:///.../mlruns``) names a local path.
    text = os.fspath(path)
    for prefix in ("sqlite:///", "file://"):
        if text.startswith(prefix):
            return Path(text[len(prefix) :])
    return Path(text)


def sniff(path: str | os.PathLike[str]) -> str:
    """The name of the format of ``path`` (a file or a directory)."""
    _load_all()
    p = _local(path)
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


def open_reader(
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    mapping: str | os.PathLike[str] | None = None,
    samples: str | os.PathLike[str] | None = None,
    run: str | None = None,
) -> Reader:
    """An incremental reader for ``path``; ``format`` overrides sniffing.

    ``mapping`` names a TOML or JSON file of ``canonical name = "source key"`` rules that take
    precedence over the format's own table (for the generic formats, the only table).
    ``samples`` names a framework's sample dump (``readers.samples``) read as the run's
    attempts and transcripts; without it, a dump where the framework puts it by default
    beside the log is read too.
    ``run`` picks one run of a store that holds several (W&B folder, trackio, MLflow).
    A URL (``s3://``, ``gs://``, ``az://``) is read through a local mirror fetched by byte
    ranges (``readers.remote``).
    """
    from .remote import is_url

    if is_url(path):
        from .remote import open_remote

        return open_remote(
            os.fspath(path), open_reader, format=format, mapping=mapping, samples=samples, run=run
        )
    _load_all()
    p = _local(path)
    if format is None:
        format = sniff(p)
    elif format not in FORMATS:
        raise UnknownFormatError(
            f"unknown format {format!r}; expected one of: {', '.join(sorted(FORMATS))}",
            path=str(p),
        )
    if not p.exists():
        raise UnknownFormatError("no such file or directory", path=str(p))
    kwargs: dict[str, Any] = {}
    if mapping is not None:
        from .mapping import load_user_mapping

        kwargs["extra_rules"] = tuple(load_user_mapping(mapping))
    if run is not None:
        import inspect

        if "run" not in inspect.signature(FORMATS[format].factory).parameters:
            raise UnknownFormatError(
                f"--run picks a run of a tracker store; a {format} source holds one run",
                path=str(p),
            )
        kwargs["run"] = run
    return _with_samples(FORMATS[format].factory(p, **kwargs), p, samples)


def _with_samples(reader: Reader, path: Path, samples: str | os.PathLike[str] | None) -> Reader:
    """The hook that attaches a sample dump after reading (``readers.samples.attach``)."""
    from .samples import attach

    if samples is not None:
        return attach(reader, samples)  # a bad --samples is the user's error: it raises
    try:
        return attach(reader, path=path)
    except (OSError, ValueError) as exc:  # looking for a default dump must never stop a read
        reader.run.warnings.append(f"{path}: sample dump not read ({exc})")
        return reader


def read(
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    mapping: str | os.PathLike[str] | None = None,
    samples: str | os.PathLike[str] | None = None,
    run: str | None = None,
) -> RunData:
    """Read a whole run (any known format) into the canonical model (``samples``, ``run``: see
    ``open_reader``).

    The files are taken as complete: a record still open at the end of a file is read as far
    as it goes, with a warning (a live reader would wait for the rest instead).
    """
    reader = open_reader(path, format, mapping=mapping, samples=samples, run=run)
    reader.poll()
    finish = getattr(reader, "finish", None)
    if finish is not None:
        finish()
    return reader.run


def load_attempt_record(run: RunData, index: int) -> dict[str, Any]:
    """The full record (metadata included) of row ``index`` of ``run.attempts``."""
    from .native import load_attempt_record as _load

    return _load(run, index)


def find_attempt(run: RunData, attempt_id: str) -> int | None:
    """The row of ``run.attempts`` whose record has ``attempt_id``, or None."""
    from .native import find_attempt as _find

    return _find(run, attempt_id)
