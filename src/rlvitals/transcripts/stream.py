"""Stream the elements of a top-level JSON array from a file, in bounded memory.

A transcript file (``transcripts/step-NNNNNN.json``) is one JSON list of attempts. It can be
large (a policy stuck in a repetition loop writes megabytes per reply) or broken (a disk that
filled, a file copied half-way). ``iter_elements`` reads it in chunks and yields each element's
bytes, ready for a JSON decoder, with two bounds:

- a string value longer than ``max_string`` bytes is cut (at a character and escape boundary)
  and ends with a marker saying how many bytes were not read, so one huge reply costs
  ``max_string`` bytes of memory, not its size;
- once an element holds ``max_element`` bytes, its further string values keep only a short
  head; object keys are never cut, so the element keeps its shape.

A structural error (an unexpected bracket, a file cut in the middle) ends the file: every
complete element before it has been yielded, and ``Stream.error`` says where and why.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

__all__ = ["MAX_ELEMENT", "MAX_STRING", "Element", "Stream"]

MAX_STRING = 256 << 10  # bytes of one string value kept
MAX_ELEMENT = 8 << 20  # bytes of one element before its strings are cut short
_SHORT = 256  # bytes of a string value kept once the element is over MAX_ELEMENT
_HARD = 64 << 20  # an element past this (numbers, keys) is given up
CHUNK = 1 << 20

_STRUCT = re.compile(rb'[\[\]{}":,]')
_WS = b" \t\r\n"
_BS = 0x5C  # backslash


@dataclass
class Element:
    """One element of the array: its bytes (strings maybe cut), where it began, and how many
    bytes of string content were left out."""

    data: bytes
    offset: int
    cut: int


class _Malformed(Exception):
    pass


def _fix_tail(buf: bytearray, start: int) -> None:
    """Drop an incomplete escape sequence or UTF-8 character at the end of ``buf`` (string
    content from ``start``), so the cut string stays valid JSON."""
    n = len(buf)
    lo = max(start, n - 6)
    k = n - 1
    while k >= lo and buf[k] != _BS:
        k -= 1
    if k >= lo:
        j = k
        while j > start and buf[j - 1] == _BS:
            j -= 1
        if (k - j + 1) % 2 == 1:  # buf[k] escapes what follows it
            need = 6 if k + 1 < n and buf[k + 1] == 0x75 else 2  # \uXXXX or \X
            if k + 1 >= n or k + need > n:
                del buf[k:]
                n = k
    # A high surrogate whose low half was cut (\ud83d of \ud83d\ude00).
    if n - 6 >= start and buf[n - 6] == _BS and buf[n - 5] in (0x75, 0x55):
        j = n - 6
        while j > start and buf[j - 1] == _BS:
            j -= 1
        hexd = bytes(buf[n - 4 : n]).lower()
        if (n - 6 - j) % 2 == 0 and hexd[:1] == b"d" and hexd[1:2] in b"89ab":
            del buf[n - 6 :]
            n -= 6
    # UTF-8: a lead byte whose continuation bytes were cut.
    for back in range(1, 4):
        i = n - back
        if i < start:
            break
        b = buf[i]
        if b & 0xC0 == 0x80:
            continue  # a continuation byte: keep looking for its lead
        if b >= 0xC0:
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            if back < need:
                del buf[i:]
        break


class Stream:
    """Iterate the elements of the JSON array in ``f`` (a binary file).

    After iteration, ``error`` is None when the file was a complete, well-formed array, else a
    short reason with the byte offset; ``skipped`` counts elements given up as too large.
    """

    def __init__(
        self,
        f: BinaryIO,
        *,
        max_string: int = MAX_STRING,
        max_element: int = MAX_ELEMENT,
        chunk: int = CHUNK,
    ) -> None:
        self.f = f
        self.max_string = max_string
        self.max_element = max_element
        self.chunk = chunk
        self.error: str | None = None
        self.skipped = 0

    def __iter__(self) -> Iterator[Element]:
        try:
            yield from self._run()
        except _Malformed as exc:
            self.error = str(exc)

    def _run(self) -> Iterator[Element]:
        self._start()
        string, structure = self._string, self._structure
        while not self._done:
            el = string() if self._in_str else structure()
            if el is not None:
                yield el
        if not self._started:
            raise _Malformed("empty file: expected a JSON list of attempts")
        if not self._finished:
            raise _Malformed(f"cut at byte {self._base + len(self._data)}: the list is not closed")

    # -- the scanner's state, and one step of it per call -------------------------------

    def _start(self) -> None:
        self._data = b""
        self._base = 0  # file offset of data[0]
        self._pos = 0
        self._eof = False
        self._done = False  # read to the end of the file
        self._stack: list[int] = []  # open containers: ord('[') or ord('{')
        self._expect_key = False
        self._started = self._finished = False
        self._buf = bytearray()
        self._elem_open = False
        self._elem_at = 0
        self._giving_up = False  # the element is past _HARD: read to its end, keep nothing
        self._bare = False  # the element is a bare scalar (number, true, null) at depth 1
        self._in_str = False
        self._str_start = 0
        self._str_raw = 0  # bytes of the current string's content read
        self._str_cap = 0
        self._str_is_elem = False  # the element is this string itself
        self._str_full = False  # the string reached its cap: keep no more of it
        self._bs_run = 0  # trailing backslashes of the content read so far
        self._cut = 0

    def _need_more(self) -> bool:
        if self._eof:
            return False
        new = self.f.read(self.chunk)
        if not new:
            self._eof = True
            return False
        self._data = self._data[self._pos :] + new
        self._base += self._pos
        self._pos = 0
        return True

    def _take(self, a: int, b: int) -> None:
        """String content data[a:b] into the element, up to the string's cap."""
        if b <= a:
            return
        seg = self._data[a:b]
        run = len(seg) - len(seg.rstrip(b"\\"))
        self._bs_run = self._bs_run + run if run == len(seg) else run
        self._str_raw += b - a
        if self._giving_up or not self._elem_open or self._str_full:
            return
        buf = self._buf
        room = self._str_cap - (len(buf) - self._str_start)
        if b - a <= room:
            buf.extend(seg)
        else:
            buf.extend(seg[:room])
            _fix_tail(buf, self._str_start)
            self._str_full = True

    def _close_element(self) -> Element | None:
        self._elem_open = False
        if self._giving_up:
            self._giving_up = False
            self.skipped += 1
            self._buf = bytearray()
            self._cut = 0
            return None
        el = Element(bytes(self._buf), self._elem_at, self._cut)
        self._buf = bytearray()
        self._cut = 0
        return el

    def _string(self) -> Element | None:
        """Read on inside a string: to its closing quote, or to the end of what is read."""
        data, pos = self._data, self._pos
        q = data.find(b'"', pos)
        if q < 0:
            end = len(data) if self._eof else max(pos, len(data) - 8)
            self._take(pos, end)
            self._pos = end
            if not self._need_more():
                raise _Malformed(f"cut at byte {self._base + len(self._data)} inside a string")
            return None
        k = q
        while k > pos and data[k - 1] == _BS:
            k -= 1
        run = q - k + (self._bs_run if k == pos else 0)
        if run % 2 == 1:  # an escaped quote: content
            self._take(pos, q + 1)
            self._pos = q + 1
            return None
        self._take(pos, q)
        self._pos = q + 1
        self._in_str = False
        if self._elem_open and not self._giving_up:
            buf = self._buf
            kept = len(buf) - self._str_start
            if kept < self._str_raw:
                dropped = self._str_raw - kept
                self._cut += dropped
                buf.extend(b" \\u2026[%d more bytes not read]" % dropped)
            buf.extend(b'"')
        if self._str_is_elem:
            self._str_is_elem = False
            return self._close_element()
        return None

    def _structure(self) -> Element | None:
        """The text up to the next structural character, then that character (``_done`` when
        the file has no more)."""
        data = self._data
        m = _STRUCT.search(data, self._pos)
        gap_end = len(data) if m is None else m.start()
        if gap_end > self._pos:
            self._gap(gap_end)
        if m is None:
            self._done = not self._need_more()
            return None
        c = data[gap_end]
        at = self._base + gap_end
        self._pos = gap_end + 1
        if self._elem_open and not self._giving_up and len(self._buf) > _HARD:
            self._giving_up = True
            self._buf = bytearray()
        if c == 0x22:  # "
            self._quote(at)
            return None
        if c in (0x5B, 0x7B):  # [ {
            self._open(c, at)
            return None
        if c in (0x5D, 0x7D):  # ] }
            return self._close(c, at)
        if c == 0x2C:  # ,
            return self._comma(at)
        # c == 0x3A, a ':'
        if len(self._stack) < 2:
            raise _Malformed(f"byte {at}: unexpected ':'")
        if not self._giving_up:
            self._buf.append(c)
        self._expect_key = False
        return None

    def _gap(self, gap_end: int) -> None:
        """Text between structural characters: numbers, literals, white space."""
        pos = self._pos
        gap = self._data[pos:gap_end]
        if self._elem_open:
            if not self._giving_up:
                self._buf.extend(gap)
        elif self._started and not self._finished and len(self._stack) == 1 and gap.strip(_WS):
            # A bare scalar element (number, true, false, null).
            self._elem_open, self._bare, self._elem_at = True, True, self._base + pos
            self._buf.extend(gap)
        elif gap.strip(_WS) and (not self._started or self._finished):
            raise _Malformed(
                f"byte {self._base + pos}: expected a JSON list of attempts"
                if not self._started
                else f"byte {self._base + pos}: data after the end of the list"
            )
        self._pos = gap_end

    def _quote(self, at: int) -> None:
        """A string begins: its cap (a key's, a value's, one past ``max_element``)."""
        if not self._started or self._finished:
            raise _Malformed(f"byte {at}: expected a JSON list of attempts")
        stack = self._stack
        is_key = bool(stack) and stack[-1] == 0x7B and self._expect_key
        if len(stack) == 1 and not self._elem_open:
            self._elem_open, self._elem_at, self._str_is_elem = True, at, True
        self._in_str = True
        self._str_raw = 0
        self._bs_run = 0
        self._str_full = False
        if self._elem_open and not self._giving_up:
            self._buf.extend(b'"')
        self._str_start = len(self._buf)
        if is_key:
            self._str_cap = 1 << 20
        elif len(self._buf) > self.max_element:
            self._str_cap = _SHORT
        else:
            self._str_cap = self.max_string

    def _open(self, c: int, at: int) -> None:
        if not self._started:
            if c != 0x5B:
                raise _Malformed(f"byte {at}: expected a JSON list of attempts")
            self._started = True
            self._stack.append(c)
            return
        if self._finished:
            raise _Malformed(f"byte {at}: data after the end of the list")
        if len(self._stack) == 1:
            if self._elem_open:
                raise _Malformed(f"byte {at}: expected ',' between attempts")
            self._elem_open, self._elem_at, self._bare = True, at, False
        self._stack.append(c)
        self._expect_key = c == 0x7B
        if not self._giving_up:
            self._buf.append(c)

    def _close(self, c: int, at: int) -> Element | None:
        stack = self._stack
        if not stack or stack[-1] != (0x5B if c == 0x5D else 0x7B):
            raise _Malformed(f"byte {at}: unexpected {chr(c)!r}")
        if len(stack) == 1:  # the end of the list
            el = None
            if self._elem_open and self._bare:
                el = self._close_element()
                self._bare = False
            stack.pop()
            self._finished = True
            return el
        stack.pop()
        if not self._giving_up:
            self._buf.append(c)
        self._expect_key = False
        if len(stack) == 1:
            return self._close_element()
        return None

    def _comma(self, at: int) -> Element | None:
        if not self._started or self._finished:
            raise _Malformed(f"byte {at}: expected a JSON list of attempts")
        if len(self._stack) == 1:
            if self._elem_open and self._bare:
                el = self._close_element()
                self._bare = False
                return el
            return None
        if not self._giving_up:
            self._buf.append(0x2C)
        self._expect_key = self._stack[-1] == 0x7B
        return None
