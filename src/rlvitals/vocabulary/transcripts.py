"""The `transcripts` family of the canonical metrics: transcripts.

Data only: each canonical metric with its meaning, label, plot and synonyms, and the
family's names with a variable part. ``schema.py`` reads them (and generates the docs).
"""

from __future__ import annotations

import re

from .spec import MetricSpec, metric, specs

FAMILY = "transcripts"
TITLE = "Transcripts"
INTRO = ""

METRICS = specs(
    FAMILY,
    [
        metric(
            "text/gibberish_rate",
            "share of the update's samples with a sampled token of a rare id (> 100,000) "
            "at a logprob below -ln(V) - 2 (prime-rl's gibberish detector)",
            label="gibberish",
            plot="transcripts",
        ),
        metric(
            "text/repetition_rate",
            "share of the update's samples with a long run of tokens sampled at p > 0.99 "
            "(prime-rl's repetition detector: 3,000 tokens)",
            label="repetition",
            plot="transcripts",
        ),
        metric(
            "text/ngram_dup_rate",
            "share of the update's replies of 32+ tokens whose 4-gram duplicate ratio is "
            "past 0.5 (Trinity-RFT #620)",
            label="4-gram dup.",
            plot="transcripts",
        ),
    ],
)

PATTERNS: list[tuple[re.Pattern[str], MetricSpec]] = [
    (
        re.compile(r"^transcripts/[a-z0-9_]+$"),
        MetricSpec(
            "transcripts/<flag>_rate",
            "transcripts",
            "share of the step's attempts raising a transcript flag (docs/transcripts.md), "
            "derived when a run is checked; also flagged_rate, repetition_rate and "
            "reward_length_spearman",
            plot="transcripts",
            glob="transcripts/*",
        ),
    ),
]
