"""The canonical in-memory run: what every reader produces and every check and view consumes.

``RunData`` holds the run's info, one ``Series`` per metric (canonical names and, beside them,
the source's original keys), held-out evaluations, heartbeats, and optionally the attempts
table. Series are sparse: a metric has values only at the steps where it was measured, so
"not measured" (absent) and "measured NaN" (a value) stay different things.

Readers build a RunData incrementally through ``SeriesBuilder``: appends are O(1), duplicate
steps merge (the later value of a key wins, other keys join), out-of-order steps are sorted
once when the arrays are next materialised.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from .settings import RunSettings

__all__ = [
    "EVENT_KINDS",
    "AttemptTable",
    "AttemptTableBuilder",
    "Event",
    "RunData",
    "Series",
    "SeriesBuilder",
]


class Series(NamedTuple):
    """One metric over the steps where it was measured."""

    steps: np.ndarray  # (n,) int64, ascending, unique
    values: np.ndarray  # (n,) float64; NaN and inf are measured values

    def __len__(self) -> int:
        return len(self.steps)

    def at(self, step: int) -> float | None:
        """The value at ``step``, or None where it was not measured."""
        i = int(np.searchsorted(self.steps, step))
        if i < len(self.steps) and self.steps[i] == step:
            return float(self.values[i])
        return None

    def since(self, step: int) -> Series:
        """The part of the series from ``step`` on."""
        i = int(np.searchsorted(self.steps, step))
        return Series(self.steps[i:], self.values[i:])

    def finite(self) -> Series:
        """Only the finite values."""
        ok = np.isfinite(self.values)
        return Series(self.steps[ok], self.values[ok])


class _Column:
    __slots__ = ("dirty", "series", "steps", "values")

    def __init__(self) -> None:
        self.steps = array("q")
        self.values = array("d")
        self.dirty = False  # out-of-order or duplicate steps appended since the last sort
        self.series: Series | None = None


class SeriesBuilder:
    """Accumulates metric values per step; materialises numpy Series on demand."""

    def __init__(self) -> None:
        self._cols: dict[str, _Column] = {}

    def add(self, step: int, name: str, value: float) -> None:
        """Record ``value`` of ``name`` at ``step``; a repeated step overwrites."""
        col = self._cols.get(name)
        if col is None:
            col = self._cols[name] = _Column()
        n = len(col.steps)
        if n and col.steps[n - 1] >= step:
            if col.steps[n - 1] == step:
                col.values[n - 1] = value
                col.series = None
                return
            col.dirty = True
        col.steps.append(step)
        col.values.append(value)
        col.series = None

    def replace(self, name: str, steps: np.ndarray, values: np.ndarray) -> None:
        """Set the whole series of ``name`` (for metrics derived from others after each read)."""
        col = self._cols[name] = _Column()
        steps = np.asarray(steps, dtype=np.int64)
        values = np.asarray(values, dtype=np.float64)
        if len(steps) > 1 and np.any(np.diff(steps) <= 0):
            col.dirty = True
        col.steps = array("q", steps.tobytes())
        col.values = array("d", values.tobytes())

    def discard(self, name: str) -> None:
        """Forget the series of ``name`` (no error if absent)."""
        self._cols.pop(name, None)

    def extend(
        self, name: str, steps: list[int] | np.ndarray, values: list[float] | np.ndarray
    ) -> None:
        """Record many values of ``name`` at once (same rules as ``add``, faster in bulk)."""
        if len(steps) == 0:
            return
        col = self._cols.get(name)
        if col is None:
            col = self._cols[name] = _Column()
        st = np.asarray(steps, dtype=np.int64)
        va = np.asarray(values, dtype=np.float64)
        n = len(col.steps)
        if (n and col.steps[n - 1] >= st[0]) or bool(np.any(st[1:] <= st[:-1])):
            col.dirty = True  # duplicates or disorder: sorted (last value wins) on next get
        col.steps.frombytes(st.tobytes())
        col.values.frombytes(va.tobytes())
        col.series = None

    def names(self) -> list[str]:
        return list(self._cols)

    def __contains__(self, name: object) -> bool:
        return name in self._cols

    def columns(self, name: str) -> tuple[array[int], array[float]] | None:
        """The stored ``(steps, values)`` of ``name``, sorted, without building a Series (which
        copies both whole): a cheap look at the length and the newest points, as the live
        page's deltas need after every read. Read them; never change them."""
        col = self._cols.get(name)
        if col is None:
            return None
        if col.dirty:
            self.get(name)  # sorts the column in place
        return col.steps, col.values

    def get(self, name: str) -> Series | None:
        col = self._cols.get(name)
        if col is None:
            return None
        if col.series is None:
            steps = np.frombuffer(col.steps, dtype=np.int64).copy()
            values = np.frombuffer(col.values, dtype=np.float64).copy()
            if col.dirty:
                # Stable sort keeps arrival order among equal steps; keep the last of each.
                order = np.argsort(steps, kind="stable")
                steps, values = steps[order], values[order]
                last = np.ones(len(steps), dtype=bool)
                last[:-1] = steps[1:] != steps[:-1]
                steps, values = steps[last], values[last]
                col.steps = array("q", steps.tobytes())
                col.values = array("d", values.tobytes())
                col.dirty = False
            col.series = Series(steps, values)
        return col.series


