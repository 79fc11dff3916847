"""The run directory's names and the canonical metric vocabulary (METRICS.md).

One vocabulary for every run, whatever framework wrote it: the writer emits these names, every
reader maps its framework's keys onto them by meaning, and every check and view reads only them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "FORMAT_ID",
    "METRICS",
    "PATTERNS",
    "RESERVED_STEP_KEYS",
    "MetricSpec",
    "describe",
    "is_canonical",
]

FORMAT_ID = "rlvitals-run/1"

# File names inside a run directory (FORMAT.md).
RUN_JSON = "run.json"
STEPS = "steps.jsonl"
ROLLOUTS = "rollouts.jsonl"
PROGRESS = "progress.jsonl"
EVALS = "evals.jsonl"
TRANSCRIPTS = "transcripts"
CHECKPOINTS = "checkpoints"

# Keys of a step record that are not metrics.
RESERVED_STEP_KEYS = frozenset({"step", "time", "policy_version"})

# How non-finite numbers are spelled in our files (FORMAT.md).
NONFINITE_STRINGS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


@dataclass(frozen=True)
class MetricSpec:
    """One canonical metric: its name, the family (the check that reads it) and its meaning."""

    name: str
    family: str
    description: str


def _specs(family: str, rows: list[tuple[str, str]]) -> list[MetricSpec]:
    return [MetricSpec(name, family, desc) for name, desc in rows]


_ALL = [
    *_specs(
        "reward",
        [
            ("reward/mean", "mean reward of the attempts this update trained on"),
            ("reward/std", "std of the same rewards across the whole batch (not learning signal)"),
            (
                "reward/group_std_mean",
                "mean over trained groups of the population std of rewards within the group",
            ),
            (
                "reward/mean_with_unusable",
                "mean reward of trained attempts plus the graded attempts of rejected groups",
            ),
        ],
    ),
    *_specs(
        "groups",
        [
            ("groups/trained", "groups trained on this update"),
            ("groups/rejected", "groups rejected this update"),
            (
                "groups/all_solved",
                "completed groups whose every attempt scored the run's top reward",
            ),
            (
                "groups/none_solved",
                "completed groups whose every attempt scored the run's bottom reward",
            ),
            (
                "groups/signal_fraction",
                "share of completed groups whose rewards differ (what GRPO learns from)",
            ),
            ("discard/groups/no_variance", "groups rejected because every attempt scored the same"),
            (
                "discard/groups/group_too_small",
                "groups rejected because more than max_group_losses attempts failed",
            ),
        ],
    ),
    *_specs(
        "failures",
        [
            ("rollouts/retries", "attempt retries this update"),
        ],
    ),
    *_specs(
        "responses",
        [
            ("response/length_mean", "mean generated tokens per attempt"),
            ("response/truncated_rate", "share of attempts that hit the token limit"),
        ],
    ),
    *_specs(
        "agreement",
        [
            (
                "train/mismatch_kl",
                "token mean of k3 = w - 1 - Δ, KL(sampler || trainer) estimate, never negative",
            ),
            ("train/mismatch_k1", "token mean of -Δ (k1; may be negative)"),
            ("train/logprob_abs_diff", "token mean of |Δ| (log space, not probability space)"),
            ("train/mismatch_ess", "token-level (Σw)² / (n·Σw²), in (0, 1], 1 = identical"),
            (
                "train/mismatch_ess_seq",
                "sequence-level ESS with one weight per attempt, w = exp(ΣΔ)",
            ),
            (
                "freshness/lag_mean",
                "mean updates between the sampler version of a trained attempt and its trainer",
            ),
            ("freshness/lag_p90", "90th percentile of the same lag"),
            ("freshness/lag_max", "largest lag of a trained attempt"),
        ],
    ),
    *_specs(
        "policy",
        [
            ("sampling/entropy_estimate", "-mean sampler logprob over sampled tokens"),
            ("train/entropy", "mean token entropy computed by the trainer"),
            ("train/loss", "loss as logged"),
            ("train/grad_norm", "gradient norm before clipping"),
            ("train/lr", "learning rate"),
            ("train/clip_frac", "share of tokens whose importance ratio was clipped"),
            ("train/ppo_kl", "old-vs-new policy KL within the update"),
            ("train/ref_kl", "KL to the reference policy"),
            ("train/advantage_std", "std of advantages in the batch"),
        ],
    ),
    *_specs(
        "perf",
        [
            ("perf/step_seconds", "wall seconds of the update, from the previous step record"),
            ("perf/sampling_seconds", "seconds spent sampling"),
            ("perf/grading_seconds", "seconds spent grading"),
            ("perf/training_seconds", "seconds spent in the optimizer update"),
            ("perf/tokens_per_second", "generated tokens per wall second of the update"),
            ("perf/attempt_seconds_p50", "median attempt duration (start to end)"),
            ("perf/attempt_seconds_p90", "90th percentile attempt duration"),
            ("perf/attempt_seconds_p99", "99th percentile attempt duration"),
        ],
    ),
]

METRICS: dict[str, MetricSpec] = {m.name: m for m in _ALL}

# Families of names with a variable part (METRICS.md).
PATTERNS: list[tuple[re.Pattern[str], MetricSpec]] = [
    (
        re.compile(r"^discard/groups/[^/]+$"),
        MetricSpec("discard/groups/<reason>", "groups", "rejected groups this update by reason"),
    ),
    (
        re.compile(r"^discard/rollouts/.+$"),
        MetricSpec(
            "discard/rollouts/<reason>",
            "failures",
            "attempts that never reached training, by reason (rollout_failed/<Exc>, "
            "grading_failed/<Exc>, unversioned, ungraded, stale, or the loop's own reason)",
        ),
    ),
    (
        re.compile(r"^rollout/.+$"),
        MetricSpec(
            "rollout/<key>",
            "episodes",
            "episode metadata: numbers averaged, labels counted as rollout/<key>/<label>, "
            "booleans as rates",
        ),
    ),
    (
        re.compile(r"^eval/.+/score$"),
        MetricSpec("eval/<suite>/score", "heldout", "held-out score of a sampler checkpoint"),
    ),
    (
        re.compile(r"^perf/.+$"),
        MetricSpec("perf/<name>", "perf", "other time, throughput or utilisation figures"),
    ),
    (
        re.compile(r"^transcripts/[a-z0-9_]+$"),
        MetricSpec(
            "transcripts/<flag>_rate",
            "transcripts",
            "share of the step's attempts raising a transcript flag (docs/transcripts.md), "
            "derived when a run is checked; also flagged_rate, repetition_rate and "
            "reward_length_spearman",
        ),
    ),
]


def describe(name: str) -> MetricSpec | None:
    """The spec of a canonical name (fixed or patterned), or None for a non-canonical key."""
    spec = METRICS.get(name)
    if spec is not None:
        return spec
    for pattern, pspec in PATTERNS:
        if pattern.match(name):
            return pspec
    return None


def is_canonical(name: str) -> bool:
    """Whether ``name`` belongs to the canonical vocabulary."""
    return describe(name) is not None
