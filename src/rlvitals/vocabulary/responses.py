"""The `responses` family of the canonical metrics: responses.

Data only: each canonical metric with its meaning, label, plot and synonyms, and the
family's names with a variable part. ``schema.py`` reads them (and generates the docs).
"""

from __future__ import annotations

import re

from .spec import Alias, MetricSpec, metric, specs

FAMILY = "responses"
TITLE = "Responses"
INTRO = ""

METRICS = specs(
    FAMILY,
    [
        metric(
            "response/length_mean",
            "mean generated tokens per attempt",
            "response_length",
            "response_length_mean",
            "response_length/mean",
            "completion_length",
            "completions/mean_length",
            "completion_len_mean",
            "mean_response_length",
            "avg_response_length",
            "gen_len",
            "generate/avg_num_tokens",
            "rollout/response_length_mean",
            Alias("mean_gen_tokens_per_sample", note="NeMo-RL"),
            Alias("generation_length", note="NeMo-RL 'Mean Generation Length'"),
            "response_tokens",
            "mean_response_tokens",
            "gen_tokens",
            "output_tokens",
            label="length",
            key=True,
            plot="length",
        ),
        metric(
            "response/truncated_rate",
            "share of attempts that hit the token limit",
            "truncated_rate",
            "truncation_rate",
            "truncated_ratio",
            "truncated_fraction",
            "clipped_ratio",
            "completions/clipped_ratio",
            "response_length/clip_ratio",
            "no_eos_ratio",
            "frac_truncated",
            label="truncated",
            key=True,
            plot="truncation",
        ),
    ],
)

PATTERNS: list[tuple[re.Pattern[str], MetricSpec]] = []
