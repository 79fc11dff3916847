"""rlvitals run directories (docs/format.md, format 1): run.json, steps, rollouts, evals, progress.

Every JSON Lines file is read from where the last pass stopped (byte offsets), so a live view
costs time proportional to the new bytes. Shards (``steps.<shard>.jsonl``,
``rollouts.<shard>.jsonl``) are merged by step.

Attempts go into a columnar table (``model.AttemptTable``): big chunks of ``rollouts*.jsonl``
are decoded at once by msgspec into a struct holding only the columns we keep, so an attempt's
metadata is skipped, not built; strings become int32 codes. A chunk msgspec refuses (a bad
line) is read again line by line, so the bad line becomes one warning naming file and line and
every good line around it is still read. Each row keeps its file and byte offset:
``load_attempt_record(run, i)`` reads one attempt's full record, metadata included, on demand.
"""

from __future__ import annotations

import math
import mmap
import re
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ..errors import ReadError, UsageError
from ..jsonio import MAX_LINE_BYTES, left_temporaries, to_float
from ..model import ATTEMPT_COLUMNS, AttemptTable, AttemptTableBuilder, RunData
from ..schema import (
    EVALS,
    PROGRESS,
    RESERVED_STEP_KEYS,
    ROLLOUTS,
    RUN_JSON,
    STEPS,
    TRANSCRIPTS,
)
from . import _split
from ._columns import STEP, attempt_columns
from ._format import Format, register
from .base import (
    MAX_STEP,
    SKIPPED,
    FileState,
    check_state,
    clear_run,
    decode_json,
    decode_logged,
    open_binary,
    read_chunks,
    read_lines,
)

__all__ = ["NativeReader", "find_attempt", "load_attempt_record"]

CHUNK = 8 << 20  # bytes of step records decoded at once
# Bytes of attempt records decoded at once: small enough that a chunk's decoded records (about
# their bytes again as Python objects) stay in a core's cache while a dozen column passes read
# them (benchmarks/yardsticks.py: a quarter less CPU than 8 MiB chunks on the ingest run).
ROLLOUT_CHUNK = 512 << 10


class _Attempt(msgspec.Struct, gc=False):
    """The fields of a rollouts.jsonl record that the table keeps (the rest are skipped)."""

    step: int
    task_id: str = ""
    group_id: str = ""
    policy_version: int | None = None
    reward: float | None = None
    trained: bool = False
    discard_reason: str | None = None
    response_tokens: int | None = 0
    truncated: bool = False
    lag: int | None = None
    time: float | None = None
    duration: float | None = None


_DECODER = msgspec.json.Decoder(_Attempt, strict=False)
_GENERIC = msgspec.json.Decoder()


def _is_run_dir(p: Path) -> bool:
    if p.is_file():
        p = p.parent if p.name in (RUN_JSON, STEPS) else p
    return p.is_dir() and ((p / RUN_JSON).is_file() or (p / STEPS).is_file())


def _shards(d: Path, base: str) -> list[Path]:
    """``base`` and its shards ``<stem>.<shard>.jsonl``, the unsharded file first."""
    stem = base[: -len(".jsonl")]
    out = [d / base] if (d / base).is_file() else []
    out.extend(
        p
        for p in sorted(d.glob(f"{stem}.*.jsonl"))
        if p.is_file() and p.name != base and not p.name.endswith(".tmp")
    )
    return out


