"""What every sample-dump reader shares: one sample per attempt, one step at a time.

A dump format (one module per framework) lists its step files and turns one step's files into
``Sample`` rows, streaming; it also yields the same rows again as transcripts, text and all,
when a view or a check asks for them. ``SampleSource`` does the rest for every format:

- the attempts table (``model.AttemptTable``), one row per sample, grown step by step;
- per-step aggregates from ``metrics.decide`` and ``metrics.step_metrics`` (group std, the
  no-variance share, all/none solved, mean with unusable, mismatch from both logprob arrays),
  added only where the run's own step records lack them, so the framework's numbers win;
- a transcript store over the dump files (``SampleTranscripts``), read lazily per step.

Memory is bounded by one step: a step's rows are aggregated and dropped, text is never held
(a row keeps its file and byte offset or row index), and a step's files are read again only
when a view asks for its transcripts.

A step is read once it is settled: a later step has files, the files have not changed for
``SETTLE_SECONDS``, or the run is read whole (``finish``). A step file that changes after it
was read is not read again (the frameworks write each step's file once).
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ...errors import MissingExtraError
from ...jsonio import read_json_objects
from ...metrics import Attempt, RunState, decide, step_metrics
from ...model import AttemptTableBuilder, RunData
from ...transcripts.degenerate import DegenerateCounts
from ...transcripts.store import Generation, TranscriptAttempt, TranscriptStore
from ..base import MAX_STEP

__all__ = [
    "DUMP_FORMATS",
    "DumpFormat",
    "Sample",
    "SampleSource",
    "SampleTranscripts",
    "digest",
    "jsonl_records",
    "number",
    "register_dump",
]

SETTLE_SECONDS = 3.0
# Frameworks decide what trains themselves: no group is rejected for lost attempts here.
_NO_LIMIT = 1 << 30
# Computed metrics that would be made up where the dump has no sampler version / no tokens.
_NEEDS_VERSIONS = ("freshness/",)
_NEEDS_TOKENS = ("response/", "perf/tokens")
# Counts no dump records (retries are the writer's own): left out, never a made-up 0.
_NEVER = ("rollouts/retries",)
# What a dump of one sample per prompt cannot say (``DumpFormat.grouped``).
_GROUPED = (
    "groups/",
    "discard/groups/",
    "reward/group_std_mean",
    "reward/mean_with_unusable",
)
# Per step, the samples whose reward is NaN or inf (or, where the format says a missing reward
# is a NaN the dump stored, missing): a count the non-finite check reads like a trainer's own
# nan_count. Frameworks average such rewards away (TRL's nanmean), so the step records look
# normal and only the dump shows it.
NONFINITE_REWARDS = "reward/nonfinite_count"


@dataclass
class Sample:
    """One attempt as a framework dumped it (no text: that is read again on demand)."""

    step: int
    group: str  # the group key within the step (a GRPO group: same prompt, sampled together)
    task_id: str
    reward: float | None
    policy_version: int | None = None  # None: the dump does not say
    response_tokens: int = 0
    truncated: bool = False
    discard_reason: str | None = None  # the framework's own decision, where it records one
    trained: bool | None = None  # the framework's own decision (None: decided by the rules)
    metadata: dict[str, Any] = field(default_factory=dict)
    sampler_logprobs: Any = None  # per generated token, from the sampler
    trainer_logprobs: Any = None  # the trainer's logprobs of the same tokens
    token_ids: Any = None  # the generated token ids (degenerate-text measures), where dumped
    file: int = 0  # index into the source's files
    offset: int = -1  # byte offset of its line (JSON Lines) or its row (Parquet, .pt)
    time: float = math.nan
    error: str | None = None  # "rollout_failed/<Type>" when the framework says it failed


def _degenerate(
    samples: list[Sample], vocab_size: int | None
) -> tuple[dict[str, float], dict[str, list[int]]]:
    """Degenerate-text rates of one step (``transcripts.degenerate``), over every sample that
    carries its generated token ids or its sampled logprobs, and the samples each measure
    flagged."""
    if not any(s.token_ids is not None or s.sampler_logprobs is not None for s in samples):
        return {}, {}
    counts = DegenerateCounts(vocab_size=vocab_size)
    for i, s in enumerate(samples):
        counts.add(i, s.token_ids, s.sampler_logprobs)
    return counts.rates(), counts.flagged


def digest(value: Any) -> str:
    """A short stable key for a prompt (text or chat messages), without holding the text."""
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
    else:
        data = repr(value).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def _is_dir(e: os.DirEntry[str]) -> bool:
    try:
        return e.is_dir()
    except OSError:  # a link looping on itself
        return False


def number(value: Any) -> float | None:
    """A reward or score as a float: numbers, numpy scalars, NaN spelled as text; else None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        if value in ("NaN", "nan"):
            return math.nan
        if value in ("Infinity", "inf"):
            return math.inf
        if value in ("-Infinity", "-inf"):
            return -math.inf
        return None
    item = getattr(value, "item", None)
    if callable(item):
        try:
            v = item()
        except (TypeError, ValueError, RuntimeError):
            return None
        return float(v) if isinstance(v, (int, float)) else None
    return None


