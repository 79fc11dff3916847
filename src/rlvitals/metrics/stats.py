"""Exact-sum means, population stds and percentiles of plain Python numbers (the metrics'
arithmetic: ``math.fsum``, never raising on NaN or an infinity)."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["all_same", "fmean", "mean", "percentile", "pstd", "pstd_of"]


def all_same(values: list[float | None] | list[float]) -> bool:
    first = values[0]
    if first != first:  # NaN: the same only as other NaNs
        return all(v != v for v in values)
    return values.count(first) == len(values)  # type: ignore[arg-type]  # C-level


def pstd(values: Sequence[float]) -> float:
    m = fmean(values)
    return math.sqrt(fmean([(v - m) * (v - m) for v in values]))


# Population std of a group's rewards by the rewards themselves: groups repeat the same few
# reward tuples (8 binary rewards have 256), and pstd (exact sums) depends only on the values.
_PSTD_CACHE: dict[tuple[float, ...], float] = {}


def pstd_of(values: list[float]) -> float:
    key = tuple(values)
    std = _PSTD_CACHE.get(key)
    if std is None:
        std = pstd(values)
        if len(_PSTD_CACHE) >= 4096:
            _PSTD_CACHE.clear()
        _PSTD_CACHE[key] = std
    return std


def mean(values: Sequence[float]) -> float | None:
    return fmean(values) if values else None


def fmean(values: Sequence[float]) -> float:
    """The exact-sum mean (``math.fsum``) of a non-empty sequence, never raising: an
    intermediate overflow divides first, and ``inf + -inf`` is NaN."""
    n = len(values)
    try:
        return math.fsum(values) / n
    except OverflowError:
        return math.fsum([v / n for v in values])
    except ValueError:  # inf and -inf among them
        return math.nan


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values (numpy's default method)."""
    n = len(sorted_values)
    pos = (n - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    lo_v, hi_v = sorted_values[lo], sorted_values[hi]
    return lo_v + (hi_v - lo_v) * frac if frac else float(lo_v)
