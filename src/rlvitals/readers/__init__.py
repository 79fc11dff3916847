"""Readers: any framework's run, live or after the fact, into one canonical ``RunData``.

Each reader module holds one source format and its mapping table. A reader is incremental:
``poll()`` reads only the bytes that arrived since the last call (a last line still being
written is read on the next pass), so ``watch`` and ``serve`` cost time proportional to what is
new. ``read(path)`` is one poll of a sniffed reader.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import UnknownFormatError
from ..model import RunData
from .base import local_path
from .registry import FORMATS, Format, Reader, detect, formats, register

__all__ = [
    "FORMATS",
    "Format",
    "Reader",
    "detect",
    "find_attempt",
    "formats",
    "load_attempt_record",
    "open_reader",
    "read",
    "register",
    "sniff",
]


def sniff(path: str | os.PathLike[str]) -> str:
    """The name of the format that reads ``path`` (a file or a directory) best."""
    return detect(path).format


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
    formats()  # every reader module imported (and registered)
    p = local_path(path)
    note = why = None
    if format is None:
        format, note = detect(p)
        from .registry import sniff_reason

        why = sniff_reason(p)
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
    reader = _with_samples(FORMATS[format].factory(p, **kwargs), p, samples)
    if note:
        reader.run.notes.append(note)
    if why:
        reader.run.info["sniffed"] = why
    return reader


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

    The files are taken as complete: a last line without its newline is read, and a record
    still open at the end of a file is read as far as it goes, with a warning (a live reader
    would wait for the rest instead).
    """
    reader = open_reader(path, format, mapping=mapping, samples=samples, run=run)
    reader.poll()
    rest = getattr(reader, "read_rest", None)
    if rest is not None:
        rest()  # last lines without a newline, before a reader closes its records in finish
    finish = getattr(reader, "finish", None)
    if finish is not None:
        finish()
    from ._settle import settle

    settle(reader.run)  # units told apart by the values of the whole run
    return reader.run


def load_attempt_record(run: RunData, index: int) -> dict[str, Any]:
    """The full record (metadata included) of row ``index`` of ``run.attempts``."""
    from .native import load_attempt_record as _load

    return _load(run, index)


def find_attempt(run: RunData, attempt_id: str) -> int | None:
    """The row of ``run.attempts`` whose record has ``attempt_id``, or None."""
    from .native import find_attempt as _find

    return _find(run, attempt_id)
