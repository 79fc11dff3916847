"""5. Sampler/trainer agreement and freshness.

A healthy run keeps the mismatch KL near zero and the ESS near 1. Levels are judged against
absolute lines from the literature (from the first update read) and against the run's own
start, above a floor that ignores rounding noise; a rise is named by its trend before it
reaches a line. The cause comes from the freshness lag: a mismatch rising with the lag (or
with attempts dropped as stale) is a stale policy, the sampler on older weights; rising while
the lag stays flat it is drift: numerics (precision, kernels), or weights that differ from the
version the sampler reports. A lag constant by design (async) is healthy: the mismatch then
holds the policy's own movement over that many updates, and is judged against its own start
only. Also the ESS, and in async mode the share of attempts dropped as stale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import Series
from .base import Finding
from .context import Context, finding, round_sig
from .ratio_findings import attribute
from .sequences import LOGGED_SEQ_LINE, SEQ_OVER, SeqShares, SequencesLines, cite, seq_shares
from .stats import (
    MIN_WINDOW,
    Trend,
    crossing,
    first_sustained,
    read_words,
    rolling_mean,
    short_level,
    start_level,
    trend,
)
from .thresholds import line, lines

NAME = "agreement"


@lines
@dataclass(frozen=True)
class AgreementLines:
    """Where the agreement check draws its lines."""

    mismatch_kl_warn: float = line(
        0.01,
        "sampler/trainer KL (k3, or |k1|) that warns",
        "tinker-cookbook: training is stable when the sampler-trainer KL < 0.01 (science.md 1)",
    )
    mismatch_kl_fail: float = line(
        0.1,
        "k3 KL that fails",
        "verl rollout_corr health check: |k1| > 0.1 is a significant off-policy gap",
    )
    mismatch_k1_fail: float = line(
        0.1, "|k1| that fails", "verl rollout_corr: |k1| > 0.1 is a significant off-policy gap"
    )
    mismatch_rise: float = line(
        10.0,
        "a mismatch this many times its own start counts ...",
        "science.md 1 (judged against the run's own start; an order of magnitude, far past "
        "the start's own scatter)",
    )
    mismatch_floor: float = line(
        0.0001,
        "... only above this level (rounding noise under it)",
        "science.md 1 (per-token drift |mean log w| <= 1e-3 is within verl's Geo-RS bounds; "
        "k3 ~ (log w)^2 / 2 puts its noise near 1e-4 and under)",
    )
    mismatch_trend_rise: float = line(
        3.0,
        "a rise named by its trend before a line: the five-update mean this many times its "
        "start, still rising significantly",
        "science.md 1 (one-sided CUSUM on log k3 against the first 30 steps); three times "
        "its start on a log scale",
    )
    mismatch_seq_share_warn: float = line(
        0.05,
        "share of an update's sequences past mismatch_seq_line that warns when it holds (3 "
        "of 5 updates)",
        "NeMo-RL docs/guides/grpo.md (token_mult_prob_error past ~1-2% is a problem); a "
        "twentieth of the sequences",
    )
    mismatch_tme_warn: float = line(
        1.02,
        "token mean of exp(|Δ|) (NeMo-RL's token_mult_prob_error) that warns when it holds "
        "from a start under it",
        "NeMo-RL docs/guides/grpo.md: past ~1-2% is a problem",
    )
    mismatch_spike_updates: int = line(
        2,
        "an excursion of the tail this many updates long or shorter, back under after, is a "
        "spike (info)",
        "NeMo-RL docs/guides/grpo.md (tells a spiky error from one that trends up); under "
        "the 3 of 5 an alarm needs",
    )
    mismatch_designed_rise: float = line(
        3.0,
        "with a lag constant by design (async), the tail share and the token mean warn at "
        "this many times their own start at that lag",
        "science.md 1 (judged against the run's own start, as mismatch_trend_rise)",
    )
    ess_token_fail: float = line(
        0.3, "token-level ESS that fails", "verl rollout_corr: ESS < 0.3 is severe"
    )
    ess_seq_warn: float = line(
        0.5, "sequence-level ESS that warns", "science.md 1 (warn at ESS_seq < 0.5; VCPO)"
    )
    stale_share_warn: float = line(
        0.2,
        "share of attempts dropped as stale that warns",
        "the Loops seed (attempts older than max_steps_off_policy are dropped); a fifth of "
        "the sampling wasted, as failure_burst_warn",
    )
    designed_lag: float = line(
        0.5,
        "a freshness lag whose median is at least this, and does not rise, is the run's "
        "design (async), not staleness",
        "the Loops seed (in async mode rollouts come from older policy versions by design): "
        "half an update on average",
    )
    mismatch_abs_floor: float = line(
        0.02,
        "|Δ| (mean absolute logprob gap, no line of its own) counts past sqrt(mismatch_rise) "
        "times its start only above this",
        "the Miles seed: a healthy run's log probability gap is 0.0141 to 0.0164",
    )
    mismatch_abs_trend_floor: float = line(
        0.01, "... and its trend line only above this", "the Miles seed (as mismatch_abs_floor)"
    )
    mismatch_growing: float = line(
        0.8,
        "a mismatch still rising whose mean now is at least this share of its peak is "
        "growing, not a spell that passed",
        "science.md 6 (a trend verdict needs the level it describes still there)",
    )


K1 = "train/mismatch_k1"
ABS_DIFF = "train/logprob_abs_diff"


def _lag(ctx: Context) -> tuple[Series | None, float | None, bool]:
    """The freshness lag: (series, its designed level, whether it rises). The designed level
    is the lag the run keeps (async by design: the sampler one or more updates behind), when
    its median is at least 0.5 and it does not rise; else None."""
    _n, lag = ctx.series("freshness/lag_mean")
    if lag is None:
        return None, None, False
    lt = trend(lag) if len(lag) >= MIN_WINDOW else None
    half = ctx.thresholds.of(AgreementLines).designed_lag
    rising = lt is not None and lt.rising and float(lag.values[-1]) > float(lag.values[0]) + half
    level = float(np.median(lag.values))
    return lag, (level if level >= half and not rising else None), rising


def _at_designed(s: Series, lag: Series | None, designed: float | None) -> np.ndarray | None:
    """Which updates of ``s`` already ran at the designed lag (the first updates of an async
    run sample on the trainer's own weights), where at least MIN_WINDOW did; else None."""
    if designed is None or lag is None:
        return None
    ok = np.interp(s.steps, lag.steps, lag.values) >= designed - 0.5
    return ok if ok.sum() >= MIN_WINDOW else None


def _steady_start(s: Series, v: np.ndarray, lag: Series | None, designed: float | None) -> float:
    """The mismatch's own start; with a designed lag, over the updates that already ran at
    it."""
    ok = _at_designed(s, lag, designed)
    return start_level(v) if ok is None else start_level(v[ok])


# What a stale sampler asks of the user (the mean rule and the tail rule say the same).
STALE_ACTION = (
    "The sampler is generating with older weights than the trainer's: check that "
    "the weight sync after each update reaches every engine replica."
)


def _cause(ctx: Context, step: int, lag: Series | None, lag_rising: bool) -> dict[str, Any]:
    """Why the sampler and the trainer disagree from ``step`` on, from the freshness lag: the
    weights are old, not the numerics, only where the lag says so: the lag of trained attempts
    rising (over the run or from ``step``), attempts dropped as stale, or the sampler's own
    version falling behind (the attempts table keeps the lag of discarded attempts too). A
    mismatch rising while the lag stays flat is drift: numerics, or weights that differ from
    the version the sampler reports. Returns ``stale`` with the evidence it rests on
    (``lag_rising``, ``stale_dropped``)."""
    if lag is not None and len(lag.since(step)) >= MIN_WINDOW:
        lt = trend(lag.since(step))
        lag_rising = lag_rising or (lt is not None and lt.rising)
    stale_drops = ctx.finite("discard/rollouts/stale")
    dropped = stale_drops is not None and bool(stale_drops.since(step).values.sum() > 0)
    stale = lag_rising or dropped or _sampler_lag_rising(ctx, step)
    return {"stale": stale, "lag_rising": lag_rising, "stale_dropped": dropped}


def _mismatch(ctx: Context) -> list[Finding]:
    """The mismatch's mean (k3, else |k1|, else |Δ|) past a line: the absolute lines of a
    stable run, its own start times ``mismatch_rise``, or ``mismatch_trend_rise`` times it
    while still rising (its trend, before a line); dated at the first, told stale or drift by
    the freshness lag (``_cause``), a spell that ended said, not warned."""
    th = ctx.thresholds.of(AgreementLines)
    name, s = ctx.series("train/mismatch_kl", K1, ABS_DIFF)
    if s is None or name is None:
        return []
    v = np.abs(s.values) if name == K1 else s.values
    lag, designed, lag_rising = _lag(ctx)
    lines = _Lines.of(th, name, designed)
    if len(s) < MIN_WINDOW:
        return _mismatch_short(name, s, v, lines)
    start = _steady_start(s, v, lag, designed)
    lines.own(th, name, start)
    roll = rolling_mean(v)
    onset = _mismatch_onset(s, v, roll, lines)
    if onset is None:
        return []
    idx, line = onset
    step = int(s.steps[idx])
    peak, now = float(np.nanmax(roll)), float(roll[-1])
    tr = _trend_since(s, name, step)
    growing = tr is not None and tr.rising and now >= th.mismatch_growing * peak
    cause = _cause(ctx, step, lag, lag_rising)
    ess = ctx.finite("train/mismatch_ess_seq")
    ev: dict[str, Any] = dict(
        start_level=round_sig(start),
        peak=round_sig(peak),
        now=round_sig(now),
        line=round_sig(line),
        absolute_line=None if math.isinf(lines.warn) else lines.warn,
        relative_line=round_sig(lines.rel),
        trend_line=round_sig(lines.trend),
        trend_z_since=round_sig(tr.z) if tr else None,
        growing=growing,
        lag_metric="freshness/lag_mean" if lag is not None else None,
        lag_rising=cause["lag_rising"],
        designed_lag=None if designed is None else round_sig(designed),
        stale_dropped=cause["stale_dropped"],
        ess_seq_last=round_sig(float(ess.values[-MIN_WINDOW:].mean())) if ess is not None else None,
    )
    how = "grows step after step" if growing else f"at {peak:.2g}"
    verdict, title, action = _mismatch_words(name, how, step, start, now, cause, lag is not None)
    # Judged by its course: a rise past the relative or trend line only (never the absolute
    # line of a stable run) whose five-update mean is back under its line is a spell that
    # ended (the reference trainer's 10,000-update run: 6e-5 -> 7e-4 around update 6,300, 3e-5
    # at the end), said, not warned; live, while it lasted, it was a warning.
    ended = math.isfinite(lines.warn) and peak < lines.warn and now < line and not cause["stale"]
    if ended:
        title += f"; over since (the line {line:.2g}, {lines.warn:g} for a stable run)"
        ev["ended"] = True
    severity = "fail" if peak >= lines.fail else "info" if ended else "warn"
    return [
        finding(NAME, severity, verdict, title, metric=name, first_step=step, action=action, **ev)
    ]


def _trend_since(s: Series, name: str, step: int) -> Trend | None:
    """The mismatch's trend from ``step`` on (on a log scale, but for k1, which has a sign)."""
    seg = s.since(step)
    if name != K1:
        seg = Series(seg.steps, np.log(np.maximum(np.abs(seg.values), 1e-12)))
    return trend(seg) if len(seg) >= MIN_WINDOW else None


@dataclass
class _Lines:
    """Where the mismatch's mean is held: the absolute lines of a stable run (inf: none), and
    the lines relative to its own start (set by ``own`` once the start is known)."""

    warn: float
    fail: float
    rel: float = math.inf
    trend: float = math.inf

    @classmethod
    def of(cls, th: AgreementLines, name: str, designed: float | None) -> _Lines:
        """|Δ| has no line of its own (it grows like the square root of k3). With a designed
        lag the mismatch also holds the policy's own movement over that many updates, so the
        numerics lines do not apply: it is judged against its own start only."""
        if name == ABS_DIFF or designed is not None:
            return cls(math.inf, math.inf)
        fail = th.mismatch_kl_fail if name == "train/mismatch_kl" else th.mismatch_k1_fail
        return cls(th.mismatch_kl_warn, fail)

    def own(self, th: AgreementLines, name: str, start: float) -> None:
        """The relative and trend lines: ``mismatch_rise`` and ``mismatch_trend_rise`` times
        the start, above ``mismatch_floor`` (for |Δ|, their square roots, above
        ``mismatch_abs_floor`` and ``mismatch_abs_trend_floor``)."""
        if name == ABS_DIFF:
            self.rel = max(math.sqrt(th.mismatch_rise) * start, th.mismatch_abs_floor)
            self.trend = max(math.sqrt(th.mismatch_trend_rise) * start, th.mismatch_abs_trend_floor)
        else:
            self.rel = max(th.mismatch_rise * start, th.mismatch_floor)
            self.trend = max(th.mismatch_trend_rise * start, th.mismatch_floor)


def _mismatch_short(name: str, s: Series, v: np.ndarray, lines: _Lines) -> list[Finding]:
    """Under five updates, every one past the absolute warn line of a stable run."""
    if not math.isfinite(lines.warn) or not short_level(v, lines.warn):
        return []
    level = float(v.mean())
    return [
        finding(
            NAME,
            "fail" if short_level(v, lines.fail) else "warn",
            "drift",
            f"{read_words(len(s))}: {name} at {level:.2g}, over the {lines.warn:g} line "
            "of a stable run",
            metric=name,
            first_step=int(s.steps[0]),
            level=round_sig(level),
            line=lines.warn,
            updates_read=len(s),
            values=[round_sig(float(x)) for x in v],
            action="The sampler and the trainer give the same tokens different "
            "probabilities: compare precisions (bf16 vs fp16/fp32), kernels and the "
            "engine version, and check the weights the sampler holds are the trainer's.",
        )
    ]


def _mismatch_onset(
    s: Series, v: np.ndarray, roll: np.ndarray, lines: _Lines
) -> tuple[int, float] | None:
    """(index, line) of the first line the mean crossed (3 of 5): the absolute line, the
    relative line, or the trend line, this one only while the mean still rises significantly
    (log scale) from there and its five-update mean is still past it now."""
    i_abs = crossing(v, lines.warn) if math.isfinite(lines.warn) else None
    i_rel = crossing(v, lines.rel)
    i_trend = crossing(v, lines.trend)
    if i_trend is not None:
        lo = max(0, i_trend - MIN_WINDOW)
        tr = trend(Series(s.steps[lo:], np.log(np.maximum(v[lo:], 1e-12))))
        if tr is None or not tr.rising or float(roll[-1]) < lines.trend:
            i_trend = None
    candidates = [i for i in (i_abs, i_rel, i_trend) if i is not None]
    if not candidates:
        return None
    idx = min(candidates)
    return idx, lines.warn if idx == i_abs else lines.rel if idx == i_rel else lines.trend


def _mismatch_words(
    name: str,
    how: str,
    step: int,
    start: float,
    now: float,
    cause: dict[str, Any],
    has_lag: bool,
) -> tuple[str, str, str]:
    """(verdict, title, action) of a mismatch finding, by its cause."""
    if cause["stale"]:
        return (
            "stale_policy",
            f"stale policy: {name} {how} from step {step} ({start:.2g} at the start, "
            f"{now:.2g} now) while the freshness lag rises",
            STALE_ACTION,
        )
    lag_words = (
        "with the freshness lag flat"
        if has_lag
        else "(the run logs no freshness lag; a stale sampler would show there)"
    )
    return (
        "drift",
        f"sampler/trainer drift: {name} {how} from step {step} (start {start:.2g}, "
        f"{now:.2g} now) {lag_words}",
        DRIFT_ACTION,
    )


DRIFT_ACTION = (
    "The two sides compute different probabilities for the same tokens while the sampler "
    "reports fresh weights: compare precisions (bf16 vs fp16/fp32), kernels and the engine "
    "version, and check that the weights the sampler holds are the version it reports; use "
    "truncated importance sampling (TIS) or masked IS until it is fixed."
)


def _sampler_lag_rising(ctx: Context, step: int) -> bool:
    """Whether the lag of every attempt (trained or not) grows from ``step`` on."""
    a = ctx.data.attempts
    if a is None or not len(a):
        return False
    ok = (a.lag >= 0) & (a.step >= step)
    if ok.sum() < MIN_WINDOW:
        return False
    steps, inv = np.unique(a.step[ok], return_inverse=True)
    if len(steps) < 3:
        return False
    mean_lag = np.bincount(inv, weights=a.lag[ok]) / np.bincount(inv)
    return bool(mean_lag[-1] >= mean_lag[0] + 2)


def _ess(ctx: Context, already: bool) -> list[Finding]:
    th = ctx.thresholds.of(AgreementLines)
    out: list[Finding] = []
    for name, at, sev in (
        ("train/mismatch_ess", th.ess_token_fail, "fail"),
        ("train/mismatch_ess_seq", th.ess_seq_warn, "warn"),
    ):
        s = ctx.finite(name)
        if s is None or len(s) < MIN_WINDOW:
            continue
        roll = rolling_mean(s.values)
        idx = crossing(s.values, at, above=False)
        if idx is None or (already and sev == "warn"):
            continue
        out.append(
            finding(
                NAME,
                sev,
                "drift",
                f"{name} fell to {float(np.nanmin(roll)):.2f} from step {int(s.steps[idx])} "
                f"(line {at})",
                metric=name,
                first_step=int(s.steps[idx]),
                low=round_sig(float(np.nanmin(roll))),
                line=at,
                action="Importance weights are dominated by a few tokens or sequences: the "
                "update is effectively off-policy. Cap the ratios (TIS) or mask outliers, and "
                "find the source of the mismatch.",
            )
        )
        break
    return out


def _freshness(ctx: Context) -> list[Finding]:
    th = ctx.thresholds.of(AgreementLines)
    out: list[Finding] = []
    stale = ctx.finite("discard/rollouts/stale")
    cap = ctx.config_value("training", "max_steps_off_policy")
    if stale is not None and stale.values.any():
        totals = ctx.attempts_per_step(stale.steps)
        if totals is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                share = np.nan_to_num(np.where(totals > 0, stale.values / totals, np.nan))
            idx = first_sustained(share >= th.stale_share_warn)
            if idx is not None:
                lag = ctx.finite("freshness/lag_mean")
                out.append(
                    finding(
                        NAME,
                        "warn",
                        "stale_policy",
                        f"{float(share[idx:].max()):.0%} of attempts dropped as stale from step "
                        f"{int(stale.steps[idx])}: the sampler runs more than "
                        f"{cap if cap is not None else 'max_steps_off_policy'} updates behind",
                        metric="discard/rollouts/stale",
                        first_step=int(stale.steps[idx]),
                        peak_share=round_sig(float(share[idx:].max())),
                        line=th.stale_share_warn,
                        max_steps_off_policy=cap,
                        lag_mean_last=round_sig(float(lag.values[-1])) if lag is not None else None,
                        action="Sampling is wasted on attempts the trainer will not use: "
                        "sync weights more often, shrink the rollout queue, or raise "
                        "max_steps_off_policy with importance-sampling correction.",
                    )
                )
    return out


# The per-sequence tail (metrics._seq_tail): the share of sequences past the sequence line
# (checks/sequences.py), their ratios.
SEQ_MAX = "train/mismatch_seq_tme_max"
SEQ_P90 = "train/mismatch_seq_tme_p90"
TME = "train/mismatch_tme"


def _at_designed_lag(
    s: Series, lag: Series | None, designed: float | None
) -> tuple[Series | None, float | None]:
    """With a lag constant by design: ``s`` from its first update at that lag, and its own
    start there ((None, None) while fewer than MIN_WINDOW updates ran at it: too soon to
    judge). Without one: (``s``, None)."""
    if designed is None:
        return s, None
    ok = _at_designed(s, lag, designed)
    if ok is None:
        return None, None
    first = int(np.flatnonzero(ok)[0])
    return Series(s.steps[first:], s.values[first:]), start_level(s.values[ok])


def _at_steps(s: Series | None, steps: np.ndarray) -> list[float]:
    """The values of ``s`` at ``steps``, rounded for evidence."""
    if s is None:
        return []
    return [round_sig(float(x)) for x in s.values[np.isin(s.steps, steps)]]


def _lag_evidence(
    cause: dict[str, Any], designed: float | None, base: float | None
) -> dict[str, Any]:
    """The evidence a tail finding's cause and line rest on."""
    return dict(
        lag_rising=cause["lag_rising"],
        stale_dropped=cause["stale_dropped"],
        designed_lag=None if designed is None else round_sig(designed),
        share_start_at_designed_lag=None if base is None else round_sig(base),
    )


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) index pairs of the runs of True in ``mask``, end exclusive."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def _seq_line_note(ctx: Context) -> list[Finding]:
    """A sequence line other than the writer's asked of a run that keeps no per-attempt ratios
    to count against it: said once, so the line is never ignored silently."""
    asked = ctx.thresholds.of(SequencesLines).mismatch_seq_line
    if asked == LOGGED_SEQ_LINE:
        return []
    measured = [n for n in ("train/mismatch_kl", K1, ABS_DIFF, TME, SEQ_OVER) if ctx.finite(n)]
    shares = seq_shares(ctx)
    if not measured or not shares.unavailable:
        return []
    logged = shares.series is not None
    return [
        finding(
            NAME,
            "info",
            "drift",
            f"mismatch_seq_line {asked:g} asked, but this run keeps no per-attempt sequence "
            "ratios (its attempts' mismatch.tme) to count against it: "
            + (
                f"the tail is read from the logged {SEQ_OVER}, past {LOGGED_SEQ_LINE:g}"
                if logged
                else "its tail is not judged"
            ),
            metric=SEQ_OVER if logged else measured[0],
            seq_line_asked=asked,
            logged_seq_line=LOGGED_SEQ_LINE,
            action="Per-attempt ratios come with rlvitals' writer given both the sampler's and "
            "the trainer's logprobs of each attempt; otherwise judge the tail at "
            f"{LOGGED_SEQ_LINE:g}.",
        )
    ]


