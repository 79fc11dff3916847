"""OpenRLHF console: ``✨ Global step N: {...}`` (sync trainer) or ``Global step N: {...}``."""

from __future__ import annotations

import re
from pathlib import Path

from ._format import Format, register
from .base import FileState
from .mapping import MappingTable, Rule, synonym
from .textlog import TextLogReader, head, sniff_files

__all__ = ["OPENRLHF", "OpenRLHFReader"]

OPENRLHF = MappingTable(
    "openrlhf",
    (
        synonym("rollout/reward_mean", "taken before dynamic-batch splitting"),
        synonym("reward", "where rollout/reward_mean is not logged"),
        synonym("rollout/reward_std", "whole batch"),
        synonym("group_reward_std", "mean within-group std"),
        synonym("rollout/response_length_mean"),
        synonym("response_length", "where the rollout/ key is absent"),
        Rule("rollout/truncated_rate", "response/truncated_rate"),
        Rule("truncated", "response/truncated_rate", "where the rollout/ key is absent"),
        Rule("kl", "train/ref_kl", "estimator k1/k2/k3, clamped ±10"),
        synonym("vllm_kl", "mean(vLLM - old logp), can be negative"),
        synonym("ppo_clip_ratio"),
        synonym("ppo_kl"),
        synonym("policy_loss"),
        synonym("actor_grad_norm"),
        synonym("actor_lr"),
        Rule("timing/step_total", "perf/step_seconds"),
        synonym("timing/generation"),
        Rule("timing/ppo_train", "perf/training_seconds"),
    ),
    (
        ("entropy_loss", "logged only with entropy_coef; not taken as a measured entropy"),
        ("logprobs_diff", "actor vs reference, signed"),
        ("return", "discounted return, not the reward"),
    ),
    ("OpenRLHF logs no zero-variance group count.",),
)

LINE = re.compile(r"Global step (\d+):\s*(\{.*)$", re.M)


class OpenRLHFReader(TextLogReader):
    name = "openrlhf"
    table = OPENRLHF

    def accept(self, p: Path) -> bool:
        return bool(LINE.search(head(p)))

    def feed(self, st: FileState, text: str, p: Path, lineno: int) -> None:
        m = LINE.search(text)
        if m:
            self.start_dict(st, int(m.group(1)), m.group(2), p, lineno)
        else:
            self.continue_dict(st, text, p)


register(
    Format(
        "openrlhf",
        "OpenRLHF console log (Global step N: {...})",
        lambda p: sniff_files(p, OpenRLHFReader.patterns, lambda f: LINE.search(head(f))),
        OpenRLHFReader,
        priority=33,
        table=OPENRLHF,
        kind="console log",
    )
)
