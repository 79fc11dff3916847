from __future__ import annotations

import contextlib
import errno
import os
import re
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from itertools import groupby
from operator import attrgetter
from pathlib import Path
from typing import Any

from ..config import Config, load_config
from ..errors import RunStopped, UsageError
from ..jsonio import ENCODER, LineFile, clean, dumps, encode_line
from ..jsonio import write_json_atomic as _write_json_atomic
from ..metrics import (
    UNFINISHED,
    Attempt,
    Decision,
    RunState,
    decide,
    step_metrics,
)
from ..mirrors import NullMirror, WandbMirror, import_wandb
from ..schema import (
    CHECKPOINTS,
    EVALS,
    FORMAT_ID,
    PROGRESS,
    RESERVED_STEP_KEYS,
    ROLLOUTS,
    RUN_JSON,
    STEPS,
)
from .columns import build, plain_columns, rows
from .directory import create_run_dir, now_iso, unique_name
from .directory import versions as versions_of
from .heartbeat import Heartbeat, log_progress
from .records import (
    NO_METADATA,
    WriterWarning,
    as_int,
    as_number,
    encode_attempt,
    error_code,
    needs_fixup,
    nonfinite,
    warn,
    write_transcripts,
)
from .shard import ShardIntake

__all__ = ["Run", "WriterWarning"]

_tokens = attrgetter("response_tokens")
_step = attrgetter("step")
_now = time.time
# log_attempts' plain attempts: these arguments only (the others go through log_attempt).
_PLAIN_KEYS = frozenset(
    {
        "step",
        "group_id",
        "task_id",
        "reward",
        "policy_version",
        "response_tokens",
        "truncated",
        "metadata",
        "retries",
        "duration",
    }
)
# Key orders seen that hold plain keys only: a tuple's lookup costs less than a subset test.
_PLAIN_SHAPES: set[tuple[str, ...]] = set()


def _plain_shape(d: Mapping[str, Any]) -> bool:
    """Whether ``d``'s keys are all plain (remembering the key order when they are)."""
    if not d.keys() <= _PLAIN_KEYS:
        return False
    if len(_PLAIN_SHAPES) < 1024:  # the orders a program uses are few; never unbounded
        _PLAIN_SHAPES.add(tuple(d))
    return True


