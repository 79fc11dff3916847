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
        f = self.f
        data = b""
        base = 0  # file offset of data[0]
        pos = 0
        eof = False
        stack: list[int] = []  # open containers: ord('[') or ord('{')
        expect_key = False
        started = finished = False
        buf = bytearray()
        elem_open = False
        elem_at = 0
        giving_up = False  # the element is past _HARD: read to its end, keep nothing
        bare = False  # the element is a bare scalar (number, true, null) at depth 1
        in_str = False
        str_start = 0
        str_raw = 0  # bytes of the current string's content read
        str_cap = 0
        str_is_elem = False  # the element is this string itself
        str_full = False  # the string reached its cap: keep no more of it
        bs_run = 0  # trailing backslashes of the content read so far
        cut = 0

        def need_more() -> bool:
            nonlocal data, base, pos, eof
            if eof:
                return False
            new = f.read(self.chunk)
            if not new:
                eof = True
                return False
            data = data[pos:] + new
            base += pos
            pos = 0
            return True

        def take(a: int, b: int) -> None:
            """String content data[a:b] into the element, up to the string's cap."""
            nonlocal str_raw, bs_run, str_full
            if b <= a:
                return
            seg = data[a:b]
            run = len(seg) - len(seg.rstrip(b"\\"))
            bs_run = bs_run + run if run == len(seg) else run
            str_raw += b - a
            if giving_up or not elem_open or str_full:
                return
            room = str_cap - (len(buf) - str_start)
            if b - a <= room:
                buf.extend(seg)
            else:
                buf.extend(seg[:room])
                _fix_tail(buf, str_start)
                str_full = True

        def close_element() -> Element | None:
            nonlocal elem_open, giving_up, cut, buf
            elem_open = False
            if giving_up:
                giving_up = False
                self.skipped += 1
                buf = bytearray()
                cut = 0
                return None
            el = Element(bytes(buf), elem_at, cut)
            buf = bytearray()
            cut = 0
            return el

        while True:
            if in_str:
                q = data.find(b'"', pos)
                if q < 0:
                    end = len(data) if eof else max(pos, len(data) - 8)
                    take(pos, end)
                    pos = end
                    if not need_more():
                        raise _Malformed(f"cut at byte {base + len(data)} inside a string")
                    continue
                k = q
                while k > pos and data[k - 1] == _BS:
                    k -= 1
                run = q - k + (bs_run if k == pos else 0)
                if run % 2 == 1:  # an escaped quote: content
                    take(pos, q + 1)
                    pos = q + 1
                    continue
                take(pos, q)
                pos = q + 1
                in_str = False
                if elem_open and not giving_up:
                    kept = len(buf) - str_start
                    if kept < str_raw:
                        dropped = str_raw - kept
                        cut += dropped
                        buf.extend(b" \\u2026[%d more bytes not read]" % dropped)
                    buf.extend(b'"')
                if str_is_elem:
                    str_is_elem = False
                    el = close_element()
                    if el is not None:
                        yield el
                continue

            m = _STRUCT.search(data, pos)
            if m is None:
                gap_end = len(data)
            else:
                gap_end = m.start()
            if gap_end > pos:
                gap = data[pos:gap_end]
                if elem_open:
                    if not giving_up:
                        buf.extend(gap)
                elif started and not finished and len(stack) == 1 and gap.strip(_WS):
                    # A bare scalar element (number, true, false, null).
                    elem_open, bare, elem_at = True, True, base + pos
                    buf.extend(gap)
                elif gap.strip(_WS) and (not started or finished):
                    raise _Malformed(
                        f"byte {base + pos}: expected a JSON list of attempts"
                        if not started
                        else f"byte {base + pos}: data after the end of the list"
                    )
                pos = gap_end
            if m is None:
                if not need_more():
                    break
                continue
            c = data[pos]
            at = base + pos
            pos += 1
            if elem_open and not giving_up and len(buf) > _HARD:
                giving_up = True
                buf = bytearray()
            if c == 0x22:  # "
                if not started or finished:
                    raise _Malformed(f"byte {at}: expected a JSON list of attempts")
                is_key = bool(stack) and stack[-1] == 0x7B and expect_key
                if len(stack) == 1 and not elem_open:
                    elem_open, elem_at, str_is_elem = True, at, True
                in_str = True
                str_raw = 0
                bs_run = 0
                str_full = False
                if elem_open and not giving_up:
                    buf.extend(b'"')
                str_start = len(buf)
                if is_key:
                    str_cap = 1 << 20
                elif len(buf) > self.max_element:
                    str_cap = _SHORT
                else:
                    str_cap = self.max_string
                continue
            if c in (0x5B, 0x7B):  # [ {
                if not started:
                    if c != 0x5B:
                        raise _Malformed(f"byte {at}: expected a JSON list of attempts")
                    started = True
                    stack.append(c)
                    continue
                if finished:
                    raise _Malformed(f"byte {at}: data after the end of the list")
                if len(stack) == 1:
                    if elem_open:
                        raise _Malformed(f"byte {at}: expected ',' between attempts")
                    elem_open, elem_at, bare = True, at, False
                stack.append(c)
                expect_key = c == 0x7B
                if not giving_up:
                    buf.append(c)
                continue
            if c in (0x5D, 0x7D):  # ] }
                if not stack or stack[-1] != (0x5B if c == 0x5D else 0x7B):
                    raise _Malformed(f"byte {at}: unexpected {chr(c)!r}")
                if len(stack) == 1:  # the end of the list
                    if elem_open and bare:
                        el = close_element()
                        bare = False
                        if el is not None:
                            yield el
                    stack.pop()
                    finished = True
                    continue
                stack.pop()
                if not giving_up:
                    buf.append(c)
                expect_key = False
                if len(stack) == 1:
                    el = close_element()
                    if el is not None:
                        yield el
                continue
            if c == 0x2C:  # ,
                if not started or finished:
                    raise _Malformed(f"byte {at}: expected a JSON list of attempts")
                if len(stack) == 1:
                    if elem_open and bare:
                        el = close_element()
                        bare = False
                        if el is not None:
                            yield el
                    continue
                if not giving_up:
                    buf.append(c)
                expect_key = stack[-1] == 0x7B
                continue
            if c == 0x3A:  # :
                if len(stack) < 2:
                    raise _Malformed(f"byte {at}: unexpected ':'")
                if not giving_up:
                    buf.append(c)
                expect_key = False
                continue
        if not started:
            raise _Malformed("empty file: expected a JSON list of attempts")
        if not finished:
            raise _Malformed(f"cut at byte {base + len(data)}: the list is not closed")
