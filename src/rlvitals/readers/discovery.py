"""What the registered formats tell the one discovery (``rlvitals.source.find_runs``).

Each ``Format`` says which names make a folder one of its runs (``markers``, ``marks``), which
folders beside its log hold its samples (``sample_dirs``), which file suffixes are worth
sniffing (``suffixes``) and which names in a folder are never runs (``passes_over``); each
sample-dump format (``readers.samples``) says which files are its dump (``file_pattern``) and
whether they make a run alone (``alone``). ``clues()`` gathers them, once per state of the
registries, so a reader from another package (entry point) is discovered like a built-in one
and a new reader, its folder layout and its dump included, is one file.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .registry import formats
from .samples import dump_formats

__all__ = ["Clues", "clues"]


def _any(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """One expression matching a whole name that matches any of ``patterns`` (regexes)."""
    found = sorted(set(patterns))
    return re.compile("^(?:" + "|".join(found) + ")$") if found else None


def _globs(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """One expression matching a name that matches any of the glob ``patterns``."""
    found = sorted(set(patterns))
    return re.compile("|".join(fnmatch.translate(p) for p in found)) if found else None


@dataclass(frozen=True)
class Clues:
    """The discovery's knowledge of the registered formats."""

    markers: re.Pattern[str] | None  # a name that makes its folder one run
    marks: tuple[Callable[[Path, set[str]], bool], ...]  # layouts a name cannot say
    sample_dirs: re.Pattern[str] | None  # folders beside a log that hold its samples
    suffixes: frozenset[str]  # the file suffixes worth sniffing
    dumps: tuple[re.Pattern[str], ...]  # a dump's files: samples, never runs of their own
    alone: tuple[re.Pattern[str], ...]  # ... those that make a folder without a log one run
    passes_over: tuple[Callable[[list[str]], Iterable[str]], ...]

    def is_run_dir(self, d: Path) -> bool:
        """Whether ``d`` is one run by a format's own markers."""
        try:
            names = set(os.listdir(d))
        except OSError:
            return False
        if self.markers is not None and any(self.markers.match(n) for n in names):
            return True
        return any(_safely(mark, d, names) for mark in self.marks)

    def sample_dir(self, name: str) -> bool:
        """Whether a folder of this name beside a log holds that log's samples."""
        return self.sample_dirs is not None and self.sample_dirs.match(name) is not None

    def dump_file(self, name: str) -> str | None:
        """``"alone"`` for a dump's file that makes its folder a run when no log is there,
        ``"dump"`` for another dump's file, None for a file that is no dump's."""
        if any(p.match(name) for p in self.alone):
            return "alone"
        return "dump" if any(p.match(name) for p in self.dumps) else None

    def never_runs(self, names: list[str]) -> set[str]:
        """The names among a folder's entries that a format says are never runs."""
        out: set[str] = set()
        for passes in self.passes_over:
            out.update(passes(names))
        return out


def _safely(mark: Callable[[Path, set[str]], bool], d: Path, names: set[str]) -> bool:
    """A format's ``marks``; one that fails (a folder vanished, another package's bug) says
    no."""
    try:
        return bool(mark(d, names))
    except (OSError, ValueError, TypeError, KeyError, IndexError, RecursionError):
        return False


_CACHE: dict[tuple[int, ...], Clues] = {}


def clues() -> Clues:
    """What the formats and dump formats registered now tell discovery (every reader loaded,
    the other packages' included)."""
    fmts = formats()
    dumps = dump_formats()
    key = tuple(id(f) for f in fmts) + tuple(id(type(d)) for d in dumps)
    got = _CACHE.get(key)
    if got is not None:
        return got
    got = Clues(
        markers=_globs(m for f in fmts for m in f.markers),
        marks=tuple(f.marks for f in fmts if f.marks is not None),
        sample_dirs=_any(
            [*(p for f in fmts for p in f.sample_dirs), *(p for d in dumps for p in d.sample_dirs)]
        ),
        suffixes=frozenset(s for f in fmts for s in f.suffixes),
        dumps=tuple(d.file_pattern for d in dumps if d.file_pattern is not None and not d.alone),
        alone=tuple(d.file_pattern for d in dumps if d.file_pattern is not None and d.alone),
        passes_over=tuple(f.passes_over for f in fmts if f.passes_over is not None),
    )
    _CACHE.clear()
    _CACHE[key] = got
    return got