@dataclass
class _Tail:
    """The tail share as judged: from the designed lag on where there is one, its line, the
    sequence line it counts past and the lag its cause is read from."""

    share: Series
    line: float
    shares: SeqShares
    lag: Series | None
    lag_rising: bool
    designed: float | None
    base: float | None  # its own start at the designed lag

    def evidence(self, ctx: Context, cause: dict[str, Any]) -> dict[str, Any]:
        return dict(
            **_lag_evidence(cause, self.designed, self.base),
            **self.shares.evidence(ctx.thresholds.of(SequencesLines).mismatch_seq_line),
        )


def _tail(ctx: Context) -> list[Finding]:
    """The mismatch judged by its distribution over sequences, not its mean: the share of an
    update's sequences whose ratio (token mean of exp(|Δ|)) is past ``mismatch_seq_line``
    (``seq_shares``), held over 3 of 5 updates; told as a creep (rising since), held, or spikes
    (short excursions back under). The cause comes from the freshness lag, as for the mean
    (``_cause``). With a lag constant by design, the ratio to a sampler one or more versions
    behind measures that designed staleness (the policy's own movement over those updates),
    not a broken engine: the share is then judged against its own start at the designed lag
    only, from the first update at it, and not before MIN_WINDOW updates ran there."""
    th = ctx.thresholds.of(AgreementLines)
    shares = seq_shares(ctx)
    share = shares.series
    if share is None or len(share) < 3:
        return []
    line = th.mismatch_seq_share_warn
    lag, designed, lag_rising = _lag(ctx)
    kept, base = _at_designed_lag(share, lag, designed)
    if kept is None:
        return []
    if base is not None:
        share = kept
        line = base + max(line, (th.mismatch_designed_rise - 1.0) * base)
    tail = _Tail(share, line, shares, lag, lag_rising, designed, base)
    past = share.values >= line
    if not past.any():
        return []
    idx = crossing(share.values, line, points=True)
    if idx is None:
        return _tail_spikes(ctx, tail, past)
    return [_tail_held(ctx, tail, idx)]


