"""The one way file-based readers read their files: incremental state, lines, lenient decoding.

Every reader of line-oriented files (console logs, JSON Lines, CSV, the native run directory)
keeps one ``FileState`` per file and reads it through ``read_chunks``/``read_lines``:

- only the bytes after the last pass are read; a last line without its ``\\n`` waits for the
  next pass while the file is live, and is read as a line when the file is taken as finished
  (``final=True``: ``read()``, ``finish()``);
- a BOM is skipped; bytes that are not UTF-8 cost one replaced character each, never a
  record; NUL bytes are dropped from text (so UTF-16 text of ASCII reads too);
- a file that shrank or was replaced (another inode, other bytes where the last pass stopped)
  makes the reader start over: ``FileReader`` clears its run in place and reads every file again
  from its start, so records of a deleted run never mix with those of its successor (verl's
  file logger truncates its file when a run resumes);
- a line longer than the reader's limit is skipped with one warning naming file and line,
  without ever being held in memory.

``open_binary`` is the one function that opens a file for reading.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from ..jsonio import MAX_LINE_BYTES, decode_line
from ..jsonio import decode_shallow as _decode_shallow
from ..model import RunData

__all__ = [
    "MAX_STEP",
    "SKIPPED",
    "FileReader",
    "FileState",
    "NotRegularFileError",
    "check_state",
    "clear_run",
    "decode_json",
    "decode_logged",
    "decode_text",
    "describe_path",
    "flatten",
    "head_bytes",
    "is_regular_file",
    "local_path",
    "open_binary",
    "read_chunks",
    "read_lines",
    "valid_step",
]

MAX_STEP = 2**63 - 1  # steps are stored as int64
BOM = b"\xef\xbb\xbf"
BOMS = (BOM, b"\xff\xfe", b"\xfe\xff")  # UTF-16 text of ASCII reads once its NULs are dropped
_MARK = 32  # bytes kept from where the last pass stopped, to notice a rewritten file

Warn = Callable[[str], None]


def local_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a local path: a tracking URI (``sqlite:///mlflow.db``, ``file:///x/mlruns``)
    names one."""
    text = os.fspath(path)
    for prefix in ("sqlite:///", "file://"):
        if text.startswith(prefix):
            return Path(text[len(prefix) :])
    return Path(text)


class NotRegularFileError(OSError):
    """A path that is a FIFO, a socket or a device: never read (a FIFO blocks a reader until
    a writer comes, a device such as /dev/zero never ends)."""


def _regular_opener(path: str, flags: int) -> int:
    fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a device or socket"
            if stat.S_ISFIFO(mode):
                kind = "a FIFO"
            elif stat.S_ISDIR(mode):
                kind = "a folder"
            raise NotRegularFileError(errno.EINVAL, f"not a regular file ({kind}); not read", path)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_binary(path: str | os.PathLike[str]) -> IO[bytes]:
    """Open ``path`` for reading bytes: the one place readers open a file. Only a regular file
    is opened: the open itself never waits (``O_NONBLOCK``, so a FIFO cannot hang it), and
    anything but a regular file raises ``NotRegularFileError`` (an ``OSError``)."""
    return open(path, "rb", opener=_regular_opener)


def is_regular_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file (after symlinks), without opening it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def valid_step(value: Any) -> int | None:
    """``value`` as a step number (an int in 0..2**63-1, or a float holding one), else None."""
    if type(value) is int:
        return value if 0 <= value <= MAX_STEP else None
    if type(value) is float and value.is_integer() and 0 <= value <= MAX_STEP:
        return int(value)
    return None


class FileState:
    """Where one file was read up to, and what a parser holds between passes.

    ``offset``/``line`` locate the first byte not yet read; ``ident`` (device, inode) and
    ``mark`` (the bytes just before ``offset``) tell a file replaced or rewritten since. The
    ``pending*`` fields and ``extra`` belong to record parsers (a record spanning lines).
    """

    __slots__ = (
        "cr",
        "extra",
        "ident",
        "line",
        "mark",
        "offset",
        "path",
        "pending",
        "pending_line",
        "pending_step",
        "warned",
    )

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.line = 1
        self.ident: tuple[int, int] | None = None
        self.mark = b""
        self.warned = False  # "cannot read" said once, not every pass
        self.pending: str | None = None  # text of a record not yet complete
        self.pending_line = 0
        self.pending_step: int | None = None
        self.extra: dict[str, Any] = {}
        self.cr = False  # the file ends its lines with a lone CR (old Mac style): read as LF


