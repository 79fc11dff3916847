"""OpenRLHF console: ``✨ Global step N: {...}`` (sync trainer) or ``Global step N: {...}``."""

from __future__ import annotations

import re
from pathlib import Path

from ._format import Format, register
from .base import FileState
from .mapping import MappingTable, Rule
from .textlog import TextLogReader, head, sniff_files

__all__ = ["OPENRLHF", "OpenRLHFReader"]

OPENRLHF = MappingTable(
    "openrlhf",
    (
        Rule("rollout/reward_mean", "reward/mean", "taken before dynamic-batch splitting"),
        Rule("reward", "reward/mean", "where rollout/reward_mean is not logged"),
        Rule("rollout/reward_std", "reward/std", "whole batch"),
        Rule("group_reward_std", "reward/group_std_mean", "mean within-group std"),
        Rule("rollout/response_length_mean", "response/length_mean"),
        Rule("response_length", "response/length_mean", "where the rollout/ key is absent"),
        Rule("rollout/truncated_rate", "response/truncated_rate"),
        Rule("truncated", "response/truncated_rate", "where the rollout/ key is absent"),
        Rule("kl", "train/ref_kl", "estimator k1/k2/k3, clamped ±10"),
        Rule("vllm_kl", "train/mismatch_k1", "mean(vLLM - old logp), can be negative"),
        Rule("ppo_clip_ratio", "train/clip_frac"),
        Rule("ppo_kl", "train/ppo_kl"),
        Rule("policy_loss", "train/loss"),
        Rule("actor_grad_norm", "train/grad_norm"),
        Rule("actor_lr", "train/lr"),
        Rule("timing/step_total", "perf/step_seconds"),
        Rule("timing/generation", "perf/sampling_seconds"),
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
