"""JSON Lines in and out, with non-finite numbers surviving the round trip.

Our files spell non-finite numbers as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``
(docs/format.md); readers also accept the bare tokens Python's json writes. numpy and torch scalars
become plain numbers. Encoding never raises on odd values: what cannot be encoded becomes its
``repr`` string, so a writer never loses a record over one value.

Reading: ``read_complete_lines`` yields whole lines only, so a line still being written is read
on the next pass. Writing: ``LineFile`` appends whole lines with one system call each and cuts a
failed write back to the last whole line.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import msgspec

from .schema import NONFINITE_STRINGS

__all__ = [
    "ENCODER",
    "LineFile",
    "clean",
    "decode_line",
    "dumps",
    "encode",
    "encode_line",
    "left_temporaries",
    "read_complete_lines",
    "read_json_objects",
    "scrub",
    "to_float",
    "write_bytes_atomic",
    "write_json_atomic",
]


def _nonfinite(x: float) -> str:
    if x != x:
        return "NaN"
    return "Infinity" if x > 0 else "-Infinity"


def _enc_hook(obj: Any) -> Any:
    """numpy / torch scalars and arrays, sets, paths, anything else msgspec cannot encode."""
    try:
        item = getattr(obj, "item", None)
        if callable(item) and getattr(obj, "ndim", 0) == 0:
            try:
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
    except Exception:  # a broken __repr__ or __getattr__ must not cost the record
        return f"<unrepresentable {type(obj).__name__}>"


MAX_DEPTH = 64  # containers nested deeper (or holding themselves) are written as null


def clean(value: Any, _depth: int = 0) -> Any:
    """A copy of ``value`` that encodes losslessly: non-finite floats become their strings,
    numpy/torch scalars plain numbers, tuples lists and dict keys strings. Containers nested
    deeper than ``MAX_DEPTH`` (a table that holds itself included) become null, so one odd
    value never costs the record."""
    t = type(value)
    if t is float:
        return value if value - value == 0.0 else _nonfinite(value)
    if value is None or t is str or t is bool or t is int:
        return value
    if t is dict or isinstance(value, dict):
        if _depth >= MAX_DEPTH:
            return None
        d = _depth + 1
        return {k if type(k) is str else str(k): clean(v, d) for k, v in value.items()}
    if t is list or t is tuple:
        if _depth >= MAX_DEPTH:
            return None
        return [clean(v, _depth + 1) for v in value]
    if isinstance(value, msgspec.Raw):  # already JSON
        return value
    if isinstance(value, msgspec.Struct):
        return clean(msgspec.structs.asdict(value), _depth + 1)
    if isinstance(value, float):  # a float subclass, e.g. numpy.float64
        return clean(float(value))
    if isinstance(value, int):  # an int subclass (IntEnum, numpy ints are not)
        return int(value)
    if isinstance(value, str):
        return str(value)
    return clean(_enc_hook(value))


def scrub(value: Any) -> Any:
    """``clean`` that also repairs text UTF-8 cannot hold (lone surrogates become ``\\udXXX``
    escapes) and turns anything it cannot encode into its ``repr``: the last resort of a writer
    that must not lose a record over one value."""
    value = clean(value)
    t = type(value)
    if t is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if t is dict:
        return {scrub(k): scrub(v) for k, v in value.items()}
    if t is list:
        return [scrub(v) for v in value]
    return value


_ENCODER = msgspec.json.Encoder(enc_hook=_enc_hook)
# The encoder itself, for writers that spell values first (``clean``) and encode many at once
# (``ENCODER.encode_lines``); NaN and infinities become null here, never strings.
ENCODER = _ENCODER


def encode_line(record: Any) -> bytes:
    """One JSON Lines record, ``\\n`` included. The record must already be ``clean``; one that
    still cannot be encoded (text with lone surrogates, a key of an odd type) is ``scrub``-bed
    and encoded again, so this never raises."""
    try:
        return _ENCODER.encode(record) + b"\n"
    except (TypeError, ValueError, OverflowError, RecursionError):
        return _ENCODER.encode(scrub(record)) + b"\n"


def encode(value: Any) -> bytes:
    """``value`` as compact JSON bytes, non-finite numbers kept; never raises.

    Cleaned only when it needs to be: msgspec writes NaN and infinities as ``null``, so output
    without ``null`` lost nothing, and only output with one is encoded again from ``clean``.
    """
    try:
        out = _ENCODER.encode(value)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return _ENCODER.encode(scrub(value))
    if b"null" in out:
        return encode_line(clean(value))[:-1]
    return out


def dumps(value: Any, *, indent: int | None = None) -> str:
    """JSON text of any value, cleaned first (for run.json, transcripts, --json output)."""
    try:
        return json.dumps(clean(value), indent=indent, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(scrub(value), indent=indent, ensure_ascii=False, allow_nan=False)


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


def loads(raw: bytes | str) -> Any:
    """One JSON value whatever its depth (``decode_line``; values nested deeper than
    ``MAX_DEPTH`` levels become null rather than raising RecursionError). ValueError when it
    is not JSON."""
    try:
        return decode_line(raw)
    except RecursionError:
        return decode_shallow(raw)[0]


def decode_shallow(raw: bytes | str) -> tuple[Any, str | None]:
    """A JSON value too deep for the decoders, its values deeper than ``MAX_DEPTH`` levels
    replaced by null: ``(value, note)``; ValueError if it is not JSON."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    flat = flatten_deep(data, MAX_DEPTH)
    try:
        value = decode_line(flat)
    except (ValueError, RecursionError):
        text = flat.decode("utf-8", errors="replace").replace("\x00", "")
        try:
            value = json.loads(text, strict=False)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"nested too deeply to read ({exc})") from None
    return value, f"values nested deeper than {MAX_DEPTH} levels replaced by null"


