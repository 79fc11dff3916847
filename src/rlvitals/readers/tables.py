"""The one table layer: every structured file's rows become steps and values here.

JSON (a list of records, an object of per-step lists, either nested under sections, pandas'
orients: ``_jsontables``), JSON Lines, CSV/TSV (``generic``), Parquet, and the markdown,
box-drawing and HTML tables of a console log (``shapes``) all reach a run through this module:

- **cells** (``cell``): numbers, quoted numbers (``'0.9513'``), percents (``85%`` is 0.85),
  values with a unit (``12.3s``), ``NaN``/``Infinity``/``inf`` as values; ``null``, ``None``,
  an empty cell or ``N/A`` as no value (a periodic evaluation written as null between
  evaluations is absent there, not a non-finite number: a real NaN still is one); other text
  is a label, never a metric.
- **the step column** (``find_steps``): by name (``step``, ``global_step``, ``iteration``,
  ``iter``, ``it``, ``update``, ``training_step``, ... and ``epoch`` with ``batch``), whose
  cells are integers; else by content: the first column, or one named like a row index, whose
  cells are integers that never decrease; else none, and the records are numbered in order
  from 1 with one warning. Which column was the step and why is kept in
  ``info["steps_from"]`` (``rlvitals formats --explain`` prints it).
- **rows** (``Rows``): nested objects flattened with ``/``, held until the step column is
  decided (a row with a step-named integer decides at once; otherwise ``HOLD`` rows, or the end
  of a pass, are looked at), then each row's values handed to the reader's ``Mapper``. Every
  step-named column is bookkeeping, never a metric, and so is a pandas row index (an unnamed
  column of row numbers).
- **placeholders between evaluations** (``placeholders``): an evaluation written on every
  record, a constant (``0.0``, or another repeated value) on the records between evaluations
  and varying values at a regular cadence (every k >= 2 records), is a periodic metric: the
  constant between its evaluations is no value (``readers._settle`` drops it once the run is
  read whole). An evaluation on the cadence that scores that constant is a value.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .base import flatten, valid_step
from .printed import number, parse_number

__all__ = [
    "ABSENT",
    "HOLD",
    "Placeholders",
    "Rows",
    "Steps",
    "cell",
    "find_steps",
    "is_index_name",
    "placeholders",
    "step_rank",
    "step_value",
]

# -- cells --------------------------------------------------------------------------------

# Text that means "no value here": what pandas, R, SQL and hand-written tables write for one.
ABSENT = frozenset({"", "null", "none", "na", "n/a", "<na>", "nil", "-", "--", "\u2014", "nat"})
LABEL_CHARS = 500  # a text cell kept as a label is cut to this


def cell(v: Any) -> float | str | None:
    """One cell: a number, ``None`` where it holds no value, or text (a label)."""
    if v is None:
        return None
    if type(v) is float:
        return v
    if isinstance(v, str):
        s = v.strip()
        if s.lower() in ABSENT:
            return None
        f = number(s)
        return s if f is None else f
    if isinstance(v, (bool, int, float)):
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    return None  # a list or an object inside a cell is not a value


# -- the step column ----------------------------------------------------------------------

# Names of a step column, best first (normalised: lower case, spaces and dashes as ``_``):
# the loops' own (``step``, W&B's ``_step``, HF's ``global_step``), then the other counters of
# updates the frameworks and hand-written loops print (open-instruct's ``training_step``,
# CleanRL's ``update``, ms-swift's ``global_step/max_steps``, ...).
STEP_NAMES = (
    "step",
    "global_step",
    "_step",
    "iteration",
    "iter",
    "train/global_step",
    "trainer/global_step",
    "training_step",
    "train_step",
    "global_steps",
    "steps",
    "update",
    "updates",
    "update_step",
    "num_updates",
    "optimizer_step",
    "opt_step",
    "policy_step",
    "rl_step",
    "grpo_step",
    "ppo_step",
    "iters",
    "iterations",
    "it",
    "current_steps",
    "global_step/max_steps",
)
_RANK = {n: i for i, n in enumerate(STEP_NAMES)}
_STEP_PREFIXES = frozenset({"train", "trainer", "training", "charts"})
EPOCH_NAMES = frozenset({"epoch", "epochs"})
BATCH_NAMES = frozenset(
    {
        "batch",
        "batch_idx",
        "batch_index",
        "batch_step",
        "step_in_epoch",
        "iter_in_epoch",
        "iteration_in_epoch",
        "batch_in_epoch",
    }
)
# Column names a row index goes by (pandas' unnamed index, ``index``, ``#``, ``idx``).
INDEX_NAMES = frozenset({"", "index", "idx", "#", "no", "n", "i", "row", "unnamed:_0", "level_0"})
# The names pandas gives the row index it writes (``to_csv``: unnamed, ``Unnamed: 0`` once a
# CSV read back with its index is written again; ``reset_index``: ``index``, ``level_0``).
_PANDAS_INDEX = re.compile(r"|index|level_0|Unnamed: \d+")
# A counter of something other than updates: never the step by its content.
_COUNTER = re.compile(
    r"token|sample|example|flop|time|second|sec\b|_s$|ms$|byte|mem|episode|count|total|num_"
)
_N_OF_M = re.compile(r"^\s*(\d+)\s*/\s*\d+\s*$")
HOLD = 3  # rows looked at before a step column is chosen by content
_FIRST_MAX = 10**9  # a first value this large is a time stamp or a count, not a step


# -- placeholders between periodic evaluations ------------------------------------------

MIN_EVALUATIONS = 3  # varying values on a cadence: two equal gaps make it one


@dataclass(frozen=True)
class Placeholders:
    """A periodic metric written on every record: ``value`` on the records between its
    evaluations, which fall every ``every`` steps from ``first`` (``mask``: the placeholder
    points)."""

    value: float
    every: int
    first: int
    mask: Any  # numpy bool array over the series' points
    count: int


def placeholders(steps: Any, values: Any) -> Placeholders | None:
    """The placeholder points of a series written on every record, or None. The reading:
    the most common exact value ``c``; the points that differ from it (at least
    ``MIN_EVALUATIONS``, not all one value) fall on one regular cadence (every ``k`` steps
    from the first of them, ``k`` at least twice the records' own spacing), the last one
    allowed off it at the last record (a final evaluation); every point off the cadence
    equals ``c``. Then those points are placeholders (before the first evaluation too: none
    had run); a point on the cadence after it that equals ``c`` is an evaluation that scored
    it. Never for irregular values, nor a constant series."""
    import numpy as np

    st = np.asarray(steps, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v)
    if len(v) < 2 * MIN_EVALUATIONS or not ok.all():
        return None
    vals, counts = np.unique(v, return_counts=True)
    c = float(vals[int(np.argmax(counts))])
    real = np.flatnonzero(v != c)
    if len(real) < MIN_EVALUATIONS or len(np.unique(v[real])) < 2:
        return None
    at = st[real]
    if real[-1] == len(v) - 1 and len(real) > MIN_EVALUATIONS:  # a final evaluation
        gaps = np.diff(at[:-1])
    else:
        gaps = np.diff(at)
    spacing = int(np.median(np.diff(st)))
    k = int(gaps.min()) if len(gaps) else 0
    if spacing <= 0 or k < 2 * spacing or np.any(gaps % k):
        return None
    # The cadence's steps from its first value; before it, no evaluation had run yet.
    on = ((st - at[0]) % k == 0) & (st >= at[0])
    on[real[-1]] = True  # the final evaluation, on the cadence or not
    off = ~on
    if not off.any() or np.any(v[off] != c):
        return None
    return Placeholders(c, k, int(at[0]), off, int(off.sum()))


def _norm(name: str) -> str:
    n = name.strip().strip("'\"`*").strip().lower()
    return re.sub(r"[\s\-]+", "_", n) if (" " in n or "-" in n or "\t" in n) else n


def step_rank(name: str) -> int | None:
    """How good a step column ``name`` is by its name (lower is better), or None."""
    n = _norm(name)
    r = _RANK.get(n)
    if r is None and "/" in n:
        head, _, last = n.rpartition("/")
        if head in _STEP_PREFIXES:
            r = _RANK.get(last)
    return r


def is_index_name(name: str) -> bool:
    """Whether ``name`` is what a row index is called (pandas writes it with no name)."""
    return _norm(name) in INDEX_NAMES


def step_value(v: Any) -> int | None:
    """A cell as a step number: an integer (or a float or text holding one, ``12/100`` as 12);
    any size: the caller checks the range."""
    if type(v) is int:
        return v
    if type(v) is float:
        return int(v) if v.is_integer() else None
    if isinstance(v, str):
        s = v.strip()
        if s.isdigit():
            return int(s)
        m = _N_OF_M.match(s)
        if m:
            return int(m.group(1))
        f = parse_number(s)
        return int(f) if f is not None and math.isfinite(f) and f.is_integer() else None
    return None


@dataclass(frozen=True)
class Steps:
    """Where a table's steps come from: ``how`` is ``name`` (a step-named column), ``content``
    (integers that never decrease), ``epoch`` (``column`` with ``batch`` inside it), ``key``
    (the records are keyed by their step) or ``order`` (numbered from 1); ``why`` says so."""

    how: str
    column: str | None = None
    batch: str | None = None
    why: str = ""


def _integers(rows: Sequence[Mapping[str, Any]], key: str) -> list[int] | None:
    """The step values of column ``key`` in ``rows`` (rows without it passed over), or None
    when one of them is not a non-negative integer or none has it."""
    out = []
    for r in rows:
        v = r.get(key)
        if v is None:
            continue
        s = step_value(v)
        if s is None or s < 0 or isinstance(v, bool):
            return None
        out.append(s)
    return out or None


def _columns(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for r in rows:
        for k in r:
            seen.setdefault(k, None)
    return list(seen)


def find_steps(rows: Sequence[Mapping[str, Any]], names: Sequence[str] | None = None) -> Steps:
    """The step column of a table whose first rows are ``rows`` (see the module docstring)."""
    names = list(names) if names is not None else _columns(rows)
    named = sorted((r, i, k) for i, k in enumerate(names) if (r := step_rank(k)) is not None)
    for _, _, k in named:
        if _integers(rows, k) is not None:
            return Steps("name", k, why=f"step column {k!r}: named as a step")
    epochs = [k for k in names if _norm(k) in EPOCH_NAMES]
    for k in epochs:
        values = _integers(rows, k)
        if values is None:
            continue
        batch = next(
            (b for b in names if _norm(b) in BATCH_NAMES and _integers(rows, b) is not None), None
        )
        if batch is not None:
            return Steps(
                "epoch",
                k,
                batch,
                why=f"steps from {k!r} with {batch!r}: the batch within the epoch, counted on",
            )
        if all(b > a for a, b in itertools.pairwise(values)):
            return Steps("name", k, why=f"step column {k!r}: whole epochs, no other step column")
    for i, k in enumerate(names):
        if not (i == 0 or is_index_name(k)) or _COUNTER.search(_norm(k)):
            continue
        values = _integers(rows, k)
        if values is None or len(values) != len(rows) or len(values) < 2:
            continue
        gaps = [b - a for a, b in itertools.pairwise(values)]
        if values[0] >= _FIRST_MAX or min(gaps) < 0 or max(gaps) == 0:
            continue
        # Named like an index: integers that never decrease. The first column of another
        # name (a metric of integers may go up by chance): steps at a constant cadence.
        if is_index_name(k) or (len(values) >= 3 and len(set(gaps)) == 1):
            why = (
                f"step column {k!r}: chosen by its content (integers that never decrease"
                + ("" if is_index_name(k) else ", at a constant cadence")
                + ")"
            )
            return Steps("content", k, why=why)
    return Steps("order", why="no step column: records numbered in order from 1")


# -- rows ---------------------------------------------------------------------------------


class Rows:
    """One table's rows into a run: each row flattened, given its step, and its values handed
    to ``add(step, values)`` (values are floats, or None where a cell holds no value).

    ``source`` names the table in warnings and in ``info["steps_from"]``; ``where`` (each
    row's ``path:line``) names the row in a warning. ``labels``: text cells are kept as the
    run's labels (``info["labels"]``)."""

    def __init__(
        self,
        run: Any,
        add: Callable[[int, dict[str, float | None]], None],
        source: str,
        *,
        labels: bool = True,
        steps: Steps | None = None,
    ) -> None:
        self.run = run
        self._add = add
        self.source = source
        self.labels = labels
        self.steps: Steps | None = steps
        self._held: list[tuple[Mapping[str, Any], str]] = []
        self._named: list[str] = []  # step-named columns seen, best first
        self._skip: set[str] = set()  # columns that are not metrics (steps, a row index)
        self._seen: set[str] = set()  # columns looked at once
        self._looked: set[str] = set()  # columns looked at for a step's name
        self._n = 0  # rows numbered in order
        self._epoch: tuple[int, int, int, int] | None = None  # epoch, offset, last batch, gap
        self._warned = False
        if steps is not None:
            self._decided(steps)

    # -- rows in -------------------------------------------------------------------------

    def row(self, rec: Mapping[str, Any], where: str) -> None:
        """One row (a record: nested objects are flattened with ``/``)."""
        if any(isinstance(v, dict) for v in rec.values()):
            rec = dict(flatten(dict(rec)))
        if self.steps is None:
            if any(step_rank(k) is not None and step_value(v) is not None for k, v in rec.items()):
                self._held.append((rec, where))
                self.flush(final=True)
                return
            self._held.append((rec, where))
            if len(self._held) >= HOLD:
                self.flush(final=True)
            return
        self._take(rec, where)

    def flush(self, *, final: bool) -> None:
        """Decide the step column with the rows held and read them (``final``: however few)."""
        if not self._held or (not final and len(self._held) < HOLD):
            return
        held, self._held = self._held, []
        if self.steps is None:
            self._decided(find_steps([r for r, _ in held]))
        for rec, where in held:
            self._take(rec, where)

    @property
    def pending(self) -> int:
        """Rows held until the step column is decided."""
        return len(self._held)

    # -- inside --------------------------------------------------------------------------

    def _decided(self, steps: Steps) -> None:
        self.steps = steps
        info = self.run.info.setdefault("steps_from", {})
        info[self.source] = steps.why
        if steps.how == "order":
            self.run.warnings.append(
                f"{self.source}: records without a step number; numbered in order of "
                "appearance from 1"
            )

    def _step(self, rec: Mapping[str, Any], where: str) -> int | None:
        steps = self.steps
        assert steps is not None
        how = steps.how
        if how == "name":
            for k in self._step_columns(rec):
                s = step_value(rec[k])
                if s is not None and not isinstance(rec[k], bool):
                    return s
            self._no_step(where, steps)
            return None
        if how == "content" or how == "key":
            s = step_value(rec.get(steps.column or ""))
            if s is None:
                self._no_step(where, steps)
            return s
        if how == "epoch":
            return self._epoch_step(rec, where, steps)
        return None  # numbered in order, once the row has a value

    def _step_columns(self, rec: Mapping[str, Any]) -> list[str]:
        """The step-named columns of ``rec``, best first (the chosen one first)."""
        fresh = [k for k in rec if k not in self._looked]
        if not fresh:
            return [k for k in self._named if k in rec]
        self._looked.update(fresh)
        new = [k for k in fresh if step_rank(k) is not None]
        if new:
            self._skip.update(new)
            self._named = sorted({*self._named, *new}, key=lambda k: (step_rank(k) or 0, k))
            col = self.steps.column if self.steps is not None else None
            if col is not None and col in self._named:
                self._named.remove(col)
                self._named.insert(0, col)
        return [k for k in self._named if k in rec]

    def _no_step(self, where: str, steps: Steps) -> None:
        self.run.warnings.append(f"{where}: no integer step ({steps.column!r}); skipped")

    def _epoch_step(self, rec: Mapping[str, Any], where: str, steps: Steps) -> int | None:
        e = step_value(rec.get(steps.column or ""))
        b = step_value(rec.get(steps.batch or ""))
        if e is None or b is None:
            self._no_step(where, steps)
            return None
        if self._epoch is None:
            self._epoch = (e, 0, b, 1)
            return b
        epoch, offset, last, gap = self._epoch
        if e != epoch:
            # The epoch's batches are counted on: the next epoch starts one gap (the batches
            # between two rows) after the last row of this one.
            offset = offset + last + gap - b
            self._epoch = (e, offset, b, gap)
        else:
            self._epoch = (e, offset, b, b - last if b > last else gap)
        return offset + b

    def _take(self, rec: Mapping[str, Any], where: str) -> None:
        steps = self.steps
        assert steps is not None
        step = self._step(rec, where)
        if steps.how != "order" and step is None:
            return
        skip = self._skip
        for k in (steps.column, steps.batch):
            if k is not None:
                skip.add(k)
        values: dict[str, float | None] = {}
        labels: dict[str, str] = {}
        seen = self._seen
        for k, v in rec.items():
            if k in skip:
                continue
            if k not in seen:
                seen.add(k)
                if step_rank(k) is not None:
                    skip.add(k)  # a step counter: bookkeeping, never a metric
                    continue
            c = cell(v)
            if isinstance(c, float):
                if _PANDAS_INDEX.fullmatch(k):
                    skip.add(k)  # a row index pandas wrote: never a metric
                    continue
                values[k] = c
            elif c is None:
                if v is None or isinstance(v, str):
                    values[k] = None  # no value here (null, an empty cell)
            elif self.labels and isinstance(c, str):
                labels[k] = c[:LABEL_CHARS]
        if not values:
            return  # a row of text only: not a record (a row of empty cells still is one)
        if labels:
            self.run.info.setdefault("labels", {}).update(labels)
        if steps.how == "order":
            self._n += 1
            step = self._n
            self.run.info["steps_numbered"] = self._n
        assert step is not None
        if valid_step(step) is None:
            self.run.warnings.append(f"{where}: step {step} out of range (0..2**63-1); skipped")
            return
        self._add(step, values)
