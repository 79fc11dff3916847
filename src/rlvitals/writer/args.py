"""An attempt's arguments, declared once: ``Run.log_attempt``'s keyword arguments, the
mappings ``log_attempts`` and ``ShardWriter.log_attempts`` take, and the columns of a batch
(``writer/columns.py``) are all these names, with these defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, fields
from typing import Any

__all__ = ["ARGUMENTS", "PLAIN", "AttemptArgs"]


@dataclass(frozen=True, slots=True)
class AttemptArgs:
    """One attempt's arguments, as ``Run.log_attempt`` takes them (its docstring says what
    each means; a test holds its signature to this one). ``AttemptArgs(**mapping)`` refuses
    an unknown or missing argument with the ``TypeError`` a call would raise."""

    step: int
    group_id: str
    task_id: str
    reward: float | None = None
    _: KW_ONLY
    policy_version: int | None = None
    response_tokens: int = 0
    truncated: bool = False
    metadata: Mapping[str, Any] | None = None
    sampler_logprobs: Any = None
    transcript: list[dict[str, Any]] | None = None
    error: BaseException | str | None = None
    failed_in: str = "rollout"
    retries: int = 0
    duration: float | None = None
    attempt_id: str | None = None
    discard_reason: str | None = None


# Every argument's name, in the signature's order.
ARGUMENTS: tuple[str, ...] = tuple(f.name for f in fields(AttemptArgs))

# The arguments the writer's fast paths take as they are (``log_attempts``' plain mappings, a
# batch's plain columns), each with the exact types it takes and its default; an attempt with
# any other argument, or another type, goes the way of ``log_attempt``.
PLAIN: dict[str, tuple[frozenset[type], Any]] = {
    "step": (frozenset({int}), None),
    "group_id": (frozenset({str}), None),
    "task_id": (frozenset({str}), None),
    "reward": (frozenset({float, type(None)}), None),
    "policy_version": (frozenset({int, type(None)}), None),
    "response_tokens": (frozenset({int}), 0),
    "truncated": (frozenset({bool}), False),
    "metadata": (frozenset({dict, type(None)}), None),
    "retries": (frozenset({int}), 0),
    "duration": (frozenset({float, type(None)}), None),
}
