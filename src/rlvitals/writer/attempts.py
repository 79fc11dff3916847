"""How attempts come into a run and wait for their update: one at a time (``log_attempt``),
a batch of mappings or of columns (``log_attempts``), and other processes' shards.

``AttemptIntake`` is a part of ``Run`` (one of its bases), apart for its size: the state it
reads and writes is the run's, set in ``Run.__init__`` and declared below. Its speed is the
writer's (docs: the ``writer`` package): the usual attempt is checked by exact types, built
once (the ``Attempt`` is also its record) and appended under the run's lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from itertools import groupby
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..metrics import Attempt, Decision
from .args import PLAIN
from .columns import build, plain_columns, rows
from .records import NO_METADATA, as_int, as_number, error_code, needs_fixup
from .shard import ShardIntake

__all__ = ["AttemptIntake"]

_step = attrgetter("step")
_now = time.time
# log_attempts' plain attempts: these arguments only (the others go through log_attempt).
_PLAIN_KEYS = frozenset(PLAIN)
# Key orders seen that hold plain keys only: a tuple's lookup costs less than a subset test.
_PLAIN_SHAPES: set[tuple[str, ...]] = set()


def _plain_shape(d: Mapping[str, Any]) -> bool:
    """Whether ``d``'s keys are all plain (remembering the key order when they are)."""
    if not d.keys() <= _PLAIN_KEYS:
        return False
    if len(_PLAIN_SHAPES) < 1024:  # the orders a program uses are few; never unbounded
        _PLAIN_SHAPES.add(tuple(d))
    return True


def _whole(step: Any, response_tokens: Any, retries: Any, policy_version: Any) -> tuple[Any, ...]:
    """``log_attempt``'s whole-number arguments as ints (numpy and torch integers too)."""
    return (
        as_int(step, "log_attempt: step"),
        as_int(response_tokens, "log_attempt: response_tokens"),
        as_int(retries, "log_attempt: retries"),
        as_int(policy_version, "log_attempt: policy_version", optional=True),
    )


class AttemptIntake:
    """``Run``'s attempt-logging part (see the module docstring)."""

    # The run's state this part reads and writes (set in ``Run.__init__``).
    _lock: threading.RLock
    _closed: bool
    _status: str
    _pending: dict[int, list[Attempt]]  # step -> attempts logged for it, in arrival order
    _given_ids: set[str]
    _decided: Decision | None
    _decided_upto: int
    _last_step: int | None
    _next_step: int
    _counter: int
    _id_step: int
    _id_prefix: str
    _fixups: list[Attempt]
    _failures_in_a_row: int
    _max_failures: int | None
    _intake: ShardIntake

    if TYPE_CHECKING:  # the run's own, used here

        def _warn_once(self, key: str, message: str) -> None: ...
        def _stop(self, reason: str, message: str) -> None: ...
        def _guarded(self, what: str, fn: Any, *args: Any) -> None: ...
        def _write_attempts(self, batch: list[Attempt], upto: int | None = None) -> None: ...

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
        if not (type(step) is type(response_tokens) is type(retries) is int) or (
            policy_version is not None and type(policy_version) is not int
        ):
            step, response_tokens, retries, policy_version = _whole(
                step, response_tokens, retries, policy_version
            )
        if type(group_id) is not str or type(task_id) is not str:
            group_id, task_id = str(group_id), str(task_id)
        # Working data to drop, or a number to spell, when the attempt is written (fixups).
        fixup = sampler_logprobs is not None or transcript is not None or discard_reason is not None
        if reward is not None and (type(reward) is not float or reward - reward != 0.0):
            reward, fixup = self._number(reward, "reward", fixup)
        if duration is not None and (type(duration) is not float or duration - duration != 0.0):
            duration, fixup = self._number(duration, "duration", fixup)
        err = None
        if error is not None:
            err, fixup = error_code(error, failed_in), True
        if truncated is not False and truncated is not True:
            truncated = bool(truncated)
        meta = dict(metadata) if metadata else NO_METADATA
        now = _now()
        lock = self._lock
        lock.acquire()  # not ``with``: the context protocol costs more than the rest here
        try:
            if step < self._next_step or self._closed:
                self._refuse("log_attempt", step)
            n = self._counter = self._counter + 1
            if attempt_id is None and step == self._id_step:
                aid = self._id_prefix + str(n)
            else:
                aid = self._new_id(step, n, attempt_id)
            a = Attempt(step, aid, group_id, task_id, policy_version, reward, False, None,
                        response_tokens, truncated, None, now, duration, meta, retries, None,
                        err, sampler_logprobs, transcript, discard_reason)  # fmt: skip
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
                self._decided, self._decided_upto = None, -1
            self._failures_in_a_row = 0
            return aid
        finally:
            lock.release()

    def _number(self, value: Any, what: str, fixup: bool) -> tuple[float | None, bool]:
        """A reward or duration as a float (None, told once, for what is not a number), and
        whether the attempt needs a fixup (also when the number is NaN or an infinity)."""
        if type(value) is not float:
            value = as_number(value, what, self._warn_once)
        return value, fixup or (value is not None and value - value != 0.0)

    def _new_id(self, step: int, n: int, attempt_id: Any) -> str:
        """The id of the ``n``-th attempt logged when it is not the usual one: the loop's own
        (refused if given before), or ``<step>-<n>`` for a step other than the last one's."""
        if attempt_id is not None:
            aid = str(attempt_id)
            if aid in self._given_ids:
                raise UsageError(f"log_attempt: attempt_id {aid!r} was already logged")
            self._given_ids.add(aid)
            return aid
        self._id_step, self._id_prefix = step, f"{step}-"
        return f"{step}-{n}"

    def _refuse(self, what: str, step: int) -> None:
        """Raise the UsageError for an attempt the run cannot take (the lock held)."""
        self._check_open(what)
        if step < 0:
            raise UsageError(f"{what}: step must be >= 0 (not {step})")
        raise UsageError(
            f"{what}(step={step}): update {self._last_step} is already written; "
            f"attempts must be for a later update"
        )

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
        return self._log_mappings(attempts)

    def _log_mappings(self, attempts: Iterable[Mapping[str, Any]]) -> list[str]:
        """``log_attempts`` of an iterable of mappings: plain ones here, any other through
        ``log_attempt`` (``_log_one``)."""
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
                    meta = meta.copy() if meta else NO_METADATA
                    bucket.append(Attempt(step, aid, gid, tid, pv, reward, False, None, tokens,
                                          truncated, None, now, duration, meta, retries))  # fmt: skip
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