def safe_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class NativeReader:
    """Reads an rlvitals run directory incrementally.

    Each file keeps a ``base.FileState``; a file that shrank or was replaced (the run deleted
    and written again under the same name) makes the reader start over, so records of the old
    run never mix with the new one's.
    """

    name = "rlvitals"

    def __init__(self, path: Path, *, extra_rules: tuple[Any, ...] = ()) -> None:
        if path.is_file():
            path = path.parent
        self.dir = path
        self.run = RunData(source=str(path), format=self.name)
        del extra_rules  # our files already use the canonical names
        self._reset()

    def _reset(self) -> None:
        self._tails: dict[Path, FileState] = {}
        self._run_json_key: tuple[int, int, int] | None = None
        self._attempts = AttemptTableBuilder()
        self._shard_index: dict[Path, int] = {}
        self._odd: set[Path] = set()  # run files that are not files (said once)
        self._said_left = False  # temporaries a killed writer left (said once)
        self._from_attempts = False  # the reward per update computed from the attempts
        self._reward_steps: set[int] = set()  # the updates it was computed for
        self._record_steps: set[int] = set()  # the updates with a step record
        self._record_top = -1  # the last of them
        self._lost_from = 0  # attempts from this update on not yet looked at for lost records

    def files(self) -> list[Path]:
        """Every JSON Lines file of the run that exists now."""
        out = [*_shards(self.dir, STEPS), *_shards(self.dir, ROLLOUTS)]
        out.extend(p for p in (self.dir / EVALS, self.dir / PROGRESS) if p.is_file())
        return out

    def poll(self) -> bool:
        """Read what is new since the last call; True if anything was."""
        return self._pass(final=False)

    def finish(self) -> None:
        """The files are complete: a last line without its newline is read too (unless the
        run says it is still running: then that line is being written)."""
        status = self.run.info.get("status")
        self._pass(final=status != "running")
        left = [*left_temporaries(self.dir), *left_temporaries(self.dir / TRANSCRIPTS)]
        if left and not self._said_left:
            self._said_left = True
            shown = ", ".join(str(p.relative_to(self.dir)) for p in left[:4])
            more = f" and {len(left) - 4} more" if len(left) > 4 else ""
            self.run.warnings.append(
                f"{self.dir}: {len(left)} temporary file{'s' if len(left) > 1 else ''} a killed "
                f"writer left ({shown}{more}); not read, safe to delete"
            )

    def _pass(self, *, final: bool) -> bool:
        files = self.files()
        for p in files:
            why = check_state(self._tail(p), content=False)
            if why:
                self._restart(f"{p}: {why}; the run is read again from the start")
                files = self.files()
                break
        run_id = self.run.info.get("run_id")
        changed = self._read_run_json()
        new_id = self.run.info.get("run_id")
        if changed and run_id is not None and new_id != run_id:
            # The run was deleted and started again under the same name.
            self._restart(f"{self.dir / RUN_JSON}: a new run ({new_id}); read from the start")
            changed = self._read_run_json()
            files = self.files()
        for p in files:
            check_state(self._tail(p), content=False)
        for name in (STEPS, ROLLOUTS, EVALS, PROGRESS):
            q = self.dir / name
            if q.exists() and not q.is_file() and q not in self._odd:
                self._odd.add(q)
                self.run.warnings.append(f"{q}: not a file; skipped")
        for p in _shards(self.dir, STEPS):
            changed |= self._read_chunks(p, self._decode_steps_chunk, final)
        for p in _shards(self.dir, ROLLOUTS):
            changed |= self._read_rollouts(p, final)
        changed |= self._read_lines(self.dir / EVALS, self._on_eval, final)
        changed |= self._read_lines(self.dir / PROGRESS, self._on_progress, final)
        if len(self._attempts):
            self.run.attempts = self._attempts.table()
            if changed:
                self._rewards_from_attempts()
        return changed

    def _rewards_from_attempts(self) -> None:
        """A run whose step records are lost (steps.jsonl empty, unreadable or gone) while its
        attempts are there: the reward per update computed from the attempts, with one
        warning, so the run is judged on what it holds, not "too early to tell"."""
        a = self.run.attempts
        metrics = self.run.metrics
        own = {"reward/mean", "reward/mean_with_unusable"}
        if a is None or not len(a):
            return
        if self._record_steps and not self._from_attempts:
            # The step records are there: they measure the reward themselves, but for updates
            # whose own record is lost (where the records carry a reward at all).
            if own & set(metrics.names()):
                self._rewards_for_lost_records(a)
            return
        if own & set(metrics.names()) and not self._from_attempts:
            return
        steps_read = any(not n.startswith("eval/") for n in metrics.names())
        if steps_read and not self._from_attempts:
            return  # the step records are there: they measure the reward themselves
        if not self._from_attempts:
            self.run.warnings.append(
                f"{self.dir / STEPS}: no step record (empty, unreadable or missing) beside "
                f"{len(a)} attempts in {ROLLOUTS}: the reward per update is computed from them"
            )
        self._from_attempts = True
        live = self.run.info.get("status") == "running"
        top = int(a.step[-1])  # rows are sorted by step
        self._add_rewards(
            a,
            [
                s
                for s in a.steps().tolist()
                if s not in self._reward_steps and not (live and s == top)
            ],  # not added before, nor still gathering its attempts
        )

    def _rewards_for_lost_records(self, a: AttemptTable) -> None:
        """Updates behind the last step record whose own record is lost (a damaged line of
        steps.jsonl) while their attempts are there: the reward of each computed from its
        attempts (the writer's own reward/mean* is that same mean), with one warning, so an
        intact attempt record is never lost with its update's damaged step record. Updates past
        the last step record are still being written: left to their own records."""
        top = self._record_top
        if top <= self._lost_from:
            return
        lo = int(np.searchsorted(a.step, self._lost_from, side="left"))
        hi = int(np.searchsorted(a.step, top, side="left"))
        self._lost_from = top
        lost = [
            s
            for s in np.unique(a.step[lo:hi]).tolist()
            if s not in self._record_steps and s not in self._reward_steps
        ]
        if not lost:
            return
        shown = ", ".join(map(str, lost[:5])) + (", ..." if len(lost) > 5 else "")
        self.run.warnings.append(
            f"{self.dir / STEPS}: no step record for {len(lost)} update(s) behind the last one "
            f"(step {shown}) beside their attempts in {ROLLOUTS}: their reward is computed "
            "from them"
        )
        self._add_rewards(a, lost)

    def _add_rewards(self, a: AttemptTable, steps: list[int]) -> None:
        """reward/mean_with_unusable (every graded attempt) and reward/mean (the trained ones)
        of each update in ``steps``, from its attempts."""
        metrics = self.run.metrics
        for step in steps:
            self._reward_steps.add(step)
            rows = a.rows_at(step)
            reward = np.asarray(a.reward[rows], dtype=np.float64)
            ok = ~np.asarray(a.reward_missing[rows]) & np.isfinite(reward)
            trained = np.asarray(a.trained[rows]) & ok
            if ok.any():
                metrics.add(step, "reward/mean_with_unusable", float(reward[ok].mean()))
            if trained.any():
                metrics.add(step, "reward/mean", float(reward[trained].mean()))

    def _restart(self, why: str) -> None:
        clear_run(self.run, why)
        self._reset()

    def _read_run_json(self) -> bool:
        p = self.dir / RUN_JSON
        try:
            st = p.stat()
        except OSError:
            return False
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key == self._run_json_key:
            return False
        self._run_json_key = key
        try:
            with open_binary(p) as f:
                raw = f.read()
            info, note = decode_json(raw)
        except OSError as exc:
            self.run.warnings.append(f"{p}: cannot read ({exc.strerror or exc}); run info skipped")
            return False
        except ValueError as exc:
            # run.json is rewritten atomically; a bad one is a real problem, but not fatal.
            self.run.warnings.append(f"{p}: not valid JSON ({exc}); run info skipped")
            return False
        if note:
            self.run.warnings.append(f"{p}: {note}")
        if not isinstance(info, dict):
            self.run.warnings.append(f"{p}: expected a JSON object; run info skipped")
            return False
        status = info.get("status")
        if status is not None and not isinstance(status, str):
            self.run.warnings.append(
                f"{p}: status {safe_repr(status)} is not a word such as 'running'; read as unknown"
            )
            info = {**info, "status": None}
        self.run.info = info
        return True

    def _tail(self, p: Path) -> FileState:
        tail = self._tails.get(p)
        if tail is None:
            tail = self._tails[p] = FileState(p)
        return tail

    def _read_lines(self, p: Path, handle: Any, final: bool) -> bool:
        if not p.is_file():
            return False
        tail = self._tail(p)
        changed = False
        warn = self.run.warnings.append
        for lineno, raw in read_lines(tail, warn=warn, final=final, max_line=MAX_LINE_BYTES):
            if not raw.strip():
                continue
            rec = decode_logged(raw, f"{p}:{lineno}", warn)
            if rec is SKIPPED:
                continue
            try:
                handle(rec, p, lineno)
            except ReadError as exc:
                warn(str(exc))
                continue
            changed = True
        return changed

    def _decode_steps_chunk(self, chunk: bytes, p: Path, first_line: int, base: int) -> None:
        """Step records of one chunk, column by column: the common case (every value a
        number) goes to numpy in bulk; anything else is converted value by value, warning
        with the line number."""
        arr = np.frombuffer(chunk, dtype=np.uint8)
        nl = np.flatnonzero(arr == 10)
        starts = np.empty(len(nl), dtype=np.int64)
        starts[0] = 0
        starts[1:] = nl[:-1] + 1
        lines_idx = np.flatnonzero(nl > starts)  # non-blank lines
        try:
            recs = _GENERIC.decode_lines(chunk)
        except (msgspec.DecodeError, RecursionError):
            recs = None
        if recs is None or len(recs) != len(lines_idx):
            recs, lines_idx = self._steps_one_by_one(chunk, starts, nl, p, first_line)
        good, steps = [], []
        for i, rec in enumerate(recs):
            step = rec.get("step") if type(rec) is dict else None
            if type(step) is not int or step < 0 or step > MAX_STEP:
                what = "a JSON object" if type(rec) is not dict else "an integer 'step' >= 0"
                if type(step) is int and step > MAX_STEP:
                    what = "a 'step' below 2**63"
                got = "" if type(rec) is not dict else f" (not {step!r})"
                lineno = first_line + int(lines_idx[i])
                self.run.warnings.append(f"{p}:{lineno}: expected {what}{got}; skipped")
                continue
            good.append(i)
            steps.append(step)
        if len(good) != len(recs):
            recs = [recs[i] for i in good]
            lines_idx = lines_idx[good]
        if not recs:
            return
        self._record_steps.update(steps)
        self._record_top = max(self._record_top, max(steps))
        step_arr = np.array(steps, dtype=np.int64)
        # Records with the same keys in the same order (the usual case) go to numpy as one
        # 2-D block; null (not measured) is masked out; a value numpy cannot read sends that
        # block to the per-value path.
        has_null = b"null" in chunk
        # Every key is one quoted string; more quotes than that means string values, which
        # go through the per-value path (only our NaN/Infinity spellings are numbers there).
        has_strings = chunk.count(b'"') != 2 * sum(len(r) for r in recs)
        blocks: dict[tuple[str, ...], list[int]] = {}
        for i, rec in enumerate(recs):
            blocks.setdefault(tuple(rec), []).append(i)
        for keys, idx in blocks.items():
            if has_strings:
                self._steps_by_value(
                    [recs[i] for i in idx], step_arr[idx], lines_idx[idx], p, first_line
                )
                continue
            rows = [list(recs[i].values()) for i in idx]
            try:
                if has_null:
                    obj = np.array(rows, dtype=object)
                    present = obj != None  # noqa: E711 - elementwise on an object array
                    obj[~present] = np.nan
                    block = obj.astype(np.float64)
                else:
                    block = np.array(rows, dtype=np.float64)
                    present = None
            except (ValueError, TypeError):
                self._steps_by_value(
                    [recs[i] for i in idx], step_arr[idx], lines_idx[idx], p, first_line
                )
                continue
            st = step_arr[idx]
            for j, key in enumerate(keys):
                if key == "step":
                    continue
                col = block[:, j]
                if present is None:
                    self.run.metrics.extend(key, st, col)
                else:
                    m = present[:, j].astype(bool)
                    if m.any():
                        self.run.metrics.extend(key, st[m], col[m])

    def _steps_by_value(
        self,
        recs: list[dict[str, Any]],
        steps: np.ndarray,
        lines_idx: np.ndarray,
        p: Path,
        first_line: int,
    ) -> None:
        """The slow path: every value converted on its own; non-numbers warn with their line."""
        keys: set[str] = set()
        for rec in recs:
            keys.update(rec)
        keys.discard("step")
        for key in sorted(keys):
            keep, out = [], []
            for i, rec in enumerate(recs):
                value = rec.get(key)
                if value is None:
                    continue
                v = to_float(value)
                if v is None:
                    if key not in RESERVED_STEP_KEYS:
                        lineno = first_line + int(lines_idx[i])
                        self.run.warnings.append(
                            f"{p}:{lineno}: metric {key!r} is not a number ({value!r}); skipped"
                        )
                    continue
                keep.append(i)
                out.append(v)
            if keep:
                self.run.metrics.extend(key, steps[keep], np.array(out, dtype=np.float64))

    def _steps_one_by_one(
        self, chunk: bytes, starts: np.ndarray, nl: np.ndarray, p: Path, first_line: int
    ) -> tuple[list[Any], np.ndarray]:
        """Decode a chunk msgspec refused line by line: bare NaN tokens are fine, a line that
        is not JSON becomes one warning naming it."""
        recs, idx = [], []
        for i, (a, b) in enumerate(zip(starts.tolist(), nl.tolist())):
            line = chunk[a:b]
            if not line.strip():
                continue
            rec = decode_logged(
                line, f"{p}:{first_line + i}", self.run.warnings.append, objects_only=False
            )
            if rec is SKIPPED:
                continue
            recs.append(rec)
            idx.append(i)
        return recs, np.array(idx, dtype=np.int64)

    def _on_eval(self, rec: dict[str, Any], p: Path, lineno: int) -> None:
        step, suite, score = rec.get("step"), rec.get("suite"), to_float(rec.get("score"))
        if (
            type(step) is not int
            or not 0 <= step <= MAX_STEP
            or not isinstance(suite, str)
            or score is None
        ):
            raise ReadError(
                "expected 'step' (0..2**63-1), 'suite' and a numeric 'score'; skipped",
                path=str(p),
                line=lineno,
            )
        self.run.evals.append(rec)
        self.run.metrics.add(step, f"eval/{suite}/score", score)

    def _on_progress(self, rec: dict[str, Any], p: Path, lineno: int) -> None:
        t = to_float(rec.get("time"))
        if t is None or not math.isfinite(t):
            raise ReadError("expected a numeric 'time'; skipped", path=str(p), line=lineno)
        self.run.heartbeats.append(rec)

    # -- rollouts ----------------------------------------------------------------------------

    def _read_rollouts(self, p: Path, final: bool) -> bool:
        shard = self._shard_index.get(p)
        if shard is None:
            shard = self._shard_index[p] = len(self._attempts.files)
            self._attempts.files.append(str(p))
        changed = False
        if _split.parts_wanted() > 1 and not self._tail(p).cr:
            changed = self._read_rollouts_in_pieces(p, shard, final)
        return changed | self._read_chunks(
            p,
            lambda chunk, p, line, base: self._decode_chunk(chunk, p, line, base, shard),
            final,
            ROLLOUT_CHUNK,
        )

    def _read_rollouts_in_pieces(self, p: Path, shard: int, final: bool) -> bool:
        """A big unread part of ``p`` read in pieces side by side (``readers._split``): the
        first here, the others in forked workers, joined in file order. Stops where a piece
        could not be joined; the caller reads on from there."""
        st = self._tail(p)
        cuts = _split.cut_points(p, st.offset, _split.parts_wanted(), MAX_LINE_BYTES)
        if not cuts:
            return False
        try:
            futures = _split.read_pieces(
                p, cuts, final, partial(_read_piece, str(p), str(self.dir), shard)
            )
        except Exception:  # no process could be started (a limit, no memory): one piece
            return False
        changed = self._read_chunks(
            p,
            lambda chunk, p, line, base: self._decode_chunk(chunk, p, line, base, shard),
            False,
            ROLLOUT_CHUNK,
            limit=cuts[0] - st.offset,
        )
        for future in futures:
            try:
                got = future.result()
            except Exception:  # a worker that died or failed: read on here
                break
            if got["start"] != st.offset:  # a piece before it was not read whole
                break
            changed |= self._join_piece(p, st, got)
        return changed

    def _join_piece(self, p: Path, st: FileState, got: dict[str, Any]) -> bool:
        """One worker's piece of ``p`` after what ``st`` has read: its rows recoded into this
        reader's code books, its warnings renumbered, ``st`` moved to its end."""
        before = st.line - 1
        self.run.warnings.extend(_split.renumber(got["warnings"], p, before))
        cols = got["columns"]
        if cols is not None:
            b = self._attempts
            for book, key, col in (
                (b.discards, "discards", "discard_code"),
                (b.tasks, "tasks", "task_code"),
                (b.groups, "groups", "group_code"),
            ):
                cols[col] = _split.recode(book, got[key], cols[col])
            b.append(cols)
        st.offset, st.line, st.mark = got["offset"], before + got["line"], got["mark"]
        st.warned = st.warned or got["warned"]
        return bool(got["changed"])

    def _read_chunks(
        self, p: Path, decode: Any, final: bool, chunk: int = CHUNK, limit: int | None = None
    ) -> bool:
        """Feed the complete lines of ``p`` from where the last pass stopped to ``decode``, in
        big chunks (``base.read_chunks``), at most ``limit`` bytes; a last line still being
        written waits for the next pass unless ``final``."""
        if not p.is_file():
            return False
        changed = False
        for first, start, data in read_chunks(
            self._tail(p),
            warn=self.run.warnings.append,
            final=final,
            chunk=chunk,
            max_line=MAX_LINE_BYTES,
            limit=limit,
        ):
            decode(data, p, first, start)
            changed = True
        return changed

    def _decode_chunk(self, chunk: bytes, p: Path, first_line: int, base: int, shard: int) -> None:
        arr = np.frombuffer(chunk, dtype=np.uint8)
        nl = np.flatnonzero(arr == 10)
        starts = np.empty(len(nl), dtype=np.int64)
        starts[0] = 0
        starts[1:] = nl[:-1] + 1
        nonblank = nl > starts
        try:
            recs = _DECODER.decode_lines(chunk)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            recs = None
        steps = None
        if recs is not None and len(recs) == int(nonblank.sum()):
            try:  # a step above 2**63-1 overflows; one below 0 is found by the minimum
                steps = np.fromiter(map(STEP, recs), np.int64, len(recs))
            except OverflowError:
                steps = None
            if steps is not None and len(steps) and steps.min() < 0:
                steps = None
        if recs is not None and steps is not None:
            self._add_rows(recs, starts[nonblank] + base, shard, steps)
        else:
            self._decode_lines_one_by_one(chunk, starts, nl, p, first_line, base, shard)

    def _decode_lines_one_by_one(
        self,
        chunk: bytes,
        starts: np.ndarray,
        nl: np.ndarray,
        p: Path,
        first_line: int,
        base: int,
        shard: int,
    ) -> None:
        recs: list[_Attempt] = []
        offs: list[int] = []
        for i, (a, b) in enumerate(zip(starts.tolist(), nl.tolist())):
            line = chunk[a:b]
            if not line.strip():
                continue
            lineno = first_line + i
            if len(line) > MAX_LINE_BYTES:
                self.run.warnings.append(f"{p}:{lineno}: line too long; skipped")
                continue
            rec: _Attempt | None
            try:
                rec = _DECODER.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
                rec = self._lenient(line, p, lineno, exc)
                if rec is None:
                    continue
            if not 0 <= rec.step <= MAX_STEP:
                self.run.warnings.append(
                    f"{p}:{lineno}: expected a 'step' in 0..2**63-1 (not {rec.step}); skipped"
                )
                continue
            recs.append(rec)
            offs.append(base + a)
        if recs:
            self._add_rows(recs, np.array(offs, dtype=np.int64), shard)

    def _lenient(self, line: bytes, p: Path, lineno: int, exc: Exception) -> _Attempt | None:
        # Bare NaN / Infinity tokens, bytes that are not UTF-8, metadata nested too deeply:
        # the attempt is kept and what was replaced is noted.
        try:
            obj, note = decode_json(line)
            rec = msgspec.convert(obj, _Attempt, strict=False)
        except (ValueError, msgspec.ValidationError, TypeError):
            pass
        else:
            if note:
                self.run.warnings.append(f"{p}:{lineno}: {note}")
            return rec
        msg = str(exc).replace("$[0].", "").replace("$.", "")
        self.run.warnings.append(f"{p}:{lineno}: not a valid attempt record ({msg}); skipped")
        return None

    def _add_rows(
        self,
        recs: list[_Attempt],
        offsets: np.ndarray,
        shard: int,
        steps: np.ndarray | None = None,
    ) -> None:
        self._attempts.append(attempt_columns(self._attempts, recs, offsets, shard, steps))