@dataclass
class AttemptTable:
    """One row per attempt, as columns (docs/format.md rollouts.jsonl).

    Strings with few distinct values (discard reasons, task and group ids) are stored as codes
    into a list of names. ``offsets`` locate each record in its shard file, so a view can read
    one attempt's full record (metadata included) without holding them all.
    """

    step: np.ndarray  # int64
    reward: np.ndarray  # float64, NaN where null (see reward_missing)
    reward_missing: np.ndarray  # bool
    policy_version: np.ndarray  # int64, -1 where null
    trained: np.ndarray  # bool
    discard_code: np.ndarray  # int32 into discard_reasons, -1 where null
    discard_reasons: list[str]
    task_code: np.ndarray  # int32 into task_ids
    task_ids: list[str]
    group_code: np.ndarray  # int32 into group_ids
    group_ids: list[str]
    response_tokens: np.ndarray  # int64
    truncated: np.ndarray  # bool
    lag: np.ndarray  # int64, -1 where null
    time: np.ndarray  # float64
    duration: np.ndarray  # float64, NaN where null
    shard: np.ndarray  # int16 into files
    offset: np.ndarray  # int64 byte offset of the record in its file
    files: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.step)

    def steps(self) -> np.ndarray:
        """The distinct steps that have attempts, ascending."""
        return np.unique(self.step)

    def rows_at(self, step: int) -> slice:
        """The rows of update ``step`` (rows are kept sorted by step)."""
        lo = int(np.searchsorted(self.step, step, side="left"))
        hi = int(np.searchsorted(self.step, step, side="right"))
        return slice(lo, hi)


# Column name -> dtype, in AttemptTable's order (strings are stored as int32 codes).
ATTEMPT_COLUMNS: dict[str, Any] = {
    "step": np.int64,
    "reward": np.float64,
    "reward_missing": np.bool_,
    "policy_version": np.int64,
    "trained": np.bool_,
    "discard_code": np.int32,
    "task_code": np.int32,
    "group_code": np.int32,
    "response_tokens": np.int64,
    "truncated": np.bool_,
    "lag": np.int64,
    "time": np.float64,
    "duration": np.float64,
    "shard": np.int16,
    "offset": np.int64,
}


class _Index(dict[Any, int]):
    """name -> code; a name not seen before gets the next code (``_Codes.encode``)."""

    __slots__ = ("names",)
    names: list[str]

    def __missing__(self, name: Any) -> int:
        code = self[name] = len(self.names)
        self.names.append(str(name))
        return code


class _Codes:
    """A string <-> int32 code book that only grows."""

    __slots__ = ("index", "names")

    def __init__(self) -> None:
        self.names: list[str] = []
        index = _Index({None: -1})
        index.names = self.names
        self.index: dict[str | None, int] = index

    def encode(self, values: Iterable[Any], n: int | None = None) -> np.ndarray:
        """Codes of ``values`` (``n`` of them; default ``len(values)``). One C-level pass:
        known names are looked up, new ones get codes in order of first appearance
        (``_Index.__missing__``)."""
        count = len(values) if n is None else n  # type: ignore[arg-type]
        return np.fromiter(map(self.index.__getitem__, values), np.int32, count)


