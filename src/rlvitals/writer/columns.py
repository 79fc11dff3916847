"""A batch of attempts given as columns: ``Run.log_attempts({"step": [...], ...})``.

A sampler that finishes a batch of rollouts holds them as arrays: one list (or numpy array)
per argument of ``log_attempt``. Taken as columns, the checks ``log_attempt`` makes on each
argument of each attempt are made once per column (the set of the column's types, its sum for
finiteness), ids are made for the whole batch, and the attempts are built in one C-level pass:
the cost per attempt is what the records and the step metrics need, not the argument handling.

The result is exactly that of ``log_attempt`` for each row in order (same records, ids and step
metrics; the batch shares one arrival time). A batch whose columns are not all of the exact
types (a NaN reward, a numpy float32 scalar, an ``error`` or ``transcript`` column) is logged
row by row instead, with the same result, only slower.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import repeat
from typing import Any

from ..errors import UsageError
from ..metrics import Attempt
from .args import ARGUMENTS, PLAIN
from .records import NO_METADATA

__all__ = ["COLUMNS", "REQUIRED", "build", "plain_columns", "rows"]

# The columns a batch may have: log_attempt's arguments (``error``'s ``failed_in`` too).
COLUMNS = ARGUMENTS
REQUIRED = ("step", "group_id", "task_id")


def _as_list(name: str, col: Any) -> list[Any]:
    tolist = getattr(col, "tolist", None)  # numpy arrays (and tensors): Python scalars
    if tolist is not None and getattr(col, "ndim", 1) == 1:
        col = tolist()
    if isinstance(col, (str, bytes, Mapping)) or not hasattr(col, "__len__"):
        raise UsageError(f"log_attempts: column {name!r} must be a list or an array")
    return col if type(col) is list else list(col)


def _finite(col: list[Any], types: set[type]) -> bool:
    """Whether the numbers of a float column (None allowed) are all finite."""
    vals = [x for x in col if x is not None] if type(None) in types else col
    try:
        total = sum(vals)  # NaN or an infinity makes the sum one (an overflow: rows, no harm)
    except OverflowError:
        return False
    return bool(total - total == 0.0)


def plain_columns(columns: Mapping[str, Any]) -> tuple[int, dict[str, list[Any]] | None]:
    """(rows, the columns as lists with their defaults) when every value is of the exact type
    ``log_attempt`` takes as it is, or (rows, None) when the batch must go row by row.

    Raises UsageError for an unknown or missing column, or columns of different lengths."""
    unknown = [k for k in columns if k not in COLUMNS]
    if unknown:
        raise UsageError(
            f"log_attempts: unknown column {unknown[0]!r} (columns are log_attempt's arguments)"
        )
    missing = [k for k in REQUIRED if k not in columns]
    if missing:
        raise UsageError(f"log_attempts: no {missing[0]!r} column")
    cols = {k: _as_list(k, v) for k, v in columns.items()}
    n = len(cols["step"])
    for k, v in cols.items():
        if len(v) != n:
            raise UsageError(f"log_attempts: column {k!r} has {len(v)} values, 'step' has {n}")
    if any(k not in PLAIN for k in cols) or not n:
        return n, None
    out: dict[str, list[Any]] = {}
    for k, (ok, default) in PLAIN.items():
        col = cols.get(k)
        if col is None:
            out[k] = [default] * n
            continue
        types = set(map(type, col))
        if not types <= ok:
            return n, None
        if float in types and not _finite(col, types):
            return n, None
        out[k] = col
    return n, out


def rows(columns: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The batch as one mapping of ``log_attempt``'s arguments per attempt."""
    names = list(columns)
    cols = [_as_list(k, columns[k]) for k in names]
    return [dict(zip(names, row)) for row in zip(*cols)]


def build(
    cols: dict[str, list[Any]], n: int, first: int, now: float
) -> tuple[list[str], list[Attempt]]:
    """The ids (``<step>-<k>``, k counting on from ``first``) and attempts of a plain batch,
    as ``log_attempt`` makes them one by one."""
    steps = cols["step"]
    lo, hi = min(steps), max(steps)
    numbers = map(str, range(first, first + n))
    if lo == hi:  # one update's batch: one prefix
        ids = list(map(f"{lo}-".__add__, numbers))
    else:
        ids = [f"{s}-{k}" for s, k in zip(steps, numbers)]
    made = list(
        map(
            Attempt,
            steps,
            ids,
            cols["group_id"],
            cols["task_id"],
            cols["policy_version"],
            cols["reward"],
            repeat(False),
            repeat(None),
            cols["response_tokens"],
            cols["truncated"],
            repeat(None),
            repeat(now),
            cols["duration"],
            [m.copy() if m else NO_METADATA for m in cols["metadata"]],
            cols["retries"],
        )
    )
    return ids, made
