"""KL to the reference policy: how far training has moved the policy from where it started.

Only ``train/ref_kl`` is read (TRL's ``kl``, verl's ``actor/kl_loss``, Miles' ``kl_loss``...):
never the old-vs-new KL within an update (``train/ppo_kl``) nor the sampler/trainer mismatch,
which measure other things at other scales. It is judged against absolute lines, the peers'
0.5 and 2 (token-mean nats: a policy that far from its reference has left the region where the
reward model or grader was trustworthy, Gao et al.), from the first update read, and against
its own course: past a line it is a step more severe while still climbing (its last third
rising significantly: 0.5 info, or warn while climbing; 2 warn, or fail while climbing); below
the lines a significant rising trend is named, with the update where it would cross 0.5. A
short log (under five updates) every one of them past 0.5 warns: the policy got that far in a
few updates. The KL coefficient, where the run's config gives it, is shown beside it:
at β the penalty costs β·KL of reward per token.

Between the lines, a KL no larger than the entropy's fall since the start is sharpening, not
drift, and is reported a step lower: KL(π‖ref) = H(π, ref) − H(π), so with the run's first
entropy standing for the reference's (the policy starts as the reference), KL ≤ H(ref) − H(π)
says H(π, ref) ≤ H(ref): the policy's tokens are on average at least as likely under the
reference as the reference's own samples. It narrowed onto what the reference already
favoured (a near-uniform random-init reference makes every bit of learning read as KL);
a policy that left for tokens the reference finds unlikely has a KL above the entropy's fall.
"""

from __future__ import annotations

import math

import numpy as np

from .base import Finding
from .context import ENTROPY, Context, finding, round_sig
from .stats import MIN_WINDOW, crossing, read_words, rolling_mean, short_level, trend