def check_state(st: FileState, *, content: bool = True) -> str | None:
    """Why ``st``'s file must be read again from its start (it shrank or was replaced), or
    None. Also records the file's identity for the next check. With ``content`` the bytes just
    before where the last pass stopped are compared too (a file rewritten in place, or deleted
    and written again on a file system that gave the new file the old inode number)."""
    try:
        s = os.stat(st.path)
    except OSError:
        return None
    ident = (s.st_dev, s.st_ino)
    old, st.ident = st.ident, ident
    if st.offset == 0:
        return None
    if s.st_size < st.offset:
        return "the file shrank (truncated or rewritten)"
    if old is not None and old != ident:
        return "the file was replaced"
    if content and st.mark:
        try:
            with open_binary(st.path) as f:
                f.seek(st.offset - len(st.mark))
                now = f.read(len(st.mark))
        except OSError:
            return None
        if st.cr:
            now = now.replace(b"\r", b"\n")
        if now != st.mark:
            return "the file was rewritten"
    return None


def _cannot_read(st: FileState, warn: Warn, exc: OSError) -> None:
    if not st.warned:
        st.warned = True
        warn(f"{st.path}: cannot read ({exc.strerror or exc}); skipped")


def read_chunks(
    st: FileState,
    *,
    warn: Warn,
    final: bool = False,
    chunk: int = 1 << 20,
    max_line: int = MAX_LINE_BYTES,
    limit: int | None = None,
) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(first_line, start_offset, data)``: the complete lines of ``st``'s file from
    where the last pass stopped, in chunks of about ``chunk`` bytes, each ending in ``\\n``.

    ``st`` moves past each chunk before it is yielded. With ``final`` a last line without its
    newline is yielded too (with one added). A line over ``max_line`` bytes is skipped with one
    warning. ``limit`` caps the bytes read in this pass (for sampling a file).
    """
    try:
        f = open_binary(st.path)
    except OSError as exc:
        _cannot_read(st, warn, exc)
        return
    with f:
        try:
            f.seek(st.offset)
        except OSError as exc:
            _cannot_read(st, warn, exc)
            return
        budget = limit
        parts: list[bytes] = []  # bytes of the line in progress (no newline among them)
        held = 0  # their length (while skipping: the length of the overlong line so far)
        skipping = False  # inside an overlong line: drop bytes until its newline
        eof = False
        while True:
            want = chunk if budget is None else min(chunk, budget)
            if want <= 0:
                break
            try:
                data = f.read(want)
            except OSError as exc:
                _cannot_read(st, warn, exc)
                return
            if not data:
                eof = True
                break
            if budget is not None:
                budget -= len(data)
            if st.offset == 0 and not held and not skipping:
                bom = _bom(data)
                st.offset = len(bom)
                data = data[len(bom) :]
                # Lines ended by a lone CR (no LF in the file's first chunk, CRs between
                # lines): each CR read as a newline, byte for byte, so offsets hold.
                st.cr = b"\n" not in data and data.count(b"\r") >= 2
            if st.cr:
                data = data.replace(b"\r", b"\n")
            if skipping:
                nl = data.find(b"\n")
                if nl < 0:
                    held += len(data)
                    continue
                warn(f"{st.path}:{st.line}: line too long ({held + nl} bytes); skipped")
                st.offset += held + nl + 1
                st.line += 1
                st.mark = b""
                skipping, held, parts = False, 0, []
                data = data[nl + 1 :]
            last = data.rfind(b"\n")
            if last < 0:
                parts.append(data)
                held += len(data)
                if held > max_line:
                    parts, skipping = [], True
                continue
            out = b"".join((*parts, data[: last + 1])) if parts else data[: last + 1]
            rest = data[last + 1 :]
            parts, held = ([rest] if rest else []), len(rest)
            yield _advance(st, out, len(out))
            if held > max_line:
                parts, skipping = [], True
        if not (eof and final):
            return
        if skipping:
            warn(f"{st.path}:{st.line}: line too long ({held} bytes); skipped")
            st.offset += held
            st.line += 1
            return
        rest = b"".join(parts)
        if rest.strip(b" \t\r\x00"):
            yield _advance(st, rest + b"\n", len(rest))
        elif rest:
            st.offset += len(rest)
            st.mark = (st.mark + rest)[-_MARK:]


def _advance(st: FileState, out: bytes, consumed: int) -> tuple[int, int, bytes]:
    first, start = st.line, st.offset
    st.offset += consumed
    st.line += out.count(b"\n")
    st.mark = out[max(0, consumed - _MARK) : consumed]
    return first, start, out


def read_lines(
    st: FileState,
    *,
    warn: Warn,
    final: bool = False,
    max_line: int = MAX_LINE_BYTES,
    limit: int | None = None,
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, line)`` for each new complete line of ``st``'s file (see
    ``read_chunks``); lines come without ``\\n`` or ``\\r\\n``, overlong ones are skipped."""
    for first, _, data in read_chunks(st, warn=warn, final=final, max_line=max_line, limit=limit):
        lineno = first
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            line = data[start : nl - 1 if nl > start and data[nl - 1] == 13 else nl]
            if len(line) > max_line:
                warn(f"{st.path}:{lineno}: line too long ({len(line)} bytes); skipped")
            else:
                yield lineno, line
            lineno += 1
            start = nl + 1