def _read_piece(
    path: str, folder: str, shard: int, start: int, end: int | None, final: bool
) -> Any:
    """In a worker (``readers._split``): the lines of ``path`` from ``start`` to ``end`` read as
    one reader reads them, as columns, code books, warnings and the file state at the end."""
    p = Path(path)
    reader = NativeReader.__new__(NativeReader)
    reader.dir = Path(folder)
    reader.run = RunData(source=folder, format=NativeReader.name)
    reader._reset()
    st = reader._tails[p] = _split.piece_state(p, start)
    changed = reader._read_chunks(
        p,
        lambda chunk, p, line, base: reader._decode_chunk(chunk, p, line, base, shard),
        final,
        ROLLOUT_CHUNK,
        limit=None if end is None else end - start,
    )
    b = reader._attempts
    table = b.table() if len(b) else None
    return {
        "start": start,
        "offset": st.offset,
        "line": st.line,
        "mark": st.mark,
        "warned": st.warned,
        "changed": changed,
        "warnings": reader.run.warnings,
        "columns": None if table is None else {c: getattr(table, c) for c in ATTEMPT_COLUMNS},
        "discards": b.discards.names,
        "tasks": b.tasks.names,
        "groups": b.groups.names,
    }


def _attempt_files(run: RunData) -> Any:
    t = run.attempts
    if t is None or not len(t):
        raise UsageError(f"{run.source}: this run has no attempts table")
    return t


