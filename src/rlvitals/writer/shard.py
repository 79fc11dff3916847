"""Attempts from other processes: rollout workers, an orchestrator apart from the trainer.

    # in each rollout worker (any process or node that sees the run directory)
    with rlvitals.attach("runs/grpo-seed0", shard="worker-3") as w:
        w.log_attempt(step, group_id, task_id, reward, policy_version=v, ...)

    # in the trainer, as usual
    run.log_step(step, trainer_logprobs=...)   # closes the update over every shard's attempts

A shard writer appends each attempt, as logged, to its own journal
``shards/<shard>.attempts.jsonl`` in the run directory, one whole line per ``write``: two
processes never share a file (a second writer of the same shard is refused), and a killed
worker loses at most the line it was writing. What makes an attempt's ``rollouts.jsonl``
record (trained, discard reason, lag, mismatch) is decided by the update that consumes it, so
the trainer's ``Run`` takes the journals' new lines in before it decides (``decide``,
``log_step``, ``close``) and writes the decided records itself, with the attempts it logged
in-process. An attempt that arrives after its update was written is recorded as discarded
(``late``). Only the trainer writes ``run.json`` and ``steps.jsonl``.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ..errors import UsageError
from ..jsonio import LineFile, clean, read_complete_lines, to_float
from ..metrics import Attempt
from .args import AttemptArgs
from .records import NO_METADATA, as_int, as_number, error_code, warn

__all__ = ["SHARDS", "ShardIntake", "ShardWriter", "attach"]

SHARDS = "shards"  # the journals' folder in a run directory
_JOURNAL = ".attempts.jsonl"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_DECODER = msgspec.json.Decoder()


class ShardWriter:
    """One process's writer of attempts into a run another process trains (see the module
    docstring). ``log_attempt`` has ``Run.log_attempt``'s signature; ids default to
    ``<shard>-<n>``, unique in the run. A failure to write is a ``WriterWarning``, never an
    exception in the loop; misuse (a closed writer, a bad argument) raises ``UsageError``."""

    def __init__(self, run_dir: str | os.PathLike[str], shard: str) -> None:
        if not isinstance(shard, str) or not _NAME.match(shard):
            raise UsageError(
                f"shard: expected a name of letters, digits, '.', '_' or '-' (not {shard!r})"
            )
        self.dir = Path(run_dir)
        self.shard = shard
        self.path = self.dir / SHARDS / f"{shard}{_JOURNAL}"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = LineFile(self.path)
        except OSError as exc:
            raise UsageError(f"{self.path}: cannot open the shard: {exc.strerror or exc}") from None
        try:
            fcntl.flock(self._file._f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._file.close()
            raise UsageError(
                f"{self.path}: shard {shard!r} is being written by another process; "
                "give each writer its own shard name"
            ) from None
        self._count = sum(1 for _ in read_complete_lines(self.path))
        try:
            if _torn(self.path):  # a predecessor died mid-line: end that line, never join it
                self._file.append(b"\n")
                self._count += 1  # its id is not given again
        except OSError as exc:
            self._file.close()
            raise UsageError(f"{self.path}: cannot open the shard: {exc.strerror or exc}") from None
        self._closed = False
        self._warned: set[str] = set()

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warn(message, stacklevel=4)

    def _record(self, a: AttemptArgs) -> dict[str, Any]:
        step: int = as_int(a.step, "log_attempt: step")  # type: ignore[assignment]
        if step < 0:
            raise UsageError(f"log_attempt: step must be >= 0 (not {step})")
        self._count += 1
        rec: dict[str, Any] = {
            "step": step,
            "attempt_id": f"{self.shard}-{self._count}"
            if a.attempt_id is None
            else str(a.attempt_id),
            "group_id": str(a.group_id),
            "task_id": str(a.task_id),
            "policy_version": as_int(
                a.policy_version, "log_attempt: policy_version", optional=True
            ),
            "reward": None if a.reward is None else as_number(a.reward, "reward", self._warn_once),
            "response_tokens": as_int(a.response_tokens, "log_attempt: response_tokens"),
            "truncated": bool(a.truncated),
            "time": time.time(),
            "duration": (
                None if a.duration is None else as_number(a.duration, "duration", self._warn_once)
            ),
        }
        if a.metadata:
            rec["metadata"] = dict(a.metadata)
        if a.retries:
            rec["retries"] = as_int(a.retries, "log_attempt: retries")
        err = error_code(a.error, a.failed_in)
        if err is not None:
            rec["error"] = err
        if a.sampler_logprobs is not None:
            rec["sampler_logprobs"] = a.sampler_logprobs
        if a.transcript is not None:
            rec["transcript"] = a.transcript
        if a.discard_reason is not None:
            rec["discard_reason"] = str(a.discard_reason)
        return rec

    def log_attempt(
        self, step: int, group_id: str, task_id: str, reward: float | None = None, **kwargs: Any
    ) -> str:
        """Record one attempt (``Run.log_attempt``'s arguments); returns its attempt id."""
        return self.log_attempts(
            [{"step": step, "group_id": group_id, "task_id": task_id, "reward": reward, **kwargs}]
        )[0]

    def log_attempts(self, attempts: Iterable[Mapping[str, Any]]) -> list[str]:
        """Record several attempts in one write (each a mapping of ``log_attempt``'s
        arguments); returns their ids."""
        if self._closed:
            raise UsageError(f"log_attempt: shard {self.shard!r} is closed")
        recs = []
        for a in attempts:
            try:
                recs.append(self._record(AttemptArgs(**a)))
            except TypeError as exc:
                raise UsageError(f"log_attempt: {exc}") from None
        try:
            data = b"".join(msgspec.json.encode(clean(r)) + b"\n" for r in recs)
            self._file.append(data)
        except Exception as exc:  # a full disk must not stop the worker
            self._warn_once(
                "write", f"{self.path}: attempts not written: {type(exc).__name__}: {exc}"
            )
        return [r["attempt_id"] for r in recs]

    def close(self) -> None:
        """Release the shard (its journal stays for the trainer to read)."""
        if not self._closed:
            self._closed = True
            try:
                self._file.close()
            except OSError as exc:
                self._warn_once("close", f"{self.path}: closing the shard failed: {exc}")


def _torn(path: Path) -> bool:
    """Whether the file ends inside a line (its last byte is not a newline)."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            return False
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"


def attach(run_dir: str | os.PathLike[str], shard: str) -> ShardWriter:
    """A writer of attempts into the run at ``run_dir`` for this process, as shard ``shard``
    (see the module docstring). The trainer's ``Run`` may start before or after it."""
    return ShardWriter(run_dir, shard)


def _whole(rec: dict[str, Any], key: str, *, optional: bool = False, default: int = 0) -> Any:
    """``rec[key]`` as a whole number in 0..2**63-1 (a float holding one included; a
    policy_version may be negative, as ``log_attempt`` allows)."""
    v = rec.get(key)
    if v is None:
        if optional:
            return None
        if key in ("step",):
            raise ValueError(f"no {key}")
        return default
    if type(v) is float and v.is_integer():
        v = int(v)
    low = -(2**63) if key == "policy_version" else 0
    if type(v) is not int or not low <= v <= 2**63 - 1:
        raise ValueError(f"{key} {v!r:.40} is not a whole number >= 0")
    return v


def _text(rec: dict[str, Any], key: str, *, optional: bool = False) -> Any:
    v = rec.get(key)
    if v is None and optional:
        return None
    if not isinstance(v, str):
        raise ValueError(f"{key} {v!r:.40} is not a string")
    return v


def _to_attempt(rec: Any) -> Attempt:
    """A journal line as an Attempt; ValueError for a line whose fields have the wrong types
    (a string policy_version would break every later update's arithmetic)."""
    if not isinstance(rec, dict):
        raise ValueError("not an object")
    reward, duration, when = rec.get("reward"), rec.get("duration"), rec.get("time")
    metadata = rec.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ValueError("metadata is not an object")
    for key, v in (("reward", reward), ("duration", duration), ("time", when)):
        if v is not None and to_float(v) is None:
            raise ValueError(f"{key} {v!r:.40} is not a number")
    for key in ("sampler_logprobs", "transcript"):
        if rec.get(key) is not None and not isinstance(rec[key], list):
            raise ValueError(f"{key} is not a list")
    if not isinstance(rec.get("truncated", False), bool):
        raise ValueError("truncated is not true or false")
    return Attempt(
        _whole(rec, "step"),
        _text(rec, "attempt_id"),
        _text(rec, "group_id"),
        _text(rec, "task_id"),
        _whole(rec, "policy_version", optional=True),
        None if reward is None else to_float(reward),
        False,
        None,
        _whole(rec, "response_tokens"),
        bool(rec.get("truncated")),
        None,
        float(to_float(when) or 0.0),
        None if duration is None else to_float(duration),
        metadata or NO_METADATA,
        _whole(rec, "retries"),
        None,
        _text(rec, "error", optional=True),
        rec.get("sampler_logprobs"),
        rec.get("transcript"),
        _text(rec, "discard_reason", optional=True),
    )


class ShardIntake:
    """The trainer's side: the journals' lines that arrived since the last call."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir / SHARDS
        self._offsets: dict[str, tuple[int, int]] = {}  # file -> (offset, next line number)
        self._bad: dict[str, int] = {}  # file -> bad lines skipped so far

    def take(self, on_problem: Any) -> list[Attempt]:
        """New attempts from every shard, in file order; a bad line is skipped, the first of
        each kind told through ``on_problem(key, message)`` (which tells a key once), and
        the lines skipped since then counted in one more message per call (a new key)."""
        try:
            names = sorted(n for n in os.listdir(self.dir) if n.endswith(_JOURNAL))
        except FileNotFoundError:
            return []
        except OSError as exc:
            on_problem("shards", f"{self.dir}: shards not read: {exc}")
            return []
        out: list[Attempt] = []
        for name in names:
            path = self.dir / name
            offset, line = self._offsets.get(name, (0, 1))
            told = self._bad.get(name, 0)
            bad: list[int] = []
            try:
                for lineno, end, raw in read_complete_lines(path, offset, first_line=line):
                    offset, line = end, lineno + 1
                    if raw is None:
                        bad.append(lineno)
                        on_problem(f"shard-long-{name}", f"{path}:{lineno}: line too long; skipped")
                        continue
                    try:
                        out.append(_to_attempt(_DECODER.decode(raw)))
                    except (ValueError, KeyError, TypeError, msgspec.DecodeError) as exc:
                        bad.append(lineno)
                        on_problem(
                            f"shard-bad-{name}", f"{path}:{lineno}: not an attempt ({exc}); skipped"
                        )
            except OSError as exc:
                on_problem(f"shard-read-{name}", f"{path}: not read: {exc}")
            self._offsets[name] = (offset, line)
            total = self._bad[name] = told + len(bad)
            more = bad[1:] if not told else bad  # the first was told on its own
            if more:
                s = "s" if len(more) > 1 else ""
                on_problem(
                    f"shard-more-{name}-{total}",
                    f"{path}: {len(more)} more bad line{s} skipped (lines {more[0]}..{more[-1]}); "
                    f"{total} in all",
                )
        return out
