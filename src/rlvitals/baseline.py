"""Healthy ranges from your own seeds, as the Miles lab does with three seeds.

``build`` reads several healthy runs of the same setup and stores, per metric, the range of
per-step values and of per-run means over the first steps, and each run's trend over the whole
run. ``rlvitals check --baseline ranges.json`` holds a new run against them.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from .errors import ReadError
from .jsonio import decode_line, dumps
from .model import RunData
from .schema import is_canonical

__all__ = ["BASELINE_FORMAT", "build", "comparable", "load", "save"]

BASELINE_FORMAT = "rlvitals-baseline/1"

# Families that depend on the machine or the batch size, not on the run's health.
_SKIP_PREFIXES = ("perf/", "discard/", "eval/", "rollouts/retries")
_SKIP = {"groups/trained", "groups/rejected", "groups/all_solved", "groups/none_solved"}


def comparable(name: str) -> bool:
    """Whether a metric is held against a baseline (canonical, not a count or a timing)."""
    return is_canonical(name) and name not in _SKIP and not name.startswith(_SKIP_PREFIXES)


def _slope(steps: np.ndarray, values: np.ndarray) -> float | None:
    if len(values) < 5:
        return None
    x = steps.astype(np.float64)
    xm = x.mean()
    sxx = float(((x - xm) ** 2).sum())
    if sxx == 0:
        return None
    return float(((x - xm) * (values - values.mean())).sum() / sxx)


def build(runs: list[RunData], *, first: int = 10) -> dict[str, Any]:
    """Healthy ranges over the first ``first`` steps and trends over the whole run, per metric
    measured in every run."""
    if not runs:
        raise ValueError("baseline needs at least one run")
    names = set(runs[0].names())
    for r in runs[1:]:
        names &= set(r.names())
    metrics: dict[str, Any] = {}
    for name in sorted(n for n in names if comparable(n) and all(r.is_canonical(n) for r in runs)):
        early_all, means, slopes, lasts = [], [], [], []
        for r in runs:
            s = r.series(name)
            if s is None:
                break
            fin = s.finite()
            if len(fin) < 2:
                break
            head = fin.values[:first]
            early_all.append(head)
            means.append(float(head.mean()))
            slopes.append(_slope(fin.steps, fin.values))
            lasts.append(float(fin.values[-min(5, len(fin)) :].mean()))
        else:
            allv = np.concatenate(early_all)
            metrics[name] = {
                "early_min": float(allv.min()),
                "early_max": float(allv.max()),
                "early_mean_min": min(means),
                "early_mean_max": max(means),
                "early_means": means,
                "slopes": slopes,
                "last_means": lasts,
            }
    return {
        "format": BASELINE_FORMAT,
        "first_steps": first,
        "runs": [r.source for r in runs],
        "metrics": metrics,
    }


def save(baseline: dict[str, Any], path: str | os.PathLike[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(dumps(baseline, indent=2))
        f.write("\n")


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a baseline file; a wrong file is one clear error naming it."""
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            data = decode_line(f.read())
    except FileNotFoundError:
        raise ReadError("no such file", path=p) from None
    except ValueError as exc:
        raise ReadError(f"not JSON: {exc}", path=p) from None
    if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT:
        raise ReadError(
            f"not a baseline file: expected format {BASELINE_FORMAT!r} "
            "(make one with `rlvitals baseline RUN... -o FILE`)",
            path=p,
        )
    if not isinstance(data.get("metrics"), dict):
        raise ReadError("expected a 'metrics' object", path=p)
    for name, spec in data["metrics"].items():
        for key in ("early_min", "early_max"):
            v = spec.get(key) if isinstance(spec, dict) else None
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ReadError(f"metric {name!r}: expected a finite number for {key!r}", path=p)
    return data
