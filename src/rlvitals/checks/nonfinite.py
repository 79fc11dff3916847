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


def check(ctx: Context) -> list[Finding]:
    missing = _missing(ctx)
    nulls = getattr(ctx.data, "nulls", {}) or {}
    # A source key mapped to a canonical metric is reported under the canonical name.
    covered = {src for c, src in ctx.data.original.items() if src != c and ctx.data.has(c)}
    # (first step, name, what, steps gone bad, steps measured)
    bad_rows: list[tuple[int, str, str, list[int], int]] = []
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
        bad_rows.append((first, name, kind, [int(x) for x in s.steps[bad]], len(s)))
    seen = {r[1] for r in bad_rows}
    for name, step in missing.items():
        if name in seen or name == "time" or name in covered:
            continue
        s = ctx.data.series(name)
        n = len(s) if s is not None else 0
        bad_rows.append((step, name, "missing", [], n))
    # Trainers that count the NaN and inf values they met (rlprobe nan_count / inf_count).
    for name in ctx.data.names():
        if not _COUNTED.search(name):
            continue
        s = ctx.finite(name)
        if s is None or not (s.values > 0).any():
            continue
        hit = s.values > 0
        bad_rows.append(
            (
                int(s.steps[int(np.argmax(hit))]),
                name,
                "counted",
                [int(x) for x in s.steps[hit]],
                len(s),
            )
        )
    crit = [r for r in bad_rows if _critical(ctx, r[1])]
    others = sorted(r for r in bad_rows if not _critical(ctx, r[1]))
    out: list[Finding] = []
    by_step: dict[int, list[tuple[int, str, str, list[int], int]]] = {}
    for r in crit:
        by_step.setdefault(r[0], []).append(r)
    for first in sorted(by_step):
        rows = sorted(by_step[first], key=lambda r: _priority(ctx, r[1]))
        _f, name, kind, steps_bad, measured = rows[0]
        also = [r[1] for r in rows[1:]]
        if kind == "counted" and name == DUMP_COUNT:
            counts = ctx.finite(name)
            at = int(counts.at(first) or 0) if counts is not None else 0
            title = (
                f"rewards NaN or missing in the sample dump from step {first} ({at} there; at "
                f"{len(steps_bad)} of {measured} steps): a reward function returned NaN or "
                "None, and the logged means average it away"
            )
        elif kind == "counted":
            title = (
                f"the trainer counted non-finite values from step {first}: {name} > 0 at "
                f"{len(steps_bad)} of {measured} steps"
            )
        elif kind == "missing":
            s = ctx.data.series(name)
            last = int(s.steps[-1]) if s is not None and len(s) else None
            title = (
                f"{name} is missing from step {first}: it had values up to step {last}, then "
                "none (a sink that drops NaN drops the key)"
            )
        else:
            title = f"{name} is {kind} from step {first} ({len(steps_bad)} of {measured} steps)"
            if kind.startswith("null"):
                title += ": a NaN the sink stored as null"
        if also:
            title += f"; also {', '.join(also[:3])}" + (" ..." if len(also) > 3 else "")
        out.append(
            finding(
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
        )
    if others:
        first, name = others[0][0], others[0][1]
        names = [o[1] for o in others]
        out.append(
            finding(
                NAME,
                "warn",
                "non_finite",
                f"{len(others)} measurement(s) went non-finite or missing, first {name} at step "
                f"{first}",
                metric=name,
                first_step=first,
                metrics=names[:20],
                first_steps={o[1]: o[0] for o in others[:20]},
                missing={n: missing[n] for n in names[:20] if n in missing},
                action="A measurement went non-finite or stopped being logged; find what "
                "produced it before trusting it.",
            )
        )
    return out
