"""Per-step metrics as JSON Lines or CSV, whoever wrote them, with an optional user mapping.

A row needs a step (``step``, ``global_step``, ``_step`` or ``iteration``); every other
numeric field is a metric. Nested objects are flattened with ``/``. Keys that already are
canonical names (METRICS.md) are taken as such; anything else is mapped only by a user mapping
file (``--mapping FILE``: ``canonical name = "source key"``, TOML or JSON). Several rows for
one step merge (later values win). The same reader, with a framework's table, reads
tinker-cookbook's and prime-rl's ``metrics.jsonl``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..jsonio import (
    MAX_LINE_BYTES,
    decode_line,
    read_complete_lines,
    read_json_objects,
    to_float,
)
from ..model import RunData
from ..schema import is_canonical
from . import Format, register
from .keys import header_keys
from .mapping import Mapper, MappingTable, Rule
from .textlog import head, parse_number

__all__ = ["CsvReader", "JsonlMetricsReader"]

STEP_KEYS = ("step", "global_step", "_step", "iteration", "train/global_step", "Step")

GENERIC = MappingTable(
    "generic",
    (Rule(r"^(.+)$", r"\1", "a key that is already a canonical name is taken as such"),),
    (("anything else", "kept under its own name; map it with --mapping FILE"),),
)


class _CanonicalOnly(Mapper):
    """A Mapper whose identity rule applies only to canonical names."""

    def _resolve(self, key: str) -> list[tuple[str, int, Rule]]:
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        out = [t for t in super()._resolve(key) if t[2].source != r"^(.+)$" or is_canonical(key)]
        self._cache[key] = out
        return out


def _flatten(obj: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            yield from _flatten(v, key + "/")
        else:
            yield key, v


def _as_number(v: Any) -> float | None:
    f = to_float(v)
    if f is None and isinstance(v, str):
        f = parse_number(v)
    return f


def _step_of(rec: dict[str, Any]) -> int | None:
    for k in STEP_KEYS:
        v = rec.get(k)
        if isinstance(v, bool):
            continue
        if isinstance(v, int):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
    return None


class JsonlMetricsReader:
    """Rows of per-step metrics in JSON Lines files, read incrementally by byte offset."""

    name = "jsonl"
    table = GENERIC
    glob: tuple[str, ...] = ("*.jsonl",)
    max_line = MAX_LINE_BYTES  # a longer line is skipped with a warning, never held

    def __init__(self, path: Path, *, extra_rules: tuple[Rule, ...] = ()) -> None:
        self.path = path
        self.run = RunData(source=str(path), format=self.name)
        mapper = _CanonicalOnly if self.table is GENERIC else Mapper
        self.mapper = mapper(self.table, self.run, extra=extra_rules)
        self._offsets: dict[Path, tuple[int, int]] = {}

    def files(self) -> list[Path]:
        if self.path.is_file():
            return [self.path]
        out: list[Path] = []
        for g in self.glob:
            out.extend(p for p in sorted(self.path.glob(g)) if p.is_file() and self.accept(p))
        return out

    def accept(self, p: Path) -> bool:
        return _jsonl_has_step(p)

    def poll(self) -> bool:
        changed = False
        for p in self.files():
            offset, line = self._offsets.get(p, (0, 1))
            for lineno, end, rec in read_json_objects(
                p, offset, line, self.run.warnings.append, max_line=self.max_line
            ):
                self._offsets[p] = (end, lineno + 1)
                changed = True
                if rec is not None:
                    self.row(rec, p, lineno)
        if changed:
            self.derive()
        return changed

    def row(self, rec: dict[str, Any], p: Path, lineno: int) -> None:
        step = _step_of(rec)
        if step is None and _is_config_line(rec):
            self.run.info.setdefault("config", rec["config"])  # rl-doctor's first line
            return
        if step is None:
            self.run.warnings.append(
                f"{p}:{lineno}: no integer step ({', '.join(STEP_KEYS)}); skipped"
            )
            return
        values: dict[str, float | None] = {}
        for k, v in _flatten(rec):
            if k in STEP_KEYS:
                continue
            f = _as_number(v)
            if f is not None or v is None:
                values[k] = f  # None (null) reads as NaN in the Mapper
        self.mapper.add(step, values)

    def derive(self) -> None:
        """Metrics computed from whole series after each read (none here)."""


class CsvReader(JsonlMetricsReader):
    """A CSV file with a header row and a step column; re-read from the last complete line."""

    name = "csv"
    glob = ("*.csv",)

    def __init__(self, path: Path, *, extra_rules: tuple[Rule, ...] = ()) -> None:
        super().__init__(path, extra_rules=extra_rules)
        self._header: dict[Path, list[str]] = {}

    def accept(self, p: Path) -> bool:
        return _csv_has_step(p)

    def poll(self) -> bool:
        changed = False
        for p in self.files():
            offset, line = self._offsets.get(p, (0, 1))
            for lineno, end, raw in read_complete_lines(
                p, offset, first_line=line, max_line=self.max_line
            ):
                self._offsets[p] = (end, lineno + 1)
                changed = True
                if raw is None:
                    self.run.warnings.append(f"{p}:{lineno}: line too long; skipped")
                    continue
                text = raw.decode("utf-8", errors="replace").rstrip("\r")
                if not text.strip():
                    continue
                try:
                    cells = next(csv.reader(io.StringIO(text)))
                except (csv.Error, StopIteration) as exc:
                    self.run.warnings.append(f"{p}:{lineno}: not CSV ({exc}); skipped")
                    continue
                header = self._header.get(p)
                if header is None:
                    self._header[p] = header_keys([c.strip() for c in cells], self.run)
                    continue
                if len(cells) != len(header):
                    self.run.warnings.append(
                        f"{p}:{lineno}: {len(cells)} cells for {len(header)} columns; skipped"
                    )
                    continue
                rec: dict[str, Any] = {}
                for k, c in zip(header, cells):
                    c = c.strip()
                    if k in STEP_KEYS:
                        f = parse_number(c)
                        rec[k] = int(f) if f is not None and f == f and f.is_integer() else c
                    elif c:
                        rec[k] = c
                self.row(rec, p, lineno)
        return changed


def _is_config_line(rec: dict[str, Any]) -> bool:
    return set(rec) == {"config"} and isinstance(rec["config"], dict)


def _jsonl_has_step(p: Path) -> bool:
    for line in head(p, 64 << 10).splitlines()[:5]:
        if not line.strip():
            continue
        try:
            rec = decode_line(line)
        except ValueError:
            return False
        if isinstance(rec, dict) and _is_config_line(rec):
            continue  # rl-doctor's {"config": {...}} first line
        return isinstance(rec, dict) and _step_of(rec) is not None
    return False


def _csv_has_step(p: Path) -> bool:
    first = head(p, 16 << 10).split("\n", 1)[0]
    try:
        cells = next(csv.reader(io.StringIO(first)))
    except (csv.Error, StopIteration):
        return False
    return any(c.strip() in STEP_KEYS for c in cells)


def _sniff(path: Path, glob: str, test: Any) -> bool:
    if path.is_file():
        return path.name.endswith(glob[1:]) and test(path)
    return path.is_dir() and any(test(p) for p in sorted(path.glob(glob))[:20])


register(
    Format(
        "jsonl",
        "generic JSON Lines of per-step metrics (a step field per row; --mapping FILE)",
        lambda p: _sniff(p, "*.jsonl", _jsonl_has_step),
        JsonlMetricsReader,
        priority=90,
        table=GENERIC,
        kind="JSONL",
    )
)
register(
    Format(
        "csv",
        "generic CSV of per-step metrics (a step column; --mapping FILE)",
        lambda p: _sniff(p, "*.csv", _csv_has_step),
        CsvReader,
        priority=91,
        table=GENERIC,
        kind="CSV",
    )
)
