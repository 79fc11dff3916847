"""A JSON file that holds a table, whatever its shape: read whole, its rows through ``tables``.

The shapes read (``tables_in``), at the top or nested under sections (``{"train": [...],
"eval": {...}}``):

- a list of records (``[{"step": 1, "reward": 0.4}, ...]``, pandas' ``orient="records"``);
- an object of per-step lists (``{"step": [...], "rewards_avg": [...], "kl_avg": [...]}``, with
  or without a step list; lists of another length are another table, read only with a step
  column of their own);
- records keyed by their step (``{"1": {...}, "2": {...}}``, pandas' ``orient="index"``);
- pandas' ``orient="columns"`` (``{"reward": {"0": 0.4, ...}}``) and ``orient="split"``
  (``columns``, ``index``, ``data``), and ``orient="table"`` (records under ``data``).

Where several tables are found, each key is prefixed with its section's path (``eval/acc``);
sections of settings (``config``, ``args``, ``hparams``...) are not tables. A table without a
step column is numbered in order, and the reading says so. A trainer state (``log_history``)
is TRL's (``trl``); a JSON Lines file named ``.json`` is read as JSON Lines (``generic``).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ..model import RunData
from ._format import Format, register
from .base import decode_json, open_binary
from .generic import GENERIC, CanonicalOnlyMapper
from .mapping import Mapper, Rule
from .tables import Rows, Steps, cell, find_steps, step_rank
from .textlog import head

__all__ = ["JsonTableReader", "tables_in"]

MAX_BYTES = 256 << 20  # a JSON document read whole, at most
SNIFF_BYTES = 64 << 20  # parsed whole to see whether it holds a table, at most
MAX_DEPTH = 6  # sections looked into
_INT_KEY = re.compile(r"^-?\d+$")
# Sections of settings: lists there are values of a setting (betas, GPU ids), not a table.
SETTINGS = frozenset(
    {
        "config",
        "configs",
        "args",
        "arguments",
        "hparams",
        "hyperparameters",
        "params",
        "settings",
        "cfg",
        "training_args",
        "model_config",
        "schema",
    }
)


class Table(NamedTuple):
    """One table found in a document: its section path, rows, and its steps where the shape
    gives them (records keyed by step)."""

    section: tuple[str, ...]
    rows: list[dict[str, Any]]
    steps: Steps | None = None


def _scalar(v: Any) -> bool:
    return not isinstance(v, (dict, list))


def _numeric(rows: list[dict[str, Any]]) -> bool:
    for r in rows[:50]:
        for v in r.values():
            if type(cell(v)) is float or (isinstance(v, dict) and _numeric([v])):
                return True
    return False


def _columns(obj: dict[str, Any], section: tuple[str, ...]) -> tuple[list[Table], set[str]]:
    """The tables of an object of per-step lists (and pandas' ``orient="columns"``)."""
    lists = {k: v for k, v in obj.items() if isinstance(v, list) and v and all(map(_scalar, v))}
    by_len: dict[int, list[str]] = {}
    for k, v in lists.items():
        by_len.setdefault(len(v), []).append(k)
    out: list[Table] = []
    used: set[str] = set()
    groups = sorted(by_len.items(), key=lambda kv: -len(kv[1]))
    for i, (n, keys) in enumerate(groups):
        rows = [{k: lists[k][j] for k in keys} for j in range(n)]
        if not _numeric(rows):
            continue
        # The main table (most columns) may be numbered in order; another length needs a step
        # column of its own (an evaluation's every tenth step beside the training's).
        if n < 2 or (i > 0 and not any(step_rank(k) is not None for k in keys)):
            continue
        out.append(Table(section, rows))
        used.update(keys)
    index_cols = {
        k: v
        for k, v in obj.items()
        if isinstance(v, dict)
        and v
        and all(_INT_KEY.match(str(i)) for i in v)
        and all(map(_scalar, v.values()))
    }
    if len(index_cols) >= 1 and len(index_cols) * 2 >= len(obj):
        index = sorted({int(i) for v in index_cols.values() for i in v})
        rows = [{"": i, **{k: v.get(str(i)) for k, v in index_cols.items()}} for i in index]
        if _numeric(rows):
            out.append(Table(section, rows))
            used.update(index_cols)
    return out, used


def tables_in(obj: Any, section: tuple[str, ...] = (), depth: int = 0) -> list[Table]:
    """Every table in a JSON document (see the module docstring), outermost first."""
    if depth > MAX_DEPTH:
        return []
    if isinstance(obj, list):
        recs = [r for r in obj if isinstance(r, dict)]
        if recs and len(recs) * 2 >= len(obj) and _numeric(recs):
            return [Table(section, recs)]
        return []
    if not isinstance(obj, dict) or not obj:
        return []
    if isinstance(obj.get("columns"), list) and isinstance(obj.get("data"), list):
        names = [str(c) for c in obj["columns"]]
        index = obj.get("index") if isinstance(obj.get("index"), list) else None
        rows = []
        for j, r in enumerate(obj["data"]):
            if isinstance(r, list) and len(r) == len(names):
                row = dict(zip(names, r))
                if index is not None and j < len(index):
                    row = {"": index[j], **row}
                rows.append(row)
        return [Table(section, rows)] if rows and _numeric(rows) else []
    if all(_INT_KEY.match(str(k)) for k in obj) and all(isinstance(v, dict) for v in obj.values()):
        rows = [{"": int(k), **v} for k, v in obj.items()]
        if _numeric(rows):
            if find_steps(list(obj.values())[:50]).how in ("name", "epoch"):
                return [Table(section, rows)]  # the records name their steps themselves
            why = "records keyed by their step number"
            return [Table(section, rows, Steps("key", "", why=why))]
    out, used = _columns(obj, section)
    for k, v in obj.items():
        if k in used or not isinstance(v, (dict, list)) or str(k).lower() in SETTINGS:
            continue
        out.extend(tables_in(v, (*section, str(k)), depth + 1))
    return out


def chosen_tables(obj: Any) -> list[Table]:
    """The tables of a document that are read: all those with a step column where one has
    one, else the largest."""
    found = tables_in(obj)
    if len(found) <= 1:
        return found
    stepped = [t for t in found if t.steps is not None or find_steps(t.rows[:50]).how != "order"]
    if stepped:
        return stepped
    return [max(found, key=lambda t: len(t.rows) * max(len(t.rows[0]), 1))]


@functools.lru_cache(maxsize=32)
def _document(path: str, size: int, mtime: int) -> tuple[str, Any]:
    """``("doc", value)``, ``("lines", None)`` (JSON Lines in a ``.json``), or
    ``("bad", message)``."""
    try:
        with open_binary(path) as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        return "bad", f"cannot read ({exc.strerror or exc})"
    if len(raw) > MAX_BYTES:
        return "bad", f"a JSON document over {MAX_BYTES >> 20} MB is not read whole"
    try:
        value, _note = decode_json(raw)
    except ValueError as exc:
        if "extra data" in str(exc).lower() or "trailing" in str(exc).lower():
            return "lines", None
        return "bad", f"not valid JSON ({exc})"
    return "doc", value


def document(p: Path) -> tuple[str, Any]:
    """The JSON document in ``p`` (cached per file version; see ``_document``)."""
    try:
        st = os.stat(p)
    except OSError as exc:
        return "bad", f"cannot read ({exc.strerror or exc})"
    return _document(str(p), st.st_size, st.st_mtime_ns)


# A folder's JSON file is taken for a table by its head: a list whose first record has a
# step-named key, or an object with a step-named list (the whole file is parsed when read).
_STEP_NAME = r'"(?:step|global_step|_step|iteration|iter|training_step|update|epoch)"'
_HEAD_LIST = re.compile(r"^\[\s*\{[^{}]*?" + _STEP_NAME + r"\s*:\s*\d")
_HEAD_LISTS = re.compile(r"^\{[\s\S]*?" + _STEP_NAME + r"\s*:\s*\[")


def holds_table(p: Path, *, whole: bool) -> bool:
    """Whether the JSON file ``p`` holds a table. ``whole``: parse it (up to ``SNIFF_BYTES``);
    else only look for a step-named key in its head (a folder's many JSON files)."""
    text = head(p, 1 << 20).lstrip()
    if not text.startswith(("{", "[")) or p.suffix in (".jsonl", ".ndjson"):
        return False
    if re.match(r'\{[\s\S]*?"log_history"\s*:\s*\[', text):
        return False  # a trainer state: TRL's
    if not whole:
        return bool(_HEAD_LIST.match(text) or _HEAD_LISTS.match(text))
    try:
        if os.path.getsize(p) > SNIFF_BYTES:
            return bool(_HEAD_LIST.match(text) or _HEAD_LISTS.match(text))
    except OSError:
        return False
    kind, value = document(p)
    return kind == "doc" and bool(chosen_tables(value))


class JsonTableReader:
    """A JSON file that holds a table (or a folder's first such file), read again whole when it
    changes; keys by meaning only (no framework table)."""

    name = "json"
    table = GENERIC

    def __init__(self, path: Path, *, extra_rules: tuple[Rule, ...] = ()) -> None:
        self.path = Path(path)
        self.run = RunData(source=str(path), format=self.name)
        self.extra_rules = extra_rules
        self.mapper: Mapper = CanonicalOnlyMapper(GENERIC, self.run, extra=extra_rules)
        self._seen: tuple[int, int] | None = None

    def file(self) -> Path | None:
        if self.path.is_file():
            return self.path
        found = sorted(self.path.glob("*.json"))[:20]
        return next((p for p in found if holds_table(p, whole=False)), None)

    def poll(self) -> bool:
        p = self.file()
        if p is None:
            return False
        try:
            st = os.stat(p)
        except OSError as exc:
            self._warn([f"{p}: cannot read ({exc.strerror or exc}); skipped"])
            return False
        key = (st.st_mtime_ns, st.st_size)
        if key == self._seen:
            return False
        self._seen = key
        kind, value = document(p)
        if kind != "doc":
            why = "JSON Lines: read it with --from jsonl" if kind == "lines" else value
            self._warn([f"{p}: {why}; skipped"])
            return False
        found = chosen_tables(value)
        if not found:
            self._warn([f"{p}: {no_table(value)}; skipped"])
            return False
        before = len(self.run.warnings)
        many = len(found) > 1
        for t in found:
            name = "/".join(t.section)
            where = f"{p}" + (f" [{name}]" if name else "")
            rows = Rows(self.run, self.mapper.add, where, steps=t.steps)
            for i, rec in enumerate(_prefixed(t, many)):
                rows.row(rec, f"{where}[{i}]")
            rows.flush(final=True)
        new = self.run.warnings[before:]
        del self.run.warnings[before:]
        self._warn(new)
        return True

    def _warn(self, problems: list[str]) -> None:
        # The file is read again whole each time it changes: say each problem once.
        self.run.warnings.extend(w for w in problems if w not in self.run.warnings)


def _prefixed(t: Table, many: bool) -> Iterator[dict[str, Any]]:
    """The rows of ``t``, their keys under the section's path where the document has several
    tables (a step column keeps its name)."""
    if not many or not t.section:
        yield from t.rows
        return
    prefix = "/".join(t.section) + "/"
    keep = {"", *(t.steps.column for t in (t,) if t.steps and t.steps.column)}
    for r in t.rows:
        yield {
            (k if (k in keep or step_rank(k) is not None) else prefix + k): v for k, v in r.items()
        }


def no_table(value: Any) -> str:
    """Why a JSON document holds no table, naming what is missing."""
    if isinstance(value, list):
        if value and all(isinstance(v, list) for v in value):
            return (
                "a list of lists: expected column names (a list of records, or an object of lists)"
            )
        return 'a list without records of numbers: expected [{"step": N, "reward": ...}, ...]'
    if isinstance(value, dict):
        return (
            "an object with no table: expected a list of records or per-step lists of numbers "
            '({"step": [...], "reward": [...]}), at the top or under a section'
        )
    return "a single value: expected a table of per-step numbers"


def _sniff(path: Path) -> bool:
    if path.is_file():
        return path.suffix.lower() == ".json" and holds_table(path, whole=True)
    return path.is_dir() and any(
        holds_table(p, whole=False) for p in sorted(path.glob("*.json"))[:20]
    )


register(
    Format(
        "json",
        "a JSON table a loop wrote, whatever its name: a list of step records, an object of "
        'per-step lists ({"step": [...], "reward": [...]}), either under sections, pandas\' '
        "orients (--mapping FILE)",
        _sniff,
        JsonTableReader,
        priority=89,
        table=GENERIC,
        kind="JSON",
        suffixes=(".json",),
        loose=lambda p: holds_table(p, whole=False),
    )
)