class AttemptTableBuilder:
    """Grows an AttemptTable block by block, keeping rows sorted by step.

    Appends are amortised O(new rows): columns live in buffers that double when full, and a
    block whose steps come before rows already held (another shard catching up) is merged into
    the tail from the first affected step only. ``table()`` returns views, valid until the next
    append (a later merge may move rows under them).
    """

    def __init__(self) -> None:
        self._n = 0
        self._cap = 0
        self._cols: dict[str, np.ndarray] = {
            name: np.zeros(0, dtype=dt) for name, dt in ATTEMPT_COLUMNS.items()
        }
        self.discards = _Codes()
        self.tasks = _Codes()
        self.groups = _Codes()
        self.files: list[str] = []
        self._table: AttemptTable | None = None

    def __len__(self) -> int:
        return self._n

    def _reserve(self, extra: int) -> None:
        need = self._n + extra
        if need <= self._cap:
            return
        cap = max(need, self._cap * 2, 1024)
        for name, col in self._cols.items():
            new = np.empty(cap, dtype=col.dtype)
            new[: self._n] = col[: self._n]
            self._cols[name] = new
        self._cap = cap

    def append(self, block: Mapping[str, np.ndarray]) -> None:
        """Add rows given as one array per column of ``ATTEMPT_COLUMNS`` (all the same length)."""
        k = len(block["step"])
        if k == 0:
            return
        steps = np.asarray(block["step"], dtype=np.int64)
        order = None
        if k > 1 and bool(np.any(steps[1:] < steps[:-1])):
            order = np.argsort(steps, kind="stable")
        self._reserve(k)
        n = self._n
        cols = self._cols
        first = int(steps[order[0]] if order is not None else steps[0])
        if n == 0 or cols["step"][n - 1] <= first:
            for name in ATTEMPT_COLUMNS:
                v = np.asarray(block[name])
                cols[name][n : n + k] = v[order] if order is not None else v
        else:
            # Rows already held with a step after this block's first: merge from there on.
            pos = int(np.searchsorted(cols["step"][:n], first, side="right"))
            both = np.concatenate([cols["step"][pos:n], steps])
            merged = np.argsort(both, kind="stable")  # held rows first among equal steps
            for name in ATTEMPT_COLUMNS:
                joined = np.concatenate([cols[name][pos:n], np.asarray(block[name])])
                cols[name][pos : n + k] = joined[merged]
        self._n = n + k
        self._table = None

    def table(self) -> AttemptTable:
        if self._table is None:
            n = self._n
            c = {name: col[:n] for name, col in self._cols.items()}
            self._table = AttemptTable(
                **c,
                discard_reasons=self.discards.names,
                task_ids=self.tasks.names,
                group_ids=self.groups.names,
                files=self.files,
            )
        return self._table


# What a console line that is not a metric record can say about the run (``RunData.events``).
EVENT_KINDS = (
    "traceback",  # a whole ``Traceback (most recent call last):`` block, up to its exception line
    "oom",  # CUDA / host out of memory, OutOfMemoryError, RESOURCE_EXHAUSTED, a killed process
    "http_5xx",  # a 5xx status from a server (``503 Service Unavailable``, ``HTTP/1.1" 502``)
    "connection_refused",  # Connection refused / ECONNREFUSED / cannot connect to a server
    "timeout",  # a collective, request or server that timed out (NCCL watchdog, ReadTimeout)
    "error",  # any other ERROR / CRITICAL / FATAL line, or a line naming an Error or Exception
)


class Event(NamedTuple):
    """One line (or traceback block) of a console log that is not a metric record.

    ``time`` is unix seconds from the line's own timestamp, else from the last timestamp seen
    before it in the same file, else None (the log has no timestamps). Naive timestamps are read
    as local time; a time of day without a date takes the date of the file's modification time,
    rolled a day forward each time the clock goes back. ``kind`` is one of ``EVENT_KINDS``.
    ``text`` is the line as written (ANSI codes removed; a traceback keeps all its lines joined
    by newlines, at most 60 lines / 8,000 characters). ``step`` is the last update step read
    before the event (None: before the first step record), ``source`` the file and ``line``
    its 1-based line number (a traceback: its first line).
    """

    time: float | None
    kind: str
    text: str
    step: int | None
    source: str
    line: int


