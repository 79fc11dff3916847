"""The attempts table's columns from decoded attempt records (``readers.native``).

Each column is built in one C-level pass over the records (``np.fromiter`` over an
``attrgetter``), and the slower conversion is taken only where a value needs it: a None
(a reward not logged, a missing version), an integer past 2**53 (read as float64 would).
What each column holds is what a list of the values turned into an array gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import numpy as np

__all__ = ["STEP", "attempt_columns"]

STEP, _TRAINED, _TRUNCATED = attrgetter("step"), attrgetter("trained"), attrgetter("truncated")
_REWARD = attrgetter("reward")
_DISCARD, _TASK, _GROUP = (
    attrgetter("discard_reason"),
    attrgetter("task_id"),
    attrgetter("group_id"),
)


def _rewards(recs: Sequence[Any], n: int) -> tuple[np.ndarray, np.ndarray]:
    """The reward column (NaN where none was logged: ``fromiter`` reads None as NaN) and
    where none was (looked for only where a NaN is)."""
    reward = np.fromiter(map(_REWARD, recs), np.float64, n)
    nan = np.flatnonzero(np.isnan(reward))
    missing = np.zeros(n, np.bool_)
    if len(nan):
        missing[nan] = [recs[i].reward is None for i in nan.tolist()]
    return reward, missing


def _int_column(recs: Sequence[Any], name: str, missing: int, n: int) -> np.ndarray:
    """An integer column: straight to int64 when every value is an integer within 2**53,
    else as ``_int_or`` reads a list of them (a None is ``missing``)."""
    get = attrgetter(name)
    try:
        ints = np.fromiter(map(get, recs), np.int64, n)
    except (TypeError, OverflowError):  # a None among them (or a huge value)
        return _int_or([get(r) for r in recs], missing)
    if n and (int(ints.min()) < -_EXACT or int(ints.max()) > _EXACT):
        return _int_or([get(r) for r in recs], missing)
    return ints


def _float_column(recs: Sequence[Any], name: str, n: int) -> np.ndarray:
    """A float column, NaN where the value is None (as ``np.array`` of the values reads it)."""
    return np.fromiter(map(attrgetter(name), recs), np.float64, n)


_EXACT = 2**53  # integers a float64 holds exactly


def _int_or(values: list[int | None], missing: int) -> np.ndarray:
    # None -> NaN as float, then the missing code; exact for any version or token count < 2**53.
    try:  # the usual column, every value an integer: straight to int64
        ints = np.array(values, dtype=np.int64)
    except (TypeError, OverflowError):  # a None among them (or a huge value)
        pass
    else:
        if not len(ints) or (int(ints.min()) >= -_EXACT and int(ints.max()) <= _EXACT):
            return ints  # what the float route gives for these values
    f = np.array(values, dtype=np.float64)
    bad = np.isnan(f)
    if bad.any():
        f[bad] = missing
    return f.astype(np.int64)


def attempt_columns(
    builder: Any, recs: Sequence[Any], offsets: np.ndarray, shard: int, steps: np.ndarray | None
) -> dict[str, np.ndarray]:
    """One block of ``model.ATTEMPT_COLUMNS`` from decoded records (strings coded in
    ``builder``'s books)."""
    n = len(recs)
    if steps is None:
        steps = np.array([r.step for r in recs], dtype=np.int64)
    reward, missing = _rewards(recs, n)
    return {
        "step": steps,
        "reward": reward,
        "reward_missing": missing,
        "policy_version": _int_column(recs, "policy_version", -1, n),
        "trained": np.fromiter(map(_TRAINED, recs), np.bool_, n),
        "discard_code": builder.discards.encode(map(_DISCARD, recs), n),
        "task_code": builder.tasks.encode(map(_TASK, recs), n),
        "group_code": builder.groups.encode(map(_GROUP, recs), n),
        "response_tokens": _int_column(recs, "response_tokens", 0, n),
        "truncated": np.fromiter(map(_TRUNCATED, recs), np.bool_, n),
        "lag": _int_column(recs, "lag", -1, n),
        "time": _float_column(recs, "time", n),
        "duration": _float_column(recs, "duration", n),
        "shard": np.full(n, shard, dtype=np.int16),
        "offset": offsets,
    }
