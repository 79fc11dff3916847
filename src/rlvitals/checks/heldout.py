"""7. Held-out: checkpoints scored on tasks never trained on.

Train reward rising while the held-out score is flat or falling is the exploit signature: the
policy learned what the grader checks, not the job. The held-out change is judged against its
own sampling error (binomial, from each evaluation's ``n``) and the train change against the
reward's step noise, over the same span of steps.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..model import Series
from .base import Finding
from .context import Context, finding, round_sig
from .stats import MIN_WINDOW, noise_sigma, trend

NAME = "heldout"


def _eval_se(ctx: Context, suite: str, e: Series) -> np.ndarray:
    """Standard error of each evaluation's score (binomial where ``n`` is known)."""
    ns = {}
    for rec in ctx.data.evals:
        if rec.get("suite") == suite and isinstance(rec.get("n"), (int, float)):
            ns[int(rec["step"])] = float(rec["n"])
    se = np.full(len(e), np.nan)
    for i, (step, p) in enumerate(zip(e.steps.tolist(), e.values.tolist())):
        n = ns.get(step)
        if n and 0 <= p <= 1:
            se[i] = math.sqrt(max(p * (1 - p), 1.0 / n) / n)
    if np.isnan(se).all():
        # Unknown n: the scores' own scatter around their trend.
        sigma = noise_sigma(e.values) if len(e) >= 3 else 0.05
        se[:] = sigma
    else:
        se = np.where(np.isnan(se), np.nanmean(se), se)
    return se


def check(ctx: Context) -> list[Finding]:
    th = ctx.thresholds
    suites = [n for n in ctx.data.names("eval/") if n.endswith("/score")]
    if not suites:
        return []
    rname, r = ctx.series("reward/mean", "reward/mean_with_unusable")
    out: list[Finding] = []
    for metric in suites:
        suite = metric[len("eval/") : -len("/score")]
        e = ctx.finite(metric)
        if e is None:
            continue
        if len(e) < th.heldout_min_evals:
            out.append(
                finding(
                    NAME,
                    "info",
                    "too_early",
                    f"{len(e)} held-out evaluation(s) of {suite}; divergence needs "
                    f"{th.heldout_min_evals}",
                    metric=metric,
                    evaluations=len(e),
                    action="Score sampler checkpoints on held-out tasks every few updates "
                    "([output] sampler_checkpoint_every).",
                )
            )
            continue
        if r is None:
            continue
        k = max(1, len(e) // 3)
        se = _eval_se(ctx, suite, e)
        e_first, e_last = float(e.values[:k].mean()), float(e.values[-k:].mean())
        e_se = math.sqrt(float((se[:k] ** 2).mean()) / k + float((se[-k:] ** 2).mean()) / k)
        e_change = e_last - e_first
        span = r.since(int(e.steps[0]))
        span = Series(span.steps[span.steps <= e.steps[-1]], span.values[span.steps <= e.steps[-1]])
        if len(span) < MIN_WINDOW:
            continue
        w = max(MIN_WINDOW, len(span) // 4)
        r_first, r_last = float(span.values[:w].mean()), float(span.values[-w:].mean())
        r_noise = noise_sigma(span.values)
        r_change = r_last - r_first
        tr = trend(span)
        train_rising = tr is not None and tr.rising and r_change > 3 * r_noise * math.sqrt(2 / w)
        peak_i = int(np.argmax(e.values))
        ev: dict[str, Any] = dict(
            suite=suite,
            train_metric=rname,
            train_first=round_sig(r_first),
            train_last=round_sig(r_last),
            heldout_first=round_sig(e_first),
            heldout_last=round_sig(e_last),
            heldout_change=round_sig(e_change),
            heldout_se=round_sig(e_se),
            evaluations=len(e),
            eval_steps=[int(x) for x in e.steps[:30]],
            eval_scores=[round_sig(float(x)) for x in e.values[:30]],
        )
        if train_rising and e_change <= e_se:
            falling = e_change < -2 * e_se
            divergence = int(e.steps[peak_i]) if peak_i < len(e) - 1 else int(e.steps[0])
            out.append(
                finding(
                    NAME,
                    "fail" if falling else "warn",
                    "exploit_suspected",
                    f"exploit suspected: train {rname} rose {r_first:.3g} -> {r_last:.3g} while "
                    f"held-out {suite} went {e_first:.3g} -> {e_last:.3g}"
                    f" ({'falling' if falling else 'flat'}), diverging from step {divergence}",
                    metric=metric,
                    first_step=divergence,
                    divergence_step=divergence,
                    action="Read the transcripts of the highest-reward attempts since that step: "
                    "the policy found a way to satisfy the grader without doing the task. Fix the "
                    "grader or environment and start a new run; training longer reinforces the "
                    "exploit.",
                    **ev,
                )
            )
        elif e_change > 2 * e_se:
            out.append(
                finding(
                    NAME,
                    "ok",
                    "learning",
                    f"held-out {suite} confirms: {e_first:.3g} -> {e_last:.3g}",
                    metric=metric,
                    action="Deploy only a checkpoint that passes your own evaluation.",
                    **ev,
                )
            )
    return out