def flatten_deep(data: bytes, depth_limit: int) -> bytes:
    """``data`` with every array or object deeper than ``depth_limit`` replaced by ``null``."""
    out = bytearray()
    depth = 0
    i, n = 0, len(data)
    start = 0
    in_str = False
    while i < n:
        c = data[i]
        if in_str:
            if c == 0x5C:  # backslash
                i += 2
                continue
            if c == 0x22:
                in_str = False
        elif c == 0x22:
            in_str = True
        elif c in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > depth_limit:
                out += data[start:i] + b"null"
                i = _skip_value(data, i)
                start = i
                depth -= 1
                continue
        elif c in (0x5D, 0x7D):
            depth -= 1
        i += 1
    out += data[start:]
    return bytes(out)


def _skip_value(data: bytes, i: int) -> int:
    """The index just past the array or object opening at ``i`` (or the end of ``data``)."""
    depth = 0
    in_str = False
    n = len(data)
    while i < n:
        c = data[i]
        if in_str:
            if c == 0x5C:
                i += 2
                continue
            if c == 0x22:
                in_str = False
        elif c == 0x22:
            in_str = True
        elif c in (0x5B, 0x7B):
            depth += 1
        elif c in (0x5D, 0x7D):
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


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

EXPANSION_RATIO = 100
"""A compressed file (a gzip'd event file, a sealed zstd chunk) is decompressed up to this many
times its size (text and records compress 3-20 times; a file of one repeated byte, a
decompression bomb, 30,000 times: 32 KB of zstd holding 1 GiB) ..."""
EXPANSION_MIN_BYTES = 64 << 20
"""... or this many bytes, whichever is more (one line may hold ``MAX_LINE_BYTES``)."""

_BLOCK = 1 << 20
_TEXT = re.compile(rb"\S")


class Readable(Protocol):
    """What the line reader needs of an open file (a file, a zstd stream, a bounded view)."""

    def seek(self, offset: int, /) -> int: ...

    def read(self, size: int = -1, /) -> bytes: ...


