"""What every console-log reader shares: cleaning lines, lenient values, incremental files.

Console logs come through Ray (``(TaskRunner pid=123)`` prefixes), terminals (ANSI colour
codes, lines wrapped mid-token) and Python's repr of numbers (``np.float64(0.25)``, ``nan``,
``inf``, ``tensor(0.5, device='cuda:0')``), so values are parsed leniently and never with
``eval``. A record split across lines is held until it is complete; a record still open when a
live file stops growing is shown as far as it goes and read again when the rest arrives.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from .base import FileReader, FileState, decode_text, head_bytes, valid_step
from .mapping import Mapper, MappingTable
from .printed import brace_balance, parse_pairs
from .shapes import ShapeParser, add_events

__all__ = [
    "TextLogReader",
    "bar_under",
    "clean_line",
    "deep_lines",
    "file_date",
    "head",
    "search_deep",
    "sniff_files",
]

ANSI = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC (hyperlinks, titles)
    r"|\x1b\[[0-9;?]*[ -/]*[@-~]"  # CSI (colours, cursor moves)
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
    r"|\x1b"  # a stray ESC
)
# Colour codes whose ESC was lost on the way (pasted into an issue, `^[` caret notation).
BROKEN_ANSI = re.compile(r"\^\[\[[0-9;]*[A-Za-z]|(?<!\[)\[(?:\d{1,3};)*\d{1,3}m")
RAY_PREFIX = re.compile(
    r"^\s*\((?:[\w.<>:-]+(?: pid=\d+)?|pid=\d+)(?:, ip=[\d.]+)?(?:, actor_id=\w+)?\)\s?"
)
RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
QUOTE_PREFIX = re.compile(r"^(?:[ \t]{0,3}>(?: |$))+")  # markdown quotes: "> ", "> > "
_BAR = re.compile(r"\d%\|[^|]*\|\s*\d+/\d+|\d+(?:\.\d+)?(?:it|s)/s\]?\s*$")


def clean_line(text: str) -> str:
    """A log line without ANSI codes (also ones whose ESC was lost), markdown quote marks and a
    Ray actor prefix; of a line rewritten with carriage returns (tqdm), the last segment that
    is not blank, preferring a record over a progress bar drawn after it."""
    if "\x1b" in text:
        text = ANSI.sub("", text)
    if "[" in text and ("m" in text or "^" in text):
        text = BROKEN_ANSI.sub("", text)
    if "\r" in text:
        parts = [t for t in text.split("\r") if t.strip()]
        if not parts:
            text = ""
        else:
            text = parts[-1]
            if _BAR.search(text):
                # A bar redrawn after a record on the same line: the record is what counts.
                for t in reversed(parts[:-1]):
                    if not _BAR.search(t):
                        text = t
                        break
    if text[:4].lstrip(" \t").startswith(">"):
        text = QUOTE_PREFIX.sub("", text, count=1)
    if text.endswith("]") and "repeated" in text:
        text = RAY_REPEATED.sub("", text)
    return RAY_PREFIX.sub("", text, count=1)


def bar_under(text: str) -> str | None:
    """Of a line rewritten with carriage returns, the progress bar a record was drawn over
    (``  5%|#  | 10/200 [...]\r{'loss': ...}``: the bar's position when the record was
    printed), cleaned; None when the line has no such bar."""
    if "\r" not in text or "%|" not in text:
        return None
    parts = [t for t in text.split("\r") if t.strip()]
    if len(parts) < 2 or _BAR.search(parts[-1]):
        return None
    bars = [t for t in parts[:-1] if _BAR.search(t)]
    return clean_line(bars[-1]) if bars else None


def file_date(p: Path) -> Any:
    """The date a log's time-of-day stamps belong to (its modification day), or None."""
    import datetime as _dt

    try:
        return _dt.date.fromtimestamp(p.stat().st_mtime)
    except (OSError, ValueError, OverflowError):
        return None