NAME = "reference"
METRIC = "train/ref_kl"
# The peers' lines (rl-doctor kl_drift: 0.5 is worth a look, 2.0 is far).
KL_WARN = 0.5
KL_FAIL = 2.0
# Config keys of the KL coefficient, by framework (TRL beta, verl kl_loss_coef / kl_coef,
# OpenRLHF init_kl_coef, Miles kl_loss_coef).
COEF_KEYS = ("beta", "kl_loss_coef", "kl_coef", "init_kl_coef", "kl_penalty_coef")


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
    check's floor, or under its collapse ratio of the run's own start) while the reward does
    not rise beyond noise."""
    from .policy import ENTROPY_FLOOR
    from .reward import learns

    _name, e = ctx.series(*ENTROPY)
    if e is None or len(e) < MIN_WINDOW or learns(ctx):
        return False
    last = float(e.values[-MIN_WINDOW:].mean())
    if last < ENTROPY_FLOOR:
        return True
    if len(e) < 2 * MIN_WINDOW:
        return False
    h0 = float(np.median(e.values[:MIN_WINDOW]))
    return h0 > 0 and last < ctx.thresholds.entropy_ratio_fail * h0


def check(ctx: Context) -> list[Finding]:
    s = ctx.finite(METRIC)
    if s is None:
        return []
    v = s.values
    n = len(v)
    coef = _coef(ctx)
    coef_words = f" (KL coefficient {coef:g})" if coef is not None else ""
    action = (
        "The policy has moved far from its reference: read the top-reward transcripts for a "
        "shortcut (a policy far from its start that the grader still pays is the "
        "over-optimisation signature), lower the learning rate or raise the KL coefficient, "
        "or stop at an earlier checkpoint."
    )
    if n < MIN_WINDOW:
        if not short_level(v, KL_WARN):
            return []
        level = float(v.mean())
        return [
            finding(
                NAME,
                "fail" if short_level(v, KL_FAIL) else "warn",
                "drift",
                f"{read_words(n)}: KL to the reference at {level:.2g}, over the "
                f"{KL_FAIL if level >= KL_FAIL else KL_WARN:g} line{coef_words}",
                metric=METRIC,
                first_step=int(s.steps[0]),
                level=round_sig(level),
                line=KL_FAIL if short_level(v, KL_FAIL) else KL_WARN,
                kl_coef=coef,
                updates_read=n,
                values=[round_sig(float(x)) for x in v],
                action=action,
            )
        ]
    roll = rolling_mean(v)
    now = float(roll[-1])
    peak = float(np.nanmax(roll))
    start = float(np.median(v[:MIN_WINDOW]))
    # Past a line, the severity says whether it is still climbing (the last third of the run
    # rising significantly): a KL that settled after its rise is reported a step lower (the
    # peers: 0.5 is worth a look, 2 or 0.5 while accelerating a warning).
    late = s.since(int(s.steps[n - max(MIN_WINDOW, n // 3)]))
    lt = trend(late)
    climbing = lt is not None and lt.rising
    first = crossing(v, KL_WARN)
    if first is not None:
        # Dated where it first passed 0.5; as severe as the highest line it passed.
        high = crossing(v, KL_FAIL)
        line = KL_FAIL if high is not None else KL_WARN
        sev = (
            ("fail" if climbing else "warn")
            if high is not None
            else ("warn" if climbing else "info")
        )
        sharpening = _sharpening(ctx, now) if high is None else None
        if sharpening is not None and sev != "info":
            sev = "info"
        # A KL settled past the line is worth a look, no more, unless the policy has also
        # gone near-deterministic without learning: far from its reference and collapsed,
        # the two corroborate each other (a pasted excerpt has no start to tell a climb by).
        collapsed = sev == "info" and sharpening is None and _collapsed(ctx)
        if collapsed:
            sev = "warn"
        step = int(s.steps[first])
        over2 = f", over {KL_FAIL:g} from step {int(s.steps[high])}" if high is not None else ""
        return [
            finding(
                NAME,
                sev,
                "drift",
                f"KL to the reference over {KL_WARN:g} from step {step}{over2}: {start:.2g} at "
                f"the start, {peak:.2g} at its highest, {now:.2g} now"
                f"{', still climbing' if climbing else ', no longer climbing'}{coef_words}"
                + (
                    ", with the policy near-deterministic and its reward not rising"
                    if collapsed
                    else ""
                )
                + (
                    f"; no more than the entropy's fall ({sharpening[0]:.3g} -> "
                    f"{sharpening[1]:.3g}): the policy sharpened onto what its reference "
                    "already favoured rather than drifting from it"
                    if sharpening is not None
                    else ""
                ),
                metric=METRIC,
                first_step=step,
                entropy_start=None if sharpening is None else round_sig(sharpening[0]),
                entropy_now=None if sharpening is None else round_sig(sharpening[1]),
                steps=[int(s.steps[high])] if high is not None else None,
                start_level=round_sig(start),
                peak=round_sig(peak),
                now=round_sig(now),
                line=line,
                climbing=climbing,
                entropy_collapsed=collapsed or None,
                late_trend_z=round_sig(lt.z) if lt is not None else None,
                kl_coef=coef,
                penalty_per_token=None if coef is None else round_sig(coef * now),
                action=action,
            )
        ]
    # Below the lines: a significant rise over the second half of the run, named with the
    # update where it would reach the first line.
    half = s.since(int(s.steps[n // 2])) if n >= 2 * MIN_WINDOW else None
    tr = trend(half) if half is not None else None
    if tr is None or not tr.rising or tr.slope <= 0 or now <= 2 * max(start, 1e-6):
        return []
    eta = int(s.steps[-1]) + math.ceil((KL_WARN - now) / tr.slope)
    length = int(s.steps[-1] - s.steps[0]) + 1
    if eta > int(s.steps[-1]) + length:
        return []  # a slow rise that would not get there in as long again as the run so far
    return [
        finding(
            NAME,
            "info",
            "drift",
            f"KL to the reference rising: {start:.2g} at the start, {now:.2g} now, "
            f"{tr.slope:.2g} per update; at this rate over {KL_WARN:g} by step {eta}"
            f"{coef_words}",
            metric=METRIC,
            first_step=int(half.steps[0]) if half is not None else None,
            start_level=round_sig(start),
            now=round_sig(now),
            slope=round_sig(tr.slope),
            trend_z=round_sig(tr.z),
            projected_step=eta,
            line=KL_WARN,
            kl_coef=coef,
            action="Watch it: a KL that keeps climbing at a steady reward is the policy "
            "drifting for little gain; a KL coefficient or a lower learning rate slows it.",
        )
    ]
