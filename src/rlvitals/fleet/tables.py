"""Runs as Parquet tables a query engine reads: ``OUT/runs``, ``OUT/steps``, ``OUT/attempts``
and ``OUT/findings``, one file per run in each, every row carrying its ``run``.

- ``runs``: one row per run: run, name, format, status, verdict, worst, steps, last_step,
  attempts, warnings, error (a run that could not be read has only this row).
- ``steps``: one row per update: run, step, then one float64 column per metric (canonical
  names and the source's own keys); null where the metric was not measured at that step,
  NaN and ±inf where it was measured so.
- ``attempts``: one row per attempt (where the source has them): run, step, reward,
  policy_version, trained, discard_reason, task_id, group_id, response_tokens, truncated,
  lag, time, duration.
- ``findings``: one row per finding: run, check, severity, verdict, title, metric,
  first_step, action, evidence (JSON text).

Runs differ in their metrics, so the steps files differ in their columns: read them with
``union_by_name`` (DuckDB) or ``mergeSchema`` (Spark); docs/fleet.md shows both. Each run is
read, judged and written on its own, so memory stays that of the largest run, and ``jobs``
processes write in parallel.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingExtraError, UsageError
from ..safe import unicode_text
from .judging import ordered_map

__all__ = ["TABLES", "export", "is_export"]

TABLES = ("runs", "steps", "attempts", "findings")
MARKER = "_rlvitals_export.json"


def _pa() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ModuleNotFoundError as exc:
        raise MissingExtraError("fleet", "exporting runs (pyarrow)") from exc
    return pyarrow


def is_export(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder ``export`` wrote."""
    return (Path(path) / MARKER).is_file()


def _file_id(path: str) -> str:
    """A file name for a run: readable, and unique however the runs are named (a name that is
    not UTF-8 included)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", path.strip("/"))[-80:].strip("._") or "run"
    raw = path.encode("utf-8", "surrogatepass")
    return f"{stem}-{hashlib.sha1(raw).hexdigest()[:10]}"


def _column_name(name: str, cols: dict[str, Any]) -> str:
    """A steps column for metric ``name``: itself, unless a column already there has the same
    name but for case (SQL engines such as DuckDB match names without regard to case, so
    ``Reward/Mean`` would answer for ``"reward/mean"``) or is ``run``/``step``; then
    ``NAME#2``, ``NAME#3``, ..."""
    taken = {c.lower() for c in cols}
    name = unicode_text(name)
    if name.lower() not in taken:
        return name
    n = 2
    while f"{name}#{n}".lower() in taken:
        n += 1
    return f"{name}#{n}"


def _steps_table(pa: Any, run: str, data: Any) -> Any:
    steps = data.steps()
    n = len(steps)
    cols: dict[str, Any] = {
        "run": pa.array([run] * n, pa.string()),
        "step": pa.array(steps, pa.int64()),
    }
    # a lower-case name keeps its own column before a case variant of it takes one
    for name in sorted(data.names(), key=lambda k: (k != k.lower(), k)):
        s = data.series(name)
        name = _column_name(name, cols)
        values = np.full(n, np.nan)
        present = np.zeros(n, dtype=bool)
        if s is not None and len(s):
            at = np.searchsorted(steps, s.steps)
            values[at] = s.values
            present[at] = True
        cols[name] = pa.array(values, pa.float64(), mask=~present)
    return pa.table(cols)


def _coded(pa: Any, codes: np.ndarray, names: list[str]) -> Any:
    codes = np.asarray(codes, dtype=np.int32)
    return pa.DictionaryArray.from_arrays(
        pa.array(codes, pa.int32(), mask=codes < 0), pa.array(names, pa.string())
    )


def _attempts_table(pa: Any, run: str, a: Any) -> Any:
    n = len(a)
    return pa.table(
        {
            "run": pa.array([run] * n, pa.string()),
            "step": pa.array(a.step, pa.int64()),
            "reward": pa.array(a.reward, pa.float64(), mask=np.asarray(a.reward_missing)),
            "policy_version": pa.array(a.policy_version, pa.int64(), mask=a.policy_version < 0),
            "trained": pa.array(a.trained, pa.bool_()),
            "discard_reason": _coded(pa, a.discard_code, a.discard_reasons),
            "task_id": _coded(pa, a.task_code, a.task_ids),
            "group_id": _coded(pa, a.group_code, a.group_ids),
            "response_tokens": pa.array(a.response_tokens, pa.int64()),
            "truncated": pa.array(a.truncated, pa.bool_()),
            "lag": pa.array(a.lag, pa.int64(), mask=a.lag < 0),
            "time": pa.array(a.time, pa.float64()),
            "duration": pa.array(a.duration, pa.float64(), mask=np.isnan(a.duration)),
        }
    )


_FINDING_COLUMNS = ("check", "severity", "verdict", "title", "metric", "first_step", "action")


