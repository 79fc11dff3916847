"""The canonical metric vocabulary as data: one module per family, in the seeds' reading order.

Each family module declares its ``FAMILY``, the ``TITLE`` and ``INTRO`` of its section in
docs/metrics.md, its ``METRICS`` (fixed names) and its ``PATTERNS`` (names with a variable part).
``schema.py`` is the one place that reads them: adding a metric is one row in its family's
module (and ``python -m rlvitals.schema > docs/metrics.md``).
"""

from __future__ import annotations

from . import (
    agreement,
    episodes,
    failures,
    groups,
    heldout,
    perf,
    policy,
    responses,
    reward,
    transcripts,
)
from .kept import KEPT

__all__ = ["FAMILY_MODULES", "KEPT"]

# In the seeds' reading order: the order of docs/metrics.md, of METRICS and of PATTERNS.
FAMILY_MODULES = (
    reward,
    groups,
    failures,
    episodes,
    responses,
    agreement,
    policy,
    perf,
    heldout,
    transcripts,
)