def decode_text(raw: bytes) -> str:
    """Text of a line: UTF-8, a byte that is not costing one replacement character; NULs
    dropped (logs of a crashed job and ``copytruncate`` leave runs of them)."""
    text = raw.decode("utf-8", errors="replace")
    return text.replace("\x00", "") if "\x00" in text else text


def decode_json(raw: bytes | str) -> tuple[Any, str | None]:
    """One JSON value, leniently: ``(value, note)``.

    Bare ``NaN``/``Infinity`` are accepted; bytes that are not UTF-8 become replacement
    characters and raw control characters inside strings are kept, so one odd byte never costs
    the record. Values nested deeper than 64 levels are replaced by null, and ``note`` says so.
    Raises ``ValueError`` (with the decoder's message) when the line is not JSON at all.
    """
    try:
        return decode_line(raw), None
    except RecursionError:
        return _decode_shallow(raw)
    except ValueError as exc:
        first = exc
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        return json.loads(text, strict=False), None
    except RecursionError:
        return _decode_shallow(raw)
    except ValueError:
        raise first from None


SKIPPED: Any = object()
"""What ``decode_logged`` returns for a line it skipped."""


def decode_logged(raw: bytes, where: str, warn: Warn, *, objects_only: bool = True) -> Any:
    """One line's JSON value (``decode_json``), or ``SKIPPED`` after one warning naming
    ``where`` (``path:line``): not JSON, or (``objects_only``) not an object. A value whose
    deep nesting was flattened is kept, with a warning that says so."""
    try:
        rec, note = decode_json(raw)
    except ValueError as exc:
        warn(f"{where}: not JSON ({exc}); skipped")
        return SKIPPED
    if note:
        warn(f"{where}: {note}")
    if objects_only and not isinstance(rec, dict):
        warn(f"{where}: expected a JSON object; skipped")
        return SKIPPED
    return rec


