"""prime-rl's trace stream: ``monitors/file/traces/stream/NNNNN.jsonl[.zst]`` and annotations.

Newer prime-rl (after the 2026-08-21 snapshot the ``primerl`` module follows) writes every
episode once, as it arrives, to one chunked stream, whatever its step or kind, and what is
learnt about a trace later as append-only updates, one annotation stream per producer
(PrimeIntellect-ai/prime-rl ``src/prime_rl/monitors/file/monitor.py`` ``log_episodes``,
``log_annotations``; ``monitors/file/traces/__init__.py``, ``chunks.py``, ``update.py``):

    <output_dir>/monitors/file/metrics.jsonl            the scalar rows (``readers.primerl``)
    <output_dir>/monitors/file/traces/stream/00000.jsonl.zst   sealed chunk (seekable zstd)
    <output_dir>/monitors/file/traces/stream/00001.jsonl       live chunk (plain, tailed)
    <output_dir>/monitors/file/traces/stream.index.jsonl        one row per episode
    <output_dir>/monitors/file/traces/annotations/<producer>/NNNNN.jsonl[.zst]

A stream line is a verifiers ``Episode.to_record()`` (the record the ``primerl`` module
reads), its traces stamped by the orchestrator on arrival (``info.kind``, ``info.dispatch``,
``info.arrival`` with the step it came back at). The orchestrator's updates mark the shipped
cohort (``info.effective``, ``info.ship.step``); the trainer's carry per-token streams over
a branch's tokens (``trainer_logprobs``, ``entropies``, ``mismatch_kl``), null off its loss
mask, folded onto the branch's nodes as prime-rl's ``fold_trace_updates`` does (a node takes
a stream only where every sampled position has a value). A sealed chunk needs ``pyzstd``
(``pip install -e '.[primerl]'``); a plain chunk needs nothing.

Read as: a step is the arrival step; train episodes are attempts (eval ones are held out, not
attempts); trained means shipped, not trained means a later batch shipped without it, and
undecided (the rules decide) until then; the sampler's logprobs are the sampled nodes'
``logprobs``, the trainer's the folded ``trainer_logprobs`` where every sampled token has one
(so the per-sequence mismatch is computed, ``metrics.mismatch_stats``). The index is not
needed (a stream another producer wrote has none) and the in-flight ``traces/live/`` deltas
are not attempts yet. A step is read once a later step has arrived and every annotation
stream has moved past it (or nothing has changed for ``SETTLE_SECONDS``), so its ship and
trainer updates are in when it is read.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import msgspec

from ...jsonio import (
    EXPANSION_MIN_BYTES,
    EXPANSION_RATIO,
    MAX_LINE_BYTES,
    read_complete_lines,
)
from ...model import RunData
from ...transcripts.store import TranscriptAttempt
from ._primerl_schema import (
    TOKEN_EPISODE,
    Info,
    Stamp,
    TokenNode,
    Trace,
    generation,
    info_of,
    record_reward,
    trace_reward,
)
from .base import SETTLE_SECONDS, DumpFormat, Sample, register_dump

__all__ = ["PrimeRlStream"]

TRUNCATING_STOPS = frozenset(
    {"max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens", "compaction_failed"}
)
"""The stop conditions verifiers' ``Trace.is_truncated`` counts (prime-rl ``index.py``)."""

_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


# -- what a scan needs of a line (msgspec skips the rest) ----------------------------------


class _LTrace(msgspec.Struct, gc=False):
    id: str = ""
    info: Info | None = None


class _LWork(msgspec.Struct, gc=False):
    type: str | None = None
    step: int | None = None


class _LRun(msgspec.Struct, gc=False):
    type: str | None = None
    work: _LWork | None = None


class _Light(msgspec.Struct, gc=False):
    run: _LRun | None = None
    traces: list[_LTrace] = []


class _UInfo(msgspec.Struct, gc=False):
    effective: bool | None = None
    ship: Stamp | None = None


class _UBranch(msgspec.Struct, gc=False):
    index: int = -1


class _LUpdate(msgspec.Struct, gc=False):
    trace_id: str | None = None
    info: _UInfo | None = None
    branches: list[_UBranch] = []


# -- what reading a step needs --------------------------------------------------------------


class _Branch(msgspec.Struct, gc=False):
    index: int = -1
    trainer_logprobs: list[float | None] | None = None


class _Update(msgspec.Struct, gc=False):
    branches: list[_Branch] = []


_LIGHT = msgspec.json.Decoder(_Light)
_LUPDATE = msgspec.json.Decoder(_LUpdate)
_UPDATE = msgspec.json.Decoder(_Update)
_ANY = msgspec.json.Decoder()


