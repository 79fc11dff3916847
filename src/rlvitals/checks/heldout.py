"""7. Held-out: checkpoints scored on tasks never trained on.

Train reward rising while the held-out score is flat or falling is the exploit signature: the
policy learned what the grader checks, not the job. The held-out change is judged against its
own sampling error (binomial, from each evaluation's ``n``) and the train change against the
reward's step noise, over the same span of steps. Held-out falling beyond its error fails;
held-out evidently flat (its change, twice its error included, under ``heldout_min_gain``)
warns; a held-out score that rises less than the train reward, or whose few or noisy
evaluations cannot show it flat, is said at info: the train reward can hold parts held-out
does not score (a format term, a truncation penalty learned away), and absence of evidence of
a rise is no evidence of flatness. A train pass rate that rose towards the held-out score
without passing it is not an exploit (sharpening: the skill held-out shows explains it).

The divergence can start late: held-out may rise with train reward for a while (real
learning) and then fall while train reward keeps climbing (the exploit taking over). So every
evaluation is tried as the start of the span, earliest first: over the whole run, held-out flat
or falling while train reward rises is the signature; from a later evaluation on, held-out must
fall beyond three errors (a late plateau is common in healthy runs, and trying many starts
would find a flat stretch, or a two-error fall, in noise). The first evaluation of the first such span is the divergence
step. Train reward is ``reward/mean_with_unusable`` where the run logs it: rejected groups
(all solved) hide the rise an exploit makes from ``reward/mean``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import Series
from .base import Finding
from .context import Context, finding, round_sig
from .episodes import EpisodesLines
from .jump import reward_jump
from .stats import MIN_WINDOW, TREND_Z, noise_sigma, trend
from .thresholds import line, lines

NAME = "heldout"


@lines
@dataclass(frozen=True)
class HeldoutLines:
    """Where the held-out check draws its lines."""

    heldout_min_evals: int = line(
        3,
        "held-out evaluations needed to judge divergence",
        "science.md 4 (train rising while held-out slope <= 0 over >= 3 evals)",
    )
    heldout_min_gain: float = line(
        0.05,
        "a train rise under this share of the reward's range is not held against held-out; "
        "held-out bounded under this change (twice its error included) is flat",
        "science.md 4 (the signature is held-out slope <= 0; Gao et al.: the gold reward "
        "follows the proxy at small distances); the error of a 100-task suite",
    )
    heldout_lag_gain: float = line(
        0.3,
        "a train gain of this share of the range or more beside a flat held-out warns; with "
        "held-out far behind it, said (info) ...",
        "rl-doctor's length-hacking test (a big train gain that eval follows by under 25%)",
    )
    heldout_lag_share: float = line(
        0.25,
        "... that held-out follows by under this share of it is divergence too",
        "rl-doctor's length-hacking test (eval gain under 25% of the train gain)",
    )
    heldout_max_candidates: int = line(
        64,
        "evaluations tried as the start of a divergence, earliest first",
        "DESIGN.md: every check runs in time linear in the run's length",
    )


# The standard error of an evaluation whose size is unknown, with too few evaluations to read
# their scatter: a binomial score of 100 tasks at p = 0.5.
# source: numerical guard (sqrt(0.25 / 100) = 0.05, the largest error of a 100-task suite)
UNKNOWN_SE = 0.05


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
        # Unknown n: the scores' own scatter around their trend; under ten evaluations that
        # scatter is itself too noisy to trust (four points' MAD can read a tenth of the
        # truth), so the error is at least a 100-task suite's.
        sigma = noise_sigma(e.values) if len(e) >= 3 else UNKNOWN_SE
        if len(e) < 2 * MIN_WINDOW:
            sigma = max(sigma, UNKNOWN_SE)
        se[:] = sigma
    else:
        se = np.where(np.isnan(se), np.nanmean(se), se)
    return se


# A framework's own held-out key kept under its own name (TRL/rl-doctor ``eval/accuracy``,
# ``eval/pass@1``): one segment under ``eval/`` that names a score.
_EVAL_SCORE = re.compile(r"^eval/[^/]*(?:acc|score|pass|correct|success|solve)[^/]*$", re.I)


def _suites(ctx: Context) -> list[str]:
    names = ctx.data.names("eval/")
    out = [n for n in names if n.endswith("/score")]
    return out or [n for n in names if _EVAL_SCORE.match(n) and "loss" not in n]


def suite_name(metric: str) -> str:
    """``eval/<suite>/score`` -> suite; ``eval/accuracy`` -> accuracy."""
    inner = metric[len("eval/") :]
    return inner[: -len("/score")] if inner.endswith("/score") else inner


def _span_change(e: Series, se: np.ndarray, i: int) -> tuple[float, float, float, float]:
    """Held-out over evaluations i..end: (first, last, change, se of the change), first and
    last each the mean of a third of the span."""
    v, s = e.values[i:], se[i:]
    k = max(1, len(v) // 3)
    first, last = float(v[:k].mean()), float(v[-k:].mean())
    err = math.sqrt(float((s[:k] ** 2).mean()) / k + float((s[-k:] ** 2).mean()) / k)
    return first, last, last - first, err


def _train_span(r: Series, start: int, end: int) -> dict[str, Any] | None:
    """Whether train reward rose over steps start..end, beyond its noise: its last quarter
    over its first by three standard errors of the difference (per-step noise from first
    differences), with a rising trend; or by six, whatever the trend says (a jump to a new
    level, an exploit's, leaves a saturating course whose residuals a line fits badly, so its
    trend reads weak: the two-sample test of the quarters is the evidence, at twice the
    Shewhart line)."""
    sel = (r.steps >= start) & (r.steps <= end)
    span = Series(r.steps[sel], r.values[sel])
    if len(span) < MIN_WINDOW:
        return None
    w = max(MIN_WINDOW, len(span) // 4)
    first, last = float(span.values[:w].mean()), float(span.values[-w:].mean())
    noise = noise_sigma(span.values)
    tr = trend(span)
    se = noise * math.sqrt(2 / w)
    rising = tr is not None and (
        (tr.rising and last - first > 3 * se) or (tr.z > 0 and last - first > 6 * se)
    )
    return dict(first=first, last=last, rising=rising, z=tr.z if tr else None)


def heldout_change(ctx: Context, since: int) -> dict[str, Any] | None:
    """How the first held-out suite moved from evaluation at or after step ``since`` to the
    end: ``{"suite", "first", "last", "change", "se", "evaluations"}``, or None when fewer than
    ``heldout_min_evals`` evaluations cover the span. For other checks (length, reward jumps)."""
    for metric in _suites(ctx):
        e = ctx.finite(metric)
        if e is None:
            continue
        suite = suite_name(metric)
        i = int(np.searchsorted(e.steps, since))
        i = max(0, min(i, len(e) - ctx.thresholds.of(HeldoutLines).heldout_min_evals))
        if len(e) - i < ctx.thresholds.of(HeldoutLines).heldout_min_evals:
            continue
        se = _eval_se(ctx, suite, e)
        first, last, change, err = _span_change(e, se, i)
        return dict(
            suite=suite,
            first=round_sig(first),
            last=round_sig(last),
            change=round_sig(change),
            se=round_sig(err),
            evaluations=len(e) - i,
            from_step=int(e.steps[i]),
        )
    return None


def heldout_in_unit(ctx: Context, suite: str) -> bool:
    """Whether every score of ``suite`` lies in [0, 1] (an accuracy, a pass rate): a score
    whose top is known."""
    for metric in _suites(ctx):
        e = ctx.finite(metric)
        if e is not None and suite_name(metric) == suite and len(e):
            return bool(float(e.values.min()) >= 0.0 and float(e.values.max()) <= 1.0)
    return False


def check(ctx: Context) -> list[Finding]:
    """Each held-out suite: too few evaluations to judge, a divergence from the train reward
    (``_divergence``), or learning on held-out beyond twice its error."""
    suites = _suites(ctx)
    if not suites:
        return []
    rname, r = ctx.series("reward/mean_with_unusable", "reward/mean")
    out: list[Finding] = []
    for metric in suites:
        e = ctx.finite(metric)
        if e is None:
            continue
        if len(e) < ctx.thresholds.of(HeldoutLines).heldout_min_evals:
            out.append(_too_few(ctx, metric, e))
        elif r is not None and rname is not None:
            out += _suite(ctx, metric, e, rname, r)
    return out


def _too_few(ctx: Context, metric: str, e: Series) -> Finding:
    need = ctx.thresholds.of(HeldoutLines).heldout_min_evals
    return finding(
        NAME,
        "info",
        "too_early",
        f"{len(e)} held-out evaluation(s) of {suite_name(metric)}; divergence needs {need}",
        metric=metric,
        evaluations=len(e),
        action="Score sampler checkpoints on held-out tasks every few updates "
        "([output] sampler_checkpoint_every).",
    )


@dataclass
class Divergence:
    """Train reward rising over evaluations ``i``.. while held-out does not follow."""

    i: int  # the evaluation the span starts at
    train: dict[str, Any]  # _train_span over it
    first: float  # held-out over the span: first and last thirds' means, change, its error
    last: float
    change: float
    se: float


def _suite(ctx: Context, metric: str, e: Series, rname: str, r: Series) -> list[Finding]:
    suite = suite_name(metric)
    se = _eval_se(ctx, suite, e)
    ev: dict[str, Any] = dict(
        suite=suite,
        train_metric=rname,
        evaluations=len(e),
        eval_steps=[int(x) for x in e.steps[:30]],
        eval_scores=[round_sig(float(x)) for x in e.values[:30]],
    )
    d = _divergence(ctx, e, se, r)
    if d is not None:
        return [_exploit(ctx, metric, e, rname, d, ev)]
    first, last, change, err = _span_change(e, se, 0)
    if not change > 2 * err:
        return []
    return [
        finding(
            NAME,
            "ok",
            "learning",
            f"learning on held-out {suite}: {first:.3g} -> {last:.3g}, beyond twice its error",
            metric=metric,
            heldout_first=round_sig(first),
            heldout_last=round_sig(last),
            heldout_change=round_sig(change),
            heldout_se=round_sig(err),
            action="Deploy only a checkpoint that passes your own evaluation.",
            **ev,
        )
    ]


def _divergence(ctx: Context, e: Series, se: np.ndarray, r: Series) -> Divergence | None:
    """The first span, earliest evaluation first, over which train reward rose beyond noise
    by at least ``heldout_min_gain`` of the reward's range while held-out did not follow
    (``_diverges``)."""
    last_i = len(e) - ctx.thresholds.of(HeldoutLines).heldout_min_evals
    for i in range(min(last_i + 1, ctx.thresholds.of(HeldoutLines).heldout_max_candidates)):
        train = _train_span(r, int(e.steps[i]), int(e.steps[-1]))
        if train is None or not train["rising"]:
            continue
        first, last, change, err = _span_change(e, se, i)
        gain = _gain(ctx, train)
        if gain < ctx.thresholds.of(HeldoutLines).heldout_min_gain:
            continue  # a rise too small to call the train reward rising
        if _diverges(ctx, e, i, train, gain, change, err):
            return Divergence(i, train, first, last, change, err)
    return None


def _diverges(
    ctx: Context, e: Series, i: int, train: dict[str, Any], gain: float, change: float, err: float
) -> bool:
    """Over the whole run, flat is enough, if flat is told apart from keeping up: the held-out
    change must sit 2 errors below the train gain (as a share of the reward's range), else a
    slow healthy run whose small gain held-out cannot resolve reads as an exploit. From a
    later evaluation, held-out must fall beyond three errors: a held-out score that stops
    rising late in a healthy run is common (it saturates), and trying every start would find
    a flat stretch, or a two-error fall, in noise."""
    if i:
        return change < -TREND_Z * err
    th = ctx.thresholds.of(HeldoutLines)
    # Or, over the whole run, a big train gain (a third of the reward's range or more) that
    # held-out follows by under a quarter (rl-doctor's length-hacking test: eval gain under
    # 25% of the gain): the rise is mostly not skill.
    lagging = gain >= th.heldout_lag_gain and change < th.heldout_lag_share * gain
    # A train pass rate that rose towards the held-out score without passing it is explained
    # by the skill held-out shows: sampling sharpening onto answers the policy already gives
    # greedily (RL raises pass@1 before it raises what greedy decoding solves; Yue et al.
    # 2025). Both must be shares of [0, 1] to compare.
    lo, hi = ctx.reward_bounds
    explained = (
        lo >= 0.0
        and hi <= 1.0
        and bool(np.all((e.values[i:] >= 0) & (e.values[i:] <= 1)))
        and train["last"] <= float(e.values[i:].mean())
    )
    return ((change <= err and change + 2 * err < gain) or lagging) and not explained


def _severity(ctx: Context, e: Series, d: Divergence, falling: bool, cut: bool) -> str:
    """Held-out falling beyond its error while the train reward rises: the exploit signature
    (science.md 4), a failure (a warning where most replies are cut: the budget explains it).
    Held-out evidently flat, its change bounded under ``heldout_min_gain`` (twice its error
    included): a warning (science.md 4: held-out slope <= 0). A held-out score that rises less
    than the train reward, or whose flatness its few or noisy evaluations cannot show, is a
    hypothesis (info): the train reward can hold parts held-out does not score (a format
    component, a truncation penalty learned away); unless the reward also climbed faster than
    the task allows within the span (``jump.reward_jump``): two numbers that back each other,
    a warning."""
    th = ctx.thresholds.of(HeldoutLines)
    if falling:
        return "warn" if cut else "fail"
    flat = d.change + 2 * d.se <= th.heldout_min_gain
    jump = reward_jump(ctx)
    jumped = jump is not None and jump["step"] >= int(e.steps[d.i])
    return "warn" if flat or jumped else "info"


def _gain(ctx: Context, train: dict[str, Any]) -> float:
    """The train reward's rise as a share of its range."""
    lo, hi = ctx.reward_bounds
    return (train["last"] - train["first"]) / (hi - lo if hi > lo else 1.0)


def _exploit(
    ctx: Context, metric: str, e: Series, rname: str, d: Divergence, ev: dict[str, Any]
) -> Finding:
    """Exploit suspected, dated where held-out stopped following: its (3-evaluation) peak
    within the span, when that comes after the span's start (it rose with train first, then
    fell)."""
    train = d.train
    falling = d.change < -(TREND_Z if d.i else 2) * d.se
    v = e.values[d.i :]
    smooth = [float(v[max(0, j - 1) : j + 2].mean()) for j in range(len(v))]
    peak = d.i + int(np.argmax(smooth[: max(1, len(v) - 2)]))
    divergence = int(e.steps[peak])
    # Most replies cut at the token limit over the span explain a falling held-out score (it
    # is graded under the same budget): the budget is the cause, reported by the episodes
    # check; this is its consequence, not an exploit's proof.
    t = ctx.finite("response/truncated_rate")
    cut = (
        t is not None
        and len(t.since(divergence))
        and float(t.since(divergence).values.mean()) >= ctx.thresholds.of(EpisodesLines).room_level
    )
    how = "falling" if falling else "flat" if d.change <= d.se else "far behind"
    return finding(
        NAME,
        _severity(ctx, e, d, falling, bool(cut)),
        "exploit_suspected",
        f"exploit suspected: train {rname} rose {train['first']:.3g} -> "
        f"{train['last']:.3g} while held-out {ev['suite']} went {d.first:.3g} -> "
        f"{d.last:.3g} ({how}), diverging from step {divergence}",
        metric=metric,
        first_step=divergence,
        divergence_step=divergence,
        train_first=round_sig(train["first"]),
        train_last=round_sig(train["last"]),
        train_trend_z=round_sig(train["z"]) if train["z"] is not None else None,
        heldout_first=round_sig(d.first),
        heldout_last=round_sig(d.last),
        heldout_change=round_sig(d.change),
        heldout_se=round_sig(d.se),
        replies_cut=bool(cut),
        action="Read the transcripts of the highest-reward attempts since that step "
        f"(`rlvitals transcripts RUN --step {divergence}`): the policy found a way "
        "to satisfy the grader without doing the task. Fix the grader or "
        "environment and start a new run; training longer reinforces the exploit.",
        **ev,
    )
