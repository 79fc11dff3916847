"""Non-finite values anywhere (NaN loss, NaN reward, inf grad norm) are found at once.

Every series is scanned, canonical and original keys alike; one step is enough here, because a
NaN is not noise.
"""

from __future__ import annotations

import numpy as np

from .base import Finding
from .context import Context, finding

NAME = "nonfinite"

# A NaN here breaks training itself; elsewhere it breaks a measurement.
CRITICAL = ("train/loss", "train/grad_norm", "reward/", "train/advantage_std", "train/lr")


def check(ctx: Context) -> list[Finding]:
    hits = []
    for name in ctx.data.names():
        if name == "time":
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
    for first, name, s, bad in hits:
        critical = any(name == c or (c.endswith("/") and name.startswith(c)) for c in CRITICAL)
        if not critical:
            others.append((first, name, int(bad.sum()), len(s)))
            continue
        value = float(s.values[np.argmax(bad)])
        kind = "NaN" if np.isnan(value) else ("inf" if value > 0 else "-inf")
        n_bad = int(bad.sum())
        out.append(
            finding(
                NAME,
                "fail",
                "non_finite",
                f"{name} is {kind} from step {first} ({n_bad} of {len(s)} steps)",
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
    if others:
        first, name, n_bad, _n = others[0]
        names = [o[1] for o in others]
        out.append(
            finding(
                NAME,
                "warn",
                "non_finite",
                f"{len(others)} measurement(s) went non-finite, first {name} at step {first}",
                metric=name,
                first_step=first,
                metrics=names[:20],
                first_steps={o[1]: o[0] for o in others[:20]},
                action="A measurement went non-finite; find what produced it before trusting it.",
            )
        )
    return out