class Presence:
    """Which records each key appeared in, per stream of records (for ``RunData.missing``).

    A stream is the records that start with the same key: one file's rows, one kind of
    console line. Judging a key against its own stream keeps a file that lags another (a
    trainer's metrics behind its orchestrator's) from reading as keys gone missing.
    """

    __slots__ = ("_open", "keys", "streams")

    def __init__(self) -> None:
        self.streams: dict[str, list[int]] = {}  # stream -> distinct steps of its records
        self.keys: dict[str, list[Any]] = {}  # key -> [stream, first index, last index, count]
        # stream -> [the key set of its latest records, index of the first of them not yet
        # counted]: records with the key set of the one before cost no per-key work.
        self._open: dict[str, list[Any]] = {}

    def record(self, step: int, keys: Iterable[str], stream: str) -> None:
        """Note one record of ``stream`` at ``step`` holding ``keys``."""
        st = self.streams.get(stream)
        if st is None:
            st = self.streams[stream] = []
            self._open[stream] = [(), 0]
        if not st or st[-1] != step:
            st.append(step)
        n = len(st) - 1
        block = self._open[stream]
        kt = tuple(keys)
        if kt == block[0]:
            return
        self._count(stream, block, n - 1)
        block[0], block[1] = kt, n
        if n < len(st) and kt:
            self._count(stream, block, n)
            block[1] = n + 1

    def _count(self, stream: str, block: list[Any], end: int) -> None:
        since = block[1]
        if end < since:
            return
        table = self.keys
        for k in block[0]:
            e = table.get(k)
            if e is None:
                table[k] = [stream, since, end, end - since + 1]
            elif e[0] == stream and e[2] < since:
                e[2] = end
                e[3] += end - since + 1
            elif e[0] == stream:
                e[3] += end - e[2]
                e[2] = end

    def vanished(self) -> dict[str, int]:
        """Key -> the first step of its stream without it, for keys gone from the rest of it."""
        for stream, block in self._open.items():
            end = len(self.streams[stream]) - 1
            self._count(stream, block, end)
            block[1] = max(block[1], end + 1)
        out: dict[str, int] = {}
        for k, (stream, first, last, count) in self.keys.items():
            st = self.streams[stream]
            if len(st) - 1 - last >= 2 and count >= 3 and count * 2 >= last - first + 1:
                out[k] = st[last + 1]
        return out


