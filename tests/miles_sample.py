"""Miles' ``Sample``, copied field for field (Miles needs GPUs, so it is not installed here).

From radixark/miles @31f1ca96 ``miles/utils/types.py:26-157``: the dataclass fields in order
with their defaults, the ``Status`` enum, the nested ``SpecInfo`` / ``PrefixCacheInfo`` (their
counters only) and ``to_dict`` (the ``__dict__`` copy with ``status`` as its value and the
nested infos as dicts), which is what ``--save-debug-rollout-data`` saves. slime's ``Sample``
(THUDM/slime ``slime/utils/types.py:94``) has the same fields the readers use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


@dataclass
class Sample:
    """The sample generated"""

    group_index: int | None = None
    index: int | None = None
    rollout_id: int | None = None
    prompt: str | list[dict[str, str]] = ""
    tokens: list[int] = field(default_factory=list)
    multimodal_inputs: dict[str, Any] | None = None
    multimodal_train_inputs: dict[str, Any] | None = None
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    rollout_routed_experts: Any = None
    rollout_indexer_topk: Any = None
    remove_sample: bool = False
    teacher_log_probs: list[float] | None = None
    opd_reverse_kl: list[float] | None = None

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    status: Status = Status.PENDING
    metadata: dict = field(default_factory=dict)
    generate_function_path: str | None = None
    train_metadata: dict | None = None
    adapter: Any = None
    reward_spec: Any = None
    routing_key: str | None = None
    non_generation_time: float = 0.0

    @dataclass
    class SpecInfo:
        spec_accept_token_num: int = 0
        spec_draft_token_num: int = 0
        spec_verify_ct: int = 0
        completion_token_num: int = 0

        def to_dict(self) -> dict[str, int]:
            return {
                "spec_accept_token_num": self.spec_accept_token_num,
                "spec_draft_token_num": self.spec_draft_token_num,
                "spec_verify_ct": self.spec_verify_ct,
                "completion_token_num": self.completion_token_num,
            }

    spec_info: SpecInfo = field(default_factory=SpecInfo)

    @dataclass
    class PrefixCacheInfo:
        cached_tokens: int = 0
        total_prompt_tokens: int = 0

        def to_dict(self) -> dict[str, int]:
            return {
                "cached_tokens": self.cached_tokens,
                "total_prompt_tokens": self.total_prompt_tokens,
            }

    prefix_cache_info: PrefixCacheInfo = field(default_factory=PrefixCacheInfo)

    def to_dict(self) -> dict[str, Any]:
        value = self.__dict__.copy()
        value["status"] = self.status.value
        value["spec_info"] = self.spec_info.to_dict()
        value["prefix_cache_info"] = self.prefix_cache_info.to_dict()
        return value


def make(
    group: int,
    index: int,
    reward: float,
    *,
    version: int = 3,
    status: str = "completed",
    length: int = 4,
    prompt: str | None = None,
) -> Sample:
    """A sample as a Miles rollout returns it (tokens = prompt + response)."""
    return Sample(
        group_index=group,
        index=index,
        prompt=prompt if prompt is not None else f"question {group}",
        tokens=list(range(3 + length)),
        response=f"answer {group}.{index}",
        response_length=length,
        label="42",
        reward=reward,
        loss_mask=[1] * length,
        weight_versions=[str(version)],
        rollout_log_probs=[-0.5] * length,
        status=Sample.Status(status),
    )
