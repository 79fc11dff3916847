"""Your own healthy ranges: the run's first steps and trend held against your seeds' (``check
--baseline``). Read as the mean over the first steps, never one step."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..baseline import comparable
from .base import Finding
from .context import Context, fact, finding, round_sig
from .reward import check as reward_check
from .stats import MIN_WINDOW, trend
from .verdict import FLAT_VERDICTS

NAME = "baseline"


def check(ctx: Context) -> list[Finding]:
    base = ctx.baseline
    if not base:
        return []
    first = int(base.get("first_steps", 10))
    out: list[Finding] = []
    early: list[Finding] = []
    for name, spec in sorted(base.get("metrics", {}).items()):
        if not comparable(name) or not ctx.data.is_canonical(name):
            continue
        s = ctx.finite(name)
        if s is None or len(s) < MIN_WINDOW:
            continue
        head = s.values[:first]
        mean = float(head.mean())
        lo, hi = float(spec["early_min"]), float(spec["early_max"])
        if not lo <= mean <= hi:
            cause = _verdict(name)
            mark: dict[str, Any] = {} if cause else {"symptom": True}
            early.append(
                finding(
                    NAME,
                    "warn",
                    cause or _unjudged(ctx),
                    f"{name} outside your healthy range: mean {mean:.3g} over the first "
                    f"{len(head)} steps, your seeds {lo:.3g} to {hi:.3g}",
                    metric=name,
                    first_step=int(s.steps[0]),
                    mean=round_sig(mean),
                    healthy_min=round_sig(lo),
                    healthy_max=round_sig(hi),
                    seed_means=[round_sig(x) for x in spec.get("early_means", [])],
                    window=[int(s.steps[0]), int(s.steps[len(head) - 1])],
                    **mark,
                    action="This run starts differently from your healthy seeds: compare its "
                    "config, data and versions with theirs before trusting the curves.",
                )
            )
        slopes = [x for x in spec.get("slopes", []) if isinstance(x, (int, float))]
        tr = trend(s)
        if len(slopes) >= 2 and tr is not None and abs(tr.z) > 3:
            same_sign = np.sign(slopes)
            if abs(same_sign.sum()) == len(slopes) and np.sign(tr.slope) == -same_sign[0]:
                out.append(
                    finding(
                        NAME,
                        "warn" if name.startswith("reward/") else "info",
                        _verdict(name) or "not_learning",
                        f"{name} trends {'down' if tr.slope < 0 else 'up'} "
                        f"({tr.slope:.3g}/step) where every seed trended the other way",
                        metric=name,
                        first_step=int(s.steps[0]),
                        slope=round_sig(tr.slope),
                        seed_slopes=[round_sig(x) for x in slopes],
                        action="Over the run this metric moves against your healthy seeds: "
                        "look at when it turned.",
                    )
                )
    return _grouped(ctx, early) + out


@fact
def _unjudged(ctx: Context) -> str:
    """The verdict of a range finding that names no cause: starting unlike your seeds says the
    setup differs, not whether the run learns, so it carries what the reward check reads, as
    the run's verdict would without it (learning; else a flat reward's verdict, said at info
    or worse; else too early to tell) and, marked a symptom, yields to any finding that names
    a cause."""
    said = [f.verdict for f in reward_check(ctx)]
    if "learning" in said:
        return "learning"
    return next((v for v in said if v in FLAT_VERDICTS), "too_early")


def _grouped(ctx: Context, early: list[Finding]) -> list[Finding]:
    """Metrics that start outside the seeds' ranges: one finding each, or one for all when
    there are more than two (one cause, a different config or data, moves many at once; the
    same advice on eight cards says it eight times)."""
    if len(early) <= 2:
        return early
    worst = early[0]
    listed = "; ".join(
        f"{f.metric} {f.evidence['mean']:.3g} (seeds {f.evidence['healthy_min']:.3g} to "
        f"{f.evidence['healthy_max']:.3g})"
        for f in early[:6]
    ) + (f"; and {len(early) - 6} more" if len(early) > 6 else "")
    return [
        finding(
            NAME,
            "warn",
            _unjudged(ctx),
            f"{len(early)} metrics outside your healthy ranges over the first steps: {listed}",
            metric=worst.metric,
            first_step=worst.first_step,
            metrics={
                str(f.metric): {
                    k: f.evidence.get(k) for k in ("mean", "healthy_min", "healthy_max")
                }
                for f in early
            },
            symptom=True,  # one cause, a different config or data: not one metric's verdict
            action=worst.action,
        )
    ]


def _verdict(name: str) -> str | None:
    """The cause a metric of this family names when it sits outside your seeds' range; None
    for the rest (the reward among them), whose range says only that the setup differs."""
    if name.startswith(("train/mismatch", "train/logprob_abs_diff")):
        return "drift"
    if name.startswith("freshness/"):
        return "stale_policy"
    if name.startswith(("response/", "rollout/termination_reason")):
        return "out_of_room"
    if name.startswith(("sampling/entropy", "train/entropy")):
        return "collapse"
    return None
