"""Per-step metrics as JSON Lines or CSV, whoever wrote them, with an optional user mapping.

A row needs a step (``step``, ``global_step``, ``_step``, ``iteration`` or ``iter``); every other
numeric field is a metric. Nested objects are flattened with ``/``. Keys that already are
canonical names (docs/metrics.md) are taken as such; anything else is mapped only by a user mapping
file (``--mapping FILE``: ``canonical name = "source key"``, TOML or JSON). Several rows for
one step merge (later values win). The same reader, with a framework's table, reads
tinker-cookbook's and prime-rl's ``metrics.jsonl``.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..jsonio import to_float
from ..schema import is_canonical
from ._format import Format, register
from .base import (
    SKIPPED,
    FileReader,
    FileState,
    decode_json,
    decode_logged,
    decode_text,
    flatten,
    valid_step,
)
from .keys import header_keys
from .mapping import Mapper, MappingTable, Rule
from .printed import parse_number
from .textlog import head

__all__ = ["CsvReader", "JsonlMetricsReader"]

STEP_KEYS = ("step", "global_step", "_step", "iteration", "iter", "train/global_step", "Step")

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


def as_number(v: Any) -> float | None:
    f = to_float(v)
    if f is None and isinstance(v, str):
        f = parse_number(v)
    return f


def step_of(rec: dict[str, Any]) -> int | None:
    for k in STEP_KEYS:
        v = rec.get(k)
        if isinstance(v, bool):
            continue
        if isinstance(v, int):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
    return None


class JsonlMetricsReader(FileReader):
    """Rows of per-step metrics in JSON Lines files, read incrementally by byte offset."""

    name = "jsonl"
    table = GENERIC
    patterns: tuple[str, ...] = ("*.jsonl",)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "glob" in cls.__dict__:  # the older spelling of ``patterns``
            cls.patterns = cls.__dict__["glob"]

    def reset(self) -> None:
        mapper = CanonicalOnlyMapper if self.table is GENERIC else Mapper
        self.mapper = mapper(self.table, self.run, extra=self.extra_rules)

    def accept(self, p: Path) -> bool:
        return _jsonl_has_step(p)

    def line(self, st: FileState, raw: bytes, lineno: int) -> None:
        if not raw.strip():
            return
        p = st.path
        rec = decode_logged(raw, f"{p}:{lineno}", self.run.warnings.append)
        if rec is SKIPPED:
            return
        self.row(rec, p, lineno)

    def row(self, rec: dict[str, Any], p: Path, lineno: int) -> None:
        step = step_of(rec)
        if step is None and _is_config_line(rec):
            self.run.info.setdefault("config", rec["config"])  # rl-doctor's first line
            return
        if step is None:
            self.run.warnings.append(
                f"{p}:{lineno}: no integer step ({', '.join(STEP_KEYS)}); skipped"
            )
            return
        values: dict[str, float | None] = {}
        for k, v in flatten(rec):
            if k in STEP_KEYS:
                continue
            f = as_number(v)
            if f is not None or v is None:
                values[k] = f  # None (null) reads as NaN in the Mapper
        self.add(step, values, p, lineno)

    def add(self, step: int, values: Mapping[str, float | None], p: Path, lineno: int) -> None:
        """Map one row's values at ``step`` (a step outside 0..2**63-1 is one warning)."""
        if valid_step(step) is None:
            self.run.warnings.append(
                f"{p}:{lineno}: step {step} out of range (0..2**63-1); skipped"
            )
            return
        self.mapper.add(step, values)


class CsvReader(JsonlMetricsReader):
    """A CSV file with a header row and a step column; re-read from the last complete line."""

    name = "csv"
    patterns = ("*.csv",)

    def accept(self, p: Path) -> bool:
        return _csv_has_step(p)

    def line(self, st: FileState, raw: bytes, lineno: int) -> None:
        p = st.path
        text = decode_text(raw)
        if not text.strip():
            return
        try:
            cells = next(csv.reader(io.StringIO(text)))
        except (csv.Error, StopIteration) as exc:
            self.run.warnings.append(f"{p}:{lineno}: not CSV ({exc}); skipped")
            return
        header = st.extra.get("header")
        if header is None:
            st.extra["header"] = header_keys([c.strip() for c in cells], self.run)
            return
        if len(cells) != len(header):
            self.run.warnings.append(
                f"{p}:{lineno}: {len(cells)} cells for {len(header)} columns; skipped"
            )
            return
        rec: dict[str, Any] = {}
        for k, c in zip(header, cells):
            c = c.strip()
            if k in STEP_KEYS and c.isdigit():
                rec[k] = int(c)
            elif k in STEP_KEYS:
                f = parse_number(c)
                rec[k] = int(f) if f is not None and math.isfinite(f) and f.is_integer() else c
            elif c:
                rec[k] = c
        self.row(rec, p, lineno)


def _is_config_line(rec: dict[str, Any]) -> bool:
    return set(rec) == {"config"} and isinstance(rec["config"], dict)


def _jsonl_has_step(p: Path) -> bool:
    """Whether one of the first lines of ``p`` is a JSON object with a step (a line of junk
    before it is passed over)."""
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
        if isinstance(rec, dict) and _is_config_line(rec):
            continue  # rl-doctor's {"config": {...}} first line
        if isinstance(rec, dict) and step_of(rec) is not None:
            return True
    return False


_STEP_START = re.compile(r'\s*\{\s*"(?:step|global_step|_step|iteration|iter)"\s*:\s*\d')


def _csv_has_step(p: Path) -> bool:
    first = head(p, 16 << 10).split("\n", 1)[0]
    try:
        cells = next(csv.reader(io.StringIO(first)))
    except (csv.Error, StopIteration):
        return False
    return any(c.strip() in STEP_KEYS for c in cells)


def sniff_glob(path: Path, glob: str, test: Any) -> bool:
    if path.is_file():
        return path.name.endswith(glob[1:]) and test(path)
    return path.is_dir() and any(test(p) for p in sorted(path.glob(glob))[:20])


register(
    Format(
        "jsonl",
        "generic JSON Lines of per-step metrics (a step field per row; --mapping FILE)",
        lambda p: sniff_glob(p, "*.jsonl", _jsonl_has_step),
        JsonlMetricsReader,
        priority=90,
        table=GENERIC,
        kind="JSONL",
        suffixes=(".jsonl",),
        # the folders any loop names for its samples and checkpoints beside its log
        sample_dirs=("samples", "train_data", "checkpoints?"),
    )
)
register(
    Format(
        "csv",
        "generic CSV of per-step metrics (a step column; --mapping FILE)",
        lambda p: sniff_glob(p, "*.csv", _csv_has_step),
        CsvReader,
        priority=91,
        table=GENERIC,
        kind="CSV",
        suffixes=(".csv", ".tsv"),
    )
)
