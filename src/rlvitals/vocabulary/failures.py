"""The `failures` family of the canonical metrics: failed attempts.

Data only: each canonical metric with its meaning, label, plot and synonyms, and the
family's names with a variable part. ``schema.py`` reads them (and generates the docs).
"""

from __future__ import annotations

import re

from .spec import MetricSpec, metric, specs

FAMILY = "failures"
TITLE = "Failed attempts"
INTRO = ""

METRICS = specs(
    FAMILY,
    [
        metric("rollouts/retries", "attempt retries this update", label="retries", plot="failures"),
    ],
)

PATTERNS: list[tuple[re.Pattern[str], MetricSpec]] = [
    (
        re.compile(r"^discard/rollouts/.+$"),
        MetricSpec(
            "discard/rollouts/<reason>",
            "failures",
            "attempts that never reached training, by reason (rollout_failed/<Exc>, "
            "grading_failed/<Exc>, unversioned, ungraded, stale, or the loop's own reason)",
            plot="failures",
        ),
    ),
]