D = TypeVar("D", bound="DumpFormat")
DUMP_FORMATS: dict[str, type[DumpFormat]] = {}  # name -> class, filled by register_dump


def register_dump(cls: type[D]) -> type[D]:
    """Add a dump format to the registry (its module calls this at import, as readers call
    ``register``)."""
    DUMP_FORMATS[cls.name] = cls
    return cls


class DumpFormat:
    """One framework's sample dump. Subclasses fill in the layout and the record shape, and
    register with ``register_dump`` (the module is found by itself: nothing else lists it)."""

    name = ""
    description = ""
    #: the default place of the dump relative to the directory of the run's log, if any
    default_subdir: str | None = None
    #: sniffing order among the dump formats (lower: tried first)
    priority = 50
    #: looked for by default beside a log (``samples.find``); False for a dump with no default
    #: place, read only where named (``--samples``)
    beside = True
    #: folder names (regular expressions) that hold this dump beside a log: discovery never
    #: takes them for runs of their own
    sample_dirs: tuple[str, ...] = ()
    #: a folder holding this dump's files (``file_pattern``) and no log is one run, its
    #: samples read alone, wherever discovery finds it
    alone = False
    #: whether the dump records the sampler's weight version of each sample
    versioned = False
    #: whether the dump records each sample's generated tokens
    has_tokens = False
    # The tokenizer's vocabulary size, where the dump says it (gibberish is measured against
    # a uniform guess over it; without it, not measured).
    vocab_size: int | None = None
    #: whether the dump says which samples hit the token limit
    has_truncation = False
    #: whether a sample without a reward (and without a failure of its own) is a reward
    #: that came out NaN or None and the dump stored as missing, rather than one not graded
    missing_reward_is_nan = False
    # Samples are sampled together in groups (GRPO): False where a dump keeps one sample per
    # prompt, so the group statistics (groups/*, the group spread) would be made up.
    grouped = True

    def bind(self, run: RunData) -> None:
        """Called before each poll with the run the samples join (its step records can tell
        a dump what its columns mean, as TRL's ``rewards/<func>/mean`` names reward columns)."""

    def sniff(self, d: Path) -> bool:
        """Whether ``d`` is a directory holding this dump."""
        return bool(self.step_files(d))

    #: a dump of one file per step named by this pattern (its first group the step), read by
    #: the default ``step_files``; layouts of another shape override ``step_files``
    file_pattern: re.Pattern[str] | None = None
    #: or a dump of one folder per step named by this pattern, the step's files those of
    #: ``files_in`` the folder
    dir_pattern: re.Pattern[str] | None = None

    def files_in(self, step_dir: Path) -> list[Path]:
        """The files of one step's folder (``dir_pattern``), in reading order."""
        raise NotImplementedError

    def step_files(self, d: Path) -> dict[int, list[Path]]:
        """Step -> its files, in reading order (default: the files of ``d`` matching
        ``file_pattern``, one per step, or the files in its folders matching
        ``dir_pattern``)."""
        pattern = self.file_pattern or self.dir_pattern
        if pattern is None:
            raise NotImplementedError
        out: dict[int, list[Path]] = {}
        try:
            with os.scandir(d) as it:
                for e in it:
                    m = pattern.match(e.name)
                    if not m:
                        continue
                    if self.file_pattern is not None:
                        try:
                            kept = e.is_file()
                        except OSError:  # a link looping on itself: reading it says why
                            kept = True
                        if kept:
                            out[int(m.group(1))] = [Path(e.path)]
                    elif _is_dir(e):
                        files = self.files_in(Path(e.path))
                        if files:
                            out[int(m.group(1))] = files
        except (FileNotFoundError, NotADirectoryError):
            return {}
        return out

    def records(
        self, files: list[Path], warn: Callable[[str], None]
    ) -> Iterator[tuple[Path, int, Any]]:
        """(file, byte offset or row, record) of one step's files, in reading order: JSON
        Lines by default (``jsonl_records``)."""
        return jsonl_records(files, warn)

    def sample_of(self, step: int, record: Any) -> Sample:
        """One record as a sample (``read_step`` adds its file, offset and time)."""
        raise NotImplementedError

    def transcript_of(self, step: int, i: int, record: Any) -> TranscriptAttempt:
        """One record as a transcript, text included (the ``i``-th of its step)."""
        raise NotImplementedError

    def read_step(
        self,
        step: int,
        files: list[Path],
        index: Callable[[Path], int],
        warn: Callable[[str], None],
    ) -> Iterator[Sample]:
        """The samples of one step, in file order (``index`` gives a file's number): each
        record of ``records`` as ``sample_of`` reads it, unless a format reads otherwise."""
        for p, offset, rec in self.records(files, warn):
            s = self.sample_of(step, rec)
            s.file, s.offset, s.time = index(p), offset, file_time(p)
            yield s

    def transcripts(
        self, step: int, files: list[Path], warn: Callable[[str], None]
    ) -> Iterator[TranscriptAttempt]:
        """The same samples as transcripts (text included), in the same order."""
        for i, (_p, _offset, rec) in enumerate(self.records(files, warn)):
            yield self.transcript_of(step, i, rec)


