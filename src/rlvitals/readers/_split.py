"""A big rollouts file read in several processes side by side, as one process would read it.

Decoding attempts is the bulk of reading a big run (``rlvitals check`` of a million attempts:
the JSON decode and the columns built from it). Where this process judges alone
(``fleet.judging``: ``rlvitals check RUN``, or ``--jobs 1``) and the machine has more than
one core, ``side_by_side()`` lets the native reader cut the unread part of a big
``rollouts*.jsonl`` at line boundaries into ``parts`` pieces: this process reads the first,
forked workers the others, each exactly as one reader reads lines (the same decoder, the
same line-by-line fallback, the same warnings), and their columns are joined in file order:

- string columns come back as each worker's own code book and codes, and are coded again
  in the reader's book in the worker's order of first appearance, so every code is the one a
  single pass gives;
- a worker's warnings name lines counted from its piece's start, and are renumbered by the
  lines before it (``path:LINE:`` at their head);
- the file's state (offset, line, the bytes before the offset) ends where the last piece
  ended.

A worker that fails costs only time: the rest of the file is then read here. A piece is at
least ``PIECE_BYTES`` (below that a fork costs more than it saves); a file whose lines end
in a lone CR, or with no newline near where it would be cut, is read in one piece.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import numpy as np

from .base import FileState

__all__ = [
    "PIECE_BYTES",
    "cut_points",
    "parts_wanted",
    "piece_state",
    "read_pieces",
    "recode",
    "renumber",
    "side_by_side",
]

PIECE_BYTES = 48 << 20  # bytes a piece is at least
# The first piece (this process's) is this much bigger than the others: a worker's columns
# still travel back (pickled) when it is done, about an eighth of its reading time (measured:
# 0.14 s after the parent's 0.96 s on two cores, 1,040,000 attempts).
FIRST_EXTRA = 0.15
MAX_PARTS = 4
_PARTS: ContextVar[int] = ContextVar("rlvitals_read_parts", default=1)


@contextlib.contextmanager
def side_by_side(parts: int | None = None) -> Iterator[None]:
    """Within this block, native readers in this thread read a big rollouts file in ``parts``
    processes (default: the cores, at most ``MAX_PARTS``; 1 on a single core, and off Linux,
    where processes are not forked)."""
    if parts is None:
        parts = min(os.cpu_count() or 1, MAX_PARTS)
    if not sys.platform.startswith("linux"):  # fork is safe and cheap there (as the pre-scan)
        parts = 1
    token = _PARTS.set(max(1, parts))
    try:
        yield
    finally:
        _PARTS.reset(token)


def parts_wanted() -> int:
    return _PARTS.get()


def cut_points(path: Path, start: int, parts: int, max_line: int) -> list[int]:
    """Offsets cutting ``path`` from ``start`` to its end into up to ``parts`` pieces of at
    least ``PIECE_BYTES``, each cut just after a newline; [] where it stays one piece."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            f.seek(start)
            if b"\n" not in f.read(1 << 16):
                return []  # no LF line ends near the start (a lone-CR file): one piece
            parts = min(parts, (size - start) // PIECE_BYTES)
            cuts: list[int] = []
            share = 1 + FIRST_EXTRA  # the first piece's weight; each other's is 1
            for k in range(1, parts):
                at = start + int((size - start) * (share + k - 1) / (share + parts - 1))
                f.seek(at)
                seen = 0
                while True:
                    block = f.read(1 << 20)
                    nl = block.find(b"\n")
                    if nl >= 0:
                        cuts.append(at + seen + nl + 1)
                        break
                    seen += len(block)
                    if not block or seen > max_line:
                        return []
    except OSError:
        return []
    return sorted({c for c in cuts if start < c < size})


def _context() -> Any:
    return multiprocessing.get_context("fork")


def read_pieces(
    path: Path,
    cuts: list[int],
    final: bool,
    worker: Callable[[int, int | None, bool], dict[str, Any]],
) -> list[Any]:
    """Futures of ``worker(start, end, final)`` for each piece after the first (the caller
    reads the first); ``end`` None is the file's end."""
    bounds = [*cuts, None]
    pool = ProcessPoolExecutor(max_workers=len(cuts), mp_context=_context())
    try:
        futures = [
            pool.submit(worker, start, bounds[i + 1], final if bounds[i + 1] is None else False)
            for i, start in enumerate(cuts)
        ]
    finally:
        pool.shutdown(wait=False)
    return futures


def piece_state(path: Path, start: int) -> FileState:
    """The state a reader has at ``start``, a line's first byte (lines counted from 1)."""
    st = FileState(path)
    st.offset = start
    return st


def renumber(warnings: list[str], path: Path, lines_before: int) -> list[str]:
    """A worker's warnings with their line numbers (``path:LINE:`` at their head) moved on by
    ``lines_before``."""
    if not lines_before:
        return warnings
    head = re.compile(re.escape(str(path)) + r":(\d+):")

    def move(m: re.Match[str]) -> str:
        return f"{path}:{int(m.group(1)) + lines_before}:"

    return [head.sub(move, w, count=1) for w in warnings]


def recode(book: Any, names: list[str], codes: np.ndarray) -> np.ndarray:
    """``codes`` of a worker's book (``names``; -1 for None) as codes of ``book``, new names
    coded in the worker's order of first appearance."""
    if not names:
        return codes
    table = np.fromiter(map(book.index.__getitem__, names), np.int32, len(names))
    return np.where(codes >= 0, table[np.maximum(codes, 0)], -1).astype(np.int32)