def load_attempt_record(run: RunData, index: int) -> dict[str, Any]:
    """The full record (metadata included) of row ``index`` of ``run.attempts``."""
    t = _attempt_files(run)
    if not -len(t) <= index < len(t):
        raise UsageError(f"attempt row {index} out of range (the run has {len(t)})")
    path = t.files[int(t.shard[index])]
    offset = int(t.offset[index])
    try:
        with open_binary(path) as f:
            f.seek(offset)
            line = f.readline(MAX_LINE_BYTES + 1)
    except OSError as exc:
        raise ReadError(f"cannot read ({exc.strerror or exc})", path=path) from None
    try:
        rec, _ = decode_json(line)
    except ValueError as exc:
        raise ReadError(f"byte {offset}: not JSON ({exc})", path=path) from None
    if not isinstance(rec, dict):
        raise ReadError(f"byte {offset}: expected a JSON object", path=path)
    return rec


def find_attempt(run: RunData, attempt_id: str) -> int | None:
    """The row of ``run.attempts`` whose record has ``attempt_id`` (a scan of the files)."""
    t = _attempt_files(run)
    needle = re.compile(
        rb'"attempt_id"\s*:\s*' + re.escape(msgspec.json.encode(attempt_id)) + rb"\s*[,}]"
    )
    for shard, path in enumerate(t.files):
        try:
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                for m in needle.finditer(mm):
                    start = mm.rfind(b"\n", 0, m.start()) + 1
                    rows = np.flatnonzero((t.offset == start) & (t.shard == shard))
                    if len(rows):
                        return int(rows[0])
        except (OSError, ValueError):
            continue
    return None


register(
    Format(
        "rlvitals",
        "rlvitals run directory (run.json, steps.jsonl, rollouts.jsonl, shards, ...)",
        _is_run_dir,
        NativeReader,
        priority=0,
        kind="run directory",
        # a sharded run's steps.<shard>.jsonl marks it before the trainer's own file exists
        markers=("run.json", "steps.jsonl", "steps.*.jsonl"),
    )
)
