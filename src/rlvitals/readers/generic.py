"""Per-step metrics as JSON Lines or delimited text (CSV, TSV, ...), whoever wrote them, with an
optional user mapping.

Rows become steps and values through the one table layer (``tables``): the step column by
name (``step``, ``global_step``, ``_step``, ``iteration``, ``iter``, ``update``,
``training_step``, ... or ``epoch`` with ``batch``), else by content, else the rows are
numbered in order (and the reading says so). Every other numeric field is a metric; nested
objects are flattened with ``/``; ``null`` or an empty cell is no value. Keys that already are
canonical names (docs/metrics.md) are taken as such; anything else is mapped by the shared
vocabulary or a user mapping file (``--mapping FILE``: ``canonical name = "source key"``, TOML
or JSON). Several rows for one step merge (later values win). The same reader, with a
framework's table, reads tinker-cookbook's and prime-rl's ``metrics.jsonl``.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..schema import is_canonical
from ._format import Format, register
from .base import (
    SKIPPED,
    FileReader,
    FileState,
    decode_json,
    decode_logged,
    decode_text,
)
from .keys import header_keys
from .mapping import Mapper, MappingTable, Rule
from .tables import STEP_NAMES, Rows, cell, step_rank, step_value
from .textlog import head

__all__ = ["CsvReader", "JsonlMetricsReader"]

STEP_KEYS = STEP_NAMES  # the names a step column goes by (``tables.STEP_NAMES``)

GENERIC = MappingTable(
    "generic",
    (Rule(r"^(.+)$", r"\1", "a key that is already a canonical name is taken as such"),),
    (("anything else", "kept under its own name; map it with --mapping FILE"),),
)


class CanonicalOnlyMapper(Mapper):
    """A Mapper whose identity rule applies only to canonical names."""

    def _resolve(self, key: str) -> list[tuple[str, int, Rule]]:
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        out = [t for t in super()._resolve(key) if t[2].source != r"^(.+)$" or is_canonical(key)]
        self._cache[key] = out
        return out


def step_of(rec: dict[str, Any]) -> int | None:
    """The step of a record by its step-named key (the best-named one holding an integer)."""
    best: tuple[int, int] | None = None
    for k, v in rec.items():
        r = step_rank(k)
        if r is None or isinstance(v, bool):
            continue
        s = step_value(v) if isinstance(v, int | float) else None
        if s is not None and (best is None or r < best[0]):
            best = (r, s)
    return None if best is None else best[1]


class JsonlMetricsReader(FileReader):
    """Rows of per-step metrics in JSON Lines files, read incrementally by byte offset."""

    name = "jsonl"
    table = GENERIC
    patterns: tuple[str, ...] = ("*.jsonl", "*.ndjson")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "glob" in cls.__dict__:  # the older spelling of ``patterns``
            cls.patterns = cls.__dict__["glob"]

    def reset(self) -> None:
        mapper = CanonicalOnlyMapper if self.table is GENERIC else Mapper
        self.mapper = mapper(self.table, self.run, extra=self.extra_rules)
        self._tables: dict[Path, Rows] = {}

    def accept(self, p: Path) -> bool:
        return _jsonl_table(p, named=True)

    def rows(self, p: Path) -> Rows:
        """The table of file ``p`` (the table layer: steps, cells, labels)."""
        t = self._tables.get(p)
        if t is None:
            t = self._tables[p] = Rows(self.run, self._adder(p), str(p))
        return t

    def stream_of(self, p: Path) -> str | None:
        """The writer of file ``p`` where one run is several writers' files, each with keys
        of its own (``Mapper.add``'s ``stream``); None: the files continue one another."""
        return None

    def _adder(self, p: Path) -> Callable[[int, dict[str, float | None]], None]:
        stream = self.stream_of(p)
        if stream is None:
            return self._add
        return lambda step, values: self.mapper.add(step, values, stream)

    def _add(self, step: int, values: dict[str, float | None]) -> None:
        self.mapper.add(step, values)

    def line(self, st: FileState, raw: bytes, lineno: int) -> None:
        if not raw.strip():
            return
        p = st.path
        rec = decode_logged(raw, f"{p}:{lineno}", self.run.warnings.append)
        if rec is SKIPPED:
            return
        self.row(rec, p, lineno)

    def row(self, rec: dict[str, Any], p: Path, lineno: int) -> None:
        if _is_config_line(rec):
            self.run.info.setdefault("config", rec["config"])  # rl-doctor's first line
            return
        self.rows(p).row(rec, f"{p}:{lineno}")

    def derive(self) -> None:
        """After each pass: rows held to choose the step column are read (a sample read for
        sniffing is all there is)."""
        for t in self._tables.values():
            t.flush(final=self.sample_bytes is not None)

    def end_file(self, st: FileState) -> None:
        t = self._tables.get(st.path)
        if t is not None:
            t.flush(final=True)


class CsvReader(JsonlMetricsReader):
    """Delimited text (CSV, TSV, ``;`` or ``|`` separated, or columns aligned with spaces) with a
    header row; re-read from the last complete line."""

    name = "csv"
    patterns = ("*.csv", "*.tsv", "*.tab")

    def accept(self, p: Path) -> bool:
        return _delimited(p, named=True) is not None

    def line(self, st: FileState, raw: bytes, lineno: int) -> None:
        p = st.path
        text = decode_text(raw)
        if not text.strip() and not (st.extra.get("delim") and st.extra["delim"] in text):
            return  # a blank line (a line of separators is a row of empty cells)
        header = st.extra.get("header")
        if header is None:
            header = self._header(st, text, lineno)
            if header is None:
                return
        cells = _split(text, st.extra["delim"])
        if cells is None:
            self.run.warnings.append(f"{p}:{lineno}: not CSV; skipped")
            return
        if len(cells) != len(header):
            self.run.warnings.append(
                f"{p}:{lineno}: {len(cells)} cells for {len(header)} columns; skipped"
            )
            return
        self.rows(p).row(dict(zip(header, cells)), f"{p}:{lineno}")

    def _header(self, st: FileState, text: str, lineno: int) -> list[str] | None:
        """The header row, from ``text``: or from the comment line before it when that names
        as many columns as ``text`` has numbers (numpy's ``savetxt``: ``# step reward``)."""
        if text.lstrip().startswith("#"):
            st.extra["comment"] = text.lstrip()[1:]
            return None
        comment = st.extra.pop("comment", None)
        delim = st.extra["delim"] = _delimiter(text, st.path)
        cells = _split(text, delim)
        if comment is not None and cells is not None and not _is_header(cells):
            names = _split(comment, _delimiter(comment))
            if names is not None and _is_header(names) and len(names) == len(cells):
                st.extra["header"] = header_keys([c.strip() for c in names], self.run)
                return st.extra["header"]
        if cells is None or len(cells) < _least_columns(st.path) or not _is_header(cells):
            self.run.warnings.append(
                f"{st.path}:{lineno}: expected a header row of column names; skipped"
            )
            return None
        st.extra["header"] = header_keys([c.strip() for c in cells], self.run)
        return None


def _least_columns(p: Path) -> int:
    """Columns a delimited table needs: one in a file named as one (``.csv``, ``.tsv``), two
    elsewhere (a line of one word is not a table's header in a ``.txt``)."""
    return 1 if p.suffix.lower() in (".csv", ".tsv", ".tab") else 2


def _is_header(cells: list[str]) -> bool:
    """Whether a row reads as column names (most of them not numbers)."""
    return bool(cells) and sum(type(cell(c)) is float for c in cells) * 2 <= len(cells)


def _delimiter(header: str, p: Path | None = None) -> str | None:
    """The separator of a delimited table, from its header row: a tab, a comma, a semicolon or
    a bar; else the one its name says (one column of a ``.csv``), else None (columns aligned
    with spaces)."""
    for d in ("\t", ",", ";", "|"):
        if d in header:
            return d
    if p is not None:
        return {".csv": ",", ".tsv": "\t", ".tab": "\t"}.get(p.suffix.lower())
    return None


def _split(text: str, delim: str | None) -> list[str] | None:
    if delim is None:
        return text.split()
    if delim == "|":
        cells = [c.strip() for c in text.strip().strip("|").split("|")]
        return cells
    try:
        return next(csv.reader(io.StringIO(text), delimiter=delim))
    except (csv.Error, StopIteration):
        return None


def _is_config_line(rec: dict[str, Any]) -> bool:
    return set(rec) == {"config"} and isinstance(rec["config"], dict)


def _has_value(rec: dict[str, Any]) -> bool:
    return any(type(cell(v)) is float for v in rec.values() if not isinstance(v, dict)) or any(
        isinstance(v, dict) and _has_value(v) for v in rec.values()
    )


def _jsonl_table(p: Path, *, named: bool) -> bool:
    """Whether one of the first lines of ``p`` is a JSON object of metrics (a line of junk
    before it is passed over); ``named``: one with a step-named integer key."""
    n = 0
    for line in head(p, 64 << 10).splitlines():
        if not line.strip():
            continue
        n += 1
        if n > 5:
            break
        try:
            rec, _ = decode_json(line)
        except ValueError:
            # Cut by the sample's end (a very long line): a step key near its start will do.
            if _STEP_START.match(line):
                return True
            continue
        if not isinstance(rec, dict) or _is_config_line(rec):
            continue  # rl-doctor's {"config": {...}} first line
        if step_of(rec) is not None or (not named and _has_value(rec)):
            return True
    return False


_STEP_START = re.compile(
    r'\s*\{\s*"(?:step|global_step|_step|iteration|iter|training_step|update)"\s*:\s*\d'
)


def _delimited(p: Path, *, named: bool) -> str | None:
    """The separator (``"none"`` for aligned columns) of a delimited table at the start of
    ``p``, or None: a header row of at least two names, then rows of as many cells, most of
    them numbers. ``named``: the header names a step column."""
    lines = [t for t in head(p, 16 << 10).split("\n") if t.strip()]
    comment = None
    while lines and lines[0].lstrip().startswith("#") and len(lines) > 1:
        comment, lines = lines[0].lstrip()[1:], lines[1:]
    if not lines:
        return None
    delim = _delimiter(lines[0], p)
    header = _split(lines[0], delim)
    if header is not None and comment is not None and not _is_header(header):
        named_by = _split(comment, _delimiter(comment))
        if named_by is not None and len(named_by) == len(header) and _is_header(named_by):
            header, lines = named_by, ["", *lines]  # numpy's savetxt: '# step reward'
    if header is None or len(header) < _least_columns(p) or not _is_header(header):
        return None
    names = [c.strip() for c in header]
    if named and not any(step_rank(c) is not None for c in names):
        return None
    rows = [_split(t, delim) for t in lines[1:21]]
    if not named or delim is None:
        good = [r for r in rows if r is not None and len(r) == len(header)]
        numeric = [r for r in good if sum(type(cell(c)) is float for c in r) * 2 >= len(r)]
        if not numeric or len(good) * 4 < len(rows) * 3 or (delim is None and len(numeric) < 2):
            return None
    return delim or "none"


def json_lines(p: Path) -> bool:
    """Whether ``p`` (a ``.json``) holds JSON Lines: one object per line, not one document."""
    text = head(p, 64 << 10).lstrip()
    if not text.startswith("{"):
        return False
    lines = [t for t in text.split("\n") if t.strip()]
    if len(lines) < 2 or not lines[1].lstrip().startswith("{"):
        return False
    try:
        first, _ = decode_json(lines[0])
    except ValueError:
        return False
    return isinstance(first, dict)


def sniff_glob(path: Path, glob: str, test: Any) -> bool:
    if path.is_file():
        return path.name.endswith(glob[1:]) and test(path)
    return path.is_dir() and any(test(p) for p in sorted(path.glob(glob))[:20])


def _sniff_jsonl(path: Path) -> bool:
    if path.is_file():
        if path.suffix in (".jsonl", ".ndjson"):
            return _jsonl_table(path, named=False)
        return path.suffix == ".json" and json_lines(path) and _jsonl_table(path, named=False)
    return path.is_dir() and any(
        _jsonl_table(p, named=True)
        for pat in JsonlMetricsReader.patterns
        for p in sorted(path.glob(pat))[:20]
    )


_DELIMITED_SUFFIXES = (".csv", ".tsv", ".tab", ".psv", ".dat", ".txt")


def _sniff_delimited(path: Path) -> bool:
    if path.is_file():
        return (
            path.suffix.lower() in _DELIMITED_SUFFIXES and _delimited(path, named=False) is not None
        )
    return path.is_dir() and any(
        _delimited(p, named=True) is not None
        for pat in CsvReader.patterns
        for p in sorted(path.glob(pat))[:20]
    )


register(
    Format(
        "jsonl",
        "generic JSON Lines of per-step metrics (a step field per row, else numbered in order; "
        "--mapping FILE)",
        _sniff_jsonl,
        JsonlMetricsReader,
        priority=90,
        table=GENERIC,
        kind="JSONL",
        suffixes=(".jsonl",),
        loose=lambda p: _jsonl_table(p, named=True),
        # the folders any loop names for its samples and checkpoints beside its log
        sample_dirs=("samples", "train_data", "checkpoints?"),
    )
)
register(
    Format(
        "csv",
        "generic CSV/TSV of per-step metrics (a step column, else numbered in order; "
        "--mapping FILE)",
        _sniff_delimited,
        CsvReader,
        priority=91,
        table=GENERIC,
        kind="CSV",
        suffixes=(".csv", ".tsv"),
        loose=lambda p: _delimited(p, named=True) is not None,
    )
)