# -- chunks ------------------------------------------------------------------------------------


def _chunks(directory: Path) -> dict[int, Path]:
    """Chunk number -> its file now: the plain ``NNNNN.jsonl`` while it is written, else the
    sealed ``NNNNN.jsonl.zst`` (the plain file goes only once its twin is complete)."""
    out: dict[int, Path] = {}
    try:
        names = [p for p in directory.iterdir() if p.is_file()]
    except OSError:
        return {}
    for p in names:
        head, dot, rest = p.name.partition(".")
        if not dot or not head.isdigit() or rest not in ("jsonl", "jsonl.zst"):
            continue
        n = int(head)
        if rest == "jsonl" or n not in out:
            out[n] = p
    return out


def _open(path: Path) -> IO[bytes]:
    """A chunk for reading from any offset: plain, or sealed (seekable zstd frames)."""
    if path.suffix != ".zst":
        return open(path, "rb")
    try:
        import pyzstd
    except ImportError:
        raise OSError(
            "a sealed chunk (zstd): install pyzstd (the primerl extra) to read it"
        ) from None
    try:
        return pyzstd.SeekableZstdFile(path, "rb")  # type: ignore[return-value]
    except pyzstd.SeekableFormatError:
        return pyzstd.ZstdFile(path, "rb")  # type: ignore[return-value]
    except pyzstd.ZstdError as exc:
        raise OSError(str(exc)) from exc


class _Chunk:
    """A chunk open for reading, a sealed one no further than it may expand to
    (``EXPANSION_RATIO`` times its size): whatever a damaged chunk raises (pyzstd's
    ``ZstdError``, ``EOFError`` for a cut frame) comes out as ``OSError``, so every reader of a
    chunk (the scan, a step's episodes, the trainer's updates) skips it the same way."""

    def __init__(self, path: Path) -> None:
        self.f = _open(path)
        self._damaged: tuple[type[Exception], ...] = (EOFError, ValueError)
        self.limit: int | None = None
        self.cut = False  # the sealed chunk holds more than its limit
        self._at = 0
        if path.suffix == ".zst":
            try:
                size = path.stat().st_size
            except OSError:
                size = 0
            self.limit = max(EXPANSION_MIN_BYTES, EXPANSION_RATIO * size)
            import pyzstd  # _open imported it

            self._damaged += (pyzstd.ZstdError,)

    def __enter__(self) -> _Chunk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _room(self, size: int) -> int:
        if self.limit is None:
            return size
        room = self.limit - self._at
        if size < 0 or size > room:
            size = room
        if size <= 0 and not self.cut:
            self.cut = bool(self._call(self.f.read, 1))
        return max(size, 0)

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self._damaged as exc:
            raise OSError(str(exc) or type(exc).__name__) from exc

    def seek(self, offset: int) -> int:
        if self.limit is not None:
            offset = min(offset, self.limit)
        self._at = self._call(self.f.seek, offset)
        return self._at

    def read(self, size: int = -1) -> bytes:
        size = self._room(size)
        data: bytes = self._call(self.f.read, size) if size else b""
        self._at += len(data)
        return data

    def readline(self, size: int = -1) -> bytes:
        size = self._room(size)
        data: bytes = self._call(self.f.readline, size) if size else b""
        self._at += len(data)
        return data

    def close(self) -> None:
        self.f.close()


class _Lines:
    """Lines read at their addresses, each chunk opened once for a step's reads (a step's
    addresses ascend within a chunk, so a sealed chunk decompresses each frame once)."""

    def __init__(self) -> None:
        self.files: dict[tuple[Path, int], _Chunk] = {}
        self.listed: dict[Path, dict[int, Path]] = {}

    def path(self, directory: Path, chunk: int) -> Path | None:
        if directory not in self.listed:
            self.listed[directory] = _chunks(directory)
        return self.listed[directory].get(chunk)

    def read(self, directory: Path, chunk: int, offset: int) -> bytes | None:
        f = self.files.get((directory, chunk))
        if f is None:
            path = self.path(directory, chunk)
            if path is None:
                return None
            f = self.files[(directory, chunk)] = _Chunk(path)
        f.seek(offset)
        line = f.readline(MAX_LINE_BYTES + 1)
        return line if line.endswith(b"\n") else None

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        self.files.clear()


