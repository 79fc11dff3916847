from __future__ import annotations

import contextlib
import errno
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
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
from .attempts import AttemptIntake
from .directory import create_run_dir, now_iso, unique_name
from .directory import versions as versions_of
from .heartbeat import Heartbeat, log_progress
from .records import (
    WriterWarning,
    as_int,
    encode_attempt,
    nonfinite,
    warn,
    write_transcripts,
)
from .shard import ShardIntake

__all__ = ["Run", "WriterWarning"]

_tokens = attrgetter("response_tokens")


class Run(AttemptIntake):
    """A run directory being written by a training loop.

    Args:
        config: a Config, a dict shaped like the TOML, a TOML path, or None for defaults.
        sections: extra config sections of the loop (name -> dataclass), validated too.
        versions: what a comparison must hold fixed (framework, model, task, grader versions).
        info: anything else to record in run.json (e.g. an injected fault and its onset step).

    Creates ``<output_dir>/<name>/`` and writes ``run.json`` at once. Use it as a context
    manager: leaving the block normally marks the run finished, an exception marks it crashed
    with the exception as the reason, a guard marks it stopped. Thread-safe: attempts may be
    logged from several threads. Attempts come in through its base ``AttemptIntake``
    (``writer/attempts.py``: ``log_attempt``, ``log_attempts``); this class closes updates and
    writes the run's files.
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

    # -- updates (attempts come in through AttemptIntake: log_attempt, log_attempts) ------

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
