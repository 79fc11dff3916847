"""What a whole run read tells that one record cannot: units told apart by the values.

``settle(run)`` runs once a run has been read whole (``readers.read``):

- a fraction metric (``keys.FRACTIONS``: truncated rate, clip fraction...) whose source
  key's values go above 1 and stay within 0..100 was logged as a percent (a loop's own
  ``clip_ratio`` printed as ``12.5``): its canonical values are divided by 100, and the
  source key's entry in ``RunData.resolved`` (``formats --explain``) and
  ``info["units"]`` say so. The source key keeps its values as printed.
- an evaluation (``eval/*``) written on every record with a constant between evaluations that
  fall at a regular cadence (``tables.placeholders``): the constant there is no value, and
  its points go, from the canonical series and its source key's; ``info["placeholders"]``
  and the source key's entry in ``RunData.resolved`` say so.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..model import RunData, SeriesBuilder
from .keys import FRACTIONS
from .tables import placeholders

__all__ = ["settle", "settled"]


def settle(run: RunData) -> None:
    """Finish a run read whole (see the module docstring)."""
    _percent_by_value(run)
    _periodic_placeholders(run)


def settled(run: RunData) -> RunData:
    """The run as ``settle`` would leave it, for a run still being read (a follower's): the
    run itself where nothing would change, else a settled copy, so that a run judged live is
    judged as ``check`` reads it while its own series keep the values as they came (records
    still to come are appended in the same units)."""
    if not any(_percent_target(run, t) for t in FRACTIONS) and not any(
        _placeholder_target(run, t) for t in run.metrics.names()
    ):
        return run
    metrics = SeriesBuilder()
    for name in run.metrics.names():
        s = run.metrics.get(name)
        if s is not None:
            metrics.extend(name, s.steps, s.values)
    copy = dataclasses.replace(
        run, metrics=metrics, info=dict(run.info), resolved=dict(run.resolved)
    )
    if "_settings_key" in run.__dict__:
        copy.__dict__["_settings_key"] = run.__dict__["_settings_key"]
    settle(copy)
    return copy


def _placeholder_target(run: RunData, target: str) -> bool:
    if not target.startswith("eval/"):
        return False
    s = run.metrics.get(target)
    return s is not None and placeholders(s.steps, s.values) is not None


def _percent_target(run: RunData, target: str) -> bool:
    src = run.original.get(target)
    if not src or src == target:
        return False
    s = run.metrics.get(target)
    if s is None or not len(s):
        return False
    v = s.values[np.isfinite(s.values)]
    return bool(len(v)) and float(v.min()) >= 0.0 and 1.0 < float(v.max()) <= 100.0


def _periodic_placeholders(run: RunData) -> None:
    for target in sorted(run.metrics.names()):
        if not target.startswith("eval/"):
            continue
        s = run.metrics.get(target)
        got = placeholders(s.steps, s.values) if s is not None else None
        if s is None or got is None:
            continue
        keep = ~got.mask
        run.metrics.replace(target, s.steps[keep], s.values[keep])
        src = run.original.get(target, target)
        why = (
            f"{got.value:g} on the {got.count} records between evaluations every {got.every} "
            f"steps (from step {got.first}): a placeholder, no value"
        )
        for name in {src, f"{run.format}:{src}"} - {target}:
            own = run.metrics.get(name)
            if own is not None and np.array_equal(own.steps, s.steps):
                run.metrics.replace(name, own.steps[keep], own.values[keep])
        run.info.setdefault("placeholders", {})[target] = f"{src}: {why}"
        hit = run.resolved.get(src)
        if hit is not None:
            run.resolved[src] = (hit[0], hit[1], "; ".join(x for x in (hit[2], why) if x))


def _percent_by_value(run: RunData) -> None:
    for target in sorted(FRACTIONS):
        if not _percent_target(run, target):
            continue
        src = run.original[target]
        s = run.metrics.get(target)
        assert s is not None
        v = s.values[np.isfinite(s.values)]
        run.metrics.replace(target, s.steps, s.values / 100.0)
        why = f"values up to {float(v.max()):g}: a percent (0-100), read as value / 100"
        run.info.setdefault("units", {})[target] = f"{src}: {why}"
        hit = run.resolved.get(src)
        if hit is not None:
            detail = "; ".join(x for x in (hit[2], why) if x)
            run.resolved[src] = (hit[0], hit[1], detail)
