"""tinker-cookbook ``<log_path>/iteration_NNNNNN/train_rollout_summaries.jsonl``.

``serialize_rollout_summaries`` makes one record per trajectory (thinking-machines-lab/
tinker-cookbook @9dfcc3a2 ``tinker_cookbook/rl/rollout_logging.py:72-147``): ``schema_version,
split, iteration, group_idx, traj_idx, tags, sampling_client_step, total_reward,
final_reward, trajectory_metrics, steps`` (each transition's ``ob_len, ac_len, reward,
episode_done, metrics, logs``) and ``final_ob_len``; ``TrainingRunStore.write_rollouts``
writes them once per iteration as ``json.dumps`` lines (``stores/training_store.py:292-311``,
the folder ``iteration_{i:06d}``, :81, file ``{base_name}_rollout_summaries.jsonl``, :160).
``rollout_json_export`` is on by default (``rl/train.py:542``). The iteration is the step of
``metrics.jsonl``.

A group is ``group_idx``; the reward is ``total_reward``; the sampler version is
``sampling_client_step``; tokens are the transitions' ``ac_len`` summed. The summaries hold no
text (the logtree HTML/JSON beside them does, and is not read): transcripts here carry
identity, reward and lengths only.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...transcripts.store import Generation, TranscriptAttempt
from .base import DumpFormat, Sample, number, register_dump

__all__ = ["TinkerRollouts"]

_DIR = re.compile(r"^iteration_(\d+)$")
_FILE = "train_rollout_summaries.jsonl"


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


class TinkerRollouts(DumpFormat):
    name = "tinker"
    priority = 40
    sample_dirs = (r"iteration_\d+",)
    description = "tinker-cookbook iteration_NNNNNN/train_rollout_summaries.jsonl"
    versioned = True
    has_tokens = True

    dir_pattern = _DIR

    def files_in(self, step_dir: Path) -> list[Path]:
        p = step_dir / _FILE
        return [p] if p.is_file() else []

    @staticmethod
    def _tokens(rec: dict[str, Any]) -> int:
        steps = rec.get("steps")
        if not isinstance(steps, list):
            return 0
        return sum(_int(s.get("ac_len")) or 0 for s in steps if isinstance(s, dict))

    def sample_of(self, step: int, rec: Any) -> Sample:
        group = str(rec.get("group_idx"))
        tags = rec.get("tags")
        task = "/".join(map(str, tags)) if isinstance(tags, list) and tags else group
        meta = {}
        tm = rec.get("trajectory_metrics")
        if isinstance(tm, dict):
            meta = {k: v for k, v in tm.items() if isinstance(v, (int, float, bool))}
        return Sample(
            step=step,
            group=group,
            task_id=f"{task}#{group}",
            reward=number(rec.get("total_reward")),
            policy_version=_int(rec.get("sampling_client_step")),
            response_tokens=self._tokens(rec),
            metadata=meta,
        )

    def transcript_of(self, step: int, i: int, rec: Any) -> TranscriptAttempt:
        group = str(rec.get("group_idx"))
        steps = [s for s in rec.get("steps") or [] if isinstance(s, dict)]
        return TranscriptAttempt(
            step=step,
            index=i,
            attempt_id=f"{step}-{i}",
            group_id=f"{step}/{group}",
            task_id=None,
            reward=number(rec.get("total_reward")),
            trained=None,
            generations=[
                Generation(
                    policy_version=_int(rec.get("sampling_client_step")),
                    prompt_tokens=_int(s.get("ob_len")),
                    completion_tokens=_int(s.get("ac_len")),
                )
                for s in steps
            ],
        )


register_dump(TinkerRollouts)
