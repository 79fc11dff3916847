"""MLflow tracking stores: the SQLite store (``mlflow.db``, ``sqlite:///...``) and the file
store (``mlruns/``), read live, without mlflow installed.

- SQLite (MLflow 3's default, ``sqlite:///<cwd>/mlflow.db``): table ``metrics(key, value,
  timestamp, run_uuid, step, is_nan)``; a NaN is stored as ``value 0, is_nan 1`` and an
  infinity as the largest double (SQL has no infinities; MLflow's own client returns that
  number), both read back as what was logged. ``runs`` gives the name and status, ``params``
  the config.
- File store (``mlruns/<experiment>/<run>/``): ``meta.yaml``, ``metrics/<key path>`` files of
  ``<timestamp ms> <value> <step>`` lines (``nan``/``inf`` written literally), ``params/<key>``.

We read the tables and files directly rather than through ``MlflowClient``: ``import mlflow``
takes seconds and pulls SQLAlchemy and alembic, ``get_metric_history`` is one key per call with
no "since", and the schema of these two tables has been stable across MLflow releases. Following
a live run is ``rowid > last`` (SQLite) or a byte offset per metric file, so ``poll()`` reads
only what was logged since the last call. A store of several runs needs ``--run NAME`` (a run
name or id); deleted runs are not offered.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from ..errors import ReadError
from ..model import RunData
from ._format import Format, register
from ._trackers import SQLITE_ERRORS, choose_run, connect, map_by_keys, query, tables
from .base import FileState, check_state, read_lines
from .mapping import Rule

__all__ = ["MlflowReader", "local_path"]

_MAX = 1.7976931348623157e308  # what MLflow's SQL store writes for +/-inf
_STATUS = {"RUNNING": "running", "SCHEDULED": "running", "FINISHED": "finished"}
_STATUS.update({"FAILED": "crashed", "KILLED": "stopped"})
_FILE_STATUS = {"1": "RUNNING", "2": "SCHEDULED", "3": "FINISHED", "4": "FAILED", "5": "KILLED"}


def local_path(text: str) -> str:
    """``sqlite:///rel.db``, ``sqlite:////abs.db`` and ``file:///abs/mlruns`` as paths."""
    for prefix in ("sqlite:///", "file://"):
        if text.startswith(prefix):
            return text[len(prefix) :]
    return text


def _is_sql_store(path: Path) -> bool:
    t = tables(path)
    return {"key", "value", "run_uuid", "step", "is_nan"} <= t.get("metrics", set()) and (
        "runs" in t
    )


def _meta(path: Path) -> dict[str, str]:
    """The top-level ``key: value`` lines of an MLflow ``meta.yaml`` (no YAML library)."""
    out: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        if line[:1].isspace() or ":" not in line:
            continue
        k, _, v = line.partition(":")
        out[k.strip()] = v.strip().strip("'\"")
    return out


def _file_runs(path: Path) -> list[Path]:
    """Run directories under a file store, an experiment directory, or a run directory."""
    if (path / "meta.yaml").is_file() and (path / "metrics").is_dir():
        return [path]
    out: list[Path] = []
    for exp in [path, *sorted(p for p in path.iterdir() if p.is_dir())]:
        if not (exp / "meta.yaml").is_file():
            continue
        for run in sorted(p for p in exp.iterdir() if p.is_dir()):
            meta = run / "meta.yaml"
            if (
                meta.is_file()
                and (run / "metrics").is_dir()
                and _meta(meta).get("lifecycle_stage", "active") == "active"
            ):
                out.append(run)
        if exp == path and out:
            break
    return out


def _store(path: Path) -> tuple[str, Path] | None:
    """("sql", db file) or ("file", store folder) that ``path`` is, or None."""
    if path.is_file():
        return ("sql", path) if _is_sql_store(path) else None
    if not path.is_dir():
        return None
    # Only the store itself (mlruns/, an experiment or a run folder): a project folder that
    # holds mlflow.db or mlruns/ beside other things stays a folder of runs.
    if _file_runs(path):
        return "file", path
    return None