def _tail_spikes(ctx: Context, tail: _Tail, past: np.ndarray) -> list[Finding]:
    """Short excursions only (``mismatch_spike_updates`` or fewer, back under after), two or
    more: said (info), with their steps, never warned."""
    spikes = [
        (a, b)
        for a, b in _runs(past)
        if b - a <= ctx.thresholds.of(AgreementLines).mismatch_spike_updates
    ]
    if len(spikes) < 2:
        return []
    steps = [int(tail.share.steps[a]) for a, _ in spikes]
    spiky = _cause(ctx, steps[0], tail.lag, tail.lag_rising)
    return [
        finding(
            NAME,
            "info",
            "stale_policy" if spiky["stale"] else "drift",
            f"mismatch spikes: {len(spikes)} updates where over {tail.line:.0%} of the "
            f"sequences were past {tail.shares.line:g} (steps "
            f"{', '.join(map(str, steps[:6]))}), each back under the next update",
            metric=SEQ_OVER,
            first_step=steps[0],
            steps=steps,
            line=tail.line,
            seq_line=tail.shares.line,
            peak_share=round_sig(float(tail.share.values.max())),
            shape="spiky",
            action="Spikes of the per-sequence mismatch that pass point at the inference "
            "engine or a weight refit that sometimes goes wrong (NeMo-RL's guide): read "
            "the attempts of those updates.",
            **tail.evidence(ctx, spiky),
        )
    ]