class Run:
    """A run directory being written by a training loop.

    Args:
        config: a Config, a dict shaped like the TOML, a TOML path, or None for defaults.
        sections: extra config sections of the loop (name -> dataclass), validated too.
        versions: what a comparison must hold fixed (framework, model, task, grader versions).
        info: anything else to record in run.json (e.g. an injected fault and its onset step).

    Creates ``<output_dir>/<name>/`` and writes ``run.json`` at once. Use it as a context
    manager: leaving the block normally marks the run finished, an exception marks it crashed
    with the exception as the reason, a guard marks it stopped. Thread-safe: attempts may be
    logged from several threads.
    """

    def __init__(
        self,
        config: Config | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        *,
        sections: Mapping[str, type] | None = None,
        versions: Mapping[str, Any] | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> None:
        cfg = config if isinstance(config, Config) else load_config(config, sections=sections)
        self.config = cfg
        wandb = import_wandb() if cfg.output.wandb_project else None
        self.name = cfg.output.name or unique_name()
        self.dir = Path(cfg.output.output_dir) / self.name
        self.run_id = uuid.uuid4().hex
        self._lock = threading.RLock()
        self._closed = False
        self._status = "running"
        # step -> attempts logged for that update, in arrival order
        self._pending: dict[int, list[Attempt]] = {}
        # Attempts pending, counted when asked (``pending``): not per attempt logged.
        self._given_ids: set[str] = set()
        self._decided: Decision | None = None
        self._decided_upto = -1  # the step of ``_decided``, -1 while there is none
        self._last_step: int | None = None
        self._next_step = 0  # the first update attempts may still be logged for
        self._counter = 0
        self._id_step, self._id_prefix = -1, ""  # ids "<step>-<n>": the step's prefix, kept
        self._started = time.time()
        self._last_step_time = self._started
        rr = cfg.rollout.reward_range
        self._state = RunState(reward_range=(rr[0], rr[1]) if rr else None)
        self._max_off_policy = cfg.training.max_steps_off_policy
        self._max_losses = cfg.rollout.max_group_losses
        # 0 (TOML has no null) or None: the guard is off.
        self._max_unusable = cfg.training.max_consecutive_unusable_groups or None
        self._max_failures = cfg.rollout.max_consecutive_rollout_failures or None
        self._unusable_in_a_row = 0
        self._failures_in_a_row = 0
        # Attempts with working data to drop or non-finite numbers to spell when written.
        self._fixups: list[Attempt] = []
        self._warned: set[str] = set()
        self._failures: dict[tuple[Any, ...], int] = {}  # write failures by kind: how many
        self._phase = "starting"
        self._progress_extra: dict[str, Any] = {}
        self._meta = {
            "format": FORMAT_ID,
            "run_id": self.run_id,
            "name": self.name,
            "created": now_iso(),
            "status": "running",
            "stop_reason": None,
            "config": cfg.to_dict(),
            "versions": versions_of(versions),
            **dict(info or {}),
        }
        create_run_dir(self.dir, self._meta)
        self._intake = ShardIntake(self.dir)
        self._files = {name: LineFile(self.dir / name) for name in (STEPS, ROLLOUTS, EVALS)}
        self._progress_file: LineFile | None = None
        self._mirror: NullMirror | WandbMirror = NullMirror()
        if wandb is not None and cfg.output.wandb_project:
            try:
                self._mirror = WandbMirror(
                    wandb, cfg.output.wandb_project, self.name, self._meta["config"], self.dir
                )
            except Exception as exc:  # a W&B outage must not stop training
                warn(f"W&B mirror off: wandb.init failed: {type(exc).__name__}: {exc}")
        self._heartbeat: Heartbeat | None = None
        if cfg.output.progress_every_seconds:
            self._heartbeat = Heartbeat(
                cfg.output.progress_every_seconds,
                self.heartbeat,
                lambda exc: self._warn_once("progress", f"progress heartbeat failed: {exc}"),
                name=f"rlvitals-heartbeat-{self.name}",
            )

    # -- context manager -------------------------------------------------------------------

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self._closed:
            return
        if exc is None:
            self.close("finished")
        elif isinstance(exc, RunStopped):
            self.close("stopped", exc.reason)
        else:
            self.close("crashed", f"{type(exc).__name__}: {exc}")

    @property
    def status(self) -> str:
        """``running``, ``finished``, ``stopped`` or ``crashed`` (``abandoned``: see abandon)."""
        return self._status

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def last_step(self) -> int | None:
        """The last update written, or None before the first."""
        return self._last_step

    @property
    def pending(self) -> int:
        """Attempts logged whose update is not written yet."""
        with self._lock:
            return self._count_pending()

    def _count_pending(self) -> int:
        return sum(map(len, self._pending.values()))

    # -- logging ---------------------------------------------------------------------------

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise UsageError(f"{what}: the run is {self._status}; nothing more can be logged")

    def log_attempt(
        self,
        step: int,
        group_id: str,
        task_id: str,
        reward: float | None = None,
        *,
        policy_version: int | None = None,
        response_tokens: int = 0,
        truncated: bool = False,
        metadata: Mapping[str, Any] | None = None,
        sampler_logprobs: Any = None,
        transcript: list[dict[str, Any]] | None = None,
        error: BaseException | str | None = None,
        failed_in: str = "rollout",
        retries: int = 0,
        duration: float | None = None,
        attempt_id: str | None = None,
        discard_reason: str | None = None,
    ) -> str:
        """Record one attempt at a task; returns its attempt id.

        Args:
            step: the update that will consume it (or was in progress when it failed).
            group_id: attempts at one task sampled together share it (a GRPO group).
            task_id: the task.
            reward: the grader's reward; None when it failed before grading.
            policy_version: sampler weight version of its first model reply; None = unversioned.
            response_tokens: tokens the model generated; truncated: it hit the token limit.
            metadata: the agent's episode metadata and the grader's additions (reward
                components too): each key becomes a ``rollout/<key>`` metric.
            sampler_logprobs: per-token logprobs of the sampled tokens, from the sampler (a
                list, numpy array or torch tensor).
            transcript: the generations, each ``{"prompt", "completion", ...}`` (docs/format.md).
            error: the exception (or its type name) that ended the attempt; ``failed_in`` says
                whether the agent (``"rollout"``) or the grader (``"grading"``) raised.
            retries: retries spent on this attempt; duration: seconds from start to end.
            attempt_id: your own id (unique in the run); default ``"<step>-<n>"``.
            discard_reason: the loop's own decision to discard it (overrides the writer's).

        Raises:
            UsageError: the run is closed, ``step`` is an update already written, an argument
                has the wrong type.
            RunStopped: ``max_consecutive_rollout_failures`` failed attempts came in a row (the
                attempt is recorded, the run closed as stopped).
        """
        if (
            type(step) is not int
            or type(response_tokens) is not int
            or type(retries) is not int
            or (policy_version is not None and type(policy_version) is not int)
        ):
            step = as_int(step, "log_attempt: step")  # type: ignore[assignment]
            response_tokens = as_int(response_tokens, "log_attempt: response_tokens")  # type: ignore[assignment]
            retries = as_int(retries, "log_attempt: retries")  # type: ignore[assignment]
            policy_version = as_int(policy_version, "log_attempt: policy_version", optional=True)
        if type(group_id) is not str or type(task_id) is not str:
            group_id, task_id = str(group_id), str(task_id)
        # Working data to drop, or a number to spell, when the attempt is written (fixups).
        fixup = False
        if reward is not None:
            if type(reward) is not float:
                reward = as_number(reward, "reward", self._warn_once)
            if reward is not None and reward - reward != 0.0:  # NaN or an infinity
                fixup = True
        if duration is not None:
            if type(duration) is not float:
                duration = as_number(duration, "duration", self._warn_once)
            if duration is not None and duration - duration != 0.0:
                fixup = True
        if error is not None:
            err = error_code(error, failed_in)
            fixup = True
        else:
            err = None
        if sampler_logprobs is not None or transcript is not None or discard_reason is not None:
            fixup = True
        if truncated is not False and truncated is not True:
            truncated = bool(truncated)
        meta = dict(metadata) if metadata else NO_METADATA
        now = _now()
        lock = self._lock
        lock.acquire()  # not ``with``: the context protocol costs more than the rest here
        try:
            if step < self._next_step or self._closed:
                self._check_open("log_attempt")
                if step < 0:
                    raise UsageError(f"log_attempt: step must be >= 0 (not {step})")
                raise UsageError(
                    f"log_attempt(step={step}): update {self._last_step} is already written; "
                    f"attempts must be for a later update"
                )
            n = self._counter = self._counter + 1
            if attempt_id is None:
                if step == self._id_step:
                    aid = self._id_prefix + str(n)
                else:
                    self._id_step, self._id_prefix = step, f"{step}-"
                    aid = f"{step}-{n}"
            else:
                aid = str(attempt_id)
                if aid in self._given_ids:
                    raise UsageError(f"log_attempt: attempt_id {aid!r} was already logged")
                self._given_ids.add(aid)
            a = Attempt(
                step,
                aid,
                group_id,
                task_id,
                policy_version,
                reward,
                False,
                None,
                response_tokens,
                truncated,
                None,
                now,
                duration,
                meta,
                retries,
                None,
                err,
                sampler_logprobs,
                transcript,
                discard_reason,
            )
            if fixup:
                self._queue(a)
                return aid
            # The usual attempt, _queue inlined: nothing to fix up, not a failure.
            bucket = self._pending.get(step)
            if bucket is None:
                self._pending[step] = [a]
            else:
                bucket.append(a)
            if step <= self._decided_upto:  # it joins an update already decided: decide again
                self._decided = None
                self._decided_upto = -1
            self._failures_in_a_row = 0
            return aid
        finally:
            lock.release()

    def log_attempts(self, attempts: Iterable[Mapping[str, Any]] | Mapping[str, Any]) -> list[str]:
        """Record several attempts in one call; returns their ids, in order.

        ``attempts`` is either columns, a mapping of ``log_attempt``'s argument names to one
        list or numpy array each (``{"step": [3, 3], "group_id": ["3-g0", "3-g0"], "task_id":
        ["t17", "t17"], "reward": np.array([1.0, 0.0])}``): the fastest way in (see
        ``writer/columns.py``), or an iterable of mappings, one per attempt.

        Each item is a mapping of ``log_attempt``'s arguments (``{"step": 3, "group_id":
        "3-g0", "task_id": "t17", "reward": 1.0, ...}``): what a sampler that finishes a batch
        of rollouts at once, a Ray actor or a queue consumer holds. The records, ids, step
        metrics and errors are those of calling ``log_attempt`` for each item in order, except
        that attempts of one call share one arrival time. It costs less per attempt (about 15%
        on the logging side, 10% with ``log_step``'s share): the lock is taken once, and plain
        attempts (the keys of ``_PLAIN_KEYS``, exact types, finite numbers) skip the argument
        binding and the fixups; any other item is passed to ``log_attempt`` as it is.

        Raises:
            UsageError: an item is not a mapping, has an unknown key or a bad value; it names
                the item's index. The items before it are recorded.
            RunStopped: as ``log_attempt``.
        """
        if isinstance(attempts, Mapping):
            return self._log_columns(attempts)
        ids: list[str] = []
        append = ids.append
        plain_shapes = _PLAIN_SHAPES
        with self._lock:
            self._check_open("log_attempts")
            now = _now()
            pending = self._pending
            # The run's id and decision state in locals, written back after each item that
            # goes through log_attempt and at the end.
            n, id_step, id_prefix = self._counter, self._id_step, self._id_prefix
            next_step, decided_upto = self._next_step, self._decided_upto
            bucket: list[Attempt] = []
            bucket_step = -1
            reset = False  # a plain attempt came after the last failure: none in a row
            try:
                for i, d in enumerate(attempts):
                    step = d.get("step") if type(d) is dict else None
                    if (
                        type(step) is not int
                        or step < next_step
                        or (tuple(d) not in plain_shapes and not _plain_shape(d))
                        or type(gid := d.get("group_id")) is not str
                        or type(tid := d.get("task_id")) is not str
                        or ((pv := d.get("policy_version")) is not None and type(pv) is not int)
                        or (
                            (reward := d.get("reward")) is not None
                            and (type(reward) is not float or reward - reward)
                        )
                        or (
                            (duration := d.get("duration")) is not None
                            and (type(duration) is not float or duration - duration)
                        )
                        or ((meta := d.get("metadata")) is not None and type(meta) is not dict)
                        or type(tokens := d.get("response_tokens", 0)) is not int
                        or type(retries := d.get("retries", 0)) is not int
                        or (
                            (truncated := d.get("truncated", False)) is not False
                            and truncated is not True
                        )
                    ):
                        self._counter, self._id_step, self._id_prefix = n, id_step, id_prefix
                        if reset:
                            self._failures_in_a_row, reset = 0, False
                        append(self._log_one(i, d))
                        n, id_step, id_prefix = self._counter, self._id_step, self._id_prefix
                        next_step, decided_upto = self._next_step, self._decided_upto
                        bucket_step = -1
                        continue
                    n += 1
                    if step != id_step:
                        id_step, id_prefix = step, f"{step}-"
                    aid = id_prefix + str(n)
                    if step != bucket_step:
                        bucket_step = step
                        got = pending.get(step)
                        if got is None:
                            got = pending[step] = []
                        bucket = got
                    bucket.append(
                        Attempt(
                            step,
                            aid,
                            gid,
                            tid,
                            pv,
                            reward,
                            False,
                            None,
                            tokens,
                            truncated,
                            None,
                            now,
                            duration,
                            meta.copy() if meta else NO_METADATA,
                            retries,
                        )
                    )
                    if step <= decided_upto:  # it joins an update already decided
                        self._decided = None
                        self._decided_upto = decided_upto = -1
                    reset = True
                    append(aid)
            finally:
                self._counter, self._id_step, self._id_prefix = n, id_step, id_prefix
                if reset:
                    self._failures_in_a_row = 0
        return ids

    def _log_columns(self, columns: Mapping[str, Any]) -> list[str]:
        """``log_attempts`` of a batch given as columns (``writer/columns.py``)."""
        n, cols = plain_columns(columns)
        with self._lock:
            self._check_open("log_attempts")
            if cols is None or min(cols["step"]) < self._next_step:
                return self.log_attempts(rows(columns))  # errors name the row
            ids, made = build(cols, n, self._counter + 1, _now())
            self._counter += n
            last = made[-1].step
            self._id_step, self._id_prefix = last, f"{last}-"
            pending = self._pending
            for step, group in groupby(made, _step):
                bucket = pending.get(step)
                if bucket is None:
                    pending[step] = list(group)
                else:
                    bucket.extend(group)
            if min(cols["step"]) <= self._decided_upto:  # they join an update already decided
                self._decided = None
                self._decided_upto = -1
            self._failures_in_a_row = 0
        return ids

    def _log_one(self, i: int, d: Any) -> str:
        """``log_attempts``' item ``i`` through ``log_attempt``; errors name the index."""
        try:
            return self.log_attempt(**d)
        except TypeError as exc:  # not a mapping, an unknown or a missing argument
            raise UsageError(f"log_attempts: item {i}: {exc}") from None
        except UsageError as exc:
            raise UsageError(f"log_attempts: item {i}: {exc}") from None

    def _queue(self, a: Attempt) -> None:
        """Add an attempt to its update's pending ones (the lock held)."""
        if needs_fixup(a):
            self._fixups.append(a)
        bucket = self._pending.get(a.step)
        if bucket is None:
            self._pending[a.step] = [a]
        else:
            bucket.append(a)
        if a.step <= self._decided_upto:
            self._decided = None
            self._decided_upto = -1
        if a.error is not None:
            self._failures_in_a_row += 1
            limit = self._max_failures
            if limit is not None and self._failures_in_a_row >= limit:
                self._stop(
                    "max_consecutive_rollout_failures",
                    f"{self._failures_in_a_row} failed attempts in a row, the last {a.error}",
                )
        else:
            self._failures_in_a_row = 0

    def _take_shards(self) -> None:
        """Take in the attempts other processes logged into this run's shards (the lock
        held); one that came after its update was written is recorded as discarded."""
        late = []
        for a in self._intake.take(self._warn_once):
            last = self._last_step
            if last is not None and a.step <= last:
                a.discard_reason, a.trained = a.error or "late", False
                a.lag = None if a.policy_version is None else last - a.policy_version
                if needs_fixup(a):
                    self._fixups.append(a)
                late.append(a)
            else:
                self._queue(a)
        if late:
            self._guarded(
                "late shard attempts not written", self._write_attempts, late, self._last_step
            )

    def decide(self, step: int, *, discards: Mapping[str, str | None] | None = None) -> Decision:
        """Decide which pending attempts update ``step`` trains, before training on them.

        Calling it is optional (``log_step`` decides if it was not called); a loop calls it to
        know which attempts to compute advantages for (``Decision.trained``,
        ``Decision.trained_groups()``). ``discards`` maps attempt ids to the loop's own reason
        (None: trains), overriding the writer's rules for those attempts.
        """
        with self._lock:
            self._check_open("decide")
            step = self._check_step(step)
            self._take_shards()
            batch = self._batch(step)
            if discards:
                unknown = set(discards) - {a.attempt_id for a in batch}
                if unknown:
                    self._warn_once(
                        "discards-unknown",
                        f"step {step}: discards name attempts not pending for this update "
                        f"(e.g. {sorted(unknown)[0]!r}); ignored",
                    )
            self._decided = decide(
                batch,
                step,
                max_steps_off_policy=self._max_off_policy,
                max_group_losses=self._max_losses,
                explicit=discards,
            )
            self._decided_upto = step
            return self._decided

    def _check_step(self, step: Any) -> int:
        if type(step) is not int:
            step = as_int(step, "step")
        if step < 0:
            raise UsageError(f"step must be an integer >= 0 (not {step!r})")
        if self._last_step is not None and step <= self._last_step:
            raise UsageError(
                f"step {step} goes backwards: update {self._last_step} is already written"
            )
        return int(step)

    def log_step(
        self,
        step: int,
        *,
        trainer_logprobs: Mapping[str, Any] | None = None,
        metrics: Mapping[str, Any] | None = None,
        discards: Mapping[str, str | None] | None = None,
        policy_version: int | None = None,
    ) -> dict[str, Any]:
        """Close update ``step``: decide, compute the step record, write everything.

        Args:
            trainer_logprobs: attempt id -> the trainer's logprobs of the same sampled tokens.
            metrics: the loop's own numbers (``train/loss``, ``perf/sampling_seconds``...);
                they override computed ones of the same name.
            discards: the loop's own discard decisions (see ``decide``).
            policy_version: the trainer's weight version after this update (default step + 1).

        Returns the step record as written. Raises ``RunStopped`` after writing when
        ``max_consecutive_unusable_groups`` rejected groups came in a row.
        """
        with self._lock:
            self._check_open("log_step")
            step = self._check_step(step)
            self._take_shards()
            if policy_version is not None:
                policy_version = as_int(policy_version, "log_step: policy_version")
            decision = self._decided
            if discards is not None or decision is None or decision.step != step:
                decision = self.decide(step, discards=discards)
            batch = self._batch(step, take=True)
            if self._given_ids:
                for a in batch:
                    self._given_ids.discard(a.attempt_id)
            self._decided = None
            self._decided_upto = -1
            self._last_step = step
            self._next_step = step + 1
            record: dict[str, Any] = {"step": step, "time": time.time()}
            try:
                record = self._step_record(
                    step, decision, batch, trainer_logprobs, metrics, policy_version
                )
            except Exception as exc:  # never break the loop over our own failure
                warn(f"step {step}: step record incomplete: {type(exc).__name__}: {exc}")
            self._guarded(f"step {step}: attempts not written", self._write_attempts, batch, step)
            self._guarded(f"step {step}: step record not written", self._append, STEPS, record)
            self._mirror_log(record)
            try:
                self._check_unusable(step, decision)
            except RunStopped as exc:
                exc.record = record  # written: the caller counts this update
                raise
            return record

    def _batch(self, step: int, *, take: bool = False) -> list[Attempt]:
        """The pending attempts update ``step`` closes (those of it and earlier updates)."""
        pending = self._pending
        steps = [s for s in pending if s <= step]
        if len(steps) == 1:
            batch = pending.pop(steps[0]) if take else list(pending[steps[0]])
        else:
            batch = []
            for s in sorted(steps):
                batch.extend(pending.pop(s) if take else pending[s])
        return batch

    def _check_unusable(self, step: int, decision: Decision) -> None:
        limit = self._max_unusable
        for gid, reason in decision.groups.items():
            if reason is None:
                self._unusable_in_a_row = 0
                continue
            self._unusable_in_a_row += 1
            if limit is not None and self._unusable_in_a_row >= limit:
                self._stop(
                    "max_consecutive_unusable_groups",
                    f"{self._unusable_in_a_row} rejected groups in a row by step {step} "
                    f"(the last {gid!r}: {reason})",
                )

    def _step_record(
        self,
        step: int,
        decision: Decision,
        batch: list[Attempt],
        trainer_logprobs: Mapping[str, Any] | None,
        metrics: Mapping[str, Any] | None,
        policy_version: int | None,
    ) -> dict[str, Any]:
        now = time.time()
        m: dict[str, Any] = {
            "step": step,
            "time": now,
            "policy_version": step + 1 if policy_version is None else policy_version,
        }
        problems: list[str] = []
        odd: list[Attempt] = []
        try:
            m.update(step_metrics(decision, batch, self._state, trainer_logprobs, problems, odd))
        except Exception as exc:  # a bug of ours must not cost the loop's own numbers
            warn(f"step {step}: metrics not computed: {type(exc).__name__}: {exc}")
        for a in odd:  # metadata JSON cannot spell as it is (NaN, numpy values): write it clean
            a.metadata = clean(a.metadata)
        for problem in problems:  # once per kind: "...sampled tokens..." or "...without..."
            kind = "tlp-length" if "sampled tokens" in problem else "tlp-stray"
            self._warn_once(kind, f"step {step}: {problem}")
        step_seconds = now - self._last_step_time
        self._last_step_time = now
        m["perf/step_seconds"] = step_seconds
        if step_seconds > 0:
            m["perf/tokens_per_second"] = sum(map(_tokens, batch)) / step_seconds
        for key, value in (metrics or {}).items():
            key = str(key)
            if key in RESERVED_STEP_KEYS:
                self._warn_once(f"reserved-{key}", f"metric {key!r} is reserved; kept as _{key}")
                key = f"_{key}"
            m[key] = value
        return clean(m)

    def _write_attempts(self, batch: list[Attempt], upto: int | None = None) -> None:
        """Write attempts (of updates up to ``upto``; None: all), transcripts too."""
        if not batch:
            return
        fix = self._fixups
        if fix:
            if upto is None:
                mine, self._fixups = fix, []
            else:
                mine = [a for a in fix if a.step <= upto]
                self._fixups = [a for a in fix if a.step > upto] if len(mine) < len(fix) else []
            self._write_transcripts_of(mine)
            for a in mine:
                # Back to defaults, which are not encoded (and the logprobs are freed early).
                a.error = a.sampler_logprobs = a.transcript = a.given_reason = None
                r, d = a.reward, a.duration
                if r is not None and r - r != 0.0:
                    a.reward = nonfinite(r)  # type: ignore[assignment]
                if d is not None and d - d != 0.0:
                    a.duration = nonfinite(d)  # type: ignore[assignment]
        try:
            data = ENCODER.encode_lines(batch)
        except Exception:  # a value msgspec cannot encode: find it, keep the record scrubbed
            data = b"".join([encode_attempt(a, self._warn_once) for a in batch])
        self._files[ROLLOUTS].append(data)

    def _write_transcripts_of(self, attempts: list[Attempt]) -> None:
        by_step: dict[int, list[Attempt]] = {}
        for a in attempts:
            if a.transcript is not None:
                by_step.setdefault(a.step, []).append(a)
        for s, some in by_step.items():
            self._guarded(f"step {s}: transcripts not written", self._write_transcripts, s, some)

    def _write_transcripts(self, step: int, attempts: list[Attempt]) -> None:
        write_transcripts(self.dir, self.config.output.trace == "full", step, attempts)

    def log_eval(
        self,
        step: int,
        suite: str,
        score: float,
        n: int | None = None,
        *,
        checkpoint: str | None = None,
        **extra: Any,
    ) -> None:
        """Record a held-out evaluation of the sampler checkpoint at update ``step``.

        Becomes ``eval/<suite>/score`` at ``step`` for readers; ``extra`` keys are kept.
        """
        with self._lock:
            self._check_open("log_eval")
            step = as_int(step, "log_eval: step")  # type: ignore[assignment]
            record = {
                "step": step,
                "checkpoint": checkpoint,
                "suite": str(suite),
                "score": score,
                "n": n,
                "time": time.time(),
                **extra,
            }
            self._guarded(f"eval at step {step} not written", self._append, EVALS, clean(record))

    def checkpoint_due(self, step: int) -> bool:
        """Whether ``[output] sampler_checkpoint_every`` asks for a checkpoint after ``step``."""
        every = self.config.output.sampler_checkpoint_every
        return every is not None and (step + 1) % every == 0

    def checkpoint_path(self, step: int, suffix: str = ".pt") -> Path:
        """Where the sampler checkpoint of update ``step`` goes (``checkpoints/``)."""
        cdir = self.dir / CHECKPOINTS
        cdir.mkdir(exist_ok=True)
        return cdir / f"sampler-step-{step:06d}{suffix}"

    # -- progress --------------------------------------------------------------------------

    def progress(self, phase: str | None = None, **fields: Any) -> None:
        """Tell the heartbeat what the loop is doing (``phase="sampling"``, attempts_needed=...).

        Cheap and safe to call often; the heartbeat thread writes what it last heard.
        """
        with self._lock:
            if phase is not None:
                self._phase = phase
            if fields:
                self._progress_extra.update(fields)

    @contextlib.contextmanager
    def phase(self, name: str, **fields: Any) -> Iterator[None]:
        """``with run.phase("training"):`` sets the phase the heartbeat reports."""
        self.progress(name, **fields)
        yield

    def heartbeat(self) -> dict[str, Any] | None:
        """Write one progress record now (the background timer calls this); None if closed."""
        with self._lock:
            if self._closed:
                return None
            now = time.time()
            rec = {
                "time": now,
                "step": 0 if self._last_step is None else self._last_step + 1,
                "phase": self._phase,
                "attempts_done": self._count_pending(),
                "attempts_needed": None,
                "seconds_since_step": now - self._last_step_time,
                **self._progress_extra,
            }
            try:
                if self._progress_file is None:
                    self._progress_file = LineFile(self.dir / PROGRESS)
                self._progress_file.append(encode_line(clean(rec)))
            except Exception as exc:
                self._warn_once("progress", f"progress heartbeat not written: {exc}")
        log_progress(rec)
        return rec

    # -- internals -------------------------------------------------------------------------

    def _append(self, name: str, record: Mapping[str, Any]) -> None:
        self._files[name].append(encode_line(record))

    def _write_final_meta(self, meta: dict[str, Any]) -> None:
        """run.json with the run's end, atomically; on a full disk (no room for the temporary
        copy) over the old one in place, which needs no new room, so a reader does not see
        the run ``running`` for ever."""
        try:
            _write_json_atomic(self.dir / RUN_JSON, meta)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            data = (dumps(meta, indent=None) + "\n").encode()
            with open(self.dir / RUN_JSON, "r+b") as f:
                f.write(data)
                f.truncate()

    def _guarded(self, what: str, fn: Any, *args: Any) -> None:
        """Run a write; a failure becomes a WriterWarning, never an exception in the loop. The
        same failure again (a full disk fails every write) is counted, not warned each time;
        ``close`` says how many there were."""
        try:
            fn(*args)
        except Exception as exc:
            kind = (
                re.sub(r"^step \d+: ", "", what),
                type(exc).__name__,
                getattr(exc, "errno", None),
            )
            seen = self._failures.get(kind, 0)
            self._failures[kind] = seen + 1
            if not seen:
                warn(f"{what}: {type(exc).__name__}: {exc}")

    def _mirror_log(self, record: Mapping[str, Any]) -> None:
        try:
            self._mirror.log(record)
        except Exception as exc:
            self._warn_once("wandb", f"W&B mirror failed, step records still on disk: {exc}")

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warn(message)

    def _stop(self, reason: str, message: str) -> None:
        self.close("stopped", reason)
        raise RunStopped(reason, message)

    def abandon(self) -> None:
        """Stop writing as a killed process would: nothing more is written, not even run.json.

        The heartbeat stops, files close, pending attempts are lost and ``run.json`` keeps
        saying ``running``: what a hung job leaves when its scheduler kills it. The reference
        trainer's ``stall`` fault ends this way; tests use it to leave a run "running".
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._status = "abandoned"  # in this process only: run.json keeps "running"
            if self._heartbeat is not None:
                self._heartbeat.stop()
            self._pending = {}
            self._fixups = []
            files = list(self._files.values())
            if self._progress_file is not None:
                files.append(self._progress_file)
            for f in files:
                self._guarded("closing a run file failed", f.close)
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)

    def close(self, status: str = "finished", reason: str | None = None) -> None:
        """End the run: write pending attempts as discarded, set the status in run.json.

        Pending attempts keep their own failure as the reason, else ``unfinished``. Closing
        twice is harmless; the first status stays.
        """
        if status not in ("finished", "stopped", "crashed"):
            raise UsageError(
                f'close: status expected "finished", "stopped" or "crashed" (not {status!r})'
            )
        with self._lock:
            if self._closed:
                return
            try:
                self._take_shards()
            except RunStopped:
                return  # a guard tripped on the shards' last attempts and closed the run
            self._closed = True
            self._status = status
            if self._heartbeat is not None:
                self._heartbeat.stop()
            pending = [a for s in sorted(self._pending) for a in self._pending[s]]
            self._pending = {}
            for a in pending:
                a.discard_reason = a.error or a.given_reason or UNFINISHED
                a.trained = False
                a.lag = None if a.policy_version is None else a.step - a.policy_version
            self._guarded("pending attempts not written", self._write_attempts, pending)
            files = list(self._files.values())
            if self._progress_file is not None:
                files.append(self._progress_file)
            for f in files:
                self._guarded("closing a run file failed", f.close)
            self._meta["status"] = status
            self._meta["stop_reason"] = reason
            self._meta["ended"] = now_iso()
            self._guarded(f"run.json not updated to {status!r}", self._write_final_meta, self._meta)
            self._guarded("W&B finish failed", self._mirror.finish, status)
            again = sum(n - 1 for n in self._failures.values())
            if again:
                warn(
                    f"{again} more writes failed the same way as those warned (the run's "
                    "files miss what they held)"
                )
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)