class MlflowReader:
    """One MLflow run, from a SQLite store or a file store, read incrementally."""

    name = "mlflow"

    def __init__(
        self, path: Path, *, extra_rules: tuple[Rule, ...] = (), run: str | None = None
    ) -> None:
        path = Path(local_path(str(path)))
        found = _store(path)
        if found is None:
            raise ReadError("not an MLflow store (mlflow.db or mlruns/)", path=str(path))
        self.kind, self.store = found
        self.path = path
        self.extra_rules = extra_rules
        self.run = RunData(source=str(path), format=self.name)
        self._last_rowid = 0
        self._states: dict[Path, FileState] = {}
        if self.kind == "sql":
            names = [
                (str(r), str(n or r))
                for r, n in query(
                    self.store,
                    "SELECT run_uuid, name FROM runs WHERE lifecycle_stage = 'active' "
                    "ORDER BY start_time",
                )
            ]
            self.run_id = choose_run(str(self.store), names, run, "MLflow runs")
            self.run_dir: Path | None = None
        else:
            dirs = {d.name: d for d in _file_runs(self.store)}
            names = [
                (rid, _meta(d / "meta.yaml").get("run_name") or rid) for rid, d in dirs.items()
            ]
            self.run_id = choose_run(str(self.store), names, run, "MLflow runs")
            self.run_dir = dirs[self.run_id]
        self.run.info.update({"run_id": self.run_id, "name": dict(names)[self.run_id]})

    def poll(self) -> bool:
        """Read the metric points logged since the last call; True if any were."""
        try:
            changed = self._poll_sql() if self.kind == "sql" else self._poll_files()
        except SQLITE_ERRORS as exc:
            self.run.warnings.append(f"{self.store}: cannot read ({exc}); will retry")
            return False
        except ReadError as exc:
            self.run.warnings.append(str(exc))
            return False
        if changed:
            map_by_keys(self.run, self.extra_rules, time_key="_timestamp")
        return changed

    def finish(self) -> None:
        """The store is complete: a metric file's last line without its newline is read."""
        if self.run_dir is not None and self._poll_files(final=True):
            map_by_keys(self.run, self.extra_rules, time_key="_timestamp")

    # -- SQLite store ------------------------------------------------------------------------

    def _poll_sql(self) -> bool:
        conn = connect(self.store)
        try:
            row = conn.execute(
                "SELECT status, start_time, experiment_id FROM runs WHERE run_uuid = ?",
                (self.run_id,),
            ).fetchone()
            if row is not None:
                self._status(str(row[0]), row[1])
            params = conn.execute(
                "SELECT key, value FROM params WHERE run_uuid = ?", (self.run_id,)
            ).fetchall()
            if params:
                self.run.info["config"] = dict(params)
            cur = conn.execute(
                "SELECT rowid, key, value, timestamp, step, is_nan FROM metrics "
                "WHERE run_uuid = ? AND rowid > ? ORDER BY rowid",
                (self.run_id, self._last_rowid),
            )
            changed = False
            add = self.run.metrics.add
            keys = self.run.source_keys
            for rowid, key, value, stamp, step, is_nan in cur:
                self._last_rowid = rowid
                changed = True
                v = math.nan if is_nan else float(value)
                if abs(v) == _MAX:
                    v = math.copysign(math.inf, v)
                add(int(step), key, v)
                keys.add(key)
                if isinstance(stamp, int):
                    add(int(step), "_timestamp", stamp / 1000)
                    keys.add("_timestamp")
            return changed
        finally:
            conn.close()

    def _status(self, status: str, start_ms: object) -> None:
        self.run.info["status"] = _STATUS.get(status, status.lower())
        if isinstance(start_ms, int):
            self.run.info["created_time"] = start_ms / 1000

    # -- file store --------------------------------------------------------------------------

    def _poll_files(self, *, final: bool = False) -> bool:
        run_dir = self.run_dir
        assert run_dir is not None
        meta = _meta(run_dir / "meta.yaml")
        start = meta.get("start_time", "")
        self._status(
            _FILE_STATUS.get(meta.get("status", ""), "RUNNING"),
            int(start) if start.isdigit() else None,
        )
        params = {}
        for p in sorted((run_dir / "params").rglob("*")) if (run_dir / "params").is_dir() else []:
            if p.is_file():
                try:
                    params[p.relative_to(run_dir / "params").as_posix()] = p.read_text(
                        encoding="utf-8", errors="replace"
                    )
                except OSError:
                    continue
        if params:
            self.run.info["config"] = params
        changed = False
        metrics = run_dir / "metrics"
        for p in sorted(metrics.rglob("*")):
            if p.is_file():
                changed |= self._metric_file(p, p.relative_to(metrics).as_posix(), final)
        return changed

    def _metric_file(self, p: Path, key: str, final: bool) -> bool:
        st = self._states.get(p)
        if st is None:
            st = self._states[p] = FileState(p)
        why = check_state(st)
        if why is not None:  # MLflow only appends: a rewritten file is read again whole
            self.run.warnings.append(f"{p}: {why}; read again from its start")
            self.run.metrics.discard(key)
            st = self._states[p] = FileState(p)
        changed = False
        for lineno, raw in read_lines(st, warn=self.run.warnings.append, final=final):
            changed = True
            if raw.strip():
                self._point(p, key, raw, lineno)
        return changed

    def _point(self, p: Path, key: str, raw: bytes, lineno: int) -> bool:
        """One ``<timestamp ms> <value> <step>`` line; a malformed one is a warning."""
        parts = raw.split()
        try:
            stamp, value = int(parts[0]), float(parts[1])
            step = int(parts[2]) if len(parts) > 2 else 0
        except (IndexError, ValueError):
            self.run.warnings.append(
                f"{p}:{lineno}: expected '<timestamp ms> <value> <step>'; skipped"
            )
            return False
        self.run.metrics.add(step, key, value)
        self.run.metrics.add(step, "_timestamp", stamp / 1000)
        self.run.source_keys.update((key, "_timestamp"))
        return True


def _sniff(path: Path) -> bool:
    try:
        return _store(Path(local_path(str(path)))) is not None
    except OSError:
        return False


def _file_store(d: Path, names: set[str]) -> bool:
    """An MLflow file store: ``<experiment>/meta.yaml`` beside run folders holding ``meta.yaml``
    and ``metrics/``; or one such experiment, or one run."""

    def run(r: Path) -> bool:
        return (r / "meta.yaml").is_file() and (r / "metrics").is_dir()

    def experiment(e: Path) -> bool:
        if not (e / "meta.yaml").is_file():
            return False
        try:
            return any(run(e / n) for n in os.listdir(e))
        except OSError:
            return False

    if "meta.yaml" in names:
        return run(d) or experiment(d)
    return any(experiment(d / n) for n in names if n.isdigit())


register(
    Format(
        "mlflow",
        "MLflow store: mlflow.db / sqlite:///... or a file store mlruns/ (--run NAME picks "
        "a run), live",
        _sniff,
        MlflowReader,
        priority=6,
        table=None,
        kind="tracking store",
        files="mlflow.db, mlruns/",
        marks=_file_store,
        suffixes=(".db",),
    )
)
