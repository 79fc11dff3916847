"""What the writer writes, record by record: an attempt from ``log_attempt``'s arguments, its
``rollouts.jsonl`` line, an update's ``transcripts/step-NNNNNN.json``, and the warning a
failure inside the writer becomes. Shared by the run (``Run``) and the shard writer."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ..errors import UsageError
from ..jsonio import ENCODER, clean, encode_line, scrub, write_bytes_atomic
from ..metrics import Attempt
from ..schema import TRANSCRIPTS

__all__ = [
    "NO_METADATA",
    "WriterWarning",
    "as_int",
    "as_number",
    "encode_attempt",
    "error_code",
    "needs_fixup",
    "nonfinite",
    "warn",
    "write_transcripts",
]


class WriterWarning(UserWarning):
    """Something went wrong inside the writer; the training loop goes on."""


def warn(message: str, stacklevel: int = 3) -> None:
    """A failure inside the writer, told to the loop as a ``WriterWarning``."""
    warnings.warn(message, WriterWarning, stacklevel=stacklevel)


def nonfinite(x: float) -> str:
    """How docs/format.md spells a non-finite number."""
    return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")


def as_int(value: Any, what: str, *, optional: bool = False) -> int | None:
    """An int from a Python, numpy or torch integer; UsageError for anything else."""
    if value is None and optional:
        return None
    if isinstance(value, bool):
        raise UsageError(f"{what} must be an integer (not {value!r})")
    try:
        return int(value.__index__())
    except (AttributeError, TypeError, ValueError):
        raise UsageError(f"{what} must be an integer (not {value!r})") from None


def as_number(value: Any, what: str, warn_once: Callable[[str, str], None]) -> float | None:
    """A float from a number, numpy or torch scalar; None (told once) for anything else."""
    try:
        item = getattr(value, "item", None)
        return float(item() if callable(item) else value)
    except (TypeError, ValueError, RuntimeError):
        warn_once(what, f"{what} {value!r} is not a number; recorded as null")
        return None


def error_code(error: BaseException | str | None, failed_in: str) -> str | None:
    """``rollout_failed/<Type>`` or ``grading_failed/<Type>`` for a failed attempt."""
    if error is None:
        return None
    if failed_in != "rollout" and failed_in != "grading":
        raise UsageError(f'failed_in: expected "rollout" or "grading" (not {failed_in!r})')
    ename = error if isinstance(error, str) else type(error).__name__
    return f"{failed_in}_failed/{ename}"


def needs_fixup(a: Attempt) -> bool:
    """Whether the attempt holds working data to drop or numbers to spell when written."""
    r, d = a.reward, a.duration
    return (
        a.error is not None
        or a.sampler_logprobs is not None
        or a.transcript is not None
        or a.given_reason is not None
        or (r is not None and r - r != 0.0)
        or (d is not None and d - d != 0.0)
    )


class _TranscriptEntry(msgspec.Struct):
    """One attempt in ``transcripts/step-NNNNNN.json`` (docs/format.md)."""

    attempt_id: str
    group_id: str
    task_id: str
    reward: Any
    trained: bool
    generations: list[Any]


TEXT_KEYS = frozenset({"prompt", "completion"})  # what trace = "samples" leaves out

# The keys every rollouts.jsonl record has: Attempt's fields up to ``retries``.
RECORD_FIELDS = Attempt.__struct_fields__[: Attempt.__struct_fields__.index("retries")]
NO_METADATA: dict[str, Any] = {}  # shared by attempts logged without metadata; never mutated


def encode_attempt(a: Attempt, warn_once: Callable[[str, str], None]) -> bytes:
    """One attempt's line, even when a value JSON cannot hold is in it (written as text)."""
    try:
        return ENCODER.encode(a) + b"\n"
    except Exception:
        warn_once(
            "unencodable",
            f"attempt {a.attempt_id!r}: a value JSON cannot hold; written as text",
        )
        rec = {f: getattr(a, f) for f in RECORD_FIELDS}
        if a.retries:
            rec["retries"] = a.retries
        if a.mismatch is not None:
            rec["mismatch"] = a.mismatch
        return encode_line(scrub(rec))


def write_transcripts(run_dir: Path, full: bool, step: int, attempts: list[Attempt]) -> None:
    """``transcripts/step-NNNNNN.json``: the update's attempts and their generations; with
    ``full`` False (trace = "samples") without the prompt and completion text."""
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
                    **{k: v for k, v in g.items() if k not in TEXT_KEYS},
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
            nonfinite(r) if (r := a.reward) is not None and r - r != 0.0 else r,
            a.trained,
            gens,
        )
        for a, gens in zip(attempts, gens_all)
    ]
    tdir = run_dir / TRANSCRIPTS
    tdir.mkdir(exist_ok=True)
    path = tdir / f"step-{step:06d}.json"
    if path.exists():  # attempts of this update written before (close after a crash)
        with contextlib.suppress(OSError, ValueError):
            entries = msgspec.json.decode(path.read_bytes()) + entries
    write_bytes_atomic(path, ENCODER.encode(entries) + b"\n")  # every value spelled
