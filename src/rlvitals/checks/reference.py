"""KL to the reference policy: how far training has moved the policy from where it started.

Only ``train/ref_kl`` is read (TRL's ``kl``, verl's ``actor/kl_loss``, Miles' ``kl_loss``...):
never the old-vs-new KL within an update (``train/ppo_kl``) nor the sampler/trainer mismatch,
which measure other things at other scales. It is judged against absolute lines, the peers'
0.5 and 2 (token-mean nats: a policy that far from its reference has left the region where the
reward model or grader was trustworthy, Gao et al.), from the first update read, and against
its own course: past 0.5 it is worth a look (info), a warning while its last third still
climbs significantly past ``ref_kl_climb_warn`` (1.0: healthy runs reach 0.66-1.1); past 2
a warning, a failure while climbing; below
the lines a significant rising trend is named, with the update where it would cross 0.5. A
short log (under five updates) every one of them past 0.5 warns: the policy got that far in a
few updates. The KL coefficient, where the run's config gives it, is shown beside it:
at β the penalty costs β·KL of reward per token.

Between the lines, a KL no larger than the entropy's fall since the start is sharpening, not
drift, and is said at info: KL(π‖ref) = H(π, ref) − H(π), so with the run's first
entropy standing for the reference's (the policy starts as the reference), KL ≤ H(ref) − H(π)
says H(π, ref) ≤ H(ref): the policy's tokens are on average at least as likely under the
reference as the reference's own samples. It narrowed onto what the reference already
favoured (a near-uniform random-init reference makes every bit of learning read as KL);
a policy that left for tokens the reference finds unlikely has a KL above the entropy's fall.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..model import Series
from .base import Finding
from .context import ENTROPY, Context, finding, round_sig
from .reward import learns
from .stats import MIN_WINDOW, Trend, crossing, read_words, rolling_mean, short_level, trend
from .thresholds import line, lines

NAME = "reference"


@lines
@dataclass(frozen=True)
class ReferenceLines:
    """Where the reference check draws its lines."""

    ref_kl_warn: float = line(
        0.5,
        "KL to the reference worth a look (info; warn while still climbing)",
        "rl-doctor kl_drift (0.5 worth a look); Gao et al. 2210.10760 (the proxy reward "
        "leaves the gold one as sqrt(KL) grows)",
    )
    ref_kl_climb_warn: float = line(
        1.0,
        "a KL to the reference still climbing (its last third) past this warns",
        "families: operating point, precision 1.00, recall 0.15 / 1.00 / 1.00 (at 0.5: 0.65 / 1.00 / 1.00); real healthy runs reach 0.66-1.1 (benchmarks/families.md): the line sits at their range, rl-doctor's 0.5 is 'worth a look' (info)",
    )
    ref_kl_fail: float = line(
        2.0,
        "KL to the reference that is far (warn; fail while still climbing)",
        "rl-doctor kl_drift (2.0 is far)",
    )


METRIC = "train/ref_kl"
# Config keys of the KL coefficient, by framework (TRL beta, verl kl_loss_coef / kl_coef,
# OpenRLHF init_kl_coef, Miles kl_loss_coef).
COEF_KEYS = ("beta", "kl_loss_coef", "kl_coef", "init_kl_coef", "kl_penalty_coef")
ACTION = (
    "The policy has moved far from its reference: read the top-reward transcripts for a "
    "shortcut (a policy far from its start that the grader still pays is the "
    "over-optimisation signature), lower the learning rate or raise the KL coefficient, "
    "or stop at an earlier checkpoint."
)


def _coef(ctx: Context) -> float | None:
    got = ctx.config_find(*COEF_KEYS)
    if got is None:
        return None
    try:
        return float(got[1])
    except (TypeError, ValueError):
        return None


def _sharpening(ctx: Context, kl_now: float) -> tuple[float, float] | None:
    """(entropy at the start, entropy now) where the KL to the reference is no larger than
    the entropy's fall between them (see the module docstring); else None."""
    e = ctx.finite("train/entropy")
    if e is None or len(e) < 2 * MIN_WINDOW:
        return None
    e0 = float(np.median(e.values[:MIN_WINDOW]))
    e1 = float(rolling_mean(e.values)[-1])
    return (e0, e1) if kl_now <= e0 - e1 else None


