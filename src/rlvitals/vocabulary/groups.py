"""The `groups` family of the canonical metrics: groups and discards.

Data only: each canonical metric with its meaning, label, plot and synonyms, and the
family's names with a variable part. ``schema.py`` reads them (and generates the docs).
"""

from __future__ import annotations

import re

from .spec import Alias, MetricSpec, metric, one_minus, specs

FAMILY = "groups"
TITLE = "Groups and discards"
INTRO = ""

METRICS = specs(
    FAMILY,
    [
        metric(
            "groups/trained",
            "groups trained on this update",
            label="trained groups",
            plot="groups",
        ),
        metric(
            "groups/rejected",
            "groups rejected this update",
            label="rejected groups",
            plot="groups",
        ),
        metric(
            "groups/all_solved",
            "completed groups whose every attempt scored the run's top reward",
            label="all solved",
            plot="groups",
        ),
        metric(
            "groups/none_solved",
            "completed groups whose every attempt scored the run's bottom reward",
            label="none solved",
            plot="groups",
        ),
        metric(
            "groups/none_solved_share",
            "share of the update's prompts whose every attempt scored the bottom reward",
            Alias(
                "baseline_reward/pct_0",
                scale=0.01,
                note="NeMo-RL: percent (0-100) of prompts with mean reward 0; / 100",
            ),
            label="none solved share",
            plot="signal",
        ),
        metric(
            "groups/all_solved_share",
            "share of the update's prompts whose every attempt scored the top reward",
            Alias(
                "baseline_reward/pct_1",
                scale=0.01,
                note="NeMo-RL: percent (0-100) of prompts with mean reward 1; / 100",
            ),
            label="all solved share",
            plot="signal",
        ),
        metric(
            "groups/signal_fraction",
            "share of completed groups whose rewards differ (what GRPO learns from)",
            one_minus("frac_reward_zero_std", "TRL: share of samples whose group std is 0"),
            one_minus("zero_variance_group_frac", "rlprobe"),
            one_minus("zero_var_group_frac", "rl-doctor"),
            one_minus("zero_std_frac", "share of groups with zero reward std"),
            Alias(
                "baseline_reward/pct_mixed",
                scale=0.01,
                note="NeMo-RL: percent (0-100) of prompts with mixed rewards; / 100",
            ),
            one_minus("frac_zero_std", "share of groups with zero reward std"),
            label="signal groups",
            key=True,
            plot="signal",
        ),
        metric(
            "discard/groups/no_variance",
            "groups rejected because every attempt scored the same",
            label="no-variance groups",
            plot="groups",
        ),
        metric(
            "discard/groups/group_too_small",
            "groups rejected because more than max_group_losses attempts failed",
            label="groups too small",
            plot="groups",
        ),
    ],
)

PATTERNS: list[tuple[re.Pattern[str], MetricSpec]] = [
    (
        re.compile(r"^discard/groups/[^/]+$"),
        MetricSpec(
            "discard/groups/<reason>",
            "groups",
            "rejected groups this update by reason",
            plot="groups",
        ),
    ),
]