def _tail_held(ctx: Context, tail: _Tail, idx: int) -> Finding:
    """The share past its line in 3 of 5 updates from ``idx``: held or creeping (warn), or
    over since (info), with the tail's numbers at its onset and the attempts furthest off."""
    share, line = tail.share, tail.line
    step = int(share.steps[idx])
    seg = share.since(step)
    tr = trend(seg) if len(seg) >= MIN_WINDOW else None
    before = share.values[:idx]
    creeping = tr is not None and tr.rising
    now = float(share.values[-min(3, len(share)) :].mean())
    ended = now < line and not creeping
    mean_name, mean = ctx.series(TME, "train/mismatch_kl")
    mean_now = float(mean.values[-min(3, len(mean)) :].mean()) if mean is not None else None
    first_steps = seg.steps[:MIN_WINDOW]
    cause = _cause(ctx, step, tail.lag, tail.lag_rising)
    mx = ctx.finite(SEQ_MAX)
    max_seg = mx.since(step) if mx is not None else None
    ev: dict[str, Any] = dict(
        line=line,
        seq_line=tail.shares.line,
        share_start=round_sig(float(np.median(before)) if len(before) else 0.0),
        share_since=round_sig(float(np.median(seg.values))),
        share_now=round_sig(now),
        shares=_at_steps(share, first_steps),
        seq_ratio_max=round_sig(float(max_seg.values.max())) if max_seg is not None else None,
        seq_ratio_max_at_onset=_at_steps(mx, first_steps),
        seq_ratio_p90_at_onset=_at_steps(ctx.finite(SEQ_P90), first_steps),
        mean_metric=mean_name,
        mean_now=None if mean_now is None else round_sig(mean_now),
        mean_kl_line=ctx.thresholds.of(AgreementLines).mismatch_kl_warn,
        trend_z_since=round_sig(tr.z) if tr else None,
        shape="creeping" if creeping else "held",
        lag_metric="freshness/lag_mean" if tail.lag is not None else None,
        **tail.evidence(ctx, cause),
    )
    cited = cite(ctx, first_steps, tail.shares.line)
    if cited:
        ev["examples"] = cited
        ev["attempt_ids"] = [e["attempt_id"] for e in cited]
    kl = ctx.finite("train/mismatch_kl")
    if kl is not None:
        ev["mean_kl_now"] = round_sig(float(kl.values[-min(3, len(kl)) :].mean()))
    title, action = _tail_words(ctx, ev, cause, step, ended)
    verdict = "stale_policy" if cause["stale"] else "drift"
    return finding(
        NAME,
        "info" if ended else "warn",
        verdict,
        title,
        metric=SEQ_OVER,
        first_step=step,
        action=action,
        **ev,
    )