def flatten(obj: dict[str, Any], sep: str = "/", prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(key, value) of a nested dict, nested keys joined with ``sep``."""
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            yield from flatten(v, sep, key + sep)
        else:
            yield key, v


def head_bytes(p: Path, size: int) -> bytes:
    """The first ``size`` bytes of a file, a BOM skipped; empty if it cannot be read."""
    try:
        with open_binary(p) as f:
            data = f.read(size)
    except OSError:
        return b""
    return data[len(_bom(data)) :]


def describe_path(p: Path) -> str:
    """A few words on what ``p`` holds, for the 'cannot read' message."""
    if p.is_dir():
        try:
            names = sorted(e.name for e in os.scandir(p) if not e.name.startswith("."))
        except OSError:
            names = []
        if not names:
            return "an empty folder"
        shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        return f"a folder of {len(names)} entries, none a run or a log this version knows ({shown})"
    data = head_bytes(p, 64 << 10)
    try:
        cut = os.path.getsize(p) > len(data)  # then the last line read is only begun
    except OSError:
        cut = False
    if not data:
        return "an empty file"
    if len(data) > 8 and (data[1:8:2] == b"\0\0\0\0" or data[0:8:2] == b"\0\0\0\0"):
        return "UTF-16 text (convert it to UTF-8, e.g. iconv -f UTF-16 -t UTF-8)"
    if data[:2] == b"\x1f\x8b":
        return "a gzip file (decompress it first)"
    text = data.decode("utf-8", errors="replace")
    bad = sum(1 for c in text if (c < " " and c not in "\t\r\n") or c == "\ufffd")
    if bad > len(text) // 10:
        return "binary data, not text"
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "a file of blank lines"
    first = lines[0].strip()
    if first.startswith("{"):
        try:
            rec, _ = decode_json(first)
        except ValueError:
            rec = None
        if isinstance(rec, dict):
            keys = ", ".join(list(map(str, rec))[:6])
            return f"JSON lines with no step field (first keys: {keys})"
    shown = first[:60].encode("unicode_escape").decode("ascii")
    where = "its one line" if len(lines) == 1 else f"its first {len(lines)} lines"
    if cut:
        where = "its first 64 KiB"
    return f"text with no step record in {where} (first: {shown!r})"


def _bom(data: bytes) -> bytes:
    return next((b for b in BOMS if data.startswith(b)), b"")


def clear_run(run: RunData, why: str) -> None:
    """Empty ``run`` in place (the object views hold stays the same), keeping ``why``, and
    a transcript store attached from outside (a sample dump)."""
    for f in dataclasses.fields(run):
        if f.name in ("source", "format", "transcripts"):
            continue
        if f.default_factory is not dataclasses.MISSING:
            setattr(run, f.name, f.default_factory())
        else:
            setattr(run, f.name, f.default)
    run.warnings.append(why)
    for k in [k for k in run.__dict__ if k.startswith("_") and k.endswith("_cache")]:
        del run.__dict__[k]


class FileReader:
    """Base of the readers of line-oriented files: one ``FileState`` per file, every new line
    handed to ``line``.

    A subclass sets ``name`` and ``patterns`` (globs searched when the path is a folder),
    and implements ``line(st, raw, lineno)``; ``reset`` builds what depends on the records read
    (a mapper, counters), ``end_file`` closes a record still open at the end of a finished file,
    and ``derive`` recomputes metrics from whole series after each pass.
    ``sample_bytes`` (set for sniffing) caps the bytes read per file and pass.
    """

    name = "file"
    patterns: tuple[str, ...] = ()
    max_line = MAX_LINE_BYTES  # longer lines are skipped with a warning
    sample_bytes: int | None = None
    scored = True  # sniffing compares this format's reading with others' (see registry)

    def __init__(self, path: Path, *, extra_rules: tuple[Any, ...] = ()) -> None:
        self.path = Path(path)
        self.extra_rules = tuple(extra_rules)
        self.run = RunData(source=str(path), format=self.name)
        self._states: dict[Path, FileState] = {}
        self.reset()

    # -- files ---------------------------------------------------------------------------

    def files(self) -> list[Path]:
        """The files this reader reads: the path itself, or a folder's files that match
        ``patterns`` and ``accept``."""
        if not self.path.is_dir():
            return [self.path]
        found: list[Path] = []
        for pat in self.patterns:
            for p in sorted(self.path.glob(pat)):
                if p not in found and p.is_file() and self.accept(p):
                    found.append(p)
        return found

    def accept(self, p: Path) -> bool:
        """Whether a file found in a folder is one of this format's (content sniffing)."""
        return True

    def state(self, p: Path) -> FileState:
        st = self._states.get(p)
        if st is None:
            st = self._states[p] = FileState(p)
        return st

    # -- passes --------------------------------------------------------------------------

    def poll(self) -> bool:
        """Read what is new since the last call; True if anything was."""
        return self._pass(final=False)

    def read_rest(self) -> bool:
        """The files are complete: read what is new, a last line without its newline too."""
        return self._pass(final=True)

    def finish(self) -> None:
        """The files are complete: read last lines without a newline (``read_rest``), then
        close records still open."""
        self._pass(final=True)
        for st in self._states.values():
            self.end_file(st)
        self.derive()

    def _pass(self, *, final: bool) -> bool:
        files = self.files()
        for p in files:
            why = check_state(self.state(p))
            if why:
                self.restart(f"{p}: {why}; read again from the start")
                for q in files:
                    check_state(self.state(q))
                break
        changed = False
        for p in files:
            changed |= self.read_file(self.state(p), final=final)
        if changed:
            self.derive()
        return changed

    def restart(self, why: str) -> None:
        """Forget everything read (a file was replaced) and read every file again."""
        clear_run(self.run, why)
        self._states.clear()
        self.reset()

    def read_file(self, st: FileState, *, final: bool) -> bool:
        """Feed the new lines of one file to ``line``; True if there were any."""
        changed = False
        for lineno, raw in read_lines(
            st,
            warn=self.run.warnings.append,
            final=final,
            max_line=self.max_line,
            limit=self.sample_bytes,
        ):
            changed = True
            try:
                self.line(st, raw, lineno)
            except (ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:
                self.run.warnings.append(f"{st.path}:{lineno}: could not read ({exc}); skipped")
        return changed

    # -- to override ---------------------------------------------------------------------

    def reset(self) -> None:
        """Build the state that depends on records read (called at start and on restart)."""

    def line(self, st: FileState, raw: bytes, lineno: int) -> None:
        """Handle one line (bytes, without its newline)."""
        raise NotImplementedError

    def end_file(self, st: FileState) -> None:
        """The file is complete: close a record still open in ``st``."""

    def derive(self) -> None:
        """Recompute metrics derived from whole series (after each pass)."""
