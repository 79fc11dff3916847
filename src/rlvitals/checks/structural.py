"""Numbers that are zero by design, and keys a framework renamed: recognised, never read as a
dead or broken metric (info findings that say why, never a warning).

- A clip share that is exactly 0 at every step: with one optimiser pass per batch (TRL
  ``num_iterations=1``) the importance ratio is exactly 1, so nothing can be clipped
  (huggingface/trl #3120: it "is still expected to be zero"). From the run's config where it
  says ``num_iterations``, else from the values themselves.
- A KL to the reference that is exactly 0 at every step: the KL penalty is off (``beta=0``),
  so the policy is not pinned (rl-doctor's validation run with ``beta=0``).
- A key that stops where another key mapped to the same canonical name starts: a version
  renamed it (``RunData.renamed_keys``; prime-rl ``filters/`` -> ``detections/``, PipelineRL
  ``stats/lag`` -> ``stats/lag_max``); slime #1837 and trl #6809 show keys that vanish between
  versions.
"""

from __future__ import annotations

import re

import numpy as np

from .base import Finding
from .context import Context, finding
from .reference import COEF_KEYS
from .stats import MIN_WINDOW

NAME = "structural"

_CLIP = re.compile(r"(?:^|/)(?:clip_ratio|clip_frac|clipfrac|pg_clipfrac)(?:$|/)")


def _all_zero(ctx: Context, name: str) -> int:
    """Steps measured when every finite value of ``name`` is exactly 0 (else 0)."""
    s = ctx.finite(name)
    if s is None or len(s) < MIN_WINDOW or bool(np.any(s.values != 0)):
        return 0
    return len(s)


def _clip(ctx: Context) -> list[Finding]:
    names = [n for n in ctx.data.names() if n == "train/clip_frac" or _CLIP.search(n)]
    zero = {n: k for n in names if (k := _all_zero(ctx, n))}
    if not zero or len(zero) < len([n for n in names if ctx.finite(n) is not None]):
        return []
    found = ctx.config_find("num_iterations", "ppo_epochs")
    passes = found[1] if found else None
    if passes not in (None, 1):
        return []  # several passes and never a clip: not by design, left to the policy check
    why = f"the run's config says {found[0]}={passes}" if found else "the values alone say so"
    return [
        finding(
            NAME,
            "info",
            "healthy",
            f"clip share 0 at every one of {max(zero.values())} steps: by design with one "
            f"optimiser pass per batch (the ratio is exactly 1; {why}), not a dead metric",
            metric=sorted(zero)[0],
            metrics=sorted(zero),
            steps_measured=max(zero.values()),
            config=None if not found else {found[0]: passes},
            action="Nothing to do. Clipping only acts with several passes over a batch "
            "(TRL num_iterations > 1; trl #3120).",
        )
    ]


def _ref_kl(ctx: Context) -> list[Finding]:
    n = _all_zero(ctx, "train/ref_kl")
    if not n:
        return []
    found = ctx.config_find(*COEF_KEYS)
    coef = found[1] if found else None
    if isinstance(coef, (int, float)) and not isinstance(coef, bool) and coef != 0:
        return []  # a penalty on and a KL of exactly 0: left to the reference check
    why = f"{found[0]}={coef} in the run's config" if found else "the values alone say so"
    return [
        finding(
            NAME,
            "info",
            "healthy",
            f"KL to the reference exactly 0 at every one of {n} steps: the KL penalty is off "
            f"({why}), not a pinned policy",
            metric="train/ref_kl",
            steps_measured=n,
            config=None if not found else {found[0]: coef},
            action="Nothing to do; with beta=0 there is no reference term to watch.",
        )
    ]


def _renamed(ctx: Context) -> list[Finding]:
    presence = ctx.data.presence
    if presence is None:
        return []
    renamed = ctx.data.renamed_keys(presence.vanished())
    pairs = sorted(
        {(step, old, new) for old, (step, new) in renamed.items() if old in presence.keys}
    )
    if not pairs:
        return []
    step, old, new = pairs[0]
    more = f" (and {len(pairs) - 1} more)" if len(pairs) > 1 else ""
    return [
        finding(
            NAME,
            "info",
            "healthy",
            f"{old} renamed {new} from step {step}{more}: a version change, read as one series",
            metric=ctx.data.resolved.get(old, (old,))[0],
            first_step=step,
            renamed=[{"from": o, "to": n, "step": s} for s, o, n in pairs],
            action="Nothing to do: the metric goes on under its new name.",
        )
    ]


def check(ctx: Context) -> list[Finding]:
    return _clip(ctx) + _ref_kl(ctx) + _renamed(ctx)
