"""trackio project databases: one SQLite file per project, many runs in it, read live.

trackio (Hugging Face's local tracker) keeps each project in ``$TRACKIO_DIR/<project>.db``
(default ``$HF_HOME/trackio``): a ``metrics`` table of ``(id, run_id, timestamp, run_name,
step, metrics JSON)`` rows, ``configs`` per run and ``alerts``. Non-finite values are stored as
the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` and read back as numbers.

We read the tables with the standard library's ``sqlite3`` (read-only), not through trackio:
no dependency, and following a live run is ``WHERE id > last`` on the table's own
autoincrement key, so ``poll()`` reads only the rows logged since the last call. A project of
several runs needs ``--run NAME`` (a run name or id); without it, one error line lists them.
Nested metric dicts are flattened with ``/``; strings and media are not metrics and are left
out. trackio records no end state, so the run has no status (``watch`` follows it until
Ctrl-C).
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import ReadError
from ..jsonio import loads as decode_line
from ..model import RunData
from ._format import Format, register
from ._trackers import SQLITE_ERRORS, choose_run, connect, map_by_keys, number, poll_store, tables
from .base import flatten
from .mapping import Rule

__all__ = ["TrackioReader"]

_NEEDS = {"id", "run_id", "run_name", "step", "metrics"}
_STORE_FILES = (".db", ".db-wal", ".db-shm", ".db-journal", ".lock")


def _is_project(path: Path) -> bool:
    cols = tables(path).get("metrics")
    return cols is not None and cols >= _NEEDS


def _project(path: Path) -> Path | None:
    if path.is_file():
        return path if _is_project(path) else None
    if not path.is_dir():
        return None
    # A folder is claimed only where it is a TRACKIO_DIR (nothing but project files in it), so
    # a project folder that happens to hold a trackio database stays a folder of runs.
    if any(not p.name.endswith(_STORE_FILES) for p in path.iterdir() if p.is_file()):
        return None
    found = [p for p in sorted(path.glob("*.db")) if _is_project(p)]
    if len(found) > 1:
        raise ReadError(
            f"{len(found)} trackio projects here; point at one: "
            + ", ".join(p.name for p in found),
            path=str(path),
        )
    return found[0] if found else None


def _epoch(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class TrackioReader:
    """One run of a trackio project database, read incrementally by row id."""

    name = "trackio"

    def __init__(
        self, path: Path, *, extra_rules: tuple[Rule, ...] = (), run: str | None = None
    ) -> None:
        db = _project(path)
        if db is None:
            raise ReadError("not a trackio project database", path=str(path))
        self.db = db
        self.path = path
        self.extra_rules = extra_rules
        self.run = RunData(source=str(path), format=self.name)
        conn = self._open()
        try:
            names = self._runs(conn)
        except SQLITE_ERRORS as exc:
            raise ReadError(f"cannot read the SQLite database ({exc})", path=str(db)) from None
        finally:
            conn.close()
        self.run_id = choose_run(str(db), names, run, "trackio runs")
        self.run.info.update(
            {"run_id": self.run_id, "name": dict(names)[self.run_id], "project": db.stem}
        )
        self._last_id = 0
        self._alert_id = 0
        self._config_read = False

    def _open(self) -> sqlite3.Connection:
        return connect(self.db)

    @staticmethod
    def _runs(conn: sqlite3.Connection) -> list[tuple[str, str]]:
        rows = conn.execute(
            "SELECT run_id, run_name FROM metrics GROUP BY run_id ORDER BY MIN(id)"
        ).fetchall()
        seen = {r[0] for r in rows}
        try:  # a run that has a config but has logged nothing yet
            configs = conn.execute("SELECT run_id, run_name FROM configs ORDER BY id").fetchall()
        except sqlite3.OperationalError:  # no configs table
            configs = []
        rows.extend((rid, name) for rid, name in configs if rid not in seen)
        return [(str(rid), str(name)) for rid, name in rows]

    def poll(self) -> bool:
        """Read the rows logged since the last call; True if any were."""
        return poll_store(
            self.run, self.db, self._read, lambda: map_by_keys(self.run, self.extra_rules)
        )

    def _read(self, conn: sqlite3.Connection) -> bool:
        if not self._config_read:
            row = conn.execute(
                "SELECT config FROM configs WHERE run_id = ? LIMIT 1", (self.run_id,)
            ).fetchone()
            if row is not None:
                self._config_read = True
                try:
                    cfg = decode_line(row[0])
                except ValueError:
                    cfg = None
                if isinstance(cfg, dict):
                    self.run.info["config"] = cfg
        changed = False
        add = self.run.metrics.add
        keys = self.run.source_keys
        cur = conn.execute(
            "SELECT id, step, timestamp, metrics FROM metrics WHERE run_id = ? AND id > ? "
            "ORDER BY id",
            (self.run_id, self._last_id),
        )
        for rid, step, stamp, blob in cur:
            self._last_id = rid
            changed = True
            if not isinstance(step, int):
                self.run.warnings.append(f"{self.db}: metrics row {rid}: no integer step")
                continue
            try:
                rec = decode_line(blob)
            except ValueError as exc:
                self.run.warnings.append(f"{self.db}: metrics row {rid}: not JSON ({exc})")
                continue
            if not isinstance(rec, dict):
                continue
            for k, v in flatten(rec):
                f = number(v)
                if f is not None:
                    add(step, k, f)
                    keys.add(k)
            t = _epoch(stamp)
            if t is not None:
                add(step, "_timestamp", t)
                keys.add("_timestamp")
        changed |= self._alerts(conn)
        return changed

    def _alerts(self, conn: sqlite3.Connection) -> bool:
        try:
            rows = conn.execute(
                "SELECT id, timestamp, title, text, level, step FROM alerts "
                "WHERE run_id = ? AND id > ? ORDER BY id",
                (self.run_id, self._alert_id),
            ).fetchall()
        except SQLITE_ERRORS:
            return False
        for aid, stamp, title, text, level, step in rows:
            self._alert_id = aid
            self.run.info.setdefault("alerts", []).append(
                {"time": _epoch(stamp), "title": title, "text": text, "level": level, "step": step}
            )
        return bool(rows)


def _sniff(path: Path) -> bool:
    try:
        return _project(path) is not None
    except ReadError:
        return True  # several projects: the reader's error says which to choose


register(
    Format(
        "trackio",
        "trackio project database (<project>.db, SQLite; --run NAME picks a run), live",
        _sniff,
        TrackioReader,
        priority=7,
        table=None,
        kind="SQLite database",
        files="$TRACKIO_DIR/<project>.db",
        suffixes=(".db",),
    )
)
