"""6. Transcripts: read what the policy wrote, not only the curves.

Three kinds of evidence, from cheapest to richest:

- reward climbing faster than the task allows: the reward's rise over a few steps against the
  run's own early noise and early rate of rise (step records only);
- length exploitation: the within-step Spearman correlation between reward and reply length
  drifting away from its early value while held-out does not improve (the attempts table);
- flags on the transcript text (``rlvitals.transcripts``): per-step shares of episodes that
  tamper with tests or the grader, hard-code outputs, please the parser, or repeat
  themselves. A flag alarms when its rate is over its line in 3 of 5 steps, or when a
  Bernoulli CUSUM of its counts crosses its limit with flags from 3 or more steps and a pooled
  rate over the line; the line is 2% of episodes (Anthropic's onset of reward hacking) for
  hard flags and the run's early rate plus 2% for relative ones. Collapse needs the entropy
  falling too. Findings cite attempts (``evidence.attempt_ids``) with escaped excerpts.

docs/transcripts.md explains each signal and flag.

The per-step rates (``transcripts/<flag>_rate``, ``transcripts/flagged_rate``,
``transcripts/repetition_rate``) and ``transcripts/reward_length_spearman`` are derived once
before the checks run (checks/derive.py) and returned on the report for views to plot; the
run read is never written to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import RunData, Series
from ..transcripts.flags import flag_names, spec
from ..transcripts.rules import Rules
from ..transcripts.scan import RunScan, examples
from ..transcripts.store import TranscriptStore
from .base import Finding
from .context import (
    ENTROPY,
    RULES_ENV,
    RULES_FILES,
    Context,
    finding,
    round_sig,
)
from .heldout import heldout_change
from .jump import reward_jump
from .policy import PolicyLines
from .reward import falls, learns
from .stats import MIN_WINDOW, first_sustained, rolling_mean, start_level, trend
from .thresholds import line, lines

__all__ = [
    "NAME",
    "RULES_ENV",
    "RULES_FILES",
    "check",
    "flag_rates",
    "reward_jump",
    "reward_length_series",
    "rules_for",
    "scan",
    "spearman",
]

NAME = "transcripts"


@lines
@dataclass(frozen=True)
class TranscriptsLines:
    """Where the transcripts check draws its lines (a flag's own lines are the rules
    file's: docs/transcripts.md)."""

    collapse_share: float = line(
        0.25,
        "share of episodes with repeated replies a collapse finding needs to warn (with the "
        "entropy under its collapse line or the reward falling)",
        "families: healthy runs repeat up to 10% of their replies (repeated_replies); "
        "precision 1.00 from 0.10 to 0.40 (the entropy decides), recall on entropy_collapse "
        "runs with transcripts 8 at 0.25 (7 at 0.40); the rules' fail_rate, 25%",
    )
    length_rho: float = line(
        0.3,
        "within-step |Spearman(reward, length)| that says the reward tracks length ...",
        "science.md 4 (length exploitation: trigger when rho > 0.3 and rising)",
    )
    length_move: float = line(
        0.2,
        "... moved at least this far from its early value",
        "science.md 4 (rho rising, not a level a task's answers hold from the start)",
    )
    flag_cusum_h: float = line(
        5.0,
        "the Bernoulli CUSUM limit (log-likelihood units) on a transcript flag's counts",
        "science.md 6 (h = 4-5 for a 1-sigma shift, Montgomery & Runger)",
    )
    flag_entropy_drop: float = line(
        0.85,
        "entropy after a repetition flag's onset under this share of before it: falling with it",
        "the Loops seed (entropy falling sharply alongside repetitive transcripts)",
    )


REWARD_LENGTH = "transcripts/reward_length_spearman"


def rules_for(ctx: Context) -> Rules:
    """The run's transcript rules (``Context.rules``)."""
    return ctx.rules


def store_for(ctx: Context) -> TranscriptStore | None:
    return ctx.transcript_store


def scan(ctx: Context) -> RunScan | None:
    """Flag counts of the run's transcripts (``Context.transcript_scan``, computed once)."""
    return ctx.transcript_scan


def flag_rates(sc: RunScan) -> dict[str, Series]:
    """The per-step rates of a scan as series: ``transcripts/<flag>_rate``,
    ``transcripts/flagged_rate`` (any exploit flag), ``transcripts/repetition_rate`` (any
    collapse flag), over the steps whose attempts carry text."""
    if not len(sc.steps) or not sc.has_text:
        return {}
    ok = sc.with_text > 0
    steps = sc.steps[ok]
    out = {f"transcripts/{f}_rate": Series(steps, sc.rate(f)[ok]) for f in sc.flags}
    out["transcripts/flagged_rate"] = Series(steps, sc.family_rate("exploit")[ok])
    out["transcripts/repetition_rate"] = Series(steps, sc.family_rate("collapse")[ok])
    return out


# -- reward climbing faster than the task allows --------------------------------------------


def _reward_jump_finding(ctx: Context, jump: dict[str, Any]) -> Finding:
    step = jump["step"]
    held = heldout_change(ctx, step)
    note = ""
    if held is not None:
        note = f"; held-out {held['suite']} {held['first']:.3g} -> {held['last']:.3g} since"
    return finding(
        NAME,
        "info",
        "exploit_suspected",
        f"reward climbed faster than the task allows at step {step}: {jump['metric']} "
        f"{jump['before']:.3g} -> {jump['after']:.3g} in {2 * MIN_WINDOW} steps "
        f"(early noise allows {jump['allowed']:.3g}){note}",
        metric=jump["metric"],
        first_step=step,
        heldout=held,
        action="Read the highest-reward transcripts from this step (`rlvitals transcripts RUN "
        f"--step {step}`): a sudden rise is often a shortcut in the grader.",
        **{k: v for k, v in jump.items() if k not in ("step", "metric")},
    )


# -- length exploitation ---------------------------------------------------------------------


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks with ties averaged (as Spearman's rho needs)."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    ranks = np.empty(len(x))
    starts = np.flatnonzero(np.concatenate(([True], xs[1:] != xs[:-1])))
    ends = np.concatenate((starts[1:], [len(x)]))
    avg = (starts + ends - 1) / 2.0
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (NaN when either side is constant)."""
    if len(x) < 3:
        return math.nan
    rx, ry = _ranks(x), _ranks(y)
    rx -= rx.mean()
    ry -= ry.mean()
    d = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / d) if d > 0 else math.nan


def _group_order(g: np.ndarray, x: np.ndarray, groups: int) -> np.ndarray:
    """An order of the rows by group, then by value (ties in any order: their ranks are
    averaged). Whole numbers of a modest range (token counts) as one int64 key, one sort;
    else both keys (``np.lexsort``)."""
    if len(x) and np.isfinite(x).all():
        lo, hi = float(x.min()), float(x.max())
        span = hi - lo + 1
        if span * max(groups, 1) < 2**62 and (x == np.floor(x)).all():
            return np.argsort(g.astype(np.int64) * int(span) + (x - lo).astype(np.int64))
    return np.lexsort((x, g))


def _grouped_ranks(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Ranks of ``x`` within each group of ``g`` (codes 0..G-1), ties averaged (``_ranks``
    per group): for a few distinct values (rewards) by counting, else in one sort."""
    groups = int(g.max()) + 1 if len(g) else 0
    few = len(np.unique(x[:4096])) <= 32  # a look at the start before a full pass
    values, code = np.unique(x, return_inverse=True) if few else (x, None)
    k = len(values)
    if code is not None and k <= 64 and groups * k <= 4_000_000:
        # Per group, how many of each value: a value's rank is the count of smaller ones
        # plus the middle of its own run of ties (0-based, as the sort gives).
        hist = np.bincount(g * k + code, minlength=groups * k).reshape(groups, k)
        below = np.cumsum(hist, axis=1) - hist
        return (below + (hist - 1) / 2.0)[g, code]
    n = len(x)
    order = _group_order(g, x, groups)
    gs, xs = g[order], x[order]
    at = np.arange(n)
    new_group = np.concatenate(([True], gs[1:] != gs[:-1]))
    start = np.maximum.accumulate(np.where(new_group, at, 0))
    tie = np.cumsum(new_group | np.concatenate(([True], xs[1:] != xs[:-1]))) - 1
    avg = np.bincount(tie, weights=at.astype(float)) / np.bincount(tie)
    ranks = np.empty(n)
    ranks[order] = avg[tie] - start
    return ranks


def reward_length_series(data: RunData) -> Series | None:
    """Per step, Spearman's rho between reward and response tokens over its graded attempts
    (steps with fewer than 8 of them, or a constant side, left out); None with fewer than ten
    such steps. All steps at once: ranks within each step from one sort, then each step's
    Pearson correlation of the ranks from per-step sums."""
    a = data.attempts
    if a is None or not len(a):
        return None
    ok = ~a.reward_missing & np.isfinite(a.reward) & (a.response_tokens > 0)
    step = a.step[ok]
    if not len(step):
        return None
    steps, gid, cnt = np.unique(step, return_inverse=True, return_counts=True)
    rx = _grouped_ranks(gid, a.reward[ok])
    ry = _grouped_ranks(gid, a.response_tokens[ok].astype(float))

    def total(w: np.ndarray) -> np.ndarray:
        return np.bincount(gid, weights=w, minlength=len(steps))

    sx, sy = total(rx), total(ry)
    cov = total(rx * ry) - sx * sy / cnt
    vx = total(rx * rx) - sx * sx / cnt
    vy = total(ry * ry) - sy * sy / cnt
    d = np.sqrt(np.clip(vx, 0.0, None) * np.clip(vy, 0.0, None))
    keep = (cnt >= 8) & (d > 1e-9 * np.maximum(cnt, 1) ** 2)
    rho = np.clip(cov[keep] / d[keep], -1.0, 1.0)
    if len(rho) < 2 * MIN_WINDOW:
        return None
    return Series(steps[keep].astype(np.int64), rho)


def _length(ctx: Context) -> list[Finding]:
    s = ctx.finite(REWARD_LENGTH)
    if s is None or len(s) < 2 * MIN_WINDOW:
        return []
    early = start_level(s.values)
    roll = np.nan_to_num(rolling_mean(s.values), nan=early)
    late = float(s.values[-MIN_WINDOW:].mean())
    d = 1.0 if late >= early else -1.0
    th = ctx.thresholds.of(TranscriptsLines)
    hot = (d * (s.values - early) >= th.length_move) & (np.abs(s.values) >= th.length_rho)
    idx = first_sustained(hot)
    if idx is None or abs(float(roll[-1]) - early) < th.length_move:
        return []
    step = int(s.steps[idx])
    held = heldout_change(ctx, step)
    if held is not None and held["change"] > 2 * held["se"]:
        return []  # held-out improves with it: length is buying real skill
    sev = "warn" if held is not None else "info"
    way = "longer" if d > 0 else "shorter"
    _ln, length = ctx.series("response/length_mean")
    return [
        finding(
            NAME,
            sev,
            "exploit_suspected",
            f"reward tracks length: within-step Spearman(reward, length) {early:+.2f} -> "
            f"{late:+.2f} from step {step} ({way} replies earn more)"
            + (
                f", held-out {held['suite']} {held['first']:.3g} -> {held['last']:.3g}"
                if held
                else "; no held-out score to confirm"
            ),
            metric=REWARD_LENGTH,
            first_step=step,
            early_rho=round_sig(early),
            late_rho=round_sig(late),
            line=th.length_rho,
            heldout=held,
            length_first=round_sig(start_level(length.values)) if length is not None else None,
            length_last=(
                round_sig(float(length.values[-MIN_WINDOW:].mean())) if length is not None else None
            ),
            action="Compare rewarded and unrewarded replies of similar length: if the grader pays "
            "for length (or brevity) rather than correctness, fix it; score checkpoints on "
            "held-out tasks to confirm.",
        )
    ]


# -- flag families ---------------------------------------------------------------------------


# The Bernoulli CUSUM's rates kept inside (0, 1): a base rate of at least one flag in 500
# episodes, and rates short of certainty (the log-likelihood ratios stay finite).
# source: numerical guards of the Bernoulli CUSUM (science.md 4: a per-step flagged rate)
CUSUM_P_MIN = 0.002
CUSUM_P_MAX = 0.9
CUSUM_P1_MAX = 0.99


def _cusum(
    x: np.ndarray, n: np.ndarray, p0: float, p1: float, h: float = TranscriptsLines.flag_cusum_h
) -> tuple[int, int, float] | None:
    """Bernoulli CUSUM of counts ``x`` of ``n`` for a rise from p0 to p1: (index where the
    statistic last left zero, index where it first crossed ``h``, its value there), or None
    if it never crossed."""
    up = math.log(p1 / p0)
    down = math.log((1 - p1) / (1 - p0))
    s = 0.0
    start = 0
    for i in range(len(x)):
        s = max(0.0, s + x[i] * up + (n[i] - x[i]) * down)
        if s == 0.0:
            start = i + 1
        if s > h:
            return min(start, i), i, s
    return None


def _flag_alarm(
    sc: RunScan, flag: str, rules: Rules, cusum_h: float = TranscriptsLines.flag_cusum_h
) -> dict[str, Any] | None:
    ok = sc.with_text > 0
    steps = sc.steps[ok]
    if len(steps) < MIN_WINDOW:
        return None
    n = sc.attempts[ok].astype(float)
    x = sc.counts[flag][ok].astype(float)
    rate = x / np.maximum(n, 1)
    onset_rate = rules.limit("onset_rate")
    relative = spec(flag, rules).relative
    k = int(min(max(MIN_WINDOW, rules.limit("early_steps")), max(MIN_WINDOW, len(rate) // 4)))
    early = float(np.median(rate[:k])) if relative else 0.0
    line = early + onset_rate
    sustained = first_sustained(rate > line)
    # The CUSUM dates a rise the 3-of-5 rule may miss (a small steady rate in small steps)
    # and alarms on its own only when the flags it adds up come from 3 or more steps and make
    # more than the line over the steps from its start (at least five): one burst is not a
    # trend.
    p0 = min(max(early, CUSUM_P_MIN), CUSUM_P_MAX)
    p1 = min(max(line, 2 * p0), CUSUM_P1_MAX)
    cus = _cusum(x, n, p0, p1, cusum_h) if p1 > p0 else None
    cus_start = None
    if cus is not None:
        start, cross, _s = cus
        end = max(cross, start + MIN_WINDOW - 1) + 1
        spread = int((x[start : cross + 1] > 0).sum())
        pooled = float(x[start:end].sum() / max(n[start:end].sum(), 1))
        if spread >= 3 and pooled > line:
            cus_start = start
    if sustained is None and cus_start is None:
        return None
    alarm = min(i for i in (sustained, cus_start) if i is not None)
    roll = rolling_mean(rate)
    after = roll[alarm:]
    peak_rate = float(np.nanmax(after)) if np.isfinite(after).any() else float(rate[alarm])
    # The share rising step after step: a significant trend from its onset on, and its latest
    # updates past twice the line (a flag that creeps up as a shortcut spreads, not a level
    # that a task's own answers reach and hold).
    tr = trend(Series(steps[alarm:], rate[alarm:]))
    climbing = bool(tr is not None and tr.rising and float(rate[-MIN_WINDOW:].mean()) >= 2 * line)
    return dict(
        flag=flag,
        title=spec(flag, rules).title,
        onset=int(steps[alarm]),
        line=round_sig(line),
        early_rate=round_sig(early),
        peak_rate=round_sig(peak_rate),
        last_rate=round_sig(float(rate[-MIN_WINDOW:].mean())),
        cusum=round_sig(cus[2]) if cus is not None else None,
        relative=relative,
        rates=[round_sig(float(v)) for v in rate[alarm : alarm + 10]],
        climbing=climbing,
        trend_z=round_sig(tr.z) if tr is not None and math.isfinite(tr.z) else None,
    )


def _examples(
    ctx: Context, alarms: list[dict[str, Any]], limit: int = 3, *, rewarded_first: bool = True
) -> list[dict[str, Any]]:
    store = store_for(ctx)
    if store is None:
        return []
    have = store.steps()
    first = min(a["onset"] for a in alarms)
    i = int(np.searchsorted(have, first))
    steps = have[i : i + 2 * MIN_WINDOW] + have[-2:]
    got = examples(
        store,
        rules_for(ctx),
        steps,
        [a["flag"] for a in alarms],
        limit=limit,
        rewarded_first=rewarded_first,
    )
    return [
        {
            "attempt_id": a.attempt_id,
            "step": a.step,
            "task_id": a.task_id,
            "reward": a.reward,
            "flags": sorted({h.flag for h in hits}),
            "excerpt": hits[0].excerpt[:200],
        }
        for a, hits in got
    ]


def _entropy_falling(ctx: Context, onset: int) -> dict[str, Any] | None:
    """How the entropy moved around the repetition's onset: its median before the onset
    against its mean from the onset on (falling under ``flag_entropy_drop`` of it), or a falling trend
    over the run. None when the run logs no entropy."""
    name, s = ctx.series(*ENTROPY)
    if s is None or len(s) < MIN_WINDOW:
        return None
    i = int(np.searchsorted(s.steps, onset))
    before = s.values[: max(i, 3)]
    after = s.values[i:] if i < len(s) else s.values[-MIN_WINDOW:]
    h0 = float(np.median(before))
    h1 = float(after.mean())
    tr = trend(s)
    ratio = h1 / h0 if h0 > 0 else math.nan
    return dict(
        metric=name,
        before=round_sig(h0),
        after=round_sig(h1),
        ratio=round_sig(ratio),
        start_ratio=round_sig(float(s.values[-MIN_WINDOW:].mean()) / start_level(s.values))
        if start_level(s.values) > 0
        else None,
        falling=bool(
            (math.isfinite(ratio) and ratio < ctx.thresholds.of(TranscriptsLines).flag_entropy_drop)
            or (tr is not None and tr.falling)
        ),
    )


def _corroboration(ctx: Context, alarms: list[dict[str, Any]]) -> list[str]:
    """What in the numbers backs relative transcript flags, in words (empty: nothing): held-out
    falling since the first flag's onset, a reward component at its ceiling while the task
    component stays flat, replies collapsing while the reward rises, a flag's share climbing
    step after step."""
    out = []
    onset = min(a["onset"] for a in alarms)
    held = heldout_change(ctx, onset)
    if held is not None and held["change"] < -2 * held["se"]:
        out.append(f"held-out {held['suite']} falls {held['first']:.3g} -> {held['last']:.3g}")
    comps = ctx.components
    cut = comps.shortcut()
    if cut is not None and cut.at_ceiling and comps.task is not None:
        out.append(f"component {cut.name} is at its ceiling while {comps.task.name} stays flat")
    _ln, length = ctx.series("response/length_mean")
    if length is not None and len(length) >= 2 * MIN_WINDOW and learns(ctx):
        l0 = start_level(length.values)
        l1 = float(length.values[-MIN_WINDOW:].mean())
        if l0 > 0 and l1 / l0 <= ctx.thresholds.of(PolicyLines).length_collapse_ratio:
            out.append(f"replies collapsed to {l1 / l0:.0%} of their start while the reward rose")
    climbing = [a["flag"] for a in alarms if a.get("climbing")]
    if climbing:
        out.append(f"the share of {', '.join(climbing)} climbs step after step")
    return out


def _family(ctx: Context, sc: RunScan, family: str, rules: Rules) -> list[Finding]:
    """The flags of one family that rose (``_flag_alarm``), earliest first, as one finding:
    an exploit (``_exploit``) or a collapse (``_collapse``), citing the attempts that show it."""
    names = [f for f in flag_names(rules) if spec(f, rules).family == family]
    cusum_h = ctx.thresholds.of(TranscriptsLines).flag_cusum_h
    alarms = [a for a in (_flag_alarm(sc, f, rules, cusum_h) for f in names) if a is not None]
    if not alarms:
        return []
    alarms.sort(key=lambda a: (a["onset"], -a["peak_rate"]))
    first = alarms[0]
    # An exploit shows in what was rewarded; a collapse in any reply.
    ex = _examples(ctx, alarms, rewarded_first=family == "exploit")
    said = "; ".join(
        f"{a['flag']} ({a['title']}) in {a['peak_rate']:.0%} of episodes from step {a['onset']}"
        for a in alarms[:3]
    ) + (f"; and {len(alarms) - 3} more" if len(alarms) > 3 else "")
    cite = ""
    if ex:
        e = ex[0]
        cite = f"; e.g. attempt {e['attempt_id']} (step {e['step']}, reward {e['reward']}): "
        cite += e["excerpt"][:100]
    common: dict[str, Any] = dict(
        metric=f"transcripts/{first['flag']}_rate",
        first_step=first["onset"],
        steps=sorted({a["onset"] for a in alarms}),
        flags={a["flag"]: {k: v for k, v in a.items() if k != "flag"} for a in alarms},
        attempt_ids=[e["attempt_id"] for e in ex],
        examples=ex,
        rules=rules.source,
    )
    read = _exploit if family == "exploit" else _collapse
    return [read(ctx, alarms, said, cite, rules, common)]


def _exploit(
    ctx: Context,
    alarms: list[dict[str, Any]],
    said: str,
    cite: str,
    rules: Rules,
    common: dict[str, Any],
) -> Finding:
    """Exploit flags: a hard flag (tampering, hard-coding) is wrong in any amount; a relative
    flag (a heuristic on answers: several right answers, a bonus paying a few padding tokens
    can raise it in a healthy run) is a hypothesis until the numbers agree
    (``_corroboration``)."""
    hard = any(not a["relative"] for a in alarms)
    big = any(a["peak_rate"] >= rules.limit("fail_rate") for a in alarms)
    backing = [] if hard else _corroboration(ctx, alarms)
    sev = "fail" if hard or (big and backing) else "warn" if backing else "info"
    return finding(
        NAME,
        sev,
        "exploit_suspected",
        (
            f"exploit suspected from transcripts: {said}"
            + (f", and {' and '.join(backing)}" if backing else "")
            + cite
            if hard or backing
            else f"transcript flags, a hypothesis no number confirms (held-out not "
            f"falling, no component at its ceiling over a flat task, replies not "
            f"collapsing, the flags' share not climbing): {said}{cite}"
        ),
        reward_jump=reward_jump(ctx),
        corroborated_by=backing,
        action="Read the cited attempts (`rlvitals transcripts RUN --flag "
        f"{alarms[0]['flag']}`): if the reward is earned without doing the task, fix the "
        "grader or environment and start a new run; training longer on a broken "
        "reward reinforces the exploit. Tune the flags with a rules file "
        "(docs/transcripts.md).",
        **common,
    )


def _collapse(
    ctx: Context,
    alarms: list[dict[str, Any]],
    said: str,
    cite: str,
    rules: Rules,
    common: dict[str, Any],
) -> Finding:
    """Collapse flags (repetition or one reply given to many tasks): a hypothesis (info)
    until the share of repeated replies reaches ``collapse_share`` (more than a healthy run
    repeats) and the numbers say the same: the policy's entropy under its collapse line
    (``entropy_ratio_warn`` of its start) or the reward falling. A warning then, failing at
    twice the rules' fail rate or with the entropy under ``entropy_ratio_fail``. A few
    repeated replies while the entropy sharpens and the reward climbs are a policy learning
    its answers (a healthy TRL run: 8% of episodes one reply, entropy 3.56 -> 2.83, reward
    0.43 -> 1.06)."""
    ent = _entropy_falling(ctx, alarms[0]["onset"])
    _ln, length = ctx.series("response/length_mean")
    shrink = None
    if length is not None and len(length) >= 2 * MIN_WINDOW:
        l0 = start_level(length.values)
        shrink = round_sig(float(length.values[-MIN_WINDOW:].mean()) / l0) if l0 > 0 else None
    pol = ctx.thresholds.of(PolicyLines)
    peak = max(a["peak_rate"] for a in alarms)
    # The entropy's fall, from before the flags' onset to since, or from the run's start to
    # its last updates, whichever fell further.
    lows = [
        float(ent[k])
        for k in ("ratio", "start_ratio")
        if ent is not None and ent[k] is not None and math.isfinite(ent[k])
    ]
    low = min(lows) if lows else None
    entropy_low = low is not None and low < pol.entropy_ratio_warn
    backing = []
    if entropy_low and ent is not None and low is not None:
        backing.append(f"{ent['metric']} at {low:.0%} of its start")
    if falls(ctx):
        backing.append("the reward falling")
    sure = peak >= ctx.thresholds.of(TranscriptsLines).collapse_share and bool(backing)
    if sure:
        severe = low is not None and low < pol.entropy_ratio_fail
        sev = "fail" if peak >= 2 * rules.limit("fail_rate") or severe else "warn"
        why = f", with {' and '.join(backing)}"
    else:
        sev = "info"
        why = (
            f"; a hypothesis: {peak:.0%} of episodes at most"
            + (f", {ent['metric']} {ent['before']:.3g} -> {ent['after']:.3g}" if ent else "")
            + (", the reward not falling" if not falls(ctx) else "")
            + " (a policy learning its answers repeats some)"
        )
    return finding(
        NAME,
        sev,
        "collapse",
        f"collapsing replies in transcripts: {said}{why}{cite}",
        entropy=ent,
        length_ratio=shrink,
        corroborated_by=backing,
        share_line=ctx.thresholds.of(TranscriptsLines).collapse_share,
        action="The policy is collapsing onto one reply: read the cited attempts; raise the "
        "sampling temperature, add an entropy bonus or clip-higher, or restart from a "
        "checkpoint before the onset.",
        **common,
    )


def check(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    sc = scan(ctx)
    rules = rules_for(ctx)
    if sc is not None and sc.has_text:
        out += _family(ctx, sc, "exploit", rules)
        out += _family(ctx, sc, "collapse", rules)
    out += _length(ctx)
    jump = reward_jump(ctx)
    if jump is not None and not any(f.verdict == "exploit_suspected" for f in out):
        out.append(_reward_jump_finding(ctx, jump))
    return out
