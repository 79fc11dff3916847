"""What a whole run read tells that one record cannot: units told apart by the values.

``settle(run)`` runs once a run has been read whole (``readers.read``):

- a fraction metric (``keys.FRACTIONS``: truncated rate, clip fraction...) whose source
  key's values go above 1 and stay within 0..100 was logged as a percent (a loop's own
  ``clip_ratio`` printed as ``12.5``): its canonical values are divided by 100, and the
  source key's entry in ``RunData.resolved`` (``formats --explain``) and
  ``info["units"]`` say so. The source key keeps its values as printed.
"""

from __future__ import annotations

import numpy as np

from ..model import RunData
from .keys import FRACTIONS

__all__ = ["settle"]


def settle(run: RunData) -> None:
    """Finish a run read whole (see the module docstring)."""
    _percent_by_value(run)


def _percent_by_value(run: RunData) -> None:
    for target in sorted(FRACTIONS):
        src = run.original.get(target)
        if not src or src == target:
            continue
        s = run.metrics.get(target)
        if s is None or not len(s):
            continue
        v = s.values[np.isfinite(s.values)]
        if not len(v) or float(v.min()) < 0.0 or not 1.0 < float(v.max()) <= 100.0:
            continue
        run.metrics.replace(target, s.steps, s.values / 100.0)
        why = f"values up to {float(v.max()):g}: a percent (0-100), read as value / 100"
        run.info.setdefault("units", {})[target] = f"{src}: {why}"
        hit = run.resolved.get(src)
        if hit is not None:
            detail = "; ".join(x for x in (hit[2], why) if x)
            run.resolved[src] = (hit[0], hit[1], detail)