def _collapsed(ctx: Context) -> bool:
    """The policy near-deterministic (its entropy over the last updates under the policy
    check's collapse ratio ``entropy_ratio_fail`` of the run's own start: never an absolute
    entropy, DESIGN.md) while the reward does not rise beyond noise."""

    _name, e = ctx.series(*ENTROPY)
    if e is None or len(e) < 2 * MIN_WINDOW or learns(ctx):
        return False
    last = float(e.values[-MIN_WINDOW:].mean())
    h0 = float(np.median(e.values[:MIN_WINDOW]))
    # The policy check's line, read by name (that module imports this one).
    return h0 > 0 and last < ctx.thresholds.entropy_ratio_fail * h0


def check(ctx: Context) -> list[Finding]:
    """The KL to the reference against the peers' lines, by its course: a short log every
    update past a line; past a line, as severe as its course says; below them, a rise that
    would reach the first line."""
    s = ctx.finite(METRIC)
    if s is None:
        return []
    coef = _coef(ctx)
    if len(s) < MIN_WINDOW:
        return _short_log(ctx, s, coef)
    return _past_line(ctx, s, coef) or _rising(ctx, s, coef)


def _coef_words(coef: float | None) -> str:
    return f" (KL coefficient {coef:g})" if coef is not None else ""


def _short_log(ctx: Context, s: Series, coef: float | None) -> list[Finding]:
    """Under five updates, every one past the warn line: the policy got that far in a few."""
    th = ctx.thresholds.of(ReferenceLines)
    v = s.values
    if not short_level(v, th.ref_kl_warn):
        return []
    level = float(v.mean())
    line = th.ref_kl_fail if short_level(v, th.ref_kl_fail) else th.ref_kl_warn
    return [
        finding(
            NAME,
            "fail" if short_level(v, th.ref_kl_fail) else "warn",
            "drift",
            f"{read_words(len(v))}: KL to the reference at {level:.2g}, over the "
            f"{th.ref_kl_fail if level >= th.ref_kl_fail else th.ref_kl_warn:g} line"
            f"{_coef_words(coef)}",
            metric=METRIC,
            first_step=int(s.steps[0]),
            level=round_sig(level),
            line=line,
            kl_coef=coef,
            updates_read=len(v),
            values=[round_sig(float(x)) for x in v],
            action=ACTION,
        )
    ]


def _course(s: Series) -> tuple[float, float, float]:
    """(start, peak, now): the median of its first five updates, the highest and the last of
    its five-update means."""
    roll = rolling_mean(s.values)
    return float(np.median(s.values[:MIN_WINDOW])), float(np.nanmax(roll)), float(roll[-1])


