"""Instrumentation: the run directory writer a training loop calls (FORMAT.md).

    with Run(cfg) as run:
        aid = run.log_attempt(step=3, group_id="3-g0", task_id="t17", reward=1.0, ...)
        decision = run.decide(3)            # optional: which attempts train, before training
        run.log_step(3, trainer_logprobs={aid: [...]}, metrics={"train/loss": 0.12})

Two rules shape it. Instrumentation never breaks the training loop: a failure inside the writer
(a full disk, a value it cannot encode, a W&B outage) becomes a ``WriterWarning`` and the loop
goes on. Misuse fails loudly with ``UsageError``: logging to a closed run, a step going
backwards, an attempt for an update already written. Guards stop a run on purpose with
``RunStopped`` after writing everything, ``run.json`` saying ``stopped`` and why.

What a killed process loses. Every record is appended as whole lines with one ``write`` call
and no user-space buffer, so a process killed at any moment (SIGKILL included) leaves every
record written before it intact; at most the line being written is cut short, and readers
treat a last line without its newline as not yet written. A write that fails half way (disk
full) is truncated back to the last whole line, so a failure never glues two records together.

An attempt's record needs what only its update decides (``trained``, ``discard_reason``,
``lag``, ``mismatch``), so attempts are written when ``log_step`` closes their update, all in
one write; ``close`` writes attempts still pending as discarded (their own failure, or
``unfinished``), whether the loop ended, crashed or a guard stopped it. So the one thing a
SIGKILL (or power loss) costs beyond a torn last line is the attempts logged since the last
``log_step``: the update in progress, which no step record describes yet either. Every update
before it is whole. We chose this over journaling each attempt as it arrives, for three
reasons: a journal costs an encode and a ``write`` system call per attempt (about 2 µs here,
40% of the writer's whole budget of 5 µs per attempt, measured by benchmarks/writer.py);
it doubles the bytes written; and a record written before its update is decided would need a
second, amending record that every reader merges (a format change). ``[output]
progress_every_seconds`` writes the in-progress attempt count to ``progress.jsonl``, so a live
view still sees an update's progress before it closes.

Speed. ``log_attempt`` does the least it can: it checks the arguments and builds the
``Attempt``, which is also its record. ``log_step`` decides, computes the metrics column by
column (episode metadata transposed into columns by C-level calls) and encodes the whole
update in one ``msgspec`` call; values JSON cannot spell as they are (NaN, numpy scalars) are
found on the way and only those records cleaned.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from . import __version__
from .config import Config, load_config
from .errors import ConfigError, RunStopped, UsageError
from .jsonio import ENCODER, LineFile, clean, encode_line, scrub, write_bytes_atomic
from .jsonio import write_json_atomic as _write_json_atomic
from .metrics import (
    UNFINISHED,
    Attempt,
    Decision,
    RunState,
    decide,
    step_metrics,
)
from .mirrors import NullMirror, WandbMirror, import_wandb
from .schema import (
    CHECKPOINTS,
    EVALS,
    FORMAT_ID,
    PROGRESS,
    RESERVED_STEP_KEYS,
    ROLLOUTS,
    RUN_JSON,
    STEPS,
    TRANSCRIPTS,
)

__all__ = ["Run", "WriterWarning"]

log = logging.getLogger("rlvitals")


class WriterWarning(UserWarning):
    """Something went wrong inside the writer; the training loop goes on."""


def _warn(message: str) -> None:
    warnings.warn(message, WriterWarning, stacklevel=3)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _nonfinite(x: float) -> str:
    return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")


class _TranscriptEntry(msgspec.Struct):
    """One attempt in ``transcripts/step-NNNNNN.json`` (FORMAT.md)."""

    attempt_id: str
    group_id: str
    task_id: str
    reward: Any
    trained: bool
    generations: list[Any]


_TEXT_KEYS = frozenset({"prompt", "completion"})  # what trace = "samples" leaves out


# The keys every rollouts.jsonl record has: Attempt's fields up to ``retries``.
_RECORD_FIELDS = Attempt.__struct_fields__[: Attempt.__struct_fields__.index("retries")]
_NO_METADATA: dict[str, Any] = {}  # shared by attempts logged without metadata; never mutated


def _unique_name() -> str:
    return f"run-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def _versions(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    v: dict[str, Any] = {"rlvitals": __version__, "python": platform.python_version()}
    torch = sys.modules.get("torch")  # never import torch just to read its version
    if torch is not None:
        v["torch"] = getattr(torch, "__version__", None)
    v.update(extra or {})
    return v


def _as_int(value: Any, what: str, *, optional: bool = False) -> int | None:
    """An int from a Python, numpy or torch integer; UsageError for anything else."""
    if value is None and optional:
        return None
    if isinstance(value, bool):
        raise UsageError(f"{what} must be an integer (not {value!r})")
    try:
        return int(value.__index__())
    except (AttributeError, TypeError, ValueError):
        raise UsageError(f"{what} must be an integer (not {value!r})") from None


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
        self.name = cfg.output.name or _unique_name()
        self.dir = Path(cfg.output.output_dir) / self.name
        if (self.dir / RUN_JSON).exists():
            raise UsageError(f"{self.dir}: a run directory is already there; choose another name")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the run directory {self.dir}: {exc.strerror or exc}",
                section="output",
                key="output_dir",
            ) from None
        self.run_id = uuid.uuid4().hex
        self._lock = threading.RLock()
        self._closed = False
        self._status = "running"
        # step -> attempts logged for that update, in arrival order
        self._pending: dict[int, list[Attempt]] = {}
        self._n_pending = 0
        self._given_ids: set[str] = set()
        self._decided: Decision | None = None
        self._last_step: int | None = None
        self._counter = 0
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
        self._phase = "starting"
        self._progress_extra: dict[str, Any] = {}
        self._meta = {
            "format": FORMAT_ID,
            "run_id": self.run_id,
            "name": self.name,
            "created": _now_iso(),
            "status": "running",
            "stop_reason": None,
            "config": cfg.to_dict(),
            "versions": _versions(versions),
            **dict(info or {}),
        }
        _write_json_atomic(self.dir / RUN_JSON, self._meta)
        self._files = {name: LineFile(self.dir / name) for name in (STEPS, ROLLOUTS, EVALS)}
        self._progress_file: LineFile | None = None
        self._mirror: NullMirror | WandbMirror = NullMirror()
        if wandb is not None and cfg.output.wandb_project:
            try:
                self._mirror = WandbMirror(
                    wandb, cfg.output.wandb_project, self.name, self._meta["config"], self.dir
                )
            except Exception as exc:  # a W&B outage must not stop training
                _warn(f"W&B mirror off: wandb.init failed: {type(exc).__name__}: {exc}")
        self._heartbeat: threading.Thread | None = None
        self._stop_heartbeat = threading.Event()
        if cfg.output.progress_every_seconds:
            self._heartbeat = threading.Thread(
                target=self._beat,
                args=(cfg.output.progress_every_seconds,),
                name=f"rlvitals-heartbeat-{self.name}",
                daemon=True,
            )
            self._heartbeat.start()

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
        return self._n_pending

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
            transcript: the generations, each ``{"prompt", "completion", ...}`` (FORMAT.md).
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
            step = _as_int(step, "log_attempt: step")  # type: ignore[assignment]
            response_tokens = _as_int(response_tokens, "log_attempt: response_tokens")  # type: ignore[assignment]
            retries = _as_int(retries, "log_attempt: retries")  # type: ignore[assignment]
            policy_version = _as_int(policy_version, "log_attempt: policy_version", optional=True)
        if type(group_id) is not str or type(task_id) is not str:
            group_id, task_id = str(group_id), str(task_id)
        if (reward is not None and type(reward) is not float) or (
            duration is not None and type(duration) is not float
        ):
            reward = None if reward is None else self._as_number(reward, "reward")
            duration = None if duration is None else self._as_number(duration, "duration")
        err = None
        if error is not None:
            if failed_in != "rollout" and failed_in != "grading":
                raise UsageError(f'failed_in: expected "rollout" or "grading" (not {failed_in!r})')
            ename = error if isinstance(error, str) else type(error).__name__
            err = f"{failed_in}_failed/{ename}"
        meta = dict(metadata) if metadata else None
        now = time.time()
        with self._lock:
            if self._closed:
                self._check_open("log_attempt")
            last = self._last_step
            if (last is not None and step <= last) or step < 0:
                if step < 0:
                    raise UsageError(f"log_attempt: step must be >= 0 (not {step})")
                raise UsageError(
                    f"log_attempt(step={step}): update {last} is already written; "
                    f"attempts must be for a later update"
                )
            self._counter += 1
            if attempt_id is None:
                aid = f"{step}-{self._counter}"
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
                bool(truncated),
                None,
                now,
                duration,
                meta or _NO_METADATA,
                retries,
                None,
                err,
                sampler_logprobs,
                transcript,
                discard_reason,
            )
            if (
                err is not None
                or sampler_logprobs is not None
                or transcript is not None
                or discard_reason is not None
                or (reward is not None and reward - reward != 0.0)
                or (duration is not None and duration - duration != 0.0)
            ):
                self._fixups.append(a)
            bucket = self._pending.get(step)
            if bucket is None:
                self._pending[step] = [a]
            else:
                bucket.append(a)
            self._n_pending += 1
            decided = self._decided
            if decided is not None and step <= decided.step:
                self._decided = None
            if err is not None:
                self._failures_in_a_row += 1
                limit = self._max_failures
                if limit is not None and self._failures_in_a_row >= limit:
                    self._stop(
                        "max_consecutive_rollout_failures",
                        f"{self._failures_in_a_row} failed attempts in a row, the last {err}",
                    )
            else:
                self._failures_in_a_row = 0
            return aid

    def _as_number(self, value: Any, what: str) -> float | None:
        try:
            item = getattr(value, "item", None)
            return float(item() if callable(item) else value)
        except (TypeError, ValueError, RuntimeError):
            self._warn_once(what, f"{what} {value!r} is not a number; recorded as null")
            return None

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
            return self._decided

    def _check_step(self, step: Any) -> int:
        if type(step) is not int:
            step = _as_int(step, "step")
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
            if policy_version is not None:
                policy_version = _as_int(policy_version, "log_step: policy_version")
            decision = self._decided
            if discards is not None or decision is None or decision.step != step:
                decision = self.decide(step, discards=discards)
            batch = self._batch(step, take=True)
            if self._given_ids:
                for a in batch:
                    self._given_ids.discard(a.attempt_id)
            self._decided = None
            self._last_step = step
            record: dict[str, Any] = {"step": step, "time": time.time()}
            try:
                record = self._step_record(
                    step, decision, batch, trainer_logprobs, metrics, policy_version
                )
            except Exception as exc:  # never break the loop over our own failure
                _warn(f"step {step}: step record incomplete: {type(exc).__name__}: {exc}")
            self._guarded(f"step {step}: attempts not written", self._write_attempts, batch, step)
            self._guarded(f"step {step}: step record not written", self._append, STEPS, record)
            self._mirror_log(record)
            self._check_unusable(step, decision)
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
        if take:
            self._n_pending -= len(batch)
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
            _warn(f"step {step}: metrics not computed: {type(exc).__name__}: {exc}")
        for a in odd:  # metadata JSON cannot spell as it is (NaN, numpy values): write it clean
            a.metadata = clean(a.metadata)
        for problem in problems:  # once per kind: "...sampled tokens..." or "...without..."
            kind = "tlp-length" if "sampled tokens" in problem else "tlp-stray"
            self._warn_once(kind, f"step {step}: {problem}")
        step_seconds = now - self._last_step_time
        self._last_step_time = now
        m["perf/step_seconds"] = step_seconds
        if step_seconds > 0:
            m["perf/tokens_per_second"] = sum([a.response_tokens for a in batch]) / step_seconds
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
                    a.reward = _nonfinite(r)  # type: ignore[assignment]
                if d is not None and d - d != 0.0:
                    a.duration = _nonfinite(d)  # type: ignore[assignment]
        try:
            data = ENCODER.encode_lines(batch)
        except Exception:  # a value msgspec cannot encode: find it, keep the record scrubbed
            data = b"".join([self._encode_one(a) for a in batch])
        self._files[ROLLOUTS].append(data)

    def _write_transcripts_of(self, attempts: list[Attempt]) -> None:
        by_step: dict[int, list[Attempt]] = {}
        for a in attempts:
            if a.transcript is not None:
                by_step.setdefault(a.step, []).append(a)
        for s, some in by_step.items():
            self._guarded(f"step {s}: transcripts not written", self._write_transcripts, s, some)

    def _encode_one(self, a: Attempt) -> bytes:
        try:
            return ENCODER.encode(a) + b"\n"
        except Exception:
            self._warn_once(
                "unencodable",
                f"attempt {a.attempt_id!r}: a value JSON cannot hold; written as text",
            )
            rec = {f: getattr(a, f) for f in _RECORD_FIELDS}
            if a.retries:
                rec["retries"] = a.retries
            if a.mismatch is not None:
                rec["mismatch"] = a.mismatch
            return encode_line(scrub(rec))

    def _write_transcripts(self, step: int, attempts: list[Attempt]) -> None:
        """``transcripts/step-NNNNNN.json``: the update's attempts and their generations."""
        full = self.config.output.trace == "full"
        gens_all = []
        for a in attempts:
            pv, trains = a.policy_version, a.trained
            if full:  # the loop's own keys win over the defaults
                gens = [
                    {"policy_version": pv, "trains": trains, **g}
                    if type(g) is dict or isinstance(g, Mapping)
                    else {"policy_version": pv, "trains": trains, "completion": g}
                    for g in a.transcript or ()
                ]
            else:
                gens = [
                    {
                        "policy_version": pv,
                        "trains": trains,
                        **{k: v for k, v in g.items() if k not in _TEXT_KEYS},
                    }
                    if type(g) is dict or isinstance(g, Mapping)
                    else {"policy_version": pv, "trains": trains}
                    for g in a.transcript or ()
                ]
            gens_all.append(gens)
        try:
            if b"null" in ENCODER.encode(gens_all):  # a None, or a NaN msgspec would lose
                gens_all = [clean(g) for g in gens_all]
        except Exception:  # text UTF-8 cannot hold, a key of an odd type
            gens_all = [scrub(g) for g in gens_all]
        entries = [
            _TranscriptEntry(
                a.attempt_id,
                a.group_id,
                a.task_id,
                _nonfinite(r) if (r := a.reward) is not None and r - r != 0.0 else r,
                a.trained,
                gens,
            )
            for a, gens in zip(attempts, gens_all)
        ]
        tdir = self.dir / TRANSCRIPTS
        tdir.mkdir(exist_ok=True)
        path = tdir / f"step-{step:06d}.json"
        if path.exists():  # attempts of this update written before (close after a crash)
            with contextlib.suppress(OSError, ValueError):
                entries = msgspec.json.decode(path.read_bytes()) + entries
        write_bytes_atomic(path, ENCODER.encode(entries) + b"\n")  # every value spelled

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
            step = _as_int(step, "log_eval: step")  # type: ignore[assignment]
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

    def _beat(self, every: float) -> None:
        while not self._stop_heartbeat.wait(every):
            try:
                self.heartbeat()
            except Exception as exc:  # the heartbeat thread must never die noisily
                self._warn_once("progress", f"progress heartbeat failed: {exc}")

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
                "attempts_done": self._n_pending,
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
        needed = rec["attempts_needed"]
        log.info(
            "progress: step %s %s, %s attempts done%s, %.0f s since the last update",
            rec["step"],
            rec["phase"],
            rec["attempts_done"],
            f" of {needed}" if needed else "",
            rec["seconds_since_step"],
        )
        return rec

    # -- internals -------------------------------------------------------------------------

    def _append(self, name: str, record: Mapping[str, Any]) -> None:
        self._files[name].append(encode_line(record))

    def _guarded(self, what: str, fn: Any, *args: Any) -> None:
        """Run a write; a failure becomes a WriterWarning, never an exception in the loop."""
        try:
            fn(*args)
        except Exception as exc:
            _warn(f"{what}: {type(exc).__name__}: {exc}")

    def _mirror_log(self, record: Mapping[str, Any]) -> None:
        try:
            self._mirror.log(record)
        except Exception as exc:
            self._warn_once("wandb", f"W&B mirror failed, step records still on disk: {exc}")

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            _warn(message)

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
            self._stop_heartbeat.set()
            self._pending, self._n_pending = {}, 0
            self._fixups = []
            files = list(self._files.values())
            if self._progress_file is not None:
                files.append(self._progress_file)
            for f in files:
                self._guarded("closing a run file failed", f.close)
        if self._heartbeat is not None and self._heartbeat is not threading.current_thread():
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
            self._closed = True
            self._status = status
            self._stop_heartbeat.set()
            pending = [a for s in sorted(self._pending) for a in self._pending[s]]
            self._pending, self._n_pending = {}, 0
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
            self._meta["ended"] = _now_iso()
            self._guarded(
                f"run.json not updated to {status!r}",
                _write_json_atomic,
                self.dir / RUN_JSON,
                self._meta,
            )
            self._guarded("W&B finish failed", self._mirror.finish, status)
        if self._heartbeat is not None and self._heartbeat is not threading.current_thread():
            self._heartbeat.join(timeout=5)
