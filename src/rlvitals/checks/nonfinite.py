"""Non-finite and missing values anywhere (NaN loss, NaN reward, inf grad norm, a reward that
turned null) are found at once.

Every series is scanned, canonical and original keys alike; one step is enough here, because a
NaN is not noise. Sinks hide NaN in different ways: verl's file logger writes null, TRL logs a
reward function's NaN as a null reward (and its ``frac_reward_zero_std`` as 0), prime-rl drops
the key, TensorBoard drops the point. A metric that had values and then turned null or
vanished (the readers' ``RunData.missing``: "missing from step N") is reported here with the
non-finite values, never read as a flat or hard run.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import NamedTuple

import numpy as np

from .base import Finding
from .context import Context, finding

NAME = "nonfinite"

# A NaN here breaks training itself; elsewhere it breaks a measurement.
CRITICAL = (
    "train/loss",
    "train/grad_norm",
    "reward/",
    "rewards/",
    "train/advantage_std",
    "train/lr",
)
SOURCE_CRITICAL = ("reward", "loss", "grad_norm")
# The sample-dump readers' per-step count of NaN / inf / missing rewards (readers.samples).
DUMP_COUNT = "reward/nonfinite_count"
# Counts of non-finite values a trainer logs itself.
_COUNTED = re.compile(r"(?:^|[/_.])(?:nan|inf|nonfinite|non_finite)_?(?:count|num|values)$", re.I)


def _critical(ctx: Context, name: str) -> bool:
    if _COUNTED.search(name):
        return True
    if any(name == c or (c.endswith("/") and name.startswith(c)) for c in CRITICAL):
        return True
    # A source key kept under its own name that a canonical critical metric was mapped from.
    canon = [c for c, src in ctx.data.original.items() if src == name]
    return name in SOURCE_CRITICAL or any(_critical(ctx, c) for c in canon if c != name)


def _missing(ctx: Context) -> dict[str, int]:
    """Metric -> first step it is missing from (null or vanished after values); a source key
    whose canonical metric is reported too is left out."""
    out: dict[str, int] = {}
    for attr in ("nulls", "missing"):
        got = getattr(ctx.data, attr, None)
        if isinstance(got, dict):
            out.update({str(k): int(v) for k, v in got.items()})
    if not out:
        return {}
    covered = {ctx.data.original.get(c) for c in out}
    return {k: v for k, v in out.items() if k not in covered}


def _priority(ctx: Context, name: str) -> tuple[int, int, str]:
    """Which of several metrics gone bad at one step names the finding: canonical before
    source keys, then in CRITICAL's order (the reward and the loss first)."""
    rank = next(
        (
            i
            for i, c in enumerate(CRITICAL)
            if name == c or (c.endswith("/") and name.startswith(c))
        ),
        len(CRITICAL),
    )
    return (0 if ctx.data.is_canonical(name) else 1, rank, name.count("/"), name)  # type: ignore[return-value]


class _Bad(NamedTuple):
    """A metric gone bad: from which step, how (``NaN``, ``inf``, ``null (missing)``,
    ``missing``, ``counted``), at which steps, of how many measured."""

    first: int
    name: str
    kind: str
    steps: list[int]
    measured: int


def check(ctx: Context) -> list[Finding]:
    """Every metric gone bad (non-finite values, a key turned null or vanished, a trainer's
    own count of non-finite values): one failure per step where a critical one went (the
    loss, the gradient, the reward...), one warning for all the measurements."""
    missing = _missing(ctx)
    # A source key mapped to a canonical metric is reported under the canonical name.
    covered = {src for c, src in ctx.data.original.items() if src != c and ctx.data.has(c)}
    rows = _non_finite(ctx, missing, covered)
    rows += _vanished(ctx, missing, covered, {r.name for r in rows})
    rows += _counted(ctx)
    crit = [r for r in rows if _critical(ctx, r.name)]
    others = sorted(r for r in rows if not _critical(ctx, r.name))
    by_step: dict[int, list[_Bad]] = {}
    for r in crit:
        by_step.setdefault(r.first, []).append(r)
    out = [
        _broken(ctx, sorted(by_step[first], key=lambda r: _priority(ctx, r.name)))
        for first in sorted(by_step)
    ]
    if others:
        out.append(_measurements(others, missing))
    return out


