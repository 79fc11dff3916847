"""Miles and slime ``--save-debug-rollout-data PATH``: one ``torch.save`` file per rollout.

Miles (radixark/miles @31f1ca96 ``miles/ray/rollout/debug_data.py:103-119``) saves
``dict(rollout_id=..., metadata=..., samples=[sample.to_dict() ...])`` to
``PATH.format(rollout_id=...)``; ``--dump-details DIR`` sets PATH to
``DIR/rollout_data/{rollout_id}.pt`` (``miles/utils/arguments.py:3184``); evaluation rollouts
go to ``eval_<id>.pt`` and are not attempts. slime (THUDM/slime @624b824a
``slime/observability/rollout_data_utils.py:140-153``) saves ``{"rollout_id", "samples"}`` the
same way. ``Sample.to_dict`` is the dataclass's ``__dict__`` with ``status`` as its string
value (``miles/utils/types.py:152-157``); the fields read here are ``group_index, index,
prompt, response, response_length, loss_mask, reward, weight_versions, rollout_log_probs,
status, remove_sample, label`` (``miles/utils/types.py:26-70``).

A group is ``group_index``; the step is the rollout id (Miles' ``rollout/step`` unless
``--wandb-always-use-train-step``); the sampler version is the first of ``weight_versions``;
tokens are ``sum(loss_mask)`` (Miles' ``effective_response_length``) or ``response_length``;
``truncated`` status is truncation, ``aborted`` and ``failed`` are failed rollouts. A reward
that is a dict is read at ``reward_key`` (Miles' ``--reward-key``; default: its ``reward`` or
``score`` entry). Reading needs torch (the ``train`` extra), loaded with ``weights_only=True``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ...errors import MissingExtraError
from ...transcripts.store import TranscriptAttempt
from .base import DumpFormat, Sample, digest, number, register_dump, transcript

__all__ = ["MilesRolloutData", "field", "sample_fields"]

_FILE = re.compile(r"^(\d+)\.pt$")
_FAILED = {"aborted", "failed"}


def field(sample: Any, name: str, default: Any = None) -> Any:
    """A field of a Miles ``Sample`` object or of its ``to_dict()``."""
    if isinstance(sample, dict):
        return sample.get(name, default)
    return getattr(sample, name, default)


def _status(v: Any) -> str:
    v = getattr(v, "value", v)  # Sample.Status enum, or its string in to_dict()
    return str(v).lower() if v is not None else "pending"


def _reward(v: Any, reward_key: str | None) -> float | None:
    if isinstance(v, dict):
        for k in (reward_key,) if reward_key else ("reward", "score"):
            if k in v:
                return number(v[k])
        return None
    return number(v)


def _version(versions: Any) -> int | None:
    if isinstance(versions, (list, tuple)):
        for v in versions:
            try:
                return int(v)
            except (TypeError, ValueError):
                continue
    return None


def sample_fields(sample: Any, reward_key: str | None = None) -> dict[str, Any]:
    """What an attempt needs from one Miles/slime sample (object or dict)."""
    status = _status(field(sample, "status"))
    mask = field(sample, "loss_mask")
    length = field(sample, "response_length", 0) or 0
    try:
        tokens = int(sum(mask)) if mask is not None else int(length)
    except (TypeError, ValueError):
        tokens = int(length) if isinstance(length, int) else 0
    logprobs = field(sample, "rollout_log_probs")
    if hasattr(logprobs, "tolist"):
        logprobs = logprobs.tolist()
    prompt = field(sample, "prompt", "")
    group = field(sample, "group_index")
    return {
        "group": str(group) if group is not None else digest(prompt),
        "task_id": digest(prompt),
        "reward": _reward(field(sample, "reward"), reward_key),
        "policy_version": _version(field(sample, "weight_versions")),
        "tokens": tokens,
        "truncated": status == "truncated",
        "error": f"rollout_failed/{status}" if status in _FAILED else None,
        "removed": bool(field(sample, "remove_sample", False)),
        "logprobs": list(logprobs) if isinstance(logprobs, (list, tuple)) and logprobs else None,
        "status": status,
        "label": field(sample, "label"),
    }


def _load(p: Path) -> Any:
    try:
        import torch
    except ImportError:
        raise MissingExtraError("train", "reading Miles/slime rollout data (.pt)") from None
    return torch.load(p, map_location="cpu", weights_only=True)


class MilesRolloutData(DumpFormat):
    name = "miles"
    priority = 60
    sample_dirs = ("rollout_data",)
    description = "Miles/slime --save-debug-rollout-data ({rollout_id}.pt, torch.save)"
    default_subdir = "rollout_data"
    versioned = True
    has_tokens = True
    has_truncation = True

    def __init__(self, reward_key: str | None = None) -> None:
        self.reward_key = reward_key

    file_pattern = _FILE

    def records(
        self, files: list[Path], warn: Callable[[str], None]
    ) -> Iterator[tuple[Path, int, Any]]:
        for p in files:
            try:
                doc = _load(p)
            except MissingExtraError:
                raise
            except Exception as exc:  # torch raises many types for a torn or foreign file
                warn(
                    f"{p}: not a readable rollout data file ({type(exc).__name__}: {exc}); skipped"
                )
                continue
            samples = doc.get("samples") if isinstance(doc, dict) else None
            if not isinstance(samples, list):
                warn(f"{p}: expected a dict with a 'samples' list; skipped")
                continue
            for i, s in enumerate(samples):
                if isinstance(s, dict):
                    yield p, i, s

    def sample_of(self, step: int, s: Any) -> Sample:
        f = sample_fields(s, self.reward_key)
        return Sample(
            step=step,
            group=f["group"],
            task_id=f["task_id"],
            reward=f["reward"],
            policy_version=f["policy_version"],
            response_tokens=f["tokens"],
            truncated=f["truncated"],
            error=f["error"],
            trained=False if f["removed"] else None,
            discard_reason="removed" if f["removed"] else None,
            sampler_logprobs=f["logprobs"],
            metadata={"status": f["status"]},
        )

    def transcript_of(self, step: int, i: int, s: Any) -> TranscriptAttempt:
        f = sample_fields(s, self.reward_key)
        return transcript(
            step,
            i,
            group=f["group"],
            task_id=f["task_id"],
            reward=f["reward"],
            trained=False if f["removed"] else None,
            prompt=s.get("prompt"),
            completion=s.get("response"),
            policy_version=f["policy_version"],
            completion_tokens=f["tokens"],
            finish_reason="length" if f["truncated"] else None,
        )


register_dump(MilesRolloutData)
