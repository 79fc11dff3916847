"""Parquet files read within a bound tied to their size: a file of a few hundred kilobytes can
hold millions of rows of one constant (run-length and dictionary encoding), which would expand
to gigabytes.

A reader takes the file's first rows, in batches, while the values read (rows times columns)
stay within what the file may expand to: ``EXPANSION_RATIO`` times its bytes (the bound on
every compressed input, ``jsonio``), counted at ``VALUE_BYTES`` a value (a Python float in a
list: the readers hand values on as Python objects), at least ``EXPANSION_MIN_BYTES`` worth
(2 M values: a small honest file is never cut), at most ``MAX_CELLS``; and while their row
groups' uncompressed pages stay under ``MAX_BYTES``. An honest table of metrics holds 0.1-1
value per byte (float columns, 0-90% of them constant: measured with pyarrow's snappy and
zstd); the bound is about 3 per byte. The rest is left unread, with one warning naming the
file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..jsonio import EXPANSION_MIN_BYTES, EXPANSION_RATIO
from .base import open_binary

__all__ = ["MAX_BYTES", "MAX_CELLS", "read_bounded", "value_bound"]

MAX_CELLS = 20_000_000  # values (rows x columns) read from one file, however big
MAX_BYTES = 1 << 30  # uncompressed page bytes read from one file
VALUE_BYTES = 32  # one value read, in memory: a float object (24) and its list slot (8)
BATCH_VALUES = 1 << 20  # values decoded at a time while the bound is near


def value_bound(size: int) -> int:
    """How many values a Parquet file of ``size`` bytes may be read as."""
    return min(MAX_CELLS, max(EXPANSION_MIN_BYTES, EXPANSION_RATIO * size) // VALUE_BYTES)


def read_bounded(pq: Any, path: Path, warn: Callable[[str], None]) -> Any:
    """The table in ``path`` (pyarrow.parquet as ``pq``), its rows past the bound left unread
    with one ``warn``. Only a regular file is opened (``open_binary``)."""
    with open_binary(path) as f:
        size = f.seek(0, 2)
        f.seek(0)
        pf = pq.ParquetFile(f)
        md = pf.metadata
        cols = max(1, md.num_columns)
        limit = value_bound(size)
        rows = 0  # rows whose row groups fit under MAX_BYTES
        pages = 0
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            pages += sum(rg.column(c).total_uncompressed_size for c in range(rg.num_columns))
            if pages > MAX_BYTES:
                break
            rows += rg.num_rows
        rows = min(rows, limit // cols)
        if rows >= md.num_rows:
            return pf.read()
        warn(
            f"{path}: holds {md.num_rows} rows of {cols} columns, more than a reader expands "
            f"from a file of {size} bytes ({limit} values); read the first {rows} rows only"
        )
        if rows == 0:
            return pf.schema_arrow.empty_table()
        import pyarrow as pa

        batches = []
        got = 0
        for batch in pf.iter_batches(batch_size=max(1, min(rows, BATCH_VALUES // cols))):
            batches.append(batch.slice(0, rows - got))
            got += batches[-1].num_rows
            if got >= rows:
                break
        return pa.Table.from_batches(batches, schema=pf.schema_arrow)