class _Scan:
    """How far a stream's chunks were read: a plain chunk is read on from where the last
    complete line ended; a sealed one, once, past what was read of it while plain."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.pos: dict[int, int] = {}
        self.sealed: set[int] = set()

    def lines(self, warn: Callable[[str], None]) -> Iterator[tuple[int, int, bytes]]:
        """(chunk, offset, line) of each complete line not read before, read in blocks; a
        chunk that cannot be read, or is damaged part way, is one warning (the lines before
        the damage are kept)."""
        for n, path in sorted(_chunks(self.dir).items()):
            if n in self.sealed:
                continue
            try:
                with _Chunk(path) as f:
                    yield from self._lines(n, path, f, warn)
                    if f.cut:
                        warn(
                            f"{path}: expands to more than {EXPANSION_RATIO} times its size "
                            f"(a decompression bomb?); read the first {f.limit} bytes only"
                        )
            except OSError as exc:
                warn(f"{path}: cannot read ({exc}); skipped")
                self.sealed.add(n)
                continue
            if path.suffix == ".zst":
                self.sealed.add(n)  # complete: never grows again

    def _lines(
        self, n: int, path: Path, f: _Chunk, warn: Callable[[str], None]
    ) -> Iterator[tuple[int, int, bytes]]:
        offset = self.pos.get(n, 0)
        for _lineno, end, line in read_complete_lines(f, offset, blank_runs=True):
            if line is None:
                warn(f"{path}: line at byte {offset} too long; skipped")
            elif line.strip():
                yield n, offset, line
            offset = self.pos[n] = end


def _episode_step(ep: _Light, current: int | None) -> tuple[str, int | None]:
    """(kind, arrival step) of an episode, as prime-rl's ``episode_kind`` reads the kind; an
    episode that failed before any trace keeps the step the stream is at."""
    kind = None
    step = None
    for t in ep.traces:
        if t.info is not None:
            if kind is None and t.info.kind in ("train", "eval"):
                kind = t.info.kind
            if step is None and t.info.arrival is not None:
                step = t.info.arrival.step
    run = ep.run
    if kind is None:
        kind = (run.work.type if run and run.work else None) or (run.type if run else None)
    if step is None:
        step = current if current is not None else (run.work.step if run and run.work else None)
    return kind or "eval", step


def _fold(nodes: list[TokenNode], streams: list[tuple[int, list[float | None]]]) -> dict[int, list]:
    """Node index -> its trainer logprobs (over its sampled positions), from branch streams
    full-length over each root-to-leaf path (prime-rl ``update.py`` ``fold_trace_updates``:
    newest wins; a node takes the stream only where all its sampled positions are covered)."""
    n = len(nodes)
    parents = {p for nd in nodes if isinstance(p := nd.parent, int) and 0 <= p < n}
    paths = []
    for leaf in (i for i in range(n) if i not in parents):
        path: list[int] = []
        seen: set[int] = set()
        j: int | None = leaf
        while isinstance(j, int) and 0 <= j < n and j not in seen:
            seen.add(j)
            path.append(j)
            j = nodes[j].parent
        paths.append(path[::-1])
    out: dict[int, list] = {}
    for index, stream in streams:
        if not 0 <= index < len(paths):
            continue
        cursor = 0
        for j in paths[index]:
            node = nodes[j]
            span = stream[cursor : cursor + len(node.token_ids)]
            cursor += len(node.token_ids)
            if len(span) < len(node.token_ids):
                break
            values = [v for v, m in zip(span, node.mask) if m]
            if values and all(v is not None for v in values):
                out[j] = values
    return out


class _State:
    """What the scans of one stream found so far: every reader of the same ``traces`` folder
    shares it (``find``, the sniffers and the run's own source each hold a format), so the
    stream is scanned once and then only for what it gained."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.stream = _Scan(root / "stream")
        self.notes: dict[Path, _Scan] = {}
        self.steps: dict[int, list[tuple[int, int]]] = {}  # arrival step -> (chunk, offset)
        self.last: int | None = None
        self.ship: dict[str, int] = {}  # trace id -> the step its batch shipped at
        self.streamed: dict[str, list[tuple[Path, int, int]]] = {}  # trace id -> its updates
        self.reach: dict[Path, int] = {}  # annotation stream -> the last step it covers
        self.said: list[str] = []  # what the scans found to warn of, for every run bound to it


_STATES: dict[Path, _State] = {}


class PrimeRlStream(DumpFormat):
    name = "prime-rl-stream"
    priority = 30
    sample_dirs = ("traces",)
    description = (
        "prime-rl trace stream (monitors/file/traces/stream/NNNNN.jsonl[.zst], "
        "annotations/<producer>/ folded on)"
    )
    default_subdir = None  # found from the run's folder or ``monitors/file`` (``root``)
    versioned = True
    has_tokens = True
    has_truncation = True

    def __init__(self) -> None:
        self._sink: Callable[[str], None] | None = None
        self._st: _State | None = None
        self._told = 0  # how many of the state's warnings went to this run

    def bind(self, run: RunData) -> None:
        self._sink = run.warnings.append
        self._flush()

    def _flush(self) -> None:
        """Pass on what the scans warned of and this run was not told yet: a scan is shared
        (a sniffer's, an earlier read's in this process), its warnings are every run's."""
        if self._sink is not None and self._st is not None:
            for message in self._st.said[self._told :]:
                self._sink(message)
            self._told = len(self._st.said)

    def _warn(self, message: str) -> None:
        if self._st is not None:
            self._st.said.append(message)
            self._flush()
        elif self._sink is not None:
            self._sink(message)

    @staticmethod
    def root(d: Path) -> Path | None:
        """The ``traces`` folder at or under ``d`` (a run's output dir, ``monitors/file`` or
        ``traces``)."""
        for c in (d, d / "traces", d / "monitors" / "file" / "traces"):
            if (c / "stream").is_dir() and _chunks(c / "stream"):
                return c
        return None

    def sniff(self, d: Path) -> bool:
        return self.root(d) is not None

    def _scan(self, root: Path, warn: Callable[[str], None]) -> None:
        if self._st is None or self._st.root != root:
            self._st = _STATES.setdefault(root, _State(root))
            self._told = 0
            self._flush()
        st = self._st
        for n, offset, line in st.stream.lines(warn):
            try:
                ep = _LIGHT.decode(line)
            except _ERRORS as exc:
                warn(f"{st.stream.dir}/{n:05d}: byte {offset}: not an episode ({exc}); skipped")
                continue
            kind, step = _episode_step(ep, st.last)
            if step is None:
                continue
            st.last = step if st.last is None else max(st.last, step)
            if kind == "train":
                st.steps.setdefault(step, []).append((n, offset))
        notes = root / "annotations"
        try:
            producers = sorted(p for p in notes.iterdir() if p.is_dir())
        except OSError:
            producers = []
        for d in producers:
            scan = st.notes.setdefault(d, _Scan(d))
            for n, offset, line in scan.lines(warn):
                try:
                    u = _LUPDATE.decode(line)
                except _ERRORS:
                    continue
                if not u.trace_id:
                    continue
                ship = u.info.ship if u.info is not None else None
                if ship is not None and ship.step is not None:
                    st.ship[u.trace_id] = ship.step
                reach = st.ship.get(u.trace_id)
                if reach is not None:
                    st.reach[d] = max(st.reach.get(d, reach), reach)
                if u.branches:
                    st.streamed.setdefault(u.trace_id, []).append((d, n, offset))

    def _quiet(self, root: Path) -> bool:
        newest = 0.0
        assert self._st is not None
        for d in [root / "stream", *self._st.notes]:
            for p in _chunks(d).values():
                try:
                    newest = max(newest, p.stat().st_mtime)
                except OSError:
                    return False
        return time.time() - newest >= SETTLE_SECONDS

    def step_files(self, d: Path) -> dict[int, list[Path]]:
        root = self.root(d)
        if root is None:
            return {}
        self._scan(root, self._warn)
        quiet = self._quiet(root)
        st = self._st
        assert st is not None
        last = st.last if st.last is not None else -1
        chunks = _chunks(root / "stream")
        out: dict[int, list[Path]] = {}
        for step, where in st.steps.items():
            ready = quiet or (step < last and all(st.reach.get(p, -1) > step for p in st.notes))
            if ready:
                out[step] = sorted({chunks[n] for n, _o in where if n in chunks})
        return out

    def _trained(self, trace_id: str, step: int) -> bool | None:
        st = self._st
        if st is None:
            return None
        if trace_id in st.ship:
            return True
        ships = [st.reach[p] for p in st.notes if p in st.reach]
        return False if ships and max(ships) > step else None

    def _trainer(
        self, t: Trace[TokenNode], lines: _Lines, warn: Callable[[str], None]
    ) -> list[float] | None:
        """The trainer's logprobs of the trace's sampled tokens, where every one has one."""
        streams: list[tuple[int, list[float | None]]] = []
        for d, n, offset in self._st.streamed.get(t.id, []) if self._st is not None else []:
            try:
                line = lines.read(d, n, offset)
                u = _UPDATE.decode(line) if line else None
            except (OSError, *_ERRORS) as exc:
                warn(f"{d}: chunk {n}: cannot read an update ({exc}); skipped")
                continue
            if u is not None:
                streams += [(b.index, b.trainer_logprobs) for b in u.branches if b.trainer_logprobs]
        if not streams:
            return None
        folded = _fold(t.nodes, streams)
        out: list[float] = []
        for j, node in enumerate(t.nodes):
            if node.sampled and node.logprobs:
                got = folded.get(j)
                if got is None or len(got) != len(node.logprobs):
                    return None
                out.extend(got)
        return out or None

    def _records(
        self, step: int, lines: _Lines, warn: Callable[[str], None], decoder: Any
    ) -> Iterator[tuple[Path, int, Any]]:
        st = self._st
        if st is None:
            return
        d = st.root / "stream"
        for n, offset in st.steps.get(step, []):
            path = lines.path(d, n)
            try:
                line = lines.read(d, n, offset)
                if line is None:
                    raise OSError("the line is gone")
                yield path or d, offset, decoder.decode(line)
            except (OSError, *_ERRORS) as exc:
                warn(f"{path or d}: byte {offset}: cannot read the episode ({exc}); skipped")

    def read_step(
        self,
        step: int,
        files: list[Path],
        index: Callable[[Path], int],
        warn: Callable[[str], None],
    ) -> Iterator[Sample]:
        lines = _Lines()
        try:
            yield from self._samples(step, lines, index, warn)
        finally:
            lines.close()

    def _samples(
        self, step: int, lines: _Lines, index: Callable[[Path], int], warn: Callable[[str], None]
    ) -> Iterator[Sample]:
        for p, offset, ep in self._records(step, lines, warn, TOKEN_EPISODE):
            traces = ep.trainable()
            rewards = [r for t in traces if (r := trace_reward(t)) is not None]
            tokens = 0
            truncated = False
            sampler: list[float] = []
            trainer: list[float] | None = []
            ids: list[int] = []
            when = math.nan
            for t in traces:
                for c in t.calls:
                    tokens += c.usage.completion_tokens if c.usage is not None else 0
                last = next((c for c in reversed(t.calls) if c.error is None), None)
                truncated |= t.stop_condition in TRUNCATING_STOPS or (
                    last is not None and last.finish_reason == "length"
                )
                for node in t.nodes:
                    if node.sampled:
                        sampler.extend(node.logprobs)
                        ids.extend(i for i, m in zip(node.token_ids, node.mask) if m)
                tl = self._trainer(t, lines, warn) if trainer is not None else None
                trainer = None if tl is None else [*(trainer or []), *tl]
                info = info_of(t.info)
                if info is not None and info.arrival is not None and info.arrival.time:
                    when = info.arrival.time
            shipped = [self._trained(t.id, step) for t in traces]
            trained = True if True in shipped else (False if False in shipped else None)
            group = ep.group.id if ep.group is not None and ep.group.id else ep.id
            yield Sample(
                step=step,
                group=group,
                task_id=group,
                reward=sum(rewards) / len(rewards) if rewards else None,
                policy_version=ep.policy_version(),
                response_tokens=tokens or len(sampler),
                truncated=truncated,
                trained=trained,
                discard_reason=None if trained is not False else "filtered",
                sampler_logprobs=sampler or None,
                trainer_logprobs=trainer if sampler and trainer else None,
                token_ids=ids or None,
                file=index(p),
                offset=offset,
                time=when,
                error=ep.error(),
            )

    def transcripts(
        self, step: int, files: list[Path], warn: Callable[[str], None]
    ) -> Iterator[TranscriptAttempt]:
        lines = _Lines()
        try:
            for i, (_p, _offset, ep) in enumerate(self._records(step, lines, warn, _ANY)):
                yield _transcript(step, i, ep if isinstance(ep, dict) else {}, self._trained)
        finally:
            lines.close()


def _transcript(
    step: int, i: int, ep: dict[str, Any], trained: Callable[[str, int], bool | None]
) -> TranscriptAttempt:
    traces = [t for t in ep.get("traces") or [] if isinstance(t, dict)]
    decided = [trained(str(t.get("id") or ""), step) for t in traces]
    gens = [generation(t, trains) for t, trains in zip(traces, decided)]
    rewards = [r for t in traces if (r := record_reward(t)) is not None]
    group = ep.get("group")
    gid = group.get("id") if isinstance(group, dict) else None
    return TranscriptAttempt(
        step=step,
        index=i,
        attempt_id=f"{step}-{i}",
        group_id=f"{step}/{gid}" if gid else None,
        task_id=None,
        reward=sum(rewards) / len(rewards) if rewards else None,
        trained=True if True in decided else (False if False in decided else None),
        generations=gens,
    )


register_dump(PrimeRlStream)