def transcript(
    step: int,
    index: int,
    *,
    group: str | None,
    task_id: str | None,
    reward: float | None,
    trained: bool | None,
    prompt: Any,
    completion: Any,
    policy_version: int | None = None,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    finish_reason: str | None = None,
) -> TranscriptAttempt:
    """A transcript attempt with one generation; its id is the sample's attempt id."""
    return TranscriptAttempt(
        step=step,
        index=index,
        attempt_id=f"{step}-{index}",
        group_id=f"{step}/{group}" if group is not None else None,
        task_id=task_id,
        reward=reward,
        trained=trained,
        generations=[
            Generation(
                prompt=prompt,
                completion=completion,
                policy_version=policy_version,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                finish_reason=finish_reason,
                trains=trained,
            )
        ],
    )


class SampleSource:
    """A framework's sample dump read into a run: attempts, step aggregates, transcripts."""

    def __init__(self, directory: Path, fmt: DumpFormat, run: RunData) -> None:
        self.dir = directory
        self.format = fmt
        self.run = run
        self._builder = AttemptTableBuilder()
        self._file_index: dict[str, int] = {}
        self._done: set[int] = set()
        self._mine: set[str] = set()  # metric names this source added
        self._state = RunState()
        self._listing: dict[int, list[Path]] = {}
        self.unread: str | None = None  # why the dump cannot be read here (an extra missing)
        self.transcripts = SampleTranscripts(self)
        run.transcripts = self.transcripts
        run.info.setdefault(
            "samples", {"format": fmt.name, "path": str(directory), "rule": fmt.description}
        )

    # -- reading -------------------------------------------------------------------------

    def _index(self, p: Path) -> int:
        key = str(p)
        i = self._file_index.get(key)
        if i is None:
            i = self._file_index[key] = len(self._builder.files)
            self._builder.files.append(key)
        return i

    def poll(self, final: bool = False) -> bool:
        """Read the steps that settled since the last call; True if any was read. A dump
        that needs an extra not installed is not read, with one warning saying which extra
        reads it: the run is judged from its step records (it never costs the verdict)."""
        if self.unread is not None:
            return False
        self.format.bind(self.run)
        try:
            listing = self.format.step_files(self.dir)
        except OSError as exc:
            self._warn(f"{self.dir}: cannot list the sample dump ({exc.strerror or exc})")
            return False
        for step in [s for s in listing if not 0 <= s <= MAX_STEP]:
            files = listing.pop(step)
            if step not in self._done:
                self._done.add(step)
                self._warn(f"{files[0]}: step {step} out of range (0..2**63-1); skipped")
        self._listing = listing
        todo = sorted(s for s in listing if s not in self._done)
        if not todo:
            return False
        last = max(listing)
        now = time.time()
        changed = False
        for step in todo:
            files = listing[step]
            if not final and step == last and not self._settled(files, now):
                continue  # the newest step may still be being written
            self._done.add(step)
            try:
                self._ingest(step, files)
            except MissingExtraError as exc:
                self._done.discard(step)
                self._not_read(str(exc))
                break
            except OSError as exc:
                self._warn(f"{files[0]}: cannot read ({exc.strerror or exc}); step {step} skipped")
                continue
            changed = True
        if changed and len(self._builder):
            self.run.attempts = self._builder.table()
        return changed

    def _not_read(self, why: str) -> None:
        """The dump cannot be read here (``why``: the extra that reads it): said once, in
        ``info["samples"]["unread"]`` and a warning; the run keeps its step records."""
        self.unread = why
        info = self.run.info.get("samples")
        if isinstance(info, dict):
            info["unread"] = why
        self._warn(f"{self.dir}: sample dump not read: {why}; judged from the step records alone")

    @staticmethod
    def _settled(files: list[Path], now: float) -> bool:
        try:
            newest = max(p.stat().st_mtime for p in files)
        except (OSError, ValueError):
            return False
        return now - newest >= SETTLE_SECONDS

    def _warn(self, message: str) -> None:
        self.run.warnings.append(message)

    def _ingest(self, step: int, files: list[Path]) -> None:
        samples = list(self.format.read_step(step, files, self._index, self._warn))
        if not samples:
            return
        versioned = self.format.versioned and all(s.policy_version is not None for s in samples)
        attempts: list[Attempt] = []
        trainer: dict[str, Any] = {}
        for i, s in enumerate(samples):
            aid = f"{step}-{i}"
            # A dump without versions comes from a synchronous trainer: sampled with the
            # weights being trained (lag 0) for the decision; the table keeps "unknown".
            pv = s.policy_version if s.policy_version is not None else step
            a = Attempt(
                step,
                aid,
                f"{step}/{s.group}",
                s.task_id,
                pv,
                s.reward,
                False,
                None,
                int(s.response_tokens),
                bool(s.truncated),
                None,
                s.time,
                None,
                s.metadata,
                0,
                None,
                s.error,
                s.sampler_logprobs,
            )
            attempts.append(a)
            if s.trainer_logprobs is not None and s.sampler_logprobs is not None:
                trainer[aid] = s.trainer_logprobs
        kw: dict[str, Any] = {"max_steps_off_policy": _NO_LIMIT, "max_group_losses": _NO_LIMIT}
        # No group to judge (one sample per prompt): each sample trains as the dump has it.
        given: dict[str, str | None] = (
            {} if self.format.grouped else {a.attempt_id: None for a in attempts}
        )
        decision = decide(attempts, step, explicit=given, **kw)
        # The framework's own "not trained" (filtered, masked, removed) where the rules would
        # train it; a group the framework trains with zero advantage stays no_variance here.
        explicit = {
            a.attempt_id: s.discard_reason or "filtered"
            for a, s in zip(attempts, samples)
            if s.trained is False and a.trained
        }
        if explicit:
            decision = decide(attempts, step, explicit={**given, **explicit}, **kw)
        problems: list[str] = []
        m = step_metrics(decision, attempts, self._state, trainer or None, problems)
        for p in problems[:1]:
            self._warn(f"{self.dir}: step {step}: {p}")
        if not self.format.has_truncation:
            m.pop("response/truncated_rate", None)  # every sample "not truncated": made up
        if not self.format.grouped:  # one sample per prompt: every group "has no variance"
            for name in [k for k in m if k.startswith(_GROUPED)]:
                del m[name]
        m[NONFINITE_REWARDS] = float(sum(self._nonfinite(s) for s in samples))
        rates, flagged = _degenerate(samples, self.format.vocab_size)
        m.update(rates)
        if any(flagged.values()):
            # The samples each measure flagged, for the text check to cite (a few per step).
            flags = self.run.info.setdefault("text_flags", {})
            flags[step] = {k: [f"{step}-{i}" for i in v[:8]] for k, v in flagged.items() if v}
        # Each sample's sequence ratio, for the mismatch tail to cite (a dump has no attempt
        # records of ours to read it back from): the step's furthest off, a few.
        ratios = [(a.mismatch["tme"], a.attempt_id) for a in attempts if a.mismatch]
        if ratios:
            self.run.info.setdefault("mismatch_ratios", {})[step] = [
                {"step": step, "attempt_id": i, "seq_ratio": float(f"{r:.3g}")}
                for r, i in sorted(ratios, key=lambda r: -r[0])[:8]
            ]
        self._add_metrics(step, m, versioned, self.format.has_tokens)
        self._add_rows(step, samples, attempts, versioned)

    def _nonfinite(self, s: Sample) -> bool:
        """Whether a sample's reward is NaN or inf, or missing where missing means NaN; a
        sample that failed is counted by its failure, not here."""
        if s.error is not None:
            return False
        if s.reward is None:
            return self.format.missing_reward_is_nan
        return not math.isfinite(s.reward)

    def _add_metrics(
        self, step: int, m: dict[str, float | None], versioned: bool, has_tokens: bool
    ) -> None:
        metrics = self.run.metrics
        for name, value in m.items():
            if value is None:
                continue
            if (
                name in _NEVER
                or (not versioned and name.startswith(_NEEDS_VERSIONS))
                or (not has_tokens and name.startswith(_NEEDS_TOKENS))
            ):
                continue
            if name in metrics and name not in self._mine:
                continue  # the run's own step records measure it: theirs win
            self._mine.add(name)
            metrics.add(step, name, float(value))

    def _add_rows(
        self, step: int, samples: list[Sample], attempts: list[Attempt], versioned: bool
    ) -> None:
        b = self._builder
        n = len(samples)
        pv = np.array(
            [s.policy_version if s.policy_version is not None else -1 for s in samples],
            dtype=np.int64,
        )
        lag = np.where(pv >= 0, step - pv, -1)
        rewards = [a.reward for a in attempts]
        block = {
            "step": np.full(n, step, dtype=np.int64),
            "reward": np.array([math.nan if r is None else r for r in rewards], dtype=np.float64),
            "reward_missing": np.array([r is None for r in rewards], dtype=np.bool_),
            "policy_version": pv,
            "trained": np.array([a.trained for a in attempts], dtype=np.bool_),
            "discard_code": b.discards.encode([a.discard_reason for a in attempts]),
            "task_code": b.tasks.encode([a.task_id for a in attempts]),
            "group_code": b.groups.encode([a.group_id for a in attempts]),
            "response_tokens": np.array([a.response_tokens for a in attempts], dtype=np.int64),
            "truncated": np.array([a.truncated for a in attempts], dtype=np.bool_),
            "lag": lag.astype(np.int64),
            "time": np.array([s.time for s in samples], dtype=np.float64),
            "duration": np.full(n, math.nan),
            "shard": np.array([s.file for s in samples], dtype=np.int16),
            "offset": np.array([s.offset for s in samples], dtype=np.int64),
        }
        b.append(block)


