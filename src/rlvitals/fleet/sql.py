"""SQL over runs with DuckDB (embedded): the tables ``runs``, ``steps``, ``attempts`` and
``findings`` of ``rlvitals.fleet.tables``.

Given a folder ``rlvitals export`` wrote, the query reads its Parquet files in place; given
runs, they are exported to a temporary folder first (so a query sees exactly what an export
holds).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import MissingExtraError, UsageError
from .tables import TABLES, export, is_export

__all__ = ["QueryResult", "connect", "query"]

# The columns each table has whatever the runs hold, so a query of an empty table still runs.
_EMPTY = {
    "runs": "run VARCHAR, name VARCHAR, format VARCHAR, status VARCHAR, verdict VARCHAR, "
    "worst VARCHAR, steps BIGINT, last_step BIGINT, attempts BIGINT, warnings BIGINT, "
    "error VARCHAR",
    "steps": "run VARCHAR, step BIGINT",
    "attempts": "run VARCHAR, step BIGINT, reward DOUBLE, policy_version BIGINT, "
    "trained BOOLEAN, discard_reason VARCHAR, task_id VARCHAR, group_id VARCHAR, "
    "response_tokens BIGINT, truncated BOOLEAN, lag BIGINT, time DOUBLE, duration DOUBLE",
    "findings": 'run VARCHAR, "check" VARCHAR, severity VARCHAR, verdict VARCHAR, '
    "title VARCHAR, metric VARCHAR, first_step BIGINT, action VARCHAR, evidence VARCHAR",
}


@dataclass
class QueryResult:
    """What a query returned: column names and rows (plain Python values)."""

    columns: list[str]
    rows: list[tuple[Any, ...]]

    def to_dict(self) -> dict[str, Any]:
        return {"columns": self.columns, "rows": [dict(zip(self.columns, r)) for r in self.rows]}


def _duckdb() -> Any:
    try:
        import duckdb
    except ModuleNotFoundError as exc:
        raise MissingExtraError("fleet", "querying runs (duckdb)") from exc
    return duckdb


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _glob_literal(path: str) -> str:
    """``path`` with DuckDB's glob characters taken literally (``t[12]`` is a folder name)."""
    return "".join(f"[{c}]" if c in "[*?" else c for c in path)


def connect(folder: str | os.PathLike[str], *, extensions: bool = False) -> Any:
    """A DuckDB connection with the four tables of an export folder as views. DuckDB's
    extensions are neither installed nor loaded unless ``extensions`` is true."""
    duckdb = _duckdb()
    con = duckdb.connect(
        config={
            "autoinstall_known_extensions": extensions,
            "autoload_known_extensions": extensions,
        }
    )
    con.execute("SET enable_progress_bar = false")  # its bar would land in --json output
    for t in TABLES:
        d = Path(folder, t)
        if any(d.glob("*.parquet")):
            src = _sql_str(_glob_literal(str(d)) + "/*.parquet")
            con.execute(
                f"CREATE VIEW {t} AS SELECT * FROM read_parquet({src}, union_by_name = true)"
            )
        else:
            con.execute(f"CREATE TABLE {t} ({_EMPTY[t]})")
    return con


def _run(folder: str | os.PathLike[str], sql: str, extensions: bool = False) -> QueryResult:
    duckdb = _duckdb()
    con = connect(folder, extensions=extensions)
    try:
        cur = con.execute(sql)
        columns = [d[0] for d in (cur.description or [])]
        rows = cur.fetchall() if cur.description else []
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(first) from None
    finally:
        con.close()
    return QueryResult(columns, [tuple(r) for r in rows])


def query(
    paths: Sequence[str], sql: str, *, jobs: int = 1, extensions: bool = False, **options: Any
) -> QueryResult:
    """Run ``sql`` over ``paths``: one folder ``export`` wrote, or runs to export first.

    The statement is DuckDB's, with DuckDB's reach: it can read any file the user can
    (``read_csv``, ``read_text``) and write one (``COPY ... TO``), as the user's own SQL may.
    Extensions are not installed or loaded (no network) unless ``extensions`` is true."""
    if not sql.strip():
        raise UsageError("query: expected an SQL statement after the runs")
    _duckdb()
    if len(paths) == 1 and is_export(paths[0]):
        return _run(paths[0], sql, extensions)
    with tempfile.TemporaryDirectory(prefix="rlvitals-query-") as tmp:
        export(paths, tmp, jobs=jobs, **options)
        return _run(tmp, sql, extensions)
