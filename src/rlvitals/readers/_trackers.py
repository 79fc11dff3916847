"""What the tracker readers share: values to numbers, run selection, mapping by key set.

A tracker (TensorBoard, W&B, trackio, MLflow) stores whatever keys the framework logged, under
the framework's own names. The readers keep every numeric key as a series under its own name
(``"NaN"``/``"Infinity"`` kept as values), then ``map_by_keys`` finds the framework whose
mapping table best explains the key set (with or without HF's ``train/`` prefix) and maps the
whole series through it; where no table fits, keys that already are canonical names are taken
as such and the rest stay under their own names.
"""

from __future__ import annotations

import functools
import math
import os
import re
import sqlite3
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import ReadError, UnknownFormatError
from ..jsonio import to_float
from ..model import RunData
from ..schema import is_canonical
from ._format import FORMATS
from .base import is_regular_file, open_binary
from .mapping import MappingTable, Rule, apply_table

__all__ = [
    "SQLITE_ERRORS",
    "choose_run",
    "connect",
    "is_sqlite",
    "map_by_keys",
    "number",
    "query",
    "sqlite_problem",
    "sqlite_refusal",
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


def _wal_mode(path: Path) -> bool:
    """Whether the database's header says WAL (bytes 18 and 19 are 2)."""
    try:
        with open_binary(path) as f:
            head = f.read(20)
    except OSError:
        return False
    return len(head) == 20 and head[18] == 2 and head[19] == 2


def _uri(path: Path) -> str:
    """A read-only URI for ``path``. A WAL database with no ``-wal`` file beside it (no writer
    has it open) is opened ``immutable``: SQLite would otherwise create ``-wal`` and ``-shm``
    files in the user's folder and leave them there, and a reader never writes there. One
    with a ``-wal`` file is read through it (its last commits live there)."""
    p = path.resolve()
    query = "mode=ro"
    if _wal_mode(p) and not os.path.exists(f"{p}-wal"):
        query += "&immutable=1"
    return "file:" + urllib.parse.quote(str(p)) + "?" + query


# What a damaged SQLite file raises: sqlite3's errors, and a UnicodeDecodeError where SQLite
# hands back damaged text (its schema, an error message) that Python decodes as UTF-8.
SQLITE_ERRORS = (sqlite3.Error, UnicodeDecodeError)


def connect(path: Path, *, timeout: float = 10.0) -> sqlite3.Connection:
    """A read-only connection (a live writer keeps writing; WAL databases read what is
    committed), which writes nothing beside the file. A file SQLite cannot open is one
    ``ReadError``."""
    if not is_regular_file(path):
        raise ReadError("not a regular file; not read", path=str(path))
    try:
        conn = sqlite3.connect(_uri(path), uri=True, timeout=timeout, check_same_thread=False)
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1")
    except SQLITE_ERRORS as exc:
        raise ReadError(f"cannot open the SQLite database ({exc})", path=str(path)) from None
    return conn


def query(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The rows of one read-only query, the connection closed after; a damaged or locked
    database is one ``ReadError`` naming the file."""
    conn = connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    except SQLITE_ERRORS as exc:
        raise ReadError(f"cannot read the SQLite database ({exc})", path=str(path)) from None
    finally:
        conn.close()


_SNIFF_TIMEOUT = 1.0  # seconds a sniff waits for a locked database


@functools.lru_cache(maxsize=64)
def _schema(key: tuple[str, int, int, int]) -> tuple[dict[str, frozenset[str]], str | None]:
    """(table -> columns, None), or ({}, why it cannot be read), for one version of a file:
    the three tracker sniffers ask once, and a locked file costs one short wait, not three."""
    path = Path(key[0])
    try:
        conn = connect(path, timeout=_SNIFF_TIMEOUT)
    except ReadError as exc:
        return {}, exc.detail
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        cols = {
            n: frozenset(r[1] for r in conn.execute(f'PRAGMA table_info("{n}")')) for n in names
        }
        return cols, None
    except SQLITE_ERRORS as exc:
        return {}, f"cannot read the SQLite database ({exc})"
    finally:
        conn.close()


def _key(path: Path) -> tuple[str, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (str(path.resolve()), st.st_ino, st.st_mtime_ns, st.st_size)


def tables(path: Path) -> dict[str, set[str]]:
    """Table name -> column names of an SQLite file; empty where it is none or unreadable."""
    if not is_sqlite(path):
        return {}
    key = _key(path)
    if key is None:
        return {}
    return {k: set(v) for k, v in _schema(key)[0].items()}


SQLITE_FORMATS = frozenset({"trackio", "rlwatch", "mlflow"})


def sqlite_refusal(path: Path, candidates: Sequence[str]) -> str | None:
    """Why ``path``, an SQLite file no tracker reader took, is not read at all (rather than
    its pages being parsed as a console log); None for any other file."""
    if SQLITE_FORMATS.intersection(candidates) or not is_sqlite(path):
        return None
    problem = sqlite_problem(path)
    if problem is not None:
        return f"an SQLite database that cannot be read ({problem}); damaged, cut short or locked"
    shown = ", ".join(sorted(tables(path))[:6]) or "none"
    return (
        "an SQLite database, but no tracker store this version knows (trackio, rlwatch, "
        f"MLflow); its tables: {shown}"
    )


def sqlite_problem(path: Path) -> str | None:
    """Why an SQLite file cannot be read (damaged, truncated, locked), or None: such a file is
    reported as what it is, never handed to the text readers."""
    if not is_sqlite(path):
        return None
    key = _key(path)
    return None if key is None else _schema(key)[1]


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
    except SQLITE_ERRORS as exc:
        run.warnings.append(f"{db}: cannot read ({exc}); will retry")
        changed = False
    finally:
        conn.close()
    if changed:
        after()
    return changed