def read_complete_lines(
    source: str | os.PathLike[str] | Readable,
    offset: int = 0,
    *,
    first_line: int = 1,
    max_line: int = MAX_LINE_BYTES,
    blank_runs: bool = False,
) -> Iterator[tuple[int, int, bytes | None]]:
    """Yield ``(line_number, end_offset, line)`` for each complete line from ``offset``.

    ``source`` is a path or a binary file open for reading (read in blocks of 1 MiB: never
    whole). A last line without its ``\\n`` is still being written: it is not yielded, and the
    caller resumes from the last ``end_offset`` on its next pass. Lines come without ``\\n``.
    A line longer than ``max_line`` bytes is skipped without being held in memory and yielded
    as ``None``, so the caller can warn about it by line number. With ``blank_runs``, a run of
    blank lines is yielded once, as its last line (``b""``): a stretch of newlines costs a
    search, not a loop turn each.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            yield from _complete_lines(f, offset, first_line, max_line, blank_runs)
    else:
        yield from _complete_lines(source, offset, first_line, max_line, blank_runs)


def _complete_lines(
    f: Readable, offset: int, lineno: int, max_line: int, blank_runs: bool
) -> Iterator[tuple[int, int, bytes | None]]:
    f.seek(offset)
    pos = offset  # where the line being read starts
    held: list[bytes] = []  # its bytes from earlier blocks
    size = 0  # their length (counted on while an oversized line is skipped)
    skipping = False  # inside an oversized line: discard bytes until its newline
    while True:
        block = f.read(_BLOCK)
        if not block:
            return
        start = 0
        while True:
            if blank_runs and not size:
                m = _TEXT.search(block, start)
                last = block.rfind(b"\n", start, m.start() if m else len(block))
                if last >= 0:
                    n = block.count(b"\n", start, last + 1)
                    pos += last + 1 - start
                    yield lineno + n - 1, pos, b""
                    lineno += n
                    start = last + 1
            nl = block.find(b"\n", start)
            if nl < 0:
                break
            line = None
            if not skipping and size + nl - start <= max_line:
                line = b"".join((*held, block[start:nl])) if held else block[start:nl]
            pos += size + nl + 1 - start
            held.clear()
            size = 0
            skipping = False
            yield lineno, pos, line
            lineno += 1
            start = nl + 1
        if start < len(block):
            size += len(block) - start
            if not skipping:
                held.append(block[start:] if start else block)
                if size > max_line:
                    held.clear()
                    skipping = True


def read_json_objects(
    path: str | os.PathLike[str],
    offset: int,
    first_line: int,
    warn: Callable[[str], None],
    *,
    max_line: int = MAX_LINE_BYTES,
) -> Iterator[tuple[int, int, dict[str, Any] | None]]:
    """Yield ``(line_number, end_offset, record)`` for each complete line of a JSON Lines file
    from ``offset``: the record when the line is a JSON object, else None after one warning
    naming the file and line (too long, not JSON, not an object). Blank lines give None
    quietly. Every line is yielded, so the caller can move its offset past bad ones.
    """
    for lineno, end, raw in read_complete_lines(
        path, offset, first_line=first_line, max_line=max_line
    ):
        if raw is None:
            warn(f"{path}:{lineno}: line too long; skipped")
            yield lineno, end, None
            continue
        if not raw.strip():
            yield lineno, end, None
            continue
        try:
            rec = decode_line(raw)
        except ValueError as exc:
            warn(f"{path}:{lineno}: not JSON ({exc}); skipped")
            yield lineno, end, None
            continue
        if not isinstance(rec, dict):
            warn(f"{path}:{lineno}: expected a JSON object; skipped")
            yield lineno, end, None
            continue
        yield lineno, end, rec


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes, *, fsync: bool = False) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, optional fsync, rename). Where the
    system has unnamed temporary files (Linux ``O_TMPFILE``) the data is written to one and
    given a name only to be renamed, so a process killed while writing leaves nothing behind."""
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = _unnamed(path)
    if fd is not None:
        try:
            try:
                _write_all(fd, data, fsync)
                linked = _link_unnamed(fd, tmp)
            finally:
                os.close(fd)
            if linked:
                os.replace(tmp, path)
                return
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_TEMPORARY = re.compile(r"\.\d+(?:\.claim)?\.tmp$")
LEFT_AFTER_S = 60.0  # a temporary this old was left (a live writer renames its own at once)


