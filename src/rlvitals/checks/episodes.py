"""4. Episode metrics: why episodes end.

A rising share of episodes ending at the turn limit (``rollout/termination_reason/max_turns``)
or the token limit (``response/truncated_rate``) while reward stays flat means the agent is
running out of room, not learning the task. Judged by its course: most episodes cut off now is
a problem whatever the reward does; a start where most are cut that falls away (a new model
learning to stop) is transient. Before five updates exist, every update read mostly cut off is
said at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import Series
from .base import Finding
from .context import Context, fact, finding, round_sig
from .stats import (
    MIN_WINDOW,
    crossing,
    noise_sigma,
    read_words,
    rolling_mean,
    short_level,
    start_level,
    trend,
)
from .thresholds import line, lines

NAME = "episodes"


@lines
@dataclass(frozen=True)
class EpisodesLines:
    """Where the episodes check draws its lines."""

    room_rise: float = line(
        0.2,
        "rise of the share of episodes at a limit over its start that counts while the "
        "reward is flat",
        "the Loops seed (a rising max_turns or truncated rate with a flat reward means "
        "running out of room); a fifth of the episodes",
    )
    room_creep: float = line(
        0.15,
        "the share that counts while it still climbs with the reward flat (and half of it over its start)",
        "science.md 5 (EWMA of clip_ratio > 0.15 pages, > 0.05 warns); families: precision 1.00 finished, 0.998 prefixes (at 0.05: 0.998; 0.10: 0.996), truncation recall 0.95 / 1.00 / 1.00; healthy shares creep to 10-11% as replies lengthen",
    )
    room_level: float = line(
        0.5,
        "share of episodes at a limit that is a problem whatever the reward does (most of "
        "them cut)",
        "science.md 5 (truncated samples add reward noise: DAPO's overlong shaping); most "
        "episodes cut",
    )


LIMIT_LABELS = ("max_turns", "max_tokens", "length", "truncated", "token_limit", "turn_limit")


def _termination_shares(ctx: Context) -> list[tuple[str, Series]]:
    """Share of episodes per update that ended at a limit, per limit label."""
    names = ctx.data.names("rollout/termination_reason/")
    if not names:
        return []
    cols: dict[str, Series] = {}
    for n in names:
        s = ctx.finite(n)
        if s is not None:
            cols[n] = s
    if not cols:
        return []
    steps = np.unique(np.concatenate([s.steps for s in cols.values()]))
    total = np.zeros(len(steps))
    for s in cols.values():
        total[np.searchsorted(steps, s.steps)] += s.values
    out = []
    for n, s in cols.items():
        label = n.rsplit("/", 1)[-1]
        if label not in LIMIT_LABELS:
            continue
        num = np.zeros(len(steps))
        num[np.searchsorted(steps, s.steps)] = s.values
        ok = total > 0
        out.append((n, Series(steps[ok], num[ok] / total[ok])))
    return out


def _reward_flat_since(ctx: Context, step: int) -> tuple[bool, str | None, float | None]:
    """Whether the reward stayed flat from ``step`` on: no significant rising trend since,
    and its last five updates not above its five-update mean at ``step`` by a change beyond
    noise (``Context.reward_margin``): a rise too short for its trend to be significant is
    still a rise."""
    rname, r = ctx.series("reward/mean_with_unusable", "reward/mean")
    if r is None:
        return True, None, None
    seg = r.since(step)
    tr = trend(seg) if len(seg) >= MIN_WINDOW else None
    i = int(np.searchsorted(r.steps, step))
    at = float(r.values[max(0, i - MIN_WINDOW + 1) : i + 1].mean())
    now = float(r.values[-MIN_WINDOW:].mean())
    rose = now > at + ctx.reward_margin(noise_sigma(r.values))
    flat = (tr is None or not tr.rising) and not rose
    return flat, rname, (round_sig(tr.slope) if tr else None)


def check(ctx: Context) -> list[Finding]:
    """Each limit's share read by its course (``_course``), or at once in a short log; one
    finding: the earliest limit reached, the others as its evidence; else a transient start."""
    hits: list[Finding] = []
    passed: list[Finding] = []
    for name, s, words in _candidates(ctx):
        if short_level(s.values, ctx.thresholds.of(EpisodesLines).room_level):
            hits.append(_short(ctx, name, s, words))
        elif len(s) >= MIN_WINDOW:
            found = _course(ctx, name, s, words)
            if found is not None:
                (passed if found.severity == "info" else hits).append(found)
    if not hits:
        return passed[:1]
    # One finding: the earliest limit reached, the others as evidence.
    hits.sort(key=lambda f: (f.first_step or 0, -(f.evidence.get("level") or 0)))
    top = hits[0]
    if len(hits) > 1:
        top.evidence["also"] = {
            f.metric: {"first_step": f.first_step, "level": f.evidence.get("level")}
            for f in hits[1:]
        }
    return [top]


def _candidates(ctx: Context) -> list[tuple[str, Series, str]]:
    """The shares of episodes at a limit the run logs: (metric, share per update, words)."""
    out: list[tuple[str, Series, str]] = []
    t = ctx.finite("response/truncated_rate")
    if t is not None:
        out.append(("response/truncated_rate", t, "hit the token limit"))
    for name, s in _termination_shares(ctx):
        out.append((name, s, f"ended at {name.rsplit('/', 1)[-1]}"))
    return out


def _short(ctx: Context, name: str, s: Series, words: str) -> Finding:
    """Fewer than five updates, every one mostly cut off: said at once."""
    level = float(s.values.mean())
    return finding(
        NAME,
        "warn",
        "out_of_room",
        f"{read_words(len(s))}: {level:.0%} of episodes {words}",
        metric=name,
        first_step=int(s.steps[0]),
        level=round_sig(level),
        most_line=ctx.thresholds.of(EpisodesLines).room_level,
        updates_read=len(s),
        values=[round_sig(float(x)) for x in s.values],
        action="Read a few truncated replies: a model that never stops (a new "
        "model, a missing end token) or a budget too small for the task. A "
        "transient start that falls away within a few updates is normal for a "
        "model learning to stop.",
    )


def _course(ctx: Context, name: str, s: Series, words: str) -> Finding | None:
    """Judged by its course: what matters is whether episodes are still cut off now. Most cut
    from the start and still: out of room from the start; a start where most are cut (a
    random-init model that has not learned to stop) that falls away is transient; else the
    spell that began later (``_later``), if it is not over."""
    th = ctx.thresholds.of(EpisodesLines)
    start = start_level(s.values, MIN_WINDOW)
    now = float(s.values[-MIN_WINDOW:].mean())
    from_start = start >= th.room_level
    if from_start and now < th.room_level:
        return _transient(ctx, name, s, words, start, now)
    climbing, creep_line = False, None
    if from_start:
        idx = 0
    else:
        later = _later(ctx, s, start, now)
        if later is None:
            return None
        idx, climbing, creep_line = later
    flat, rname, slope = _reward_flat_since(ctx, int(s.steps[idx]))
    first = int(s.steps[idx])
    roll = rolling_mean(s.values)
    level = float(np.nanmax(roll)) if np.isfinite(roll).any() else float(s.values.mean())
    reward_words = f", while {rname or 'reward'} is flat" if flat else ""
    return finding(
        NAME,
        "warn",
        "out_of_room",
        f"running out of room: {level:.0%} of episodes {words} "
        f"({'from the start' if from_start else f'from step {first}, start {start:.0%}'}"
        f", {now:.0%} over the last {MIN_WINDOW}"
        + (", still climbing)" if climbing else ")")
        + reward_words,
        metric=name,
        first_step=first,
        start_level=round_sig(start),
        level=round_sig(level),
        last_level=round_sig(now),
        line=round_sig(start + th.room_rise),
        creep_line=round_sig(creep_line) if climbing and creep_line else None,
        most_line=th.room_level,
        reward_metric=rname,
        reward_flat=flat,
        reward_slope_since=slope,
        action="Raise the token or turn budget, or shape the reward for length "
        "(DAPO overlong shaping); read transcripts of truncated episodes for repetition "
        "loops.",
    )


def _transient(ctx: Context, name: str, s: Series, words: str, start: float, now: float) -> Finding:
    """Most episodes cut at the start, few now: the policy learned to finish in time."""
    drop = crossing(s.values, ctx.thresholds.of(EpisodesLines).room_level, above=False, points=True)
    return finding(
        NAME,
        "info",
        "out_of_room",
        f"a transient start: {start:.0%} of episodes {words} over the first "
        f"{MIN_WINDOW} updates, {now:.0%} over the last {MIN_WINDOW}",
        metric=name,
        first_step=int(s.steps[0]),
        last_step=int(s.steps[drop]) if drop is not None else None,
        start_level=round_sig(start),
        level=round_sig(now),
        most_line=ctx.thresholds.of(EpisodesLines).room_level,
        action="Nothing to do: the policy learned to finish within the budget.",
    )


def _later(ctx: Context, s: Series, start: float, now: float) -> tuple[int, bool, float] | None:
    """Where a spell at a limit that began after a healthy start began, whether the share is
    still climbing, and the creep line; None when there is none or it is over. The start is
    the median of the first five updates; three points past the line after them are enough
    (the lines are far from noise), so a live run is judged from its eighth update."""
    th = ctx.thresholds.of(EpisodesLines)
    n = len(s)
    if n < MIN_WINDOW + 3:
        return None  # not yet
    # Still climbing over the last third of the run: the budget binds more every update, and
    # a smaller level is enough (room_creep), and at least half that over the run's own
    # start.
    late = trend(s.since(int(s.steps[n - max(2 * MIN_WINDOW, n // 3)])))
    climbing = late is not None and late.rising
    creep_line = max(th.room_creep, start + th.room_creep / 2)
    line = start + th.room_rise
    if now < min(line, th.room_level) and not (climbing and now >= creep_line):
        return None  # the spell is over
    rise = crossing(s.values, line, points=True)
    most = crossing(s.values, th.room_level, points=True)
    if most is None:
        # Under most episodes, a rise past the line, or past the creep line while the share
        # still climbs, counts only while the reward stays flat (the Loops seed: a rising
        # truncated rate with a flat reward; longer answers that pay off are learning, not a
        # budget problem).
        creep = crossing(s.values, creep_line, points=True) if climbing else None
        rise, creep = (
            None if i is None or not _reward_flat_since(ctx, int(s.steps[i]))[0] else i
            for i in (rise, creep)
        )
        if rise is None and creep is None:
            return None
        return min(i for i in (rise, creep) if i is not None), climbing, creep_line
    # Most episodes cut off at a limit: a problem whatever the reward does, dated from where
    # the share first crept past the creep line.
    creep = crossing(s.values, creep_line, points=True)
    return min(i for i in (rise, most, creep) if i is not None), climbing, creep_line


@fact
def cut_from_start(ctx: Context) -> bool:
    """True when most episodes hit a limit from the run's first updates and still do (what
    this check warns as out of room from the start). For the components check: replies cut
    before they can finish leave the task out of reach, and a format or length component is
    what can still be learned: the budget is the cause, that rise its consequence."""
    return any(
        f.severity == "warn"
        and f.verdict == "out_of_room"
        and (f.evidence.get("start_level") or 0.0) >= ctx.thresholds.of(EpisodesLines).room_level
        for f in check(ctx)
    )