def _climbing(s: Series) -> Trend | None:
    """The trend of the last third of the run (at least five updates)."""
    n = len(s)
    return trend(s.since(int(s.steps[n - max(MIN_WINDOW, n // 3)])))


def _severity(
    ctx: Context, now: float, climbing: bool, over_fail: bool
) -> tuple[str, tuple[float, float] | None, bool]:
    """Past a line: (severity, sharpening, collapsed). Past ``ref_kl_fail`` (far): warn, fail
    while still climbing. Between the lines a KL within the entropy's fall is sharpening
    (info); one still climbing past ``ref_kl_climb_warn`` warns; else it is worth a look
    (info), with the policy's collapse named where its entropy fell under its collapse ratio
    while the reward does not rise (the policy check warns of that)."""
    th = ctx.thresholds.of(ReferenceLines)
    if over_fail:
        return ("fail" if climbing else "warn"), None, False
    sharpening = _sharpening(ctx, now)
    if sharpening is not None:
        return "info", sharpening, False
    if climbing and now >= th.ref_kl_climb_warn:
        return "warn", None, False
    return "info", None, _collapsed(ctx)


def _past_line(ctx: Context, s: Series, coef: float | None) -> list[Finding]:
    """Dated where it first passed the warn line; as severe as the highest line it passed and
    its course (``_severity``)."""
    th = ctx.thresholds.of(ReferenceLines)
    first = crossing(s.values, th.ref_kl_warn)
    if first is None:
        return []
    start, peak, now = _course(s)
    lt = _climbing(s)
    climbing = lt is not None and lt.rising
    high = crossing(s.values, th.ref_kl_fail)
    sev, sharpening, collapsed = _severity(ctx, now, climbing, high is not None)
    step = int(s.steps[first])
    over2 = f", over {th.ref_kl_fail:g} from step {int(s.steps[high])}" if high is not None else ""
    title = (
        f"KL to the reference over {th.ref_kl_warn:g} from step {step}{over2}: {start:.2g} at "
        f"the start, {peak:.2g} at its highest, {now:.2g} now"
        f"{', still climbing' if climbing else ', no longer climbing'}{_coef_words(coef)}"
    )
    if collapsed:
        title += ", with the policy near-deterministic and its reward not rising"
    if sharpening is not None:
        title += (
            f"; no more than the entropy's fall ({sharpening[0]:.3g} -> {sharpening[1]:.3g}): "
            "the policy sharpened onto what its reference already favoured rather than "
            "drifting from it"
        )
    return [
        finding(
            NAME,
            sev,
            "drift",
            title,
            metric=METRIC,
            first_step=step,
            entropy_start=None if sharpening is None else round_sig(sharpening[0]),
            entropy_now=None if sharpening is None else round_sig(sharpening[1]),
            steps=[int(s.steps[high])] if high is not None else None,
            start_level=round_sig(start),
            peak=round_sig(peak),
            now=round_sig(now),
            line=th.ref_kl_fail if high is not None else th.ref_kl_warn,
            climbing=climbing,
            entropy_collapsed=collapsed or None,
            late_trend_z=round_sig(lt.z) if lt is not None else None,
            kl_coef=coef,
            penalty_per_token=None if coef is None else round_sig(coef * now),
            action=ACTION,
        )
    ]


def _rising(ctx: Context, s: Series, coef: float | None) -> list[Finding]:
    """Below the lines: a significant rise over the second half of the run, at least double
    its start, named with the update where it would reach the warn line (if within as long
    again as the run so far)."""
    line = ctx.thresholds.of(ReferenceLines).ref_kl_warn
    n = len(s)
    start, _peak, now = _course(s)
    half = s.since(int(s.steps[n // 2])) if n >= 2 * MIN_WINDOW else None
    tr = trend(half) if half is not None else None
    if half is None or tr is None or not tr.rising or tr.slope <= 0:
        return []
    if now <= 2 * max(start, 1e-6):
        return []
    eta = int(s.steps[-1]) + math.ceil((line - now) / tr.slope)
    length = int(s.steps[-1] - s.steps[0]) + 1
    if eta > int(s.steps[-1]) + length:
        return []  # a slow rise that would not get there in as long again as the run so far
    return [
        finding(
            NAME,
            "info",
            "drift",
            f"KL to the reference rising: {start:.2g} at the start, {now:.2g} now, "
            f"{tr.slope:.2g} per update; at this rate over {line:g} by step {eta}"
            f"{_coef_words(coef)}",
            metric=METRIC,
            first_step=int(half.steps[0]),
            start_level=round_sig(start),
            now=round_sig(now),
            slope=round_sig(tr.slope),
            trend_z=round_sig(tr.z),
            projected_step=eta,
            line=line,
            kl_coef=coef,
            action="Watch it: a KL that keeps climbing at a steady reward is the policy "
            "drifting for little gain; a KL coefficient or a lower learning rate slows it.",
        )
    ]
