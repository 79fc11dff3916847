"""``rollout/<key>`` metrics from the episode metadata an agent and a grader return."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from .stats import fmean

if TYPE_CHECKING:
    from .decide import Attempt
    from .step import RunState

__all__ = ["EpisodeStats", "episode_stats"]

MAX_META_DEPTH = 8  # metadata tables nested deeper are not read as rollout/<key> columns
# Distinct labels kept per metadata key; the rest are counted under "<key>/_other".
MAX_LABELS_PER_KEY = 64


class EpisodeStats:
    """``rollout/<key>`` from episode metadata: one column of values per key.

    ``add_all`` takes an update's metadata at once: attempts that share keys (the usual case:
    an agent returns the same fields every episode) are transposed into columns by C-level
    calls (``itemgetter``, ``zip``), so Python touches each attempt a few times, not each value.
    ``add`` takes one attempt, value by value (odd metadata: nested tables, numpy scalars,
    non-finite numbers). ``metrics`` then classifies each column: numbers (and booleans, as
    0/1) are averaged, labels counted, nested tables become ``<key>/<subkey>``. Both also tell
    which metadata holds something plain JSON cannot spell (a non-finite float, a foreign
    object), so the writer cleans only those.
    """

    __slots__ = ("cols", "kinds")

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {}
        # key -> the types in its column, for columns only ``add_all`` filled (``metrics``
        # then need not look at every value again); ``add`` drops the entry.
        self.kinds: dict[str, set[type]] = {}

    def add(self, meta: Mapping[str, Any], prefix: str = "", depth: int = 0) -> bool:
        """Accumulate one attempt's metadata; True if it needs ``jsonio.clean`` to encode.
        Tables nested deeper than ``MAX_META_DEPTH`` (or holding themselves) are not read."""
        cols = self.cols
        odd = False
        if depth >= MAX_META_DEPTH:
            return True
        for key, v in meta.items():
            t = type(v)
            if t is float:
                if v - v != 0.0:  # NaN or ±inf
                    odd = True
            elif t is not str and t is not int and t is not bool:
                if v is None:
                    continue
                if isinstance(v, Mapping):
                    odd |= self.add(v, f"{prefix}{key}/", depth + 1)
                    continue
                odd = True
                v = _scalar(v)
                if v is None:
                    continue
            if prefix:
                key = f"{prefix}{key}"
            col = cols.get(key)
            if col is None:
                cols[key] = [v]
            else:
                col.append(v)
            if self.kinds:
                self.kinds.pop(key, None)
        return odd

    def add_all(self, metas: Sequence[Mapping[str, Any]]) -> list[int]:
        """Accumulate many attempts' metadata; the indices of those that need cleaning."""
        odd: list[int] = []
        if not metas:
            return odd
        # The usual case first: every attempt returned the same keys (in any order).
        keys = tuple(metas[0])
        if keys and len(set(map(len, metas))) == 1:
            try:  # one column per key, each by one C-level pass
                columns = [list(map(itemgetter(k), metas)) for k in keys]
            except KeyError:
                pass
            else:
                self._add_columns(keys, columns, range(len(metas)), metas, odd)
                return odd
        by_keys: dict[tuple[Any, ...], list[int]] = {}
        for i, m in enumerate(metas):
            if m:
                ks = tuple(m)
                idx = by_keys.get(ks)
                if idx is None:
                    by_keys[ks] = [i]
                else:
                    idx.append(i)
        for ks, idx in by_keys.items():
            group = [metas[i] for i in idx]
            self._add_rows(ks, list(map(itemgetter(*ks), group)), idx, group, odd)
        return odd

    def _add_rows(
        self,
        keys: tuple[Any, ...],
        rows: list[Any],
        idx: Sequence[int],
        group: Sequence[Mapping[str, Any]],
        odd: list[int],
    ) -> None:
        """Columns from ``rows`` (one value, or a tuple of values, per attempt)."""
        columns: list[Sequence[Any]] = list(zip(*rows)) if len(keys) > 1 else [rows]
        self._add_columns(keys, columns, idx, group, odd)

    def _add_columns(
        self,
        keys: tuple[Any, ...],
        columns: Sequence[Sequence[Any]],
        idx: Sequence[int],
        group: Sequence[Mapping[str, Any]],
        odd: list[int],
    ) -> None:
        """Columns of values, one per key of ``keys``, of the metadata ``group``."""
        all_kinds = []
        for col in columns:
            kinds = set(map(type, col))
            plain = kinds <= _PLAIN
            if plain and float in kinds:
                total = sum([v for v in col if type(v) is float] if len(kinds) > 1 else col)
                plain = total - total == 0.0  # else a NaN or an infinity (or an overflow)
            if not plain:  # value by value, flagging the metadata to clean
                odd.extend(i for i, m in zip(idx, group) if self.add(m))
                return
            all_kinds.append(kinds)
        cols = self.cols
        known = self.kinds
        for key, col, kinds in zip(keys, columns, all_kinds):
            values: Sequence[Any]
            if _NONE in kinds:
                values = [v for v in col if v is not None]
                kinds.discard(_NONE)
            else:
                values = col
            if values:
                mine = cols.get(key)
                if mine is None:
                    # A list of ours (a column built here) is kept; a tuple (zip's) copied.
                    cols[key] = values if isinstance(values, list) else list(values)
                    known[key] = kinds
                else:
                    mine.extend(values)
                    had = known.get(key)
                    if had is not None:
                        had |= kinds

    def metrics(self, state: RunState) -> dict[str, float]:
        """The ``rollout/*`` metrics: means, label counts (0 for labels seen earlier), rates."""
        out: dict[str, float] = {}
        known = self.kinds
        for key, col in self.cols.items():
            kinds = known.get(key)
            if kinds is None:
                kinds = set(map(type, col))
            if str in kinds:
                if len(kinds) > 1:
                    labels = Counter([v for v in col if type(v) is str])
                    numbers = [v for v in col if type(v) is not str]
                else:
                    labels, numbers = Counter(col), []
            else:
                labels, numbers = Counter(), col
            if numbers:
                out[f"rollout/{key}"] = fmean(numbers)
            if labels:
                seen = state.labels.setdefault(str(key), {})
                other = 0
                for label, n in labels.items():
                    if label in seen or len(seen) < MAX_LABELS_PER_KEY:
                        seen[label] = None
                        out[f"rollout/{key}/{label}"] = float(n)
                    else:
                        other += n
                        state.overflow_keys.add(str(key))
                if other:
                    out[f"rollout/{key}/_other"] = float(other)
        # A label seen before but absent now counts 0, so a count reads 0 and not "unmeasured".
        for key, seen in state.labels.items():
            for label in seen:
                out.setdefault(f"rollout/{key}/{label}", 0.0)
            if key in state.overflow_keys:
                out.setdefault(f"rollout/{key}/_other", 0.0)
        return out


_NONE = type(None)
_PLAIN = frozenset({float, int, bool, str, _NONE})


def _scalar(v: Any) -> float | None:
    """A numpy/torch scalar (or a float subclass) as a float; None for anything else (an
    object whose attributes raise included)."""
    if isinstance(v, (int, float)):
        return float(v)
    try:
        item = getattr(v, "item", None)
        if not (callable(item) and getattr(v, "ndim", None) == 0):
            return None
        x = item()
    except Exception:
        return None
    if isinstance(x, bool):
        return 1.0 if x else 0.0
    if isinstance(x, (int, float)):
        return float(x)
    return None


def episode_stats(attempts: Iterable[Attempt]) -> EpisodeStats:
    """Episode stats of ``attempts``' metadata."""
    stats = EpisodeStats()
    stats.add_all([a.metadata for a in attempts])
    return stats
