"""NeMo-RL GRPO ``<log_dir>/train_data_step{N}.jsonl``, one line per sample, on by default.

``grpo_train`` builds ``log_data`` with ``content``, ``rewards``, ``input_lengths``,
``token_ids``, ``token_loss_mask``, ``sample_loss_mask``, ``advantages``,
``generation_logprobs`` and ``prev_logprobs`` (and ``agent_ref``, ``filtered_rewards`` with
dynamic sampling) and writes it as ``train_data_step{total_steps + 1}.jsonl``, the step its
metrics are logged at (NVIDIA-NeMo/RL @7ea279ab ``nemo_rl/algorithms/grpo.py:3630-3653``,
:3762). ``Logger.log_batched_dict_as_jsonl`` writes one line per micro-batch of one
(``nemo_rl/utils/logger.py:1071-1098``): every value is a list of length one (the sample's
slice, ``batched_data_dict.py:885-906``), tensors as nested lists, plus ``idx``; written with
``json.dumps`` (NaN as a bare token). ``content`` is the sample's message contents in order
(``llm_message_utils.py:257-316``); tensors are padded to the batch's longest sequence and
``input_lengths`` gives the real length.

A group is the samples with the same prompt tokens (the ids before the first generated token,
as NeMo-RL's per-prompt baseline groups them). The generated tokens are those of
``token_loss_mask``; the mismatch per attempt compares ``generation_logprobs`` (the sampler,
vLLM) with ``prev_logprobs`` (the trainer's, before the update) over them. ``sample_loss_mask``
0 means the sample did not train. No sampler version is recorded (the synchronous trainer).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ...transcripts.store import TranscriptAttempt
from .base import DumpFormat, Sample, digest, number, register_dump, transcript

__all__ = ["NemoRlTrainData"]

_FILE = re.compile(r"^train_data_step(\d+)\.jsonl$")


def _one(rec: dict[str, Any], key: str) -> Any:
    """The sample's value of ``key``: a list of length one unwrapped."""
    v = rec.get(key)
    if isinstance(v, list) and len(v) == 1:
        return v[0]
    return v


def _row(v: Any, n: int) -> np.ndarray | None:
    if not isinstance(v, list):
        return None
    try:
        a = np.asarray(v[:n], dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return a if a.ndim == 1 else None


class NemoRlTrainData(DumpFormat):
    name = "nemo-rl"
    priority = 50
    alone = True
    description = "NeMo-RL train_data_step{N}.jsonl (GRPO training data, on by default)"
    has_tokens = True

    file_pattern = _FILE

    @staticmethod
    def _parse(rec: dict[str, Any]) -> dict[str, Any]:
        length = _one(rec, "input_lengths")
        ids = _one(rec, "token_ids")
        mask_raw = _one(rec, "token_loss_mask")
        n = (
            int(length)
            if isinstance(length, (int, float))
            else (len(ids) if isinstance(ids, list) else 0)
        )
        mask = _row(mask_raw, n)
        gen = mask > 0 if mask is not None else None
        first = int(np.argmax(gen)) if gen is not None and gen.any() else n
        prompt_ids = ids[:first] if isinstance(ids, list) else None
        sample_mask = number(_one(rec, "sample_loss_mask"))
        out: dict[str, Any] = {
            "reward": number(_one(rec, "rewards")),
            "group": digest(repr(prompt_ids))
            if prompt_ids is not None
            else digest(repr(_one(rec, "content"))),
            "tokens": int(gen.sum()) if gen is not None else 0,
            "trained": None if sample_mask is None else sample_mask > 0,
            "sampler": None,
            "trainer": None,
            "ids": None,
        }
        if gen is not None and isinstance(ids, list) and len(ids) >= len(gen):
            try:
                out["ids"] = np.asarray(ids[: len(gen)], dtype=np.int64)[gen]
            except (TypeError, ValueError, OverflowError):
                out["ids"] = None
        g = _row(_one(rec, "generation_logprobs"), n)
        t = _row(_one(rec, "prev_logprobs"), n)
        if gen is not None and g is not None and t is not None and len(g) == len(t) == len(gen):
            out["sampler"] = g[gen]
            out["trainer"] = t[gen]
        return out

    def sample_of(self, step: int, rec: Any) -> Sample:
        r = self._parse(rec)
        a = _one(rec, "agent_ref")
        meta = {"agent_ref": a} if isinstance(a, str) else {}
        return Sample(
            step=step,
            group=r["group"],
            task_id=r["group"],
            reward=r["reward"],
            response_tokens=r["tokens"],
            trained=r["trained"],
            discard_reason=None if r["trained"] is not False else "sample_loss_mask",
            sampler_logprobs=r["sampler"],
            trainer_logprobs=r["trainer"],
            token_ids=r["ids"],
            metadata=meta,
        )

    def transcript_of(self, step: int, i: int, rec: Any) -> TranscriptAttempt:
        r = self._parse(rec)
        content = _one(rec, "content")
        parts = content if isinstance(content, list) else [content]
        return transcript(
            step,
            i,
            group=r["group"],
            task_id=r["group"],
            reward=r["reward"],
            trained=r["trained"],
            prompt=parts[:-1],
            completion=parts[-1] if parts else None,
            completion_tokens=r["tokens"],
        )


register_dump(NemoRlTrainData)
