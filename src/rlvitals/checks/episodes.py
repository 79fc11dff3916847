"""4. Episode metrics: why episodes end.

A rising share of episodes ending at the turn limit (``rollout/termination_reason/max_turns``)
or the token limit (``response/truncated_rate``) while reward stays flat means the agent is
running out of room, not learning the task.
"""

from __future__ import annotations

import numpy as np

from ..model import Series
from .base import Finding
from .context import Context, finding, round_sig
from .stats import MIN_WINDOW, crossing, rolling_mean, start_level, trend

NAME = "episodes"

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
    rname, r = ctx.series("reward/mean_with_unusable", "reward/mean")
    if r is None:
        return True, None, None
    seg = r.since(step)
    tr = trend(seg) if len(seg) >= MIN_WINDOW else None
    return (tr is None or not tr.rising), rname, (round_sig(tr.slope) if tr else None)


def check(ctx: Context) -> list[Finding]:
    th = ctx.thresholds
    candidates: list[tuple[str, Series, str]] = []
    t = ctx.finite("response/truncated_rate")
    if t is not None:
        candidates.append(("response/truncated_rate", t, "hit the token limit"))
    for name, s in _termination_shares(ctx):
        candidates.append((name, s, f"ended at {name.rsplit('/', 1)[-1]}"))
    hits: list[Finding] = []
    for name, s, words in candidates:
        # The start is the median of the first five updates; three points past the line
        # after them are enough (the lines are far from noise), so a live run is judged from
        # its eighth update.
        if len(s) < MIN_WINDOW + 3:
            continue
        start = start_level(s.values, MIN_WINDOW)
        roll = rolling_mean(s.values)
        line = start + th.room_rise
        rise = crossing(s.values, line, points=True)
        most = crossing(s.values, th.room_level, points=True)
        from_start = start >= th.room_level
        if most is None and not from_start:
            # A smaller rise counts only while reward stays flat: longer answers that pay
            # off are learning, not a budget problem.
            if rise is None:
                continue
            flat, rname, slope = _reward_flat_since(ctx, int(s.steps[rise]))
            if not flat:
                continue
            idx = rise
        else:
            # Most episodes cut off at a limit: a problem whatever the reward does.
            idx = 0 if from_start else min(i for i in (rise, most) if i is not None)
            flat, rname, slope = _reward_flat_since(ctx, int(s.steps[idx]))
        first = int(s.steps[idx])
        level = float(np.nanmax(roll)) if np.isfinite(roll).any() else float(s.values.mean())
        reward_words = f", while {rname or 'reward'} is flat" if flat else ""
        hits.append(
            finding(
                NAME,
                "warn",
                "out_of_room",
                f"running out of room: {level:.0%} of episodes {words} "
                f"({'from the start' if from_start else f'from step {first}, start {start:.0%}'})"
                + reward_words,
                metric=name,
                first_step=first,
                start_level=round_sig(start),
                level=round_sig(level),
                line=round_sig(line),
                most_line=th.room_level,
                reward_metric=rname,
                reward_flat=flat,
                reward_slope_since=slope,
                action="Raise the token or turn budget, or shape the reward for length "
                "(DAPO overlong shaping); read transcripts of truncated episodes for repetition "
                "loops.",
            )
        )
    if not hits:
        return []
    # One finding: the earliest limit reached, the others as evidence.
    hits.sort(key=lambda f: (f.first_step or 0, -(f.evidence.get("level") or 0)))
    top = hits[0]
    if len(hits) > 1:
        top.evidence["also"] = {
            f.metric: {"first_step": f.first_step, "level": f.evidence.get("level")}
            for f in hits[1:]
        }
    return [top]