def _non_finite(
    ctx: Context, missing: dict[str, int], covered: Collection[str | None]
) -> list[_Bad]:
    """Series holding a NaN, an inf, or a null the sink stored for one."""
    nulls = getattr(ctx.data, "nulls", {}) or {}
    out: list[_Bad] = []
    for name in ctx.data.names():
        if name == "time" or name in covered:
            continue
        s = ctx.data.series(name)
        if s is None or not len(s):
            continue
        bad = ~np.isfinite(s.values)
        if not bad.any():
            continue
        first = int(s.steps[int(np.argmax(bad))])
        value = float(s.values[np.argmax(bad)])
        null = name in nulls or (name in missing and missing[name] <= first)
        kind = (
            "null (missing)"
            if null
            else "NaN"
            if np.isnan(value)
            else ("inf" if value > 0 else "-inf")
        )
        out.append(_Bad(first, name, kind, [int(x) for x in s.steps[bad]], len(s)))
    return out


def _vanished(
    ctx: Context, missing: dict[str, int], covered: Collection[str | None], seen: set[str]
) -> list[_Bad]:
    """Metrics that had values and then none (a sink that drops NaN drops the key)."""
    out: list[_Bad] = []
    for name, step in missing.items():
        if name in seen or name == "time" or name in covered:
            continue
        s = ctx.data.series(name)
        out.append(_Bad(step, name, "missing", [], len(s) if s is not None else 0))
    return out


def _counted(ctx: Context) -> list[_Bad]:
    """Trainers that count the NaN and inf values they met (rlprobe nan_count / inf_count,
    the sample-dump readers' ``reward/nonfinite_count``): a count above 0."""
    out: list[_Bad] = []
    for name in ctx.data.names():
        if not _COUNTED.search(name):
            continue
        s = ctx.finite(name)
        if s is None or not (s.values > 0).any():
            continue
        hit = s.values > 0
        first = int(s.steps[int(np.argmax(hit))])
        out.append(_Bad(first, name, "counted", [int(x) for x in s.steps[hit]], len(s)))
    return out


def _title(ctx: Context, bad: _Bad) -> str:
    """What went bad, in the words of how it went."""
    first, name, kind, steps_bad, measured = bad
    if kind == "counted" and name == DUMP_COUNT:
        counts = ctx.finite(name)
        at = int(counts.at(first) or 0) if counts is not None else 0
        return (
            f"rewards NaN or missing in the sample dump from step {first} ({at} there; at "
            f"{len(steps_bad)} of {measured} steps): a reward function returned NaN or "
            "None, and the logged means average it away"
        )
    if kind == "counted":
        return (
            f"the trainer counted non-finite values from step {first}: {name} > 0 at "
            f"{len(steps_bad)} of {measured} steps"
        )
    if kind == "missing":
        s = ctx.data.series(name)
        last = int(s.steps[-1]) if s is not None and len(s) else None
        return (
            f"{name} is missing from step {first}: it had values up to step {last}, then "
            "none (a sink that drops NaN drops the key)"
        )
    title = f"{name} is {kind} from step {first} ({len(steps_bad)} of {measured} steps)"
    return title + (": a NaN the sink stored as null" if kind.startswith("null") else "")


def _broken(ctx: Context, rows: list[_Bad]) -> Finding:
    """Critical metrics gone bad at one step, named by the first in priority (fail)."""
    first, name, kind, steps_bad, measured = rows[0]
    also = [r.name for r in rows[1:]]
    title = _title(ctx, rows[0])
    if also:
        title += f"; also {', '.join(also[:3])}" + (" ..." if len(also) > 3 else "")
    return finding(
        NAME,
        "fail",
        "non_finite",
        title,
        metric=name,
        first_step=first,
        value=kind,
        non_finite_steps=steps_bad[:20],
        count=len(steps_bad),
        measured_steps=measured,
        also=also[:20],
        action="Stop and look at the step before: a NaN loss or reward poisons every "
        "update after it (and a sink may store it as null or drop the key). Check for a "
        "division by a zero std, the log of zero, an overflow in bf16, or a grader "
        "returning NaN; restart from the last finite checkpoint.",
    )


def _measurements(others: list[_Bad], missing: dict[str, int]) -> Finding:
    """Measurements (not critical) gone non-finite or missing, in one warning."""
    first, name = others[0].first, others[0].name
    names = [o.name for o in others]
    return finding(
        NAME,
        "warn",
        "non_finite",
        f"{len(others)} measurement(s) went non-finite or missing, first {name} at step {first}",
        metric=name,
        first_step=first,
        metrics=names[:20],
        first_steps={o.name: o.first for o in others[:20]},
        missing={n: missing[n] for n in names[:20] if n in missing},
        action="A measurement went non-finite or stopped being logged; find what "
        "produced it before trusting it.",
    )