class TextLogReader(FileReader):
    """Base of the console-log readers: files found, read incrementally, lines fed to ``feed``.

    A subclass sets ``name``, ``table`` and ``patterns`` (file globs searched in a directory)
    and implements ``feed(state, text, path, lineno)``, calling ``self.emit(step, values)``.
    Lines arrive cleaned (``clean_line``) and decoded leniently (``base.decode_text``).
    """

    name = "text"
    table: MappingTable
    patterns: tuple[str, ...] = ("*.log", "*.txt", "*.out", "*.err")
    max_pending_lines = 2000
    # Lines that are not records (errors, tracebacks, 5xx, OOM) become RunData.events, with
    # the times of the log's own stamps, for the liveness check (readers/shapes.py).
    events_from_lines = True

    def reset(self) -> None:
        self.mapper = Mapper(self.table, self.run, extra=self.extra_rules)
        self._last_step: int | None = None

    def line(self, st: FileState, raw: bytes, lineno: int) -> None:
        text = clean_line(decode_text(raw))
        if self.events_from_lines and self.sample_bytes is None:  # not when sniffing
            ev = st.extra.get("events")
            if ev is None:
                ev = st.extra["events"] = ShapeParser(
                    str(st.path), file_date(st.path), records=False
                )
            held = st.pending_step if st.pending is not None else None
            ev.last_step = held if held is not None else getattr(self, "_last_step", None)
            ev.feed(text, lineno)
        self.feed(st, text, st.path, lineno)

    def _take_events(self, st: FileState, *, final: bool) -> None:
        ev = st.extra.get("events")
        if ev is None:
            return
        if final:
            ev.finish()
        _records, events = ev.drain()
        add_events(self.run, events)

    def read_file(self, st: FileState, *, final: bool) -> bool:
        changed = super().read_file(st, final=final)
        if changed and st.pending is not None:
            self.flush(st, st.path, final=False)  # shown as far as it goes; re-read when done
        if changed:
            self._take_events(st, final=False)
        return changed

    def end_file(self, st: FileState) -> None:
        """The file is complete: close a record still open (with a warning)."""
        self._take_events(st, final=True)
        if st.pending is not None:
            self.run.warnings.append(
                f"{st.path}:{st.pending_line}: record incomplete at end of file; read as far "
                "as it goes"
            )
            self.flush(st, st.path, final=True)
            st.pending = None

    # -- to override ---------------------------------------------------------------------

    def feed(self, st: FileState, text: str, p: Path, lineno: int) -> None:
        raise NotImplementedError

    def flush(self, st: FileState, p: Path, *, final: bool) -> None:
        """Emit the pending record of ``st`` (complete when ``final``); default: dict text."""
        if st.pending is None or st.pending_step is None:
            return
        self.emit(st.pending_step, parse_pairs(st.pending, complete=final))

    # -- helpers -------------------------------------------------------------------------

    def emit(self, step: int, values: dict[str, Any]) -> None:
        """Record the numeric values of one record at ``step`` (a step past int64 is one
        warning, not a crash)."""
        nums = {k: v for k, v in values.items() if isinstance(v, float)}
        if not nums:
            return
        if valid_step(step) is None:
            self.run.warnings.append(f"{self.path}: step {step} out of range (0..2**63-1); skipped")
            return
        self._last_step = step
        self.mapper.add(step, nums)

    def start_dict(self, st: FileState, step: int, text: str, p: Path, lineno: int) -> None:
        """Begin a dict record at ``text`` (from its ``{``); emits it at once if complete."""
        self.interrupt_pending(st, p)
        if brace_balance(text) <= 0:
            self.emit(step, parse_pairs(text))
            return
        st.pending, st.pending_step, st.pending_line = text, step, lineno
        st.extra["lines"] = 1

    def continue_dict(self, st: FileState, text: str, p: Path) -> bool:
        """Append a line to an open dict record; True if the line was taken."""
        if st.pending is None:
            return False
        st.pending += "\n" + text
        st.extra["lines"] = st.extra.get("lines", 1) + 1
        if brace_balance(st.pending) <= 0:
            self.end_pending(st, p)
        elif st.extra["lines"] > self.max_pending_lines:
            self.run.warnings.append(
                f"{p}:{st.pending_line}: record never closed after {self.max_pending_lines} "
                "lines; read as far as it goes"
            )
            self.end_pending(st, p)
        return True

    def interrupt_pending(self, st: FileState, p: Path) -> None:
        """A new record starts while one is still open: read the open one as far as it goes."""
        if st.pending is None:
            return
        self.run.warnings.append(
            f"{p}:{st.pending_line}: record not closed before the next one; read as far as it goes"
        )
        self.flush(st, p, final=False)
        st.pending = None
        st.pending_step = None

    def end_pending(self, st: FileState, p: Path) -> None:
        if st.pending is not None:
            self.flush(st, p, final=True)
            st.pending = None
            st.pending_step = None