def _tail_words(
    ctx: Context, ev: dict[str, Any], cause: dict[str, Any], step: int, ended: bool
) -> tuple[str, str]:
    """A held or creeping tail finding's title and action, by its cause."""
    th = ctx.thresholds.of(AgreementLines)
    creeping = ev["shape"] == "creeping"
    mx_words = f", the worst {ev['seq_ratio_max']:.3g}x" if ev["seq_ratio_max"] else ""
    title = (
        f"mismatch in the tail: {ev['share_since']:.0%} of the sequences past "
        f"{ev['seq_line']:g} from step {step} ({ev['share_start']:.0%} before{mx_words})"
    )
    if cause["stale"]:
        title = "stale policy: " + title
        title += (
            " while the freshness lag rises"
            if cause["lag_rising"]
            else " with attempts dropped as stale"
            if cause["stale_dropped"]
            else " while the sampler's weights fall behind"
        )
    elif "mean_kl_now" in ev and ev["mean_kl_now"] < th.mismatch_kl_warn:
        title += f" while the mean KL reads {ev['mean_kl_now']:.2g}, under its line"
    base = ev["share_start_at_designed_lag"]
    if base is not None:
        title += f" (the lag is {ev['designed_lag']:.2g} by design: {base:.0%} at its start)"
    title += "; still rising" if creeping else "; over since" if ended else ""
    action = (
        STALE_ACTION
        if cause["stale"]
        else (
            "A share of the sequences gets probabilities from the sampler far from the trainer's "
            "while the mean looks fine: read the flagged updates' attempts; if the outliers come "
            "from one engine replica or one kind of prompt, check that replica's weights (refit), "
            "kernels and sampling parameters. "
            + (
                "A share that keeps growing points at how the weights are updated (NeMo-RL's guide)."
                if creeping
                else "Mask or cap those sequences (seq-level TIS/masked IS) until it is fixed."
            )
        )
    )
    return title, action


