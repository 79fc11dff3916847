"""The reference trainer's own config sections: ``[model]``, ``[task]`` and ``[optim]``.

They sit beside the writer's ``[output]``, ``[training]`` and ``[rollout]`` in one TOML file and
are validated the same way (an unknown key or a wrong type is an error naming section and key).
The defaults are the measured healthy setup (docs/trainer.md): a character-level
transformer of about 400k parameters, two-digit additions, 160 tasks x 4 attempts per update, a
warm start to a sampled pass rate of 0.45, one torch thread (docs/trainer.md has the figures).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..config import option

__all__ = [
    "SECTIONS",
    "UNUSABLE_UPDATES",
    "CorrectionConfig",
    "EngineConfig",
    "ModelConfig",
    "OptimConfig",
    "TaskConfig",
    "unusable_guard",
]


@dataclass
class ModelConfig:
    """The policy: a small decoder-only transformer trained from scratch."""

    n_layer: int = option(2, "transformer blocks", minimum=1)
    n_head: int = option(4, "attention heads per block", minimum=1)
    d_model: int = option(128, "width of the residual stream (a multiple of 2 * n_head)", minimum=8)
    sampler_dtype: Literal["bfloat16", "float32"] = option(
        "bfloat16",
        "precision of the sampler's weight copy; the trainer always recomputes in float32, so "
        "bfloat16 makes the sampler/trainer mismatch real and small",
    )


@dataclass
class TaskConfig:
    """The tasks, the agent's budget and how attempts are sampled."""

    digits: int = option(2, "digits per operand of the additions (the difficulty knob)", minimum=1)
    tool_fraction: float = option(
        0.25,
        "share of tasks whose first operand is a variable the agent must look up with its tool "
        "(multi-turn: call the tool, read its reply, then answer)",
        minimum=0.0,
    )
    heldout_fraction: float = option(
        0.1, "share of problems held out from warm start and training, for evaluation", minimum=0.0
    )
    tasks_per_step: int = option(160, "tasks (GRPO groups) sampled per update", minimum=1)
    group_size: int = option(4, "attempts per task (the GRPO group)", minimum=2)
    max_new_tokens: int = option(
        8, "tokens the agent may generate in one attempt, over all its turns", minimum=1
    )
    max_turns: int = option(3, "model replies per attempt (each tool call ends one)", minimum=1)
    temperature: float = option(1.0, "sampling temperature", minimum=0.01)
    heldout_tasks: int = option(200, "held-out tasks scored at each sampler checkpoint", minimum=1)


@dataclass
class OptimConfig:
    """Warm start and GRPO: steps, learning rates, clipping, seed."""

    steps: int = option(40, "GRPO updates", minimum=1)
    seed: int = option(0, "seed of everything: weights, tasks, sampling", minimum=0)
    # One thread: this model's operations are small to split. On 2 cores at 64 x 4, 40 updates
    # trained in 5.7 s at 1 thread against 7.5-8.2 s at 2 (OpenMP's passive wait wakes the
    # second thread for every operation); at 160 x 4 the two are even when the machine is idle
    # (0.33-0.35 s against 0.32-0.34 s per update) and 1 thread is faster beside a busy core
    # (0.37 s against 0.43 s). The second core is left to the live view and the checks.
    threads: int = option(
        1, "torch CPU threads; a seed reproduces a run only at a fixed thread count", minimum=1
    )
    lr: float = option(3e-4, "GRPO learning rate (AdamW)", minimum=0.0)
    lr_warmup: int = option(
        0, "updates over which the GRPO learning rate rises linearly to lr (0: none)", minimum=0
    )
    clip_eps: float = option(0.2, "PPO clip range of the importance ratio", minimum=0.0)
    minibatches: int = option(
        2,
        "optimizer steps per update; after the first, the policy is off the sampling policy and "
        "the clip can act",
        minimum=1,
    )
    grad_clip: float = option(1.0, "clip the gradient norm to this", minimum=0.0)
    weight_decay: float = option(0.0, "AdamW weight decay during GRPO", minimum=0.0)
    async_lead: int = option(
        1,
        'in [training] mode = "async": updates the sampler runs ahead of the trainer',
        minimum=1,
    )
    warm_lr: float = option(2e-3, "learning rate of the supervised warm start", minimum=0.0)
    warm_batch: int = option(128, "sequences per warm-start step", minimum=1)
    warm_target_pass_rate: float = option(
        0.45,
        "the warm start stops once the sampled pass rate on training tasks reaches this, so "
        "attempts at a task disagree",
        minimum=0.0,
    )
    warm_check_every: int = option(10, "warm-start steps between pass-rate checks", minimum=1)
    warm_max_steps: int = option(3000, "give up the warm start after this many steps", minimum=1)


@dataclass
class EngineConfig:
    """How the sampler (the inference engine) samples, beyond the temperature: its truncation
    and its precision. Its log-probs are those of the distribution it samples from (after
    top-p/top-k, renormalised: an engine's processed log-probs), so truncation shows as a
    ratio below 1 to the trainer's full-vocabulary log-probs. Not part of the warm start."""

    top_p: float = option(1.0, "nucleus sampling of the training rollouts (1: off)", minimum=0.01)
    top_k: int = option(0, "top-k sampling of the training rollouts (0: off)", minimum=0)
    dtype: Literal["", "bfloat16", "float32", "float8"] = option(
        "",
        "precision of the sampler's weight copy from the run's start (\"\": [model] "
        "sampler_dtype); float8 rounds weights and activations to float8 e4m3",
    )


@dataclass
class CorrectionConfig:
    """Importance-sampling correction of the sampler/trainer mismatch (off by default): each
    token's loss is weighted by pi_trainer / pi_sampler, per token or one weight per sequence,
    truncated or masked outside [clip_min, clip_max]. With it on, the PPO ratio is taken
    against the trainer's own recomputation (decoupled PPO), also in async mode."""

    mode: Literal["none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask"] = (
        option(
            "none",
            "where the weight is taken (token or sequence) and what happens past "
            "its bounds (truncated to them, or masked to 0)",
        )
    )
    aggregation: Literal["mean", "sum"] = option(
        "mean",
        "a sequence weight from its tokens' log-ratios: exp(mean), length-normalised as GSPO; "
        "or exp(sum), the product of the token ratios",
    )
    clip_max: float = option(2.0, "upper bound of the weight", minimum=0.0)
    clip_min: float = option(0.0, "lower bound of the weight (0: none)", minimum=0.0)
    log: Literal["raw", "corrected"] = option(
        "raw",
        "train/is_weight_* logged before the truncation or masking, or after it (what the "
        "loss used)",
    )


SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "task": TaskConfig,
    "optim": OptimConfig,
    "engine": EngineConfig,
    "correction": CorrectionConfig,
}

# Rejected groups in a row that stop a trainer run whose config does not say, in updates' worth
# of groups (the writer's own default, 100 groups, is under one update of 160).
UNUSABLE_UPDATES = 3


def unusable_guard(tasks_per_step: int) -> int:
    """The trainer's ``max_consecutive_unusable_groups`` where a config does not set it:
    ``UNUSABLE_UPDATES`` updates' worth of groups."""
    return UNUSABLE_UPDATES * tasks_per_step
