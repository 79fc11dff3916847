"""Parquet files read within a bound: a file of a few megabytes can hold tens of millions of
rows of one constant (run-length and dictionary encoding), which would expand to gigabytes.
A reader takes the file's row groups in order while their rows, times their columns, stay
under ``MAX_CELLS``, and their uncompressed pages under ``MAX_BYTES``; the rest is left
unread, with one warning naming the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .base import open_binary

__all__ = ["MAX_BYTES", "MAX_CELLS", "read_bounded"]

MAX_CELLS = 20_000_000  # values (rows x columns) read from one file
MAX_BYTES = 1 << 30  # uncompressed page bytes read from one file


def read_bounded(pq: Any, path: Path, warn: Callable[[str], None]) -> Any:
    """The table in ``path`` (pyarrow.parquet as ``pq``), its row groups past the bound left
    unread with one ``warn``. Only a regular file is opened (``open_binary``)."""
    with open_binary(path) as f:
        pf = pq.ParquetFile(f)
        md = pf.metadata
        cols = max(1, md.num_columns)
        keep: list[int] = []
        cells = size = 0
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            more_cells = rg.num_rows * cols
            more_size = sum(rg.column(c).total_uncompressed_size for c in range(rg.num_columns))
            if cells + more_cells > MAX_CELLS or size + more_size > MAX_BYTES:
                warn(
                    f"{path}: holds {md.num_rows} rows of {cols} columns, more than a reader "
                    f"expands ({MAX_CELLS} values); read the first {cells // cols} rows only"
                )
                break
            keep.append(i)
            cells += more_cells
            size += more_size
        if len(keep) == md.num_row_groups:
            return pf.read()
        if not keep:
            return pf.schema_arrow.empty_table()
        return pf.read_row_groups(keep)
