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


def _critical(ctx: Context, name: str) -> bool:
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


def check(ctx: Context) -> list[Finding]:
    missing = _missing(ctx)
    nulls = getattr(ctx.data, "nulls", {}) or {}
    # A source key mapped to a canonical metric is reported under the canonical name.
    covered = {src for c, src in ctx.data.original.items() if src != c and ctx.data.has(c)}
    hits = []
    for name in ctx.data.names():
        if name == "time" or name in covered:
            continue
        s = ctx.data.series(name)
        if s is None or not len(s):
            continue
        bad = ~np.isfinite(s.values)
        if not bad.any():
            continue
        i = int(np.argmax(bad))
        hits.append((int(s.steps[i]), name, s, bad))
    hits.sort(key=lambda h: (h[0], not ctx.data.is_canonical(h[1]), h[1]))
    out = []
    others = []
    seen = set()
    for first, name, s, bad in hits:
        seen.add(name)
        null = name in nulls or (name in missing and missing[name] <= first)
        if not _critical(ctx, name):
            others.append((first, name, int(bad.sum()), len(s)))
            continue
        value = float(s.values[np.argmax(bad)])
        kind = (
            "null (missing)"
            if null
            else "NaN"
            if np.isnan(value)
            else ("inf" if value > 0 else "-inf")
        )
        n_bad = int(bad.sum())
        out.append(
            finding(
                NAME,
                "fail",
                "non_finite",
                f"{name} is {kind} from step {first} ({n_bad} of {len(s)} steps)"
                + (": a NaN the sink stored as null" if null else ""),
                metric=name,
                first_step=first,
                value=kind,
                non_finite_steps=[int(x) for x in s.steps[bad][:20]],
                count=n_bad,
                measured_steps=len(s),
                action="Stop and look at the step before: a NaN loss or reward poisons every "
                "update after it. Check for a division by a zero std, the log of zero, an "
                "overflow in bf16, or a grader returning NaN; restart from the last finite "
                "checkpoint.",
            )
        )
    # Vanished: values, then no value at all from some step on.
    for name, step in sorted(missing.items(), key=lambda kv: (kv[1], kv[0])):
        if name in seen or name == "time" or name in covered:
            continue
        s = ctx.data.series(name)
        last = int(s.steps[-1]) if s is not None and len(s) else None
        if not _critical(ctx, name):
            others.append((step, name, 0, 0))
            continue
        out.append(
            finding(
                NAME,
                "fail",
                "non_finite",
                f"{name} is missing from step {step}: it had values up to step {last}, then "
                "none (a sink that drops NaN drops the key)",
                metric=name,
                first_step=step,
                value="missing",
                last_value_step=last,
                action="A reward or loss that stops being logged is usually a NaN the logger "
                "dropped: look at the grader and the loss at that step before trusting the "
                "run.",
            )
        )
    if others:
        others.sort()
        first, name, _n_bad, _n = others[0]
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
