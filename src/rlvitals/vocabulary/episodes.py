"""The `episodes` family of the canonical metrics: episodes (agent metadata and grader additions).

Data only: each canonical metric with its meaning, label, plot and synonyms, and the
family's names with a variable part. ``schema.py`` reads them (and generates the docs).
"""

from __future__ import annotations

import re

from .spec import MetricSpec

FAMILY = "episodes"
TITLE = "Episodes (agent metadata and grader additions)"
INTRO = (
    "`rollout/<key>`: numbers averaged, labels counted as `rollout/<key>/<label>` (count "
    'this update), booleans as rates in [0, 1]. `{"termination_reason": "max_turns", '
    '"turns": 12}` gives `rollout/turns` and `rollout/termination_reason/max_turns`. A '
    'grader that returns its reward components (`{"correctness": 1.0, "format": 0.5}`) '
    "gets each as `rollout/<component>`: every reward component is logged, not only the "
    "total. Other frameworks' per-function rewards read as `reward/component/<name>/mean`."
)

METRICS: list[MetricSpec] = []

PATTERNS: list[tuple[re.Pattern[str], MetricSpec]] = [
    (
        re.compile(r"^rollout/.+$"),
        MetricSpec(
            "rollout/<key>",
            "episodes",
            "episode metadata: numbers averaged, labels counted as rollout/<key>/<label>, "
            "booleans as rates",
            plot="episodes",
        ),
    ),
]