class SampleTranscripts(TranscriptStore):
    """The transcripts of a sample dump, read lazily from the dump's own files, one step at
    a time (the interface of ``TranscriptStore``, so scans, checks and views use it as is)."""

    def __init__(self, source: SampleSource) -> None:
        super().__init__(source.dir)  # its warnings: the judging report's, never the run's
        self.source = source
        self.dir = source.dir

    @property
    def exists(self) -> bool:
        return bool(self.source._done)

    def steps(self, refresh: bool = False) -> list[int]:
        return sorted(self.source._done)

    def _files(self, step: int) -> list[Path]:
        return self.source._listing.get(step, [])

    def path(self, step: int) -> Path:
        files = self._files(step)
        return files[0] if files else self.dir / f"step-{step}"

    def file_key(self, step: int) -> tuple[int, int] | None:
        files = self._files(step)
        if not files:
            return None
        size = mtime = 0
        try:
            for p in files:
                st = p.stat()
                size += st.st_size
                mtime = max(mtime, st.st_mtime_ns)
        except OSError:
            return None
        return (size, mtime)

    def iter_step(self, step: int) -> Iterator[TranscriptAttempt]:
        files = self._files(step)
        if not files:
            return
        warned = []

        def warn(message: str) -> None:
            warned.append(message)

        try:
            yield from self.source.format.transcripts(step, files, warn)
        except OSError as exc:
            self.warn(files[0], f"cannot read ({exc.strerror or exc}); skipped")
        for message in warned[:1]:
            if message in self.source.run.warnings:  # said when the step was read: once
                self._warned.add(str(files[0]))
                continue
            prefix = f"{files[0]}: "  # the formats name the file; warn() names it too
            self.warn(files[0], message[len(prefix) :] if message.startswith(prefix) else message)


def jsonl_records(
    files: list[Path], warn: Callable[[str], None]
) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    """(file, byte offset, record) for each JSON object line of ``files``, streamed one line
    at a time (a step file of any size costs one record's memory); a bad line is one warning
    naming file and line, a last line without its newline another. (Decoding big chunks at
    once is no faster here, the per-sample work dominates, and holds a chunk's records:
    benchmarks/samples.py.)"""
    for p in files:
        start = 0
        try:
            for _lineno, end, rec in read_json_objects(p, 0, 1, warn):
                if rec is not None:
                    yield p, start, rec
                start = end
        except OSError as exc:  # unreadable, a link looping on itself: the other files count
            warn(f"{p}: cannot read ({exc.strerror or exc}); skipped")
            continue
        try:
            size = p.stat().st_size
        except OSError:
            continue
        if size > start:
            warn(f"{p}: the last line has no newline (cut short); skipped")


@functools.lru_cache(maxsize=256)
def file_time(p: Path) -> float:
    """A file's modification time (when its samples were written), NaN if unknown; asked
    once per file (each sample of a file carries it)."""
    try:
        return os.stat(p).st_mtime
    except OSError:
        return math.nan
