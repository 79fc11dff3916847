"""The `heldout` family of the canonical metrics: held-out evaluation.

Data only: each canonical metric with its meaning, label, plot and synonyms, and the
family's names with a variable part. ``schema.py`` reads them (and generates the docs).
"""

from __future__ import annotations

import re

from .spec import Alias, MetricSpec

FAMILY = "heldout"
TITLE = "Held-out evaluation"
INTRO = ""

METRICS: list[MetricSpec] = []

PATTERNS: list[tuple[re.Pattern[str], MetricSpec]] = [
    (
        re.compile(r"^eval/.+/score$"),
        MetricSpec(
            "eval/<suite>/score",
            "heldout",
            "held-out score of a sampler checkpoint",
            plot="reward",
        ),
    ),
    (
        re.compile(r"^eval/.+/component/[^/]+$"),
        MetricSpec(
            "eval/<suite>/component/<name>",
            "heldout",
            "held-out mean of one reward component on a suite (verl val-aux/<source>/<var>)",
            aliases=(
                Alias(
                    r"^val-aux/(?P<src>[^/]+)/(?P<var>(?!acc/|reward/)[^/]+)/mean@\d+$",
                    r"eval/\g<src>/component/\g<var>",
                    note="verl _val_metrics_update: reward extra infos per data source",
                ),
            ),
            plot="components",
        ),
    ),
]
