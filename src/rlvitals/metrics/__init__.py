"""Metric computations from the attempts a loop logs (docs/metrics.md).

Pure functions over one update's attempts: which attempts train and why the others do not
(``decide``), and the canonical step metrics (``step_metrics``). The writer calls them; tests
check them against values worked out by hand.

Notation: Δ = logp_trainer − logp_sampler per sampled token, w = exp(Δ).

``decide.py`` holds the decisions (and the ``Attempt`` record), ``step.py`` the step metrics,
``episodes.py`` the ``rollout/<key>`` metrics of the episodes' metadata, ``mismatch.py`` the
sampler/trainer agreement and ``stats.py`` the exact-sum arithmetic they share.
"""

from __future__ import annotations

from .decide import (
    GROUP_REASONS,
    GROUP_TOO_SMALL,
    NO_VARIANCE,
    STALE,
    UNFINISHED,
    UNGRADED,
    UNVERSIONED,
    Attempt,
    Decision,
    decide,
)
from .episodes import EpisodeStats, episode_stats
from .mismatch import mismatch_stats
from .step import RunState, step_metrics

__all__ = [
    "GROUP_REASONS",
    "GROUP_TOO_SMALL",
    "NO_VARIANCE",
    "STALE",
    "UNFINISHED",
    "UNGRADED",
    "UNVERSIONED",
    "Attempt",
    "Decision",
    "EpisodeStats",
    "RunState",
    "decide",
    "episode_stats",
    "mismatch_stats",
    "step_metrics",
]
