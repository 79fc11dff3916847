"""JSON Lines in and out, with non-finite numbers surviving the round trip.

Our files spell non-finite numbers as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``
(FORMAT.md); readers also accept the bare tokens Python's json writes. numpy and torch scalars
become plain numbers. Encoding never raises on odd values: what cannot be encoded becomes its
``repr`` string, so a writer never loses a record over one value.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from typing import Any

import msgspec

from .schema import NONFINITE_STRINGS

__all__ = [
    "clean",
    "decode_line",
    "dumps",
    "encode_line",
    "read_complete_lines",
    "to_float",
    "write_json_atomic",
]


def _nonfinite(x: float) -> str:
    if x != x:
        return "NaN"
    return "Infinity" if x > 0 else "-Infinity"


def _enc_hook(obj: Any) -> Any:
    # numpy / torch scalars and arrays, sets, paths, exceptions: anything msgspec cannot encode.
    item = getattr(obj, "item", None)
    if callable(item):
        try:
            if getattr(obj, "ndim", 0) == 0 or getattr(obj, "shape", None) in ((), None):
                return clean(item())
        except (ValueError, TypeError, RuntimeError):
            pass
    tolist = getattr(obj, "tolist", None)
    if callable(tolist):
        return clean(tolist())
    if isinstance(obj, (set, frozenset)):
        return clean(sorted(obj, key=repr))
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    return repr(obj)


def clean(value: Any) -> Any:
    """A copy of ``value`` that encodes losslessly: non-finite floats become their strings,
    numpy/torch scalars plain numbers, tuples lists and dict keys strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else _nonfinite(value)
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return clean(_enc_hook(value))


_ENCODER = msgspec.json.Encoder(enc_hook=_enc_hook)


def encode_line(record: dict[str, Any]) -> bytes:
    """One JSON Lines record, ``\\n`` included. The record must already be ``clean``."""
    return _ENCODER.encode(record) + b"\n"


def dumps(value: Any, *, indent: int | None = None) -> str:
    """JSON text of any value, cleaned first (for run.json, transcripts, --json output)."""
    return json.dumps(clean(value), indent=indent, ensure_ascii=False, allow_nan=False)


_DECODER = msgspec.json.Decoder()


def decode_line(line: bytes | str) -> Any:
    """Decode one JSON value; bare ``NaN``/``Infinity`` tokens are accepted.

    Raises ``ValueError`` with msgspec's or json's message when the line is not JSON.
    """
    try:
        return _DECODER.decode(line)
    except msgspec.DecodeError:
        # Python's json accepts the bare tokens (NaN, Infinity, -Infinity) that msgspec refuses.
        try:
            return json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(str(exc)) from None


def to_float(value: Any) -> float | None:
    """A metric value as a float: numbers, bools and our non-finite strings; None otherwise."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return NONFINITE_STRINGS.get(value)
    return None


MAX_LINE_BYTES = 64 << 20


def read_complete_lines(
    path: str | os.PathLike[str],
    offset: int = 0,
    *,
    first_line: int = 1,
    max_line: int = MAX_LINE_BYTES,
) -> Iterator[tuple[int, int, bytes | None]]:
    """Yield ``(line_number, end_offset, line)`` for each complete line from ``offset``.

    A last line without its ``\\n`` is still being written: it is not yielded, and the caller
    resumes from the last ``end_offset`` on its next pass. Lines come without ``\\n``. A line
    longer than ``max_line`` bytes is skipped without being held in memory and yielded as
    ``None``, so the caller can warn about it by line number.
    """
    with open(path, "rb") as f:
        f.seek(offset)
        pos = offset
        lineno = first_line
        tail = b""
        skipping = False  # inside an oversized line: discard bytes until its newline
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                return
            buf = tail + chunk if tail else chunk
            start = 0
            while True:
                nl = buf.find(b"\n", start)
                if nl < 0:
                    break
                line = None if skipping or nl - start > max_line else buf[start:nl]
                skipping = False
                pos += nl + 1 - start
                yield lineno, pos, line
                lineno += 1
                start = nl + 1
            tail = buf[start:]
            if len(tail) > max_line:
                # Count the discarded bytes into pos only once the line ends.
                pos += len(tail)
                tail = b""
                skipping = True


def write_json_atomic(path: str | os.PathLike[str], value: Any) -> None:
    """Write ``value`` as JSON to ``path`` atomically (temporary file, fsync, rename)."""
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(dumps(value, indent=2))
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
