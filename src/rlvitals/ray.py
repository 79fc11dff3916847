"""The run as a Ray actor: sampler actors on any node send it their attempts, the trainer its
updates, and one process owns the run directory.

    import ray
    from rlvitals.ray import RunActor

    run = RunActor.remote(cfg)                       # cfg: what ``Run`` takes
    run.log_attempts.remote([{"step": 3, "group_id": "3-g0", "task_id": "t17", "reward": 1.0}, ...])
    ray.get(run.log_step.remote(3, trainer_logprobs=..., metrics={"train/loss": 0.1}))
    ray.get(run.close.remote())

Every method has ``Run``'s signature. Calls from one caller run in the order sent (Ray's
actor ordering); calls from several samplers interleave, which is fine: an update's attempts
are whatever reached the actor before its ``log_step``. ``log_attempts`` takes a batch in one
call (one round trip for a group or an update's share). A failure inside the writer stays a
``WriterWarning`` in the actor; misuse (a step going backwards) comes back as the
``UsageError`` raised there, when the caller ``ray.get``s the result. ``ray`` is the extra
``pip install 'rlvitals[ray]'``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .errors import MissingExtraError

try:
    import ray
except ModuleNotFoundError as exc:  # pragma: no cover - the message is the behaviour
    raise MissingExtraError("ray", "rlvitals.ray (the run as a Ray actor)") from exc

__all__ = ["RunActor"]


class _RunActor:
    """The body of ``RunActor``: a ``Run`` in the actor's process."""

    def __init__(self, config: Any = None, **kwargs: Any) -> None:
        from .writer import Run

        self._run = Run(config, **kwargs)

    def log_attempt(self, *args: Any, **kwargs: Any) -> str:
        """``Run.log_attempt``; returns the attempt id."""
        return self._run.log_attempt(*args, **kwargs)

    def log_attempts(self, attempts: Sequence[Mapping[str, Any]]) -> list[str]:
        """``Run.log_attempts``: several attempts in one round trip; returns their ids."""
        return self._run.log_attempts(attempts)

    def decide(self, step: int, **kwargs: Any) -> list[str]:
        """``Run.decide``; returns the ids of the attempts the update trains."""
        return [a.attempt_id for a in self._run.decide(step, **kwargs).trained]

    def log_step(self, step: int, **kwargs: Any) -> dict[str, Any]:
        """``Run.log_step``; returns the step record as written."""
        return self._run.log_step(step, **kwargs)

    def log_eval(self, *args: Any, **kwargs: Any) -> None:
        """``Run.log_eval``."""
        self._run.log_eval(*args, **kwargs)

    def progress(self, phase: str | None = None, **fields: Any) -> None:
        """``Run.progress``: what the heartbeat reports."""
        self._run.progress(phase, **fields)

    def checkpoint_due(self, step: int) -> bool:
        return self._run.checkpoint_due(step)

    def info(self) -> dict[str, Any]:
        """Where the run is written and how it stands."""
        r = self._run
        return {
            "dir": str(r.dir),
            "name": r.name,
            "status": r.status,
            "last_step": r.last_step,
            "pending": r.pending,
        }

    def close(self, status: str = "finished", reason: str | None = None) -> dict[str, Any]:
        """``Run.close``; returns ``info()``."""
        self._run.close(status, reason)
        return self.info()


RunActor = ray.remote(_RunActor)