def _findings_table(pa: Any, run: str, findings: list[dict[str, Any]]) -> Any:
    cols: dict[str, Any] = {"run": pa.array([run] * len(findings), pa.string())}
    for c in _FINDING_COLUMNS:
        typ = pa.int64() if c == "first_step" else pa.string()
        cols[c] = pa.array([f.get(c) for f in findings], typ)
    from ..jsonio import dumps

    cols["evidence"] = pa.array([dumps(f.get("evidence") or {}) for f in findings], pa.string())
    return pa.table(cols)


_RUN_SCHEMA = {
    "run": "string",
    "name": "string",
    "format": "string",
    "status": "string",
    "verdict": "string",
    "worst": "string",
    "steps": "int64",
    "last_step": "int64",
    "attempts": "int64",
    "warnings": "int64",
    "error": "string",
}


def _runs_table(pa: Any, row: dict[str, Any]) -> Any:
    return pa.table(
        {k: pa.array([row.get(k)], getattr(pa, typ)()) for k, typ in _RUN_SCHEMA.items()}
    )


def _export_one(args: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    """Read, judge and write one run; returns its ``runs`` row."""
    path, out, options = args
    pa = _pa()
    import pyarrow.parquet as pq

    from .judging import _read_and_check

    fid = _file_id(path)
    data, report, error = _read_and_check(path, options)
    shown = unicode_text(path)
    row: dict[str, Any] = {"run": shown, "error": None if error is None else unicode_text(error)}
    if data is not None and report is not None:
        info = report.info
        row.update(
            name=None if info.get("name") is None else unicode_text(info["name"]),
            format=data.format,
            status=info.get("status"),
            verdict=report.verdict,
            worst=report.worst,
            steps=info.get("steps"),
            last_step=report.last_step,
            attempts=len(data.attempts) if data.attempts is not None else 0,
            warnings=len(data.warnings),
        )
        pq.write_table(_steps_table(pa, shown, data), Path(out, "steps", fid + ".parquet"))
        if data.attempts is not None and len(data.attempts):
            pq.write_table(
                _attempts_table(pa, shown, data.attempts), Path(out, "attempts", fid + ".parquet")
            )
        findings = [f.to_dict() for f in report.findings]
        if findings:
            pq.write_table(
                _findings_table(pa, shown, findings), Path(out, "findings", fid + ".parquet")
            )
    pq.write_table(_runs_table(pa, row), Path(out, "runs", fid + ".parquet"))
    return row


def _ours(folder: Path) -> str | None:
    """None if ``folder`` holds only what ``export`` writes there (Parquet files), else the
    first entry it did not write (a symlinked table folder counts as not ours)."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        return folder.name
    if not folder.exists():
        return None
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink() or not entry.is_file() or entry.suffix != ".parquet":
            return f"{folder.name}/{entry.name}"
    return None


def _prepare(out: Path) -> None:
    """Refuse a folder ``export`` may not replace: a file, a non-empty folder it did not
    write, or one of its table folders holding anything it did not write (a training run)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: expected a folder to export into (a file is there)")
    if out.is_dir() and any(out.iterdir()) and not is_export(out):
        raise UsageError(
            f"{out}: the folder holds other files; export into a new folder or one that "
            "`rlvitals export` wrote"
        )
    _check_tables(out)


def _check_tables(out: Path) -> None:
    for t in TABLES:
        other = _ours(out / t)
        if other is not None:
            raise UsageError(
                f"{out / t}: holds {unicode_text(other)!r}, which `rlvitals export` did not "
                "write; export into a new folder (nothing was replaced)"
            )


def _swap(out: Path, staging: Path) -> None:
    """Move the new tables into place, then remove the old ones (checked ours by _prepare)."""
    for t in TABLES:
        old = out / t
        if old.exists():
            os.replace(old, staging / f"old-{t}")
        os.replace(staging / t, old)
    shutil.rmtree(staging)


def export(
    paths: Sequence[str],
    out: str | os.PathLike[str],
    *,
    jobs: int = 1,
    **options: Any,
) -> list[dict[str, Any]]:
    """Write the runs in ``paths`` as Parquet tables under ``out`` (see the module docstring);
    returns the ``runs`` rows. ``options`` are ``judge``'s (source_format, mapping, baseline,
    thresholds, ...). The tables are written to a new folder inside ``out`` and swapped in
    when every run is written, so an export that fails leaves the old one whole. A folder
    ``export`` wrote before is replaced, table folders holding only its Parquet files; any
    other non-empty folder, or a table folder holding anything else, is refused."""
    _pa()
    outp = Path(out)
    _prepare(outp)
    outp.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".rlvitals-export-", dir=outp))
    try:
        for t in TABLES:
            (staging / t).mkdir()
        rows = list(ordered_map(_export_one, [(p, str(staging), options) for p in paths], jobs))
        _check_tables(outp)  # nothing new appeared in the table folders while the runs were read
        _swap(outp, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    (outp / MARKER).write_text(
        json.dumps({"format": "rlvitals-export/1", "tables": list(TABLES), "runs": len(rows)})
        + "\n"
    )
    return rows