@dataclass
class RunData:
    """A run, read from any format, in canonical form.

    Attributes:
        source: the path it was read from.
        format: the reader that read it (``rlvitals``, ``verl``, ``trl``...).
        info: run.json (or what the framework's logs say about the run): name, status, config,
            versions, and for reference-trainer runs the injected fault and its onset.
        metrics: per-metric series, canonical names and original keys side by side.
        original: canonical name -> the source key it was mapped from.
        evals: held-out evaluation records (step, suite, score, n, checkpoint, time).
        heartbeats: progress records (time, step, phase, ...).
        attempts: the attempts table, where the source has one.
        warnings: what the reader skipped or doubted, each naming file and line.
        source_keys: the source's own keys kept under their own names (other formats).
        events: errors, tracebacks, out-of-memory, 5xx and connection-refused lines read from
            console logs, in file order (see ``Event``); empty for sources without a console.


        resolved: source key -> (canonical name, the step of the chain that mapped it: ``user
            mapping``, ``table``, ``synonym``, ``tokens`` or ``canonical``, the rule's source
            or note). ``rlvitals formats --explain`` prints it.
        unmapped: source key -> why it stays under its own name only.
        nulls: metric name (source key or canonical) -> the step from which it has been
            ``null``/``None`` after having had a value (its series holds NaN there).
        missing: (property) metric -> first step N from which it is missing: it had values,
            then turned null (``nulls``) or vanished from every later record. The checks
            report it; see the property's docstring.
        transcripts: a transcript store other than the run directory's ``transcripts/``
            (a framework's sample dump, ``readers.samples``), or None.
        notes: what the reader chose that the user may want to know (the format picked where
            another read the file about as well, with the ``--from`` that picks the other).
    """

    source: str
    format: str
    info: dict[str, Any] = field(default_factory=dict)
    metrics: SeriesBuilder = field(default_factory=SeriesBuilder)
    original: dict[str, str] = field(default_factory=dict)
    evals: list[dict[str, Any]] = field(default_factory=list)
    heartbeats: list[dict[str, Any]] = field(default_factory=list)
    attempts: AttemptTable | None = None
    warnings: list[str] = field(default_factory=list)
    source_keys: set[str] = field(default_factory=set)
    events: list[Event] = field(default_factory=list)

    resolved: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    unmapped: dict[str, str] = field(default_factory=dict)
    nulls: dict[str, int] = field(default_factory=dict)
    presence: Presence | None = None
    transcripts: Any = None
    # What the run wrote about its own settings (``rlvitals.settings.settings_of``), once read.
    settings: RunSettings | None = None

    @property
    def missing(self) -> dict[str, int]:
        """Metric name -> the first step N from which it is missing (a NaN signal).

        Sinks store NaN differently: verl's file logger writes null, prime-rl drops the key,
        TRL logs None (TensorBoard then drops it), trackio and W&B JSON write "NaN". A metric
        (a source key or the canonical name it maps to) counts as missing from step N when
        it had values and then either
          - turned null from step N on in a store that keeps nulls itself (``nulls``; the
            rlwatch and rlprobe stores), or
          - vanished (a table's ``null`` is no value, so a key null for good vanished too):
            absent from the records after its last value (N is the first of them),
            at least two of them, while it was in half or more of the records over its own
            span and at least three times (a metric logged every k-th step or once is not
            judged missing by its gaps). Records are those of the key's own stream where the
            reader went through a ``Mapper`` (``presence``); else every step of the run.
        The canonical name a key maps to is missing where its source is. Only keys a reader
        kept from another format are judged by absence (a native run writes NaN explicitly).
        Recomputed when the run grows.
        """
        steps = self.steps()
        key = (len(steps), int(steps[-1]) if len(steps) else -1, len(self.nulls))
        cached = self.__dict__.get("_missing_cache")
        if cached is not None and cached[0] == key:
            return dict(cached[1])
        out: dict[str, int] = {}
        judged = self.source_keys | set(self.original)
        if self.presence is not None:
            out.update(self.presence.vanished())
            judged = {k for k in judged if k not in self.presence.keys}
            for target, src in self.original.items():
                if src in out:
                    out[target] = out[src]
                judged.discard(target)
        for name in sorted(judged):
            s = self.metrics.get(name)
            if s is None or len(s) < 3:
                continue
            last = int(s.steps[-1])
            hi = int(np.searchsorted(steps, last, side="right"))
            if len(steps) - hi < 2:
                continue
            lo = int(np.searchsorted(steps, int(s.steps[0]), side="left"))
            if len(s) * 2 < hi - lo:
                continue
            out[name] = int(steps[hi])
        for k in self.renamed_keys(out):
            out.pop(k, None)
        out.update(self.nulls)
        self.__dict__["_missing_cache"] = (key, out)
        return dict(out)

    def renamed_keys(self, gone: dict[str, int]) -> dict[str, tuple[int, str]]:
        """Of the keys that vanished (``gone``: key -> first step without it), those a version
        change renamed: another source key mapped to the same canonical name carries it on
        from where it stopped (prime-rl ``filters/`` -> ``detections/``, PipelineRL
        ``stats/lag`` -> ``stats/lag_max``; slime #1837, trl #6809). Key -> (step, new key);
        the canonical name they share is not missing either."""
        targets: dict[str, list[str]] = {}
        for src, (target, _kind, _detail) in self.resolved.items():
            targets.setdefault(target, []).append(src)
        out: dict[str, tuple[int, str]] = {}
        for k, step in gone.items():
            got = self.resolved.get(k)
            old = self.metrics.get(k)
            if got is None or old is None or not len(old):
                continue
            for other in targets.get(got[0], ()):
                new = self.metrics.get(other)
                if other == k or new is None or not len(new):
                    continue
                if int(new.steps[0]) > int(old.steps[-1]) and int(new.steps[-1]) >= step:
                    out[k] = (step, other)
                    out[got[0]] = (step, other)
                    break
        return out

    notes: list[str] = field(default_factory=list)

    def until(self, step: int) -> RunData:
        """The run as it stood when update ``step`` had just been written: every series,
        evaluation, heartbeat and attempt up to it, status ``running``. Replaying a finished
        run through ``until`` shows what a live check would have said at each step. At the
        run's last step the final status (finished, stopped, crashed) is kept."""
        out = RunData(source=self.source, format=self.format)
        last = self.last_step
        if last is None or step < last:
            out.info = {**self.info, "status": "running", "stop_reason": None}
        else:
            out.info = dict(self.info)  # the run ended with this step: its final status
        for name in self.metrics.names():
            s = self.metrics.get(name)
            if s is None:
                continue
            k = int(np.searchsorted(s.steps, step, side="right"))
            if k:
                out.metrics.extend(name, s.steps[:k], s.values[:k])
        out.original = dict(self.original)
        out.source_keys = set(self.source_keys)
        out.resolved = dict(self.resolved)
        out.unmapped = dict(self.unmapped)
        out.nulls = {k: v for k, v in self.nulls.items() if v <= step}
        out.transcripts = self.transcripts
        out.settings = self.settings
        if "_settings_key" in self.__dict__:
            out.__dict__["_settings_key"] = self.__dict__["_settings_key"]
        out.evals = [e for e in self.evals if isinstance(e.get("step"), int) and e["step"] <= step]
        out.events = [e for e in self.events if e.step is None or e.step <= step]
        t = self.metrics.get("time")
        cut = t.at(step) if t is not None else None
        if cut is not None:
            out.heartbeats = [h for h in self.heartbeats if (h.get("time") or 0) <= cut]
        a = self.attempts
        if a is not None:
            k = int(np.searchsorted(a.step, step, side="right"))
            cols = {
                f: getattr(a, f)[:k]
                for f in a.__dataclass_fields__
                if isinstance(getattr(a, f), np.ndarray)
            }
            out.attempts = AttemptTable(
                **cols,
                discard_reasons=a.discard_reasons,
                task_ids=a.task_ids,
                group_ids=a.group_ids,
                files=a.files,
            )
        return out

    def is_canonical(self, name: str) -> bool:
        """Whether ``name`` is a canonical metric of this run (not a source key kept as is).

        A source key can look canonical without meaning it: Miles' ``rollout/truncated`` is a
        batch truncation rate, not the episode-metadata family ``rollout/<key>``. Readers of
        other frameworks' logs record every key they kept under its own name in
        ``source_keys``; such a key counts as canonical only where a mapping produced it.
        """
        from .schema import is_canonical

        if name in self.original:
            return True
        return name not in self.source_keys and is_canonical(name)

    def canonical_names(self, prefix: str = "") -> list[str]:
        """Canonical metric names of this run, sorted (see ``is_canonical``)."""
        return [n for n in self.names(prefix) if self.is_canonical(n)]

    def series(self, name: str) -> Series | None:
        """The series of metric ``name``, or None if the run never measured it."""
        return self.metrics.get(name)

    def has(self, name: str) -> bool:
        return name in self.metrics

    def names(self, prefix: str = "") -> list[str]:
        """Metric names, optionally only those starting with ``prefix``, sorted."""
        return sorted(n for n in self.metrics.names() if n.startswith(prefix))

    def steps(self) -> np.ndarray:
        """Every step any metric was measured at, ascending (cached until new data)."""
        arrays = [s.steps for s in self._all_series()]
        key = (len(arrays), sum(len(a) for a in arrays))
        cached = self.__dict__.get("_steps_cache")
        if cached is not None and cached[0] == key:
            return cached[1]
        if not arrays:
            out = np.zeros(0, dtype=np.int64)
        else:
            # Each series' steps are sorted and unique: a sort of the union and one pass to
            # drop repeats (faster than np.unique's hashing on large runs).
            first = arrays[0]
            if all(a is first or np.array_equal(a, first) for a in arrays):
                out = first
            else:
                allst = np.sort(np.concatenate(arrays), kind="stable")
                keep = np.ones(len(allst), dtype=bool)
                keep[1:] = allst[1:] != allst[:-1]
                out = allst[keep]
        self.__dict__["_steps_cache"] = (key, out)
        return out

    def _all_series(self) -> Iterator[Series]:
        for name in self.metrics.names():
            s = self.metrics.get(name)
            if s is not None:
                yield s

    @property
    def last_step(self) -> int | None:
        st = self.series("time")
        steps = st.steps if st is not None else self.steps()
        return int(steps[-1]) if len(steps) else None

    def table(self, names: Iterable[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Dense columns over the union of steps: NaN where a metric was not measured.

        Use for display only: checks read ``series`` so "absent" and "NaN" stay apart.
        """
        names = list(names)
        steps = self.steps()
        cols = {}
        for name in names:
            s = self.series(name)
            col = np.full(len(steps), np.nan)
            if s is not None and len(s):
                col[np.searchsorted(steps, s.steps)] = s.values
            cols[name] = col
        return steps, cols
