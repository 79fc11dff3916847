"""Instrumentation: the run directory writer a training loop calls (FORMAT.md).

    with Run(cfg) as run:
        aid = run.log_attempt(step=3, group_id="3-g0", task_id="t17", reward=1.0, ...)
        run.log_step(3, trainer_logprobs={aid: [...]}, metrics={"train/loss": 0.12})

Two rules shape it. Instrumentation never breaks the training loop: a failure inside the writer
(a full disk, a value it cannot encode) becomes a ``WriterWarning`` and the loop goes on.
Misuse fails loudly: logging to a closed run, a step going backwards (``UsageError``). Guards
stop a run on purpose with ``RunStopped``.

Every record is appended as one complete line and flushed, so a process killed at any moment
loses at most the line being written. An update's attempts are written when the update closes
(their ``trained`` and ``discard_reason`` are decided then); attempts still pending when the
run ends are written as discarded with reason ``unfinished``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import platform
import threading
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import __version__
from .config import Config, load_config
from .errors import MissingExtraError, RunStopped, UsageError
from .jsonio import clean, encode_line, write_json_atomic
from .metrics import UNFINISHED, Attempt, Decision, RunState, decide, step_metrics
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


class _NullMirror:
    """Logging to W&B switched off: a null object, so the loop never branches on it."""

    def log(self, record: Mapping[str, Any]) -> None:
        pass

    def finish(self, status: str) -> None:
        pass


class _WandbMirror:
    """Mirrors every step record to a Weights & Biases run."""

    def __init__(self, project: str, name: str, config: dict[str, Any], run_dir: Path):
        try:
            import wandb
        except ImportError:
            raise MissingExtraError("wandb", "[output] wandb_project") from None
        self._wandb = wandb
        self._run = wandb.init(
            project=project, name=name, config=config, dir=str(run_dir), reinit="finish_previous"
        )

    def log(self, record: Mapping[str, Any]) -> None:
        data = {}
        for k, v in record.items():
            if k == "step" or v is None:
                continue
            if isinstance(v, str):  # our spelling of non-finite numbers
                v = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(v, v)
            data[k] = v
        self._run.log(data, step=int(record["step"]))

    def finish(self, status: str) -> None:
        self._run.finish(exit_code=0 if status == "finished" else 1)


def _unique_name() -> str:
    return f"run-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def _versions(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    v: dict[str, Any] = {"rlvitals": __version__, "python": platform.python_version()}
    import sys

    torch = sys.modules.get("torch")  # never import torch just to read its version
    if torch is not None:
        v["torch"] = getattr(torch, "__version__", None)
    v.update(extra or {})
    return v


class Run:
    """A run directory being written by a training loop.

    Args:
        config: a Config, a dict shaped like the TOML, a TOML path, or None for defaults.
        sections: extra config sections of the loop (name -> dataclass), validated too.
        versions: what a comparison must hold fixed (framework, model, task, grader versions).
        info: anything else to record in run.json (e.g. an injected fault and its onset step).

    Creates ``<output_dir>/<name>/`` and writes ``run.json`` at once. Use it as a context
    manager: leaving the block normally marks the run finished, an exception marks it crashed.
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
        self.name = cfg.output.name or _unique_name()
        self.dir = Path(cfg.output.output_dir) / self.name
        if (self.dir / RUN_JSON).exists():
            raise UsageError(f"{self.dir}: a run directory is already there; choose another name")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.run_id = uuid.uuid4().hex
        self._lock = threading.RLock()
        self._closed = False
        self._status = "running"
        self._pending: list[Attempt] = []
        self._decided: Decision | None = None
        self._last_step: int | None = None
        self._counter = 0
        self._last_step_time = time.time()
        self._state = RunState(
            reward_range=tuple(cfg.rollout.reward_range)  # type: ignore[arg-type]
            if cfg.rollout.reward_range
            else None
        )
        self._unusable_in_a_row = 0
        self._failures_in_a_row = 0
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
        write_json_atomic(self.dir / RUN_JSON, self._meta)
        self._files = {
            name: open(self.dir / name, "ab")  # noqa: SIM115 - closed in close()
            for name in (STEPS, ROLLOUTS, EVALS)
        }
        self._mirror: _NullMirror | _WandbMirror = _NullMirror()
        if cfg.output.wandb_project:
            try:
                self._mirror = _WandbMirror(
                    cfg.output.wandb_project, self.name, self._meta["config"], self.dir
                )
            except MissingExtraError:
                self.close("crashed", "wandb extra missing")
                raise
            except Exception as exc:  # a W&B outage must not stop training
                _warn(f"W&B mirror off: wandb.init failed: {exc}")
        self._heartbeat: threading.Thread | None = None
        self._stop_heartbeat = threading.Event()
        if cfg.output.progress_every_seconds:
            self._heartbeat = threading.Thread(
                target=self._beat, args=(cfg.output.progress_every_seconds,), daemon=True
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
        return self._status

    @property
    def last_step(self) -> int | None:
        """The last update written, or None before the first."""
        return self._last_step

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
            reward: the grader's reward; None when it failed before grading.
            policy_version: sampler weight version of its first model reply; None = unversioned.
            response_tokens: tokens the model generated; truncated: it hit the token limit.
            metadata: the agent's episode metadata and the grader's additions.
            sampler_logprobs: per-token logprobs of the sampled tokens, from the sampler.
            transcript: the generations, each ``{"prompt", "completion", ...}`` (FORMAT.md).
            error: the exception (or its type name) that ended the attempt; ``failed_in`` says
                whether the agent ("rollout") or the grader ("grading") raised.
            retries: retries spent on this attempt; duration: seconds from start to end.
            discard_reason: the loop's own decision to discard it (overrides the writer's).
        """
        with self._lock:
            self._check_open("log_attempt")
            if self._last_step is not None and step <= self._last_step:
                raise UsageError(
                    f"log_attempt(step={step}): update {self._last_step} is already written; "
                    f"attempts must be for a later update"
                )
            self._counter += 1
            aid = attempt_id if attempt_id is not None else f"{step}-{self._counter}"
            err = None
            if error is not None:
                kind = failed_in if failed_in in ("rollout", "grading") else "rollout"
                ename = error if isinstance(error, str) else type(error).__name__
                err = f"{kind}_failed/{ename}"
            if reward is not None and type(reward) is not float:
                reward = self._as_reward(reward, aid)
            a = Attempt(
                aid,
                step,
                str(group_id),
                str(task_id),
                reward,
                policy_version,
                response_tokens,
                bool(truncated),
                dict(metadata) if metadata else None,
                time.time(),
                duration,
                err,
                retries,
                sampler_logprobs,
                transcript,
                discard_reason,
            )
            self._pending.append(a)
            self._decided = None
            if err is not None:
                self._failures_in_a_row += 1
                limit = self.config.rollout.max_consecutive_rollout_failures
                if limit is not None and self._failures_in_a_row >= limit:
                    self._stop(
                        "max_consecutive_rollout_failures",
                        f"{self._failures_in_a_row} failed attempts in a row, the last {err}",
                    )
            else:
                self._failures_in_a_row = 0
            return aid

    def _as_reward(self, reward: Any, aid: str) -> float | None:
        try:
            item = getattr(reward, "item", None)
            return float(item() if callable(item) else reward)
        except (TypeError, ValueError):
            self._warn_once(
                "reward", f"attempt {aid}: reward {reward!r} is not a number; recorded as null"
            )
            return None

    def decide(self, step: int, *, discards: Mapping[str, str | None] | None = None) -> Decision:
        """Decide which pending attempts update ``step`` trains, before training on them.

        Calling it is optional (``log_step`` decides if it was not called); a loop calls it to
        know which attempts to compute advantages for. ``discards`` maps attempt ids to the
        loop's own reason (None: trains), overriding the writer's rules for those attempts.
        """
        with self._lock:
            self._check_open("decide")
            self._check_step(step)
            cfg = self.config
            self._decided = decide(
                [a for a in self._pending if a.step <= step],
                step,
                max_steps_off_policy=cfg.training.max_steps_off_policy,
                max_group_losses=cfg.rollout.max_group_losses,
                explicit=discards,
            )
            return self._decided

    def _check_step(self, step: int) -> None:
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise UsageError(f"step must be an integer >= 0 (not {step!r})")
        if self._last_step is not None and step <= self._last_step:
            raise UsageError(
                f"step {step} goes backwards: update {self._last_step} is already written"
            )

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
            metrics: the loop's own numbers (``train/loss``, ``perf/sampling_seconds``...).
            discards: the loop's own discard decisions (see ``decide``).
            policy_version: the trainer's weight version after this update (default step + 1).

        Returns the step record as written. Raises ``RunStopped`` after writing when
        ``max_consecutive_unusable_groups`` rejected groups came in a row.
        """
        with self._lock:
            self._check_open("log_step")
            self._check_step(step)
            if discards is not None or self._decided is None or self._decided.step != step:
                self.decide(step, discards=discards)
            decision = self._decided
            assert decision is not None
            batch = [a for a in self._pending if a.step <= step]
            self._pending = [a for a in self._pending if a.step > step]
            self._decided = None
            self._last_step = step
            record: dict[str, Any] = {}
            try:
                record = self._step_record(step, decision, batch, trainer_logprobs, metrics)
                if policy_version is not None:
                    record["policy_version"] = policy_version
                self._write_attempts(batch, step)
                self._append(STEPS, record)
                self._mirror_log(record)
            except Exception as exc:  # never break the loop over our own failure
                _warn(f"step {step}: could not write the update: {type(exc).__name__}: {exc}")
            for gid, reason in decision.groups.items():
                self._unusable_in_a_row = self._unusable_in_a_row + 1 if reason else 0
                limit = self.config.training.max_consecutive_unusable_groups
                if limit is not None and self._unusable_in_a_row >= limit:
                    self._stop(
                        "max_consecutive_unusable_groups",
                        f"{self._unusable_in_a_row} rejected groups in a row by step {step} "
                        f"(last: {gid}, {reason})",
                    )
            return record

    def _step_record(
        self,
        step: int,
        decision: Decision,
        batch: list[Attempt],
        trainer_logprobs: Mapping[str, Any] | None,
        metrics: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        now = time.time()
        if trainer_logprobs:
            known = {a.attempt_id: a for a in batch}
            for aid, lp in trainer_logprobs.items():
                a = known.get(aid)
                if a is None:
                    self._warn_once(
                        "tlp-unknown",
                        f"step {step}: trainer logprobs for unknown attempt {aid!r} ignored",
                    )
                elif a.sampler_logprobs is not None and len(lp) != len(a.sampler_logprobs):
                    self._warn_once(
                        "tlp-len",
                        f"step {step}: attempt {aid}: {len(lp)} trainer logprobs for "
                        f"{len(a.sampler_logprobs)} sampled tokens; left out of the mismatch",
                    )
        m = step_metrics(decision, batch, self._state, trainer_logprobs)
        step_seconds = now - self._last_step_time
        self._last_step_time = now
        m["perf/step_seconds"] = step_seconds
        tokens = sum(a.response_tokens or 0 for a in batch)
        if step_seconds > 0:
            m["perf/tokens_per_second"] = tokens / step_seconds
        for key, value in (metrics or {}).items():
            key = str(key)
            if key in RESERVED_STEP_KEYS:
                self._warn_once(f"reserved-{key}", f"metric {key!r} is reserved; kept as _{key}")
                key = f"_{key}"
            m[key] = value
        record = {"step": step, "time": now, "policy_version": step + 1, **m}
        return clean(record)

    def _write_attempts(self, batch: list[Attempt], step: int) -> None:
        lines = []
        for a in batch:
            lines.append(encode_line(clean(self._attempt_record(a))))
        if lines:
            self._write(ROLLOUTS, b"".join(lines))
        transcripts = [a for a in batch if a.transcript is not None]
        if transcripts:
            self._write_transcripts(step, transcripts)

    @staticmethod
    def _attempt_record(a: Attempt) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "step": a.step,
            "attempt_id": a.attempt_id,
            "group_id": a.group_id,
            "task_id": a.task_id,
            "policy_version": a.policy_version,
            "reward": a.reward,
            "trained": a.trained,
            "discard_reason": a.discard_reason,
            "response_tokens": a.response_tokens,
            "truncated": a.truncated,
            "lag": a.lag,
            "time": a.time,
            "duration": a.duration,
            "metadata": a.metadata or {},
        }
        if a.retries:
            rec["retries"] = a.retries
        if a.mismatch is not None:
            rec["mismatch"] = a.mismatch
        return rec

    def _write_transcripts(self, step: int, attempts: list[Attempt]) -> None:
        full = self.config.output.trace == "full"
        entries = []
        for a in attempts:
            gens = []
            for g in a.transcript or []:
                g = dict(g)
                g.setdefault("policy_version", a.policy_version)
                g.setdefault("trains", a.trained)
                if not full:
                    g.pop("prompt", None)
                    g.pop("completion", None)
                gens.append(g)
            entries.append(
                {
                    "attempt_id": a.attempt_id,
                    "group_id": a.group_id,
                    "task_id": a.task_id,
                    "reward": a.reward,
                    "trained": a.trained,
                    "generations": gens,
                }
            )
        tdir = self.dir / TRANSCRIPTS
        tdir.mkdir(exist_ok=True)
        write_json_atomic(tdir / f"step-{step:06d}.json", entries)

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
        """Record a held-out evaluation of the sampler checkpoint at update ``step``."""
        with self._lock:
            self._check_open("log_eval")
            record = {
                "step": step,
                "checkpoint": checkpoint,
                "suite": suite,
                "score": score,
                "n": n,
                "time": time.time(),
                **extra,
            }
            try:
                self._append(EVALS, clean(record))
            except Exception as exc:
                _warn(f"eval at step {step}: could not write: {type(exc).__name__}: {exc}")

    def checkpoint_due(self, step: int) -> bool:
        """Whether ``[output] sampler_checkpoint_every`` asks for a checkpoint after ``step``."""
        every = self.config.output.sampler_checkpoint_every
        return bool(every) and (step + 1) % every == 0  # type: ignore[operator]

    def checkpoint_path(self, step: int, suffix: str = ".pt") -> Path:
        """Where the sampler checkpoint of update ``step`` goes (``checkpoints/``)."""
        cdir = self.dir / CHECKPOINTS
        cdir.mkdir(exist_ok=True)
        return cdir / f"sampler-step-{step:06d}{suffix}"

    # -- progress --------------------------------------------------------------------------

    def progress(self, phase: str | None = None, **fields: Any) -> None:
        """Tell the heartbeat what the loop is doing (``phase="sampling"``, attempts_needed=...)."""
        with self._lock:
            if phase is not None:
                self._phase = phase
            self._progress_extra.update(fields)

    @contextlib.contextmanager
    def phase(self, name: str, **fields: Any) -> Iterator[None]:
        """``with run.phase("training"):`` sets the phase the heartbeat reports."""
        self.progress(name, **fields)
        yield

    def _beat(self, every: float) -> None:
        while not self._stop_heartbeat.wait(every):
            with self._lock:
                if self._closed:
                    return
                in_progress = 0 if self._last_step is None else self._last_step + 1
                rec = {
                    "time": time.time(),
                    "step": in_progress,
                    "phase": self._phase,
                    "attempts_done": len(self._pending),
                    **self._progress_extra,
                }
                rec.setdefault("attempts_needed", None)
                try:
                    path = self.dir / PROGRESS
                    with open(path, "ab") as f:
                        f.write(encode_line(clean(rec)))
                        f.flush()
                except Exception as exc:
                    self._warn_once("progress", f"progress heartbeat not written: {exc}")
            log.info(
                "progress: step %s %s, %s attempts done%s",
                rec["step"],
                rec["phase"],
                rec["attempts_done"],
                f" of {rec['attempts_needed']}" if rec["attempts_needed"] else "",
            )

    # -- internals -------------------------------------------------------------------------

    def _append(self, name: str, record: Mapping[str, Any]) -> None:
        self._write(name, encode_line(record))  # type: ignore[arg-type]

    def _write(self, name: str, data: bytes) -> None:
        f = self._files[name]
        f.write(data)
        f.flush()

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

    def close(self, status: str = "finished", reason: str | None = None) -> None:
        """End the run: write pending attempts as ``unfinished``, set the status in run.json."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._status = status
            self._stop_heartbeat.set()
            try:
                if self._pending:
                    for a in self._pending:
                        a.discard_reason = a.error or UNFINISHED
                        a.trained = False
                    step = self._pending[0].step
                    self._write_attempts(self._pending, step)
                    self._pending = []
            except Exception as exc:
                _warn(f"pending attempts not written: {type(exc).__name__}: {exc}")
            for f in self._files.values():
                try:
                    f.close()
                except OSError as exc:
                    _warn(f"closing a run file failed: {exc}")
            self._meta["status"] = status
            self._meta["stop_reason"] = reason
            self._meta["ended"] = _now_iso()
            try:
                write_json_atomic(self.dir / RUN_JSON, self._meta)
            except Exception as exc:
                _warn(f"run.json not updated to {status!r}: {exc}")
            try:
                self._mirror.finish(status)
            except Exception as exc:
                _warn(f"W&B finish failed: {exc}")
        if self._heartbeat is not None and self._heartbeat is not threading.current_thread():
            self._heartbeat.join(timeout=5)
