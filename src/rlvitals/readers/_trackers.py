"""What the tracker readers share: values to numbers, run selection, mapping by key set.

A tracker (TensorBoard, W&B, trackio, MLflow) stores whatever keys the framework logged, under
the framework's own names. The readers keep every numeric key as a series under its own name
(``"NaN"``/``"Infinity"`` kept as values), then ``map_by_keys`` finds the framework whose
mapping table best explains the key set (with or without HF's ``train/`` prefix) and maps the
whole series through it; where no table fits, keys that already are canonical names are taken
as such and the rest stay under their own names.
"""

from __future__ import annotations

import math
import re
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import ReadError, UnknownFormatError
from ..jsonio import to_float
from ..model import RunData
from ..schema import is_canonical
from .base import open_binary
from .mapping import MappingTable, Rule, apply_table

__all__ = [
    "choose_run",
    "connect",
    "flatten",
    "is_sqlite",
    "map_by_keys",
    "number",
    "query",
    "tables",
]


def number(value: Any) -> float | None:
    """A logged value as a float (numbers, bools, ``"NaN"``/``"Infinity"`` strings), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer beyond a double
            return math.inf if value > 0 else -math.inf
    return to_float(value)


def flatten(obj: dict[str, Any], sep: str = "/", prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(key, value) of a nested dict, nested keys joined with ``sep``."""
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            yield from flatten(v, sep, key + sep)
        else:
            yield key, v


def choose_run(
    path: str, names: Sequence[tuple[str, str]], wanted: str | None, what: str = "runs"
) -> str:
    """The id of the run to read from a store holding ``names`` (id, name) pairs.

    ``wanted`` (``--run``) matches a name or an id; without it a store of one run reads that
    run. Otherwise one error line lists the runs and says how to choose. It is an
    ``UnknownFormatError`` (a ``ReadError``), so folder discovery (``serve``) passes over a
    store it cannot split into one run instead of failing.
    """
    if wanted is not None:
        hits = [rid for rid, name in names if wanted in (rid, name)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise UnknownFormatError(
                f"{len(hits)} {what} are named {wanted!r}; pass one of their ids with --run: "
                + ", ".join(hits),
                path=path,
            )
        raise UnknownFormatError(
            f"no run {wanted!r} here; {what}: " + (_listing(names) or "none"), path=path
        )
    if len(names) == 1:
        return names[0][0]
    if not names:
        raise UnknownFormatError(f"no {what} in this store yet", path=path)
    raise UnknownFormatError(
        f"{len(names)} {what} in this store; choose one with --run NAME: {_listing(names)}",
        path=path,
    )


def _listing(names: Sequence[tuple[str, str]], shown: int = 20) -> str:
    parts = [name if name == rid else f"{name} ({rid})" for rid, name in names[:shown]]
    if len(names) > shown:
        parts.append(f"and {len(names) - shown} more")
    return ", ".join(parts)


def _score(table: MappingTable, keys: set[str]) -> int:
    score = 0
    for r in table.rules:
        if r.is_pattern:
            pat = re.compile(r.source)
            score += any(pat.match(t) for t in keys)
        else:
            score += r.source in keys
    return score


def map_by_keys(
    run: RunData, extra_rules: tuple[Rule, ...] = (), *, time_key: str | None = None
) -> str | None:
    """Map the series of ``run`` (source keys) through the best-fitting framework's table.

    Returns the framework's format name, or None where no table fits (then only keys that
    already are canonical names are taken as such). ``run.info["framework"]`` says the same.
    ``time_key`` names the tracker's own wall-clock series, mapped to ``time`` (step times).
    """
    from . import FORMATS

    keys = set(run.source_keys)
    for target, source in list(run.original.items()):  # a mapping made before this pass
        if target != source and target not in keys:
            run.metrics.discard(target)
    run.original.clear()
    best: tuple[int, str, str] | None = None  # (score, format name, prefix)
    seen: set[int] = set()
    for fmt in FORMATS.values():
        table = fmt.table
        if table is None or id(table) in seen or table.name in ("generic", "rlvitals"):
            continue
        seen.add(id(table))
        for prefix in ("", "train/"):
            stripped = {t[len(prefix) :] for t in keys if t.startswith(prefix)}
            score = _score(table, stripped)
            if score >= 2 and (best is None or score > best[0]):
                best = (score, fmt.name, prefix)
    if best is None:
        rules = tuple(Rule(t, t, "canonical name") for t in sorted(keys) if is_canonical(t))
        table = MappingTable("generic", rules)
        prefix = ""
        run.info["framework"] = None
    else:
        _, fname, prefix = best
        # The reader's own table (rules computed by derive() left out), then its derive.
        factory = FORMATS[fname].factory
        found = getattr(factory, "table", None) or FORMATS[fname].table
        assert found is not None
        table = found
        run.info["framework"] = fname
    apply_table(run, table, prefix=prefix, extra=extra_rules)
    if time_key is not None and "time" not in run.original:
        s = run.metrics.get(time_key)
        if s is not None and "time" not in keys:
            run.metrics.replace("time", s.steps, s.values)
            run.original["time"] = time_key
    if best is not None and best[1] in ("miles", "slime"):
        from .miles import derive_miles

        derive_miles(run, placeholder=best[1] == "miles")
    return None if best is None else best[1]


# -- SQLite stores (trackio, MLflow) ---------------------------------------------------------

_SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: Path) -> bool:
    """True where ``path`` is a file that starts as an SQLite database does."""
    try:
        with open_binary(path) as f:
            return f.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def connect(path: Path) -> sqlite3.Connection:
    """A read-only connection (a live writer keeps writing; WAL databases read what is
    committed). A file SQLite cannot open is one ``ReadError``."""
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=10, check_same_thread=False)
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1")
    except sqlite3.Error as exc:
        raise ReadError(f"cannot open the SQLite database ({exc})", path=str(path)) from None
    return conn


def query(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The rows of one read-only query, the connection closed after; a damaged or locked
    database is one ``ReadError`` naming the file."""
    conn = connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.Error as exc:
        raise ReadError(f"cannot read the SQLite database ({exc})", path=str(path)) from None
    finally:
        conn.close()


def tables(path: Path) -> dict[str, set[str]]:
    """Table name -> column names of an SQLite file; empty where it is none or unreadable."""
    if not is_sqlite(path):
        return {}
    try:
        conn = connect(path)
    except ReadError:
        return {}
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: {r[1] for r in conn.execute(f'PRAGMA table_info("{n}")')} for n in names}
    except sqlite3.Error:
        return {}
    finally:
        conn.close()


def poll_store(
    run: RunData, db: Path, read: Callable[[sqlite3.Connection], bool], after: Callable[[], Any]
) -> bool:
    """One poll of a tracker's SQLite store: ``read(conn)`` the rows added since the last
    one, then ``after()`` when there were any; True if there were. A store that cannot be
    opened, or is locked longer than the timeout or damaged, is a warning on ``run`` (the
    next poll tries again), never an exception."""
    try:
        conn = connect(db)
    except ReadError as exc:
        run.warnings.append(str(exc))
        return False
    try:
        changed = read(conn)
    except sqlite3.Error as exc:
        run.warnings.append(f"{db}: cannot read ({exc}); will retry")
        changed = False
    finally:
        conn.close()
    if changed:
        after()
    return changed
