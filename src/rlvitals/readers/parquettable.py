"""A Parquet file of per-step metrics (``df.to_parquet("metrics.parquet")``), through ``tables``.

The file is read whole (within ``_parquet``'s bound) each time it changes, its columns handed
row by row to the one table layer: the step column by name or content, else the rows numbered
in order; numeric columns are metrics, text columns labels, nested ones left out. Reading
needs pyarrow (the ``fleet`` extra); without it, the file is one error line naming the extra.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import MissingExtraError
from ..model import RunData
from ._format import Format, register
from ._parquet import read_bounded
from .base import head_bytes
from .generic import GENERIC, CanonicalOnlyMapper
from .mapping import Mapper, Rule
from .tables import Rows

__all__ = ["ParquetTableReader"]

MAGIC = b"PAR1"


class ParquetTableReader:
    """One Parquet file of per-step rows; keys by meaning only (no framework table)."""

    name = "parquet"
    table = GENERIC

    def __init__(self, path: Path, *, extra_rules: tuple[Rule, ...] = ()) -> None:
        self.path = Path(path)
        self.run = RunData(source=str(path), format=self.name)
        self.mapper: Mapper = CanonicalOnlyMapper(GENERIC, self.run, extra=extra_rules)
        self._seen: tuple[int, int] | None = None

    def poll(self) -> bool:
        try:
            st = os.stat(self.path)
        except OSError as exc:
            self._warn(f"{self.path}: cannot read ({exc.strerror or exc}); skipped")
            return False
        if (st.st_mtime_ns, st.st_size) == self._seen:
            return False
        self._seen = (st.st_mtime_ns, st.st_size)
        try:
            import pyarrow.parquet as pq
            import pyarrow.types as pat
        except ImportError:
            raise MissingExtraError("fleet", "reading a Parquet table") from None
        try:
            table = read_bounded(pq, self.path, self._warn)
        except Exception as exc:  # pyarrow raises its own types for a torn or foreign file
            self._warn(f"{self.path}: not a readable Parquet file ({type(exc).__name__}: {exc})")
            return False
        columns = {
            name: table.column(name).to_pylist()
            for name in table.column_names
            if not pat.is_nested(table.schema.field(name).type)
        }
        rows = Rows(self.run, self.mapper.add, str(self.path))
        names = list(columns)
        for i, values in enumerate(zip(*columns.values())):
            rows.row(dict(zip(names, values)), f"{self.path}: row {i}")
        rows.flush(final=True)
        return True

    def _warn(self, message: str) -> None:
        if message not in self.run.warnings:  # read again whole when it changes: once
            self.run.warnings.append(message)


def _sniff(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() == ".parquet" and head_bytes(path, 4) == MAGIC


register(
    Format(
        "parquet",
        "a Parquet table of per-step metrics (df.to_parquet): a step column, else numbered in "
        "order (needs the fleet extra: pyarrow; --mapping FILE)",
        _sniff,
        ParquetTableReader,
        priority=92,
        table=GENERIC,
        kind="Parquet",
        files="a .parquet file of one run's per-step rows",
    )
)
