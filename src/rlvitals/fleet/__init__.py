"""Many runs at once: find every run under a folder, judge them in parallel, export them as
Parquet tables, query those tables with DuckDB.

    find_runs(path)            every run under a folder (run directories and logs)
    judge(paths, jobs=N)       read and check each run in N processes; one Outcome each
    export(paths, out)         OUT/runs, OUT/steps, OUT/attempts, OUT/findings (Parquet)
    query(paths, sql)          DuckDB over those tables

pyarrow and duckdb are the ``fleet`` extra (``pip install 'rlvitals[fleet]'``); finding and
judging need neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..source import Discovery, find_runs
from .judging import Outcome, judge

if TYPE_CHECKING:
    from .sql import QueryResult

__all__ = ["Discovery", "Outcome", "export", "find_runs", "judge", "query"]


def export(
    paths: Sequence[str], out: str, *, jobs: int = 1, **options: Any
) -> list[dict[str, Any]]:
    """Write runs as Parquet tables; see ``rlvitals.fleet.tables.export`` (needs pyarrow)."""
    from .tables import export as _export

    return _export(paths, out, jobs=jobs, **options)


def query(paths: Sequence[str], sql: str, *, jobs: int = 1, **options: Any) -> QueryResult:
    """SQL over runs with DuckDB; see ``rlvitals.fleet.sql.query`` (needs duckdb)."""
    from .sql import query as _query

    return _query(paths, sql, jobs=jobs, **options)
