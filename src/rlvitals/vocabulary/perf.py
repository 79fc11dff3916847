"""The `perf` family of the canonical metrics: time and throughput (the system layer).

Data only: each canonical metric with its meaning, label, plot and synonyms, and the
family's names with a variable part. ``schema.py`` reads them (and generates the docs).
"""

from __future__ import annotations

import re

from .spec import Alias, MetricSpec, metric, specs

FAMILY = "perf"
TITLE = "Time and throughput (the system layer)"
INTRO = (
    "Utilisation where a framework logs it (`perf/mfu`, GPU memory) keeps its name under `perf/`."
)

METRICS = specs(
    FAMILY,
    [
        metric(
            "perf/step_seconds",
            "wall seconds of the update, from the previous step record",
            "step_time",
            "time_per_step",
            "step_seconds",
            "step_time_s",
            "time/step",
            "timing_s/step",
            Alias("time/step_wall_s", note="OpenPipe ART"),
            "perf/time_per_step",
            "sec_per_step",
            "seconds_per_step",
            label="s/step",
            key=True,
            plot="timing",
        ),
        metric(
            "perf/sampling_seconds",
            "seconds spent sampling",
            "generation_time",
            "gen_time",
            "timing_s/gen",
            "timing/generation",
            "perf/rollout_time",
            label="sampling s",
            plot="timing",
        ),
        metric(
            "perf/grading_seconds",
            "seconds spent grading",
            "timing_s/reward",
            label="grading s",
            plot="timing",
        ),
        metric(
            "perf/training_seconds",
            "seconds spent in the optimizer update",
            "train_time",
            "training_time",
            "timing_s/update_actor",
            label="training s",
            plot="timing",
        ),
        metric(
            "perf/tokens_per_second",
            "generated tokens per wall second of the update",
            "tokens_per_second",
            "tokens_per_sec",
            label="tokens/s",
            plot="throughput",
        ),
        metric(
            "perf/attempt_seconds_p50",
            "median attempt duration (start to end)",
            label="p50 s",
            plot="timing",
        ),
        metric(
            "perf/attempt_seconds_p90",
            "90th percentile attempt duration",
            label="p90 s",
            plot="timing",
        ),
        metric(
            "perf/attempt_seconds_p99",
            "99th percentile attempt duration",
            label="p99 s",
            plot="timing",
        ),
    ],
)

PATTERNS: list[tuple[re.Pattern[str], MetricSpec]] = [
    (
        re.compile(r"^perf/.+$"),
        MetricSpec(
            "perf/<name>",
            "perf",
            "other time, throughput or utilisation figures",
            plot="system",
        ),
    ),
]
