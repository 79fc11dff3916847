"""verl ``trainer.rollout_data_dir=DIR``: ``DIR/<global_step>.jsonl``, one line per sample.

Written by ``RayPPOTrainer._write_generations`` (verl/trainer/ppo/ray_trainer.py:454-477, from
a one-thread executor, :479-512), called once per step before the step's metrics are logged
(:1722-1724, logger.log at :1802, same ``global_steps``, which start at 1). Each line holds
``input`` and ``output`` (decoded text), ``gts`` (the ground truth), ``score`` (the summed
token-level score, :531), ``step``, and every same-length list of ``reward_extra_infos`` (and
``request_id``), written with ``json.dumps(..., default=str)`` (so NaN is a bare token).
Numeric reward extra infos (``acc``, reward components) become ``rollout/<key>``; text ones
(a parsed prediction) stay in the file.

There is no group id: a GRPO group is the samples of one step with the same ``input``. No
sampler version (verl's trainer is synchronous), no token counts, no logprobs.
"""

from __future__ import annotations

import re
from typing import Any

from ...transcripts.store import TranscriptAttempt
from .base import DumpFormat, Sample, digest, number, register_dump, transcript

__all__ = ["VerlDump"]

_FILE = re.compile(r"^(\d+)\.jsonl$")
_KNOWN = frozenset({"input", "output", "gts", "score", "step", "request_id"})


class VerlDump(DumpFormat):
    name = "verl"
    priority = 90
    beside = False
    description = "verl trainer.rollout_data_dir (DIR/<global_step>.jsonl)"

    file_pattern = _FILE

    def sample_of(self, step: int, rec: Any) -> Sample:
        prompt = rec.get("input")
        key = digest(prompt)
        meta = {
            k: v for k, v in rec.items() if k not in _KNOWN and isinstance(v, (int, float, bool))
        }
        return Sample(
            step=step,
            group=key,
            task_id=key,
            reward=number(rec.get("score")),
            metadata=meta,
        )

    def transcript_of(self, step: int, i: int, rec: Any) -> TranscriptAttempt:
        key = digest(rec.get("input"))
        return transcript(
            step,
            i,
            group=key,
            task_id=key,
            reward=number(rec.get("score")),
            trained=None,
            prompt=rec.get("input"),
            completion=rec.get("output"),
        )


register_dump(VerlDump)