def left_temporaries(folder: str | os.PathLike[str]) -> list[Path]:
    """The temporary files ``write_bytes_atomic`` and ``create_exclusive`` name
    (``NAME.PID.tmp``) in ``folder``, unchanged for ``LEFT_AFTER_S``: left by a writer killed
    between writing and renaming (where the system has no unnamed files, or in the moment
    between naming and renaming one). Readers pass them over; they are safe to delete."""
    now = time.time()
    out = []
    try:
        with os.scandir(folder) as it:
            for e in it:
                if _TEMPORARY.search(e.name) and e.is_file(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        if now - e.stat(follow_symlinks=False).st_mtime >= LEFT_AFTER_S:
                            out.append(Path(e.path))
    except OSError:
        return []
    return sorted(out)


def _write_all(fd: int, data: bytes, fsync: bool) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    if fsync:
        os.fsync(fd)


def _link_unnamed(fd: int, path: str) -> bool:
    """Give the unnamed file ``fd`` the name ``path``; False where the file system will not
    (then the caller writes a named temporary file instead). FileExistsError passes."""
    global _UNNAMED_LINKS
    try:
        os.link(f"/proc/self/fd/{fd}", path)
    except FileExistsError:
        raise
    except OSError:
        _UNNAMED_LINKS = False  # this system will not: named temporary files from now on
        return False
    return True


_UNNAMED_LINKS = True


def _unnamed(path: str) -> int | None:
    """An unnamed file in ``path``'s folder open for writing (Linux ``O_TMPFILE``, linkable
    through /proc), or None where the system or file system has none."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or not _UNNAMED_LINKS or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(os.path.dirname(path) or ".", flag | os.O_WRONLY, 0o644)
    except OSError:
        return None


def create_exclusive(path: str | os.PathLike[str], data: bytes) -> None:
    """Create ``path`` holding ``data`` whole, or raise FileExistsError if it is there: the
    name is claimed with its content at once (a hard link), so a process killed midway never
    leaves an empty file that would claim the name for ever."""
    path = os.fspath(path)
    fd = _unnamed(path)
    if fd is not None:
        try:
            _write_all(fd, data, True)
            if _link_unnamed(fd, path):
                return
        finally:
            os.close(fd)
    tmp = f"{path}.{os.getpid()}.claim.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def write_json_atomic(
    path: str | os.PathLike[str], value: Any, *, indent: int | None = 2, fsync: bool = True
) -> None:
    """Write ``value`` as JSON to ``path`` atomically: a temporary file, renamed over ``path``.

    A reader sees the old file or the new one, never a part. ``fsync`` also makes the new file
    durable before the rename (against power loss, not only a killed process); it costs
    milliseconds, so files written every update (transcripts) skip it.
    """
    write_bytes_atomic(path, (dumps(value, indent=indent) + "\n").encode(), fsync=fsync)


class LineFile:
    """An append-only JSON Lines file written in whole lines, one ``write`` call each.

    No user-space buffer: what ``append`` returns from is in the OS, so a killed process loses
    at most the line being written. A failed write is cut back to the last whole line; if even
    that fails, the next write starts on a fresh line so records never run together.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f: Any = open(path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        self._good = self._f.seek(0, os.SEEK_END)
        self._torn = False

    def append(self, data: bytes) -> None:
        f = self._f
        if self._torn:
            data = b"\n" + data
        view = memoryview(data)
        try:
            while view:
                n = f.write(view)
                if n is None or n <= 0:
                    raise OSError(f"{self.path}: write returned {n!r}")
                view = view[n:]
        except BaseException:
            try:
                f.truncate(self._good)
                self._torn = False
            except Exception:
                self._torn = True
            raise
        self._good += len(data)
        self._torn = False

    def close(self) -> None:
        self._f.close()