def _tme_mean(ctx: Context) -> list[Finding]:
    """NeMo-RL's own line for its token_mult_prob_error (``train/mismatch_tme``, 1 = identical):
    "past ~1-2%" is a problem. Warned where it holds past ``mismatch_tme_warn`` (3 of 5
    updates) from a start under it; told as a trend or a level. With a lag constant by design
    the line is that of the tail: the ratio's excess over 1 judged against its own start at
    the designed lag (``mismatch_designed_rise`` times it, at least NeMo-RL's line above it)."""
    th = ctx.thresholds.of(AgreementLines)
    s = ctx.finite(TME)
    if s is None or len(s) < 3:
        return []
    lag, designed, lag_rising = _lag(ctx)
    kept, base = _at_designed_lag(s, lag, designed)
    if kept is None:
        return []
    line = th.mismatch_tme_warn
    if base is not None:
        s = kept
        line = base + max(line - 1.0, (th.mismatch_designed_rise - 1.0) * (base - 1.0))
    v = s.values
    idx = crossing(v, line, points=True)
    if idx is None or (idx == 0 and len(v) >= MIN_WINDOW and start_level(v) >= line):
        return []
    step = int(s.steps[idx])
    seg = s.since(step)
    tr = trend(Series(seg.steps, np.log(np.maximum(seg.values - 1.0, 1e-9))))
    rising = tr is not None and tr.rising
    now = float(v[-min(3, len(v)) :].mean())
    cause = _cause(ctx, step, lag, lag_rising)
    designed_words = (
        "" if base is None else f", {base:.3g} at its start at the lag of {designed:.2g} by design"
    )
    return [
        finding(
            NAME,
            "warn",
            "stale_policy" if cause["stale"] else "drift",
            f"{TME} past {line:.3g} from step {step} ({now:.3g} now{designed_words}"
            + (", still rising)" if rising else ")")
            + (" while the sampler's weights fall behind" if cause["stale"] else ""),
            metric=TME,
            first_step=step,
            line=round_sig(line),
            designed_lag=None if designed is None else round_sig(designed),
            lag_rising=cause["lag_rising"],
            stale_dropped=cause["stale_dropped"],
            start_level=round_sig(float(v[0])),
            now=round_sig(now),
            peak=round_sig(float(v.max())),
            growing=rising,
            action=STALE_ACTION
            if cause["stale"]
            else "The sampler's and the trainer's probabilities of the same tokens differ by "
            "more than NeMo-RL's guide accepts: a steady rise points at how the weights are "
            "updated (refit), spikes at the inference engine; compare precisions and kernels.",
        )
    ]


def check(ctx: Context) -> list[Finding]:
    out = _tail(ctx)
    out += _mismatch(ctx)
    if not out:
        out += _tme_mean(ctx)
    out += _ess(ctx, already=bool(out))
    out += _freshness(ctx)
    # The mismatch's cause, and the ratio's own findings (checks/mismatch_cause.py).
    return attribute(ctx, out + _seq_line_note(ctx))
