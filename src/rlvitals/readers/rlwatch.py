"""rlwatch's SQLite store: ``<log_dir>/metrics.db`` (rlwatch 0.5 ``storage.py``), read live.

rlwatch keeps a ``runs`` table (id, framework, start time, its config as JSON), a ``metrics``
table of one row per step with fixed columns (entropy, ``kl_divergence``: what its callers
pass as the KL to the reference; reward mean/std/min/max, advantage std, loss, learning rate,
clip fraction, grad norm) and an ``extra_json`` column for anything else, and ``alerts``
(its own detectors' findings, kept in ``run.info["alerts"]``). Following a live run is
``id > last`` on the table's own autoincrement key. A store of several runs needs ``--run``.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any

from ..errors import ReadError
from ..jsonio import loads as decode_line
from ..model import RunData
from ._format import Format, register
from ._trackers import SQLITE_ERRORS, choose_run, connect, number, poll_store, tables
from .base import flatten
from .mapping import MappingTable, Rule, apply_table, synonym

__all__ = ["RLWATCH", "RlwatchReader"]

DB = "metrics.db"
_NEEDS = {"id", "run_id", "step", "timestamp", "kl_divergence", "extra_json"}
_FIXED = (
    "entropy",
    "kl_divergence",
    "reward_mean",
    "reward_std",
    "reward_min",
    "reward_max",
    "advantage_std",
    "loss",
    "learning_rate",
    "clip_fraction",
    "grad_norm",
)

RLWATCH = MappingTable(
    "rlwatch",
    (
        synonym("reward_mean"),
        synonym("reward_std", "whole batch"),
        synonym("entropy"),
        synonym("kl_divergence", "what rlwatch's callers pass as KL to reference"),
        synonym("advantage_std"),
        synonym("loss"),
        synonym("learning_rate"),
        synonym("clip_fraction"),
        synonym("grad_norm"),
    ),
    (("reward_min", "an extreme, not a mean"), ("reward_max", "an extreme, not a mean")),
    ("extra_json keys are kept under their own names (canonical ones taken as such).",),
)


def _store(path: Path) -> Path | None:
    db = path / DB if path.is_dir() else path
    cols = tables(db).get("metrics") if db.is_file() else None
    return db if cols is not None and cols >= _NEEDS else None


class RlwatchReader:
    """One run of an rlwatch ``metrics.db``, read incrementally by row id."""

    name = "rlwatch"
    table = RLWATCH

    def __init__(
        self, path: Path, *, extra_rules: tuple[Rule, ...] = (), run: str | None = None
    ) -> None:
        path = Path(path)
        db = _store(path)
        if db is None:
            raise ReadError(f"not an rlwatch store (expected {DB})", path=str(path))
        self.db = db
        self.extra_rules = extra_rules
        self.run = RunData(source=str(path), format=self.name)
        conn = connect(db)
        try:
            ids = [r[0] for r in conn.execute("SELECT run_id FROM metrics GROUP BY run_id")]
            cfg = dict(conn.execute("SELECT run_id, config_json FROM runs").fetchall())
        except SQLITE_ERRORS as exc:
            raise ReadError(f"cannot read the SQLite database ({exc})", path=str(db)) from None
        finally:
            conn.close()
        names = [(str(i), str(i)) for i in ids]
        self.run_id = choose_run(str(db), names, run, "rlwatch runs")
        self.run.info.update({"run_id": self.run_id, "name": self.run_id})
        try:
            config = decode_line(cfg.get(self.run_id) or "null")
        except ValueError:
            config = None
        if isinstance(config, dict):
            self.run.info["config"] = config
        self._last_id = 0
        self._alert_id = 0
        self._seen: set[str] = set()
        # Older stores lack some columns (schema_version 1 has no grad_norm): read those there.
        have = tables(db).get("metrics", set())
        self._columns = [c for c in _FIXED if c in have]

    def poll(self) -> bool:
        """Read the rows logged since the last call; True if any were."""
        return poll_store(
            self.run,
            self.db,
            self._read,
            lambda: apply_table(self.run, RLWATCH, extra=self.extra_rules),
        )

    def _add(self, step: int, key: str, value: Any) -> None:
        run = self.run
        if value is None:
            if key not in self._seen:
                return
            run.nulls.setdefault(key, step)  # had values, now null: a NaN stored as NULL
            f = math.nan
        else:
            got = number(value)
            if got is None:
                return
            f = got
        run.metrics.add(step, key, f)
        run.source_keys.add(key)
        self._seen.add(key)

    def _read(self, conn: sqlite3.Connection) -> bool:
        cols = "".join(f"{c}, " for c in self._columns)
        cur = conn.execute(
            f"SELECT id, step, timestamp, {cols}extra_json FROM metrics "
            "WHERE run_id = ? AND id > ? ORDER BY id",
            (self.run_id, self._last_id),
        )
        changed = False
        for row in cur:
            rid, step, stamp = row[0], row[1], row[2]
            self._last_id = rid
            changed = True
            if not isinstance(step, int):
                self.run.warnings.append(f"{self.db}: metrics row {rid}: no integer step")
                continue
            if isinstance(stamp, (int, float)):
                self.run.metrics.add(step, "time", float(stamp))
            for k, v in zip(self._columns, row[3:-1]):
                self._add(step, k, v)
            blob = row[-1]
            if blob:
                try:
                    extra = decode_line(blob)
                except ValueError as exc:
                    self.run.warnings.append(f"{self.db}: metrics row {rid}: extra_json ({exc})")
                    extra = None
                if isinstance(extra, dict):
                    for k, v in flatten(extra):
                        if k not in _FIXED:
                            self._add(step, k, v)
        try:
            alerts = conn.execute(
                "SELECT id, step, timestamp, detector, severity, message FROM alerts "
                "WHERE run_id = ? AND id > ? ORDER BY id",
                (self.run_id, self._alert_id),
            ).fetchall()
        except SQLITE_ERRORS:
            alerts = []
        for aid, step, stamp, detector, severity, message in alerts:
            self._alert_id = aid
            self.run.info.setdefault("alerts", []).append(
                {
                    "step": step,
                    "time": stamp,
                    "detector": detector,
                    "level": severity,
                    "text": message,
                }
            )
        return changed or bool(alerts)


register(
    Format(
        "rlwatch",
        "rlwatch store (<log_dir>/metrics.db, SQLite; --run NAME picks a run), live",
        lambda p: _store(p) is not None,
        RlwatchReader,
        priority=8,
        table=RLWATCH,
        kind="SQLite database",
        files="<log_dir>/metrics.db",
        markers=("metrics.db",),
        suffixes=(".db",),
    )
)
