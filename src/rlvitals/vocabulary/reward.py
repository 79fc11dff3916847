"""The `reward` family of the canonical metrics: reward and learning signal.

Data only: each canonical metric with its meaning, label, plot and synonyms, and the
family's names with a variable part. ``schema.py`` reads them (and generates the docs).
"""

from __future__ import annotations

import re

from .spec import NAME, Alias, MetricSpec, metric, specs

FAMILY = "reward"
TITLE = "Reward and learning signal"
INTRO = (
    "Reward components (one per reward function) and breakdowns by data source or "
    "environment are families below: `reward/component/<name>/mean`, "
    "`reward/source/<name>/mean`."
)

METRICS = specs(
    FAMILY,
    [
        metric(
            "reward/mean",
            "mean reward of the attempts this update trained on",
            "reward",
            "reward_mean",
            "rewards/mean",
            "mean_reward",
            "avg_reward",
            "reward_avg",
            "raw_reward",
            "score",
            "critic/score/mean",
            "rollout/raw_reward",
            "rollout/reward_mean",
            "reward/avg_raw_reward",
            "env/all/reward/total",
            "task_reward",
            "episode_reward_mean",
            "env/reward_mean",
            Alias("objective/scores", note="TRL PPOTrainer: reward-model score"),
            Alias("reward_score", note="DeepSpeed-Chat 'Average reward score'"),
            Alias("filtered_reward", note="NeMo-RL 'Avg Filtered Reward' (trained groups)"),
            Alias("total_rewards", note="mlx-lm-lora GRPO 'Total rewards mean'"),
            Alias("accuracy", note="a loop whose reward is right/wrong: training accuracy"),
            Alias("success_rate", note="a loop whose reward is success/failure"),
            "success",
            "solve_rate",
            "pass_rate",
            label="reward",
            key=True,
            plot="reward",
        ),
        metric(
            "reward/mean_with_unusable",
            "mean reward of trained attempts plus the graded attempts of rejected groups",
            label="reward incl. rejected",
            key=True,
            plot="reward",
        ),
        metric(
            "reward/group_std_mean",
            "mean over trained groups of the population std of rewards within the group",
            Alias("group_reward_std", note="OpenRLHF: mean within-group std"),
            Alias("group_reward_std_mean", note="rlprobe"),
            Alias("reward_std_dev", note="OpenPipe ART: mean over groups of np.std"),
            Alias("reward/std_dev", note="OpenPipe ART (newer)"),
            "within_group_reward_std",
            Alias("group_rewards_std", note="mlx-lm-lora GRPO 'Group rewards std'"),
            Alias("group_std", note="a loop's group std (MiniMind 'GrpStd')"),
            label="group std",
            key=True,
            plot="signal",
        ),
        metric(
            "reward/std",
            "std of the same rewards across the whole batch (not learning signal)",
            Alias("reward_std", note="TRL (whole batch), rlwatch"),
            "rewards/std",
            "std_reward",
            "critic/score/std",
            "rollout/reward_std",
            Alias("total_rewards_std", note="mlx-lm-lora GRPO 'Total rewards std'"),
            label="batch reward std",
            plot="signal",
        ),
        metric(
            "reward/nonfinite_count",
            "attempts of a sample dump whose reward is NaN or inf, or missing where the "
            "framework stores a NaN as missing (TRL); the logged means average them away",
            label="non-finite rewards",
            plot="failures",
        ),
    ],
)

PATTERNS: list[tuple[re.Pattern[str], MetricSpec]] = [
    (
        re.compile(r"^reward/component/[^/]+/(mean|std)$"),
        MetricSpec(
            "reward/component/<name>/mean",
            "reward",
            "mean (and `/std`, batch std) of one reward function's score over the update's "
            "attempts: the parts of a weighted total",
            "component",
            aliases=(
                Alias(
                    rf"^rewards/{NAME}/(?P<stat>mean|std)$",
                    r"reward/component/\g<name>/\g<stat>",
                    note="TRL, ms-swift: rewards/<func>/mean",
                ),
                Alias(
                    r"^rewards/(?!(?:mean|std)$)(?P<name>[^/]+)$",
                    r"reward/component/\g<name>/mean",
                    note="TRL before mid-2025, Unsloth: rewards/<func> (the mean)",
                ),
                Alias(
                    rf"^reward_components?/{NAME}$",
                    r"reward/component/\g<name>/mean",
                    note="rlprobe reward_components",
                ),
                Alias(
                    rf"^train/agg/effective/[^/]+/rewards/{NAME}/(?P<stat>mean)$",
                    r"reward/component/\g<name>/\g<stat>",
                    note="prime-rl (orchestrator metrics.py: <prefix>/rewards/<fn>)",
                ),
            ),
            plot="components",
            glob="reward/component/*",
        ),
    ),
    (
        re.compile(r"^reward/source/[^/]+/(mean|std)$"),
        MetricSpec(
            "reward/source/<name>/mean",
            "reward",
            "mean reward (and `/std`) of the update's attempts from one data source or "
            "environment: a total that is a mix of sources can hide one of them falling",
            "source",
            aliases=(
                Alias(
                    rf"^env/(?!all/){NAME}/reward/(?:total|mean)$",
                    r"reward/source/\g<name>/mean",
                    note="tinker-cookbook env/<tag>/reward/total (tag other than all)",
                ),
                Alias(rf"^env/(?!all/){NAME}/reward_mean$", r"reward/source/\g<name>/mean"),
                Alias(
                    rf"^train/(?!agg/){NAME}/effective/[^/]+/reward/mean$",
                    r"reward/source/\g<name>/mean",
                    note="prime-rl train/<env>/... (orchestrator.py: per-env pools)",
                ),
                Alias(
                    rf"^reward/source/{NAME}/(?P<stat>mean|std)$",
                    r"reward/source/\g<name>/\g<stat>",
                ),
                Alias(
                    rf"^(?:rewards?|score)/by_source/{NAME}(?:/mean)?$",
                    r"reward/source/\g<name>/mean",
                ),
            ),
            plot="components",
            glob="reward/source/*",
        ),
    ),
]