_HEADS: dict[tuple[str, int, int, int], str] = {}
HEAD_BYTES = 256 << 10  # what ``head`` gives the sniffers by default


def head(p: Path, size: int = HEAD_BYTES) -> str:
    """The first ``size`` bytes of a file as cleaned text lines joined (for sniffing).

    A BOM is skipped, NULs are dropped and bytes that are not UTF-8 replaced: one odd byte
    never hides a log. Cached per file version, since every console sniffer asks.
    """
    try:
        stt = os.stat(p)
    except OSError:
        return ""
    key = (str(p), size, stt.st_mtime_ns, stt.st_size)
    hit = _HEADS.get(key)
    if hit is not None:
        return hit
    text = decode_text(head_bytes(p, size))
    out = "\n".join(clean_line(line) for line in text.splitlines())
    if len(_HEADS) > 64:
        _HEADS.clear()
    _HEADS[key] = out
    return out


DEEP_BYTES = 8 << 20  # how far a sniffer looks for a line of its shape past the head


def search_deep(p: Path, rx: re.Pattern[str], size: int = DEEP_BYTES) -> re.Match[str] | None:
    """``rx`` searched in the head of ``p`` (``head``), then, where the file is larger, in its
    first ``size`` bytes (ANSI codes removed): a console whose first ``step:N`` line comes
    after long sample printouts is still recognised by its content."""
    m = rx.search(head(p))
    if m is not None:
        return m
    try:
        if os.path.getsize(p) <= HEAD_BYTES:
            return None
    except OSError:
        return None
    text = decode_text(head_bytes(p, size))
    if "\x1b" in text:
        text = ANSI.sub("", text)
    return rx.search(text)


def deep_lines(p: Path, size: int = DEEP_BYTES) -> list[str] | None:
    """The cleaned lines of the first ``size`` bytes of ``p``, where it is larger than the head
    (else None): what a sniffer parses when the head held no record of its shape. A line
    longer than the head itself (a resolved config or a tokenizer dump printed on one line,
    which alone filled the head) is passed over as blank, so the lines after it count."""
    try:
        if os.path.getsize(p) <= HEAD_BYTES:
            return None
    except OSError:
        return None
    lines = decode_text(head_bytes(p, size)).splitlines()
    return [clean_line(t) if len(t) <= HEAD_BYTES else "" for t in lines]


def sniff_files(path: Path, patterns: tuple[str, ...], test: Any) -> bool:
    """Whether ``path`` (a file, or a directory's files matching ``patterns``) passes ``test``."""
    if path.is_file():
        return bool(test(path))
    if not path.is_dir():
        return False
    n = 0
    for pat in patterns:
        for p in sorted(path.glob(pat)):
            n += 1
            if n > 50:
                return False
            if p.is_file() and test(p):
                return True
    return False
