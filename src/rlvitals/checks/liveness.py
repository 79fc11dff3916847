"""0. Liveness: are step records arriving, is a slow phase still making progress, did it stop.

Updates can be minutes apart, and a slow phase looks like a stall without heartbeats; with
``progress.jsonl`` a phase that keeps reporting progress is slow, not stalled. What a console
log says between its step lines (``RunData.events``) is read too: a traceback after the last
step is a crash, 503s or refused connections that do not stop for minutes mean the rollout
engine died (bursts of a minute or less are healthy), no step line ten minutes after the log
began means the engine or the trainer never started.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..jsonio import to_float
from . import groups
from .base import Finding
from .context import Context, finding, round_sig
from .thresholds import line, lines

NAME = "liveness"


@lines
@dataclass(frozen=True)
class LivenessLines:
    """Where the liveness check draws its lines."""

    stall_intervals: float = line(
        10.0,
        "a running run with no step record for this many typical (p90) step intervals is stalled",
        "the Loops seed (a slow phase looks the same as a stall without heartbeats): ten "
        "typical intervals, past the spread of a run's own slow updates; `--stall-after` "
        "sets seconds",
    )
    stall_min_seconds: float = line(
        10.0,
        "... and at least this many seconds",
        "numerical guard: timer and scheduler jitter of a fast loop",
    )
    start_timeout_seconds: float = line(
        600.0,
        "no step record this long after the run's files last changed (or in the minutes a "
        "console log covers): it did not start",
        "the Miles seed: no step lines after ten minutes means the engine or the trainer did "
        "not start",
    )
    stuck_intervals: float = line(
        5.0,
        "heartbeats reporting the same phase and attempts done for this many typical steps: "
        "stalled without waiting for the clock",
        "the Loops seed (progress_every_seconds tells a slow phase from a stall): a heartbeat "
        "that stopped moving is direct evidence, so half the stall line",
    )
    stuck_min_seconds: float = line(
        2.0,
        "... and at least this many seconds",
        "numerical guard: timer and scheduler jitter of a fast loop",
    )
    engine_dead_seconds: float = line(
        120.0,
        "5xx / refused-connection lines going on this long mean the rollout engine died",
        "the Miles seed: 503 lines that do not stop for minutes; bursts of a minute or less "
        "come from a healthy engine",
    )
    engine_gap_seconds: float = line(
        60.0,
        "a gap longer than this between such lines ends a spell",
        "the Miles seed: a healthy engine's bursts last a minute or less",
    )
    old_silence_seconds: float = line(
        3600.0,
        "a log with no end state silent this long (and old_silence_steps typical steps): read "
        "after its run ended, said as information",
        "an hour: longer than the checkpointing and evaluation pauses the frameworks document "
        "(verl save_freq, TRL eval_steps)",
    )
    old_silence_steps: float = line(
        1000.0,
        "... and this many typical step intervals",
        "DESIGN.md (a file read after its run ended is no stall): three orders of magnitude "
        "past the run's own cadence",
    )


_GUARD_VERDICTS = {
    "max_consecutive_unusable_groups": ("no_signal", "rejected groups came in a row"),
    "max_consecutive_rollout_failures": ("infra_failures", "failed attempts came in a row"),
}


def _unusable_since(ctx: Context, default: int | None) -> int | None:
    """The first step of the final stretch of updates that trained no group."""
    t = ctx.finite("groups/trained")
    if t is None or not len(t):
        return default
    trained = np.flatnonzero(t.values > 0)
    if not len(trained):
        return int(t.steps[0])
    i = int(trained[-1]) + 1
    return int(t.steps[i]) if i < len(t) else default


def _trained_before(ctx: Context, step: int | None) -> bool:
    """Whether any group trained before ``step`` (the run had signal, then lost it)."""
    t = ctx.finite("groups/trained")
    if t is None or step is None:
        return False
    return bool((t.values[t.steps < step] > 0).any())


def _stuck_span(after: list[dict]) -> float:
    """Seconds the trailing heartbeats have reported the same phase and attempts done."""
    if len(after) < 2:
        return 0.0
    last = after[-1]
    key = (last.get("phase"), last.get("attempts_done"), last.get("step"))
    first = last
    for h in reversed(after):
        if (h.get("phase"), h.get("attempts_done"), h.get("step")) != key:
            break
        first = h
    t0, t1 = to_float(first.get("time")), to_float(last.get("time"))
    return (t1 - t0) if t0 is not None and t1 is not None else 0.0


def _writer_clock_behind(ctx: Context, last_time: float, now: float, limit: float) -> float | None:
    """How far the writer's clock is behind this machine's, when the run's own records say so:
    its step file (``steps.jsonl``, which holds only step records) was written within ``limit``
    seconds on this machine's clock, yet its last record's time is older than that by more than
    ``limit``. None otherwise, or when ``now`` is not this machine's clock (a replayed one)."""
    if abs(now - time.time()) > 5:
        return None
    source = ctx.data.source
    if not isinstance(source, str) or not os.path.isdir(source):
        return None
    try:
        written = os.path.getmtime(os.path.join(source, "steps.jsonl"))
    except OSError:
        return None
    if now - written <= limit and written - last_time > limit:
        return written - last_time
    return None


def _step_times(ctx: Context) -> tuple[np.ndarray, np.ndarray] | None:
    s = ctx.finite("time")
    if s is None or len(s) == 0:
        return None
    return s.steps, s.values


ENGINE_KINDS = ("http_5xx", "connection_refused")
CRASH_KINDS = ("traceback", "oom")


def _excerpt(text: str, width: int = 160) -> str:
    """The last non-empty line of an event's text (a traceback's exception), cut short."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= width else last[: width - 1] + "…"


def _events(ctx: Context, *, crashed: bool) -> list[Finding]:
    """What the console log says between the step lines (``RunData.events``): a traceback or
    out-of-memory after the last step (a crash), 5xx or refused connections that do not stop
    for minutes (the engine died), no step line ten minutes after the log began."""
    events = list(getattr(ctx.data, "events", None) or [])
    if not events:
        return []
    has_steps = ctx.finite("time") is not None or len(ctx.data.steps()) > 0
    # A crash: a traceback or OOM with no update after it.
    last_step = ctx.data.last_step
    tail = [e for e in events if e.kind in CRASH_KINDS and (e.step == last_step or not has_steps)]
    out = [] if crashed or not tail else [_crash_in_log(ctx, tail, has_steps)]
    out += _engine_down(ctx, events)
    if not has_steps and not tail:
        out += _log_without_steps(ctx, events)
    return out


def _crash_in_log(ctx: Context, tail: list[Any], has_steps: bool) -> Finding:
    """A traceback or out-of-memory in the log with no update after it: the run crashed."""
    e, last_step = tail[-1], ctx.data.last_step
    where = f"after step {last_step}" if has_steps else "before the first step"
    return finding(
        NAME,
        "fail",
        "crashed",
        f"the run crashed {where}: {_excerpt(e.text)}",
        first_step=last_step,
        event_kind=e.kind,
        event_time=e.time,
        source_file=str(e.source),
        source_line=e.line,
        events_after_last_step=len(tail),
        action="Read the traceback at that line of the log; fix it and restart from "
        "the last checkpoint.",
    )


def _engine_down(ctx: Context, events: list[Any]) -> list[Finding]:
    """5xx / refused connections in spells (gaps of at most ``engine_gap_seconds``) that go on
    for ``engine_dead_seconds`` or more: the rollout engine was down (updates resumed after
    it) or died."""
    th = ctx.thresholds.of(LivenessLines)
    eng = sorted(
        (e for e in events if e.kind in ENGINE_KINDS and e.time is not None),
        key=lambda e: e.time,
    )
    spells: list[list[Any]] = []
    for e in eng:
        if spells and e.time - spells[-1][-1].time <= th.engine_gap_seconds:
            spells[-1].append(e)
        else:
            spells.append([e])
    last_step = ctx.data.last_step
    out = []
    for sp in spells:
        span = float(sp[-1].time - sp[0].time)
        if span < th.engine_dead_seconds:
            continue
        recovered = sp[-1].step is not None and last_step is not None and sp[-1].step < last_step
        out.append(
            finding(
                NAME,
                "warn" if recovered else "fail",
                "infra_failures" if recovered else "stalled",
                f"the rollout engine {'was down' if recovered else 'died'}: {len(sp)} "
                f"{sp[0].kind.replace('_', ' ')} lines over {span / 60:.1f} minutes"
                + (f" from after step {sp[0].step}" if sp[0].step is not None else "")
                + (", then updates resumed" if recovered else ", and they do not stop")
                + f": {_excerpt(sp[0].text, 100)}",
                first_step=None if sp[0].step is None else int(sp[0].step) + 1,
                seconds=round_sig(span),
                lines=len(sp),
                line=th.engine_dead_seconds,
                first_time=sp[0].time,
                last_time=sp[-1].time,
                source_file=str(sp[0].source),
                source_line=sp[0].line,
                action="Bursts of a minute or less come from a healthy engine; errors that "
                "go on for minutes mean the inference engine is down: read its own log (out "
                "of memory, a crashed worker), restart it, and make the rollout side retry "
                "with backoff.",
            )
        )
    return out


def _log_without_steps(ctx: Context, events: list[Any]) -> list[Finding]:
    """Never started: no step line although the log went on for ten minutes."""
    timed = [e.time for e in events if e.time is not None]
    if not timed:
        return []
    span = max(timed) - min(timed)
    if span < ctx.thresholds.of(LivenessLines).start_timeout_seconds:
        return []
    return [
        finding(
            NAME,
            "fail",
            "stalled",
            f"no step line in the {span / 60:.0f} minutes the log covers: the engine or "
            "the trainer did not start",
            log_seconds=round_sig(span),
            line=ctx.thresholds.of(LivenessLines).start_timeout_seconds,
            events=len(events),
            action="Check that the engine and trainer processes started (their logs, "
            "GPU use); a run with no step lines after ten minutes is not starting.",
        )
    ]


def check(ctx: Context) -> list[Finding]:
    """The run's end state, what its log says, its pauses, and, while it runs, whether the
    silence since its last step record is a slow phase or a stall."""
    status = ctx.status
    out = _end_state(ctx)
    events = _events(ctx, crashed=status == "crashed")
    out.extend(events)
    # A crash or a dead engine read from the log ends the question of a stall.
    ended = any(f.verdict in ("crashed", "stalled") and f.severity == "fail" for f in events)
    running = status in (None, "running") and not ended
    clock = _clock(ctx)
    if clock is None:
        return out + (_not_started(ctx) if running and status == "running" else [])
    out += _pauses(clock)
    if running:
        out += _silence(ctx, clock)
    return out


def _end_state(ctx: Context) -> list[Finding]:
    """The end state the run recorded: crashed, or stopped by a guard (the cause of a stop for
    unusable groups read from their discards: ``groups.cause``)."""
    status, reason, last_step = ctx.status, ctx.data.info.get("stop_reason"), ctx.data.last_step
    if status == "crashed":
        return [
            finding(
                NAME,
                "fail",
                "crashed",
                f"the run crashed: {reason or 'no reason recorded'}",
                first_step=last_step,
                status=status,
                stop_reason=reason,
                action="Read the exception and the log around the last step; fix it and "
                "restart from the last checkpoint.",
            )
        ]
    if status != "stopped":
        return []
    verdict, what = _GUARD_VERDICTS.get(str(reason), ("stalled", "a guard tripped"))
    first = last_step
    if reason == "max_consecutive_unusable_groups":
        first = _unusable_since(ctx, last_step)
        verdict, what = groups.cause(ctx, verdict, what, later=_trained_before(ctx, first))
    mastered = verdict == "mastered"  # the guard ended a run that had done its job
    return [
        finding(
            NAME,
            "info" if mastered else "fail",
            verdict,
            f"a guard stopped the run: {reason} ({what})",
            first_step=first,
            status=status,
            stop_reason=reason,
            guard=reason,
            action="Nothing went wrong: the tasks are solved; add harder ones to go on."
            if mastered
            else "See the findings below for why; the guard saved the rest of the budget.",
        )
    ]


def _not_started(ctx: Context) -> list[Finding]:
    """A running run with no step record this long after its files last changed."""
    now = ctx.current_time()
    last_write = ctx.last_write_time()
    age = None if last_write is None else now - last_write
    if age is None or not age > ctx.thresholds.of(LivenessLines).start_timeout_seconds:
        return []
    return [
        finding(
            NAME,
            "fail",
            "stalled",
            f"no step record in {age / 60:.0f} minutes: the trainer or the sampler did not start",
            seconds_since_last_write=round(age, 1),
            created=ctx.data.info.get("created_time"),
            action="Check that the engine and trainer processes started (their logs, "
            "GPU use); a run with no step lines after ten minutes is not starting.",
        )
    ]


@dataclass
class Clock:
    """The run's step records in time: when each came, the typical (p90) interval between
    them, and the silence after which a running run is stalled."""

    steps: np.ndarray
    times: np.ndarray
    intervals: np.ndarray  # the finite, non-negative gaps between step records
    typical: float  # NaN with fewer than two step records
    limit: float


def _clock(ctx: Context) -> Clock | None:
    times = _step_times(ctx)
    if times is None:
        return None
    th = ctx.thresholds.of(LivenessLines)
    steps, t = times
    intervals = np.diff(t)
    intervals = intervals[np.isfinite(intervals) & (intervals >= 0)]
    typical = float(np.percentile(intervals, 90)) if len(intervals) else math.nan
    if ctx.stall_after is not None:
        limit = ctx.stall_after
    elif math.isfinite(typical):
        limit = max(th.stall_intervals * typical, th.stall_min_seconds)
    else:
        limit = max(th.start_timeout_seconds, th.stall_min_seconds)
    return Clock(steps, t, intervals, typical, limit)


def _pauses(c: Clock) -> list[Finding]:
    """Long pauses inside the run (it resumed afterwards): worth knowing, not an alarm."""
    if len(c.intervals) < 5 or not math.isfinite(c.typical):
        return []
    gaps = np.diff(c.times)
    return [
        finding(
            NAME,
            "info",
            "stalled",
            f"a pause of {gaps[i]:.0f} s before step {int(c.steps[i + 1])} "
            f"(typical step {c.typical:.2f} s); the run resumed",
            first_step=int(c.steps[i + 1]),
            metric="perf/step_seconds",
            pause_seconds=round_sig(float(gaps[i])),
            typical_step_seconds=round_sig(c.typical),
            action="If it repeats, look for a slow phase (evaluation, checkpointing, "
            "weight sync) or a stuck worker.",
        )
        for i in np.flatnonzero(gaps > max(c.limit, 1e-9))[:3]
    ]


# 2000-01-01 in unix seconds: a step time before it is an elapsed time, not a date.
# source: numerical guard (no run logged before 2000; elapsed seconds stay far under it)
WALL_CLOCK_FLOOR = 946_684_800.0


@dataclass
class Silence:
    """The time since the last step record of a running run, and what heartbeats say of it."""

    now: float
    gap: float  # seconds since the last step record
    after: list[dict]  # heartbeats since it
    hb_gap: float  # seconds since the last heartbeat after it (inf: none)
    any_heartbeats: bool
    progressing: bool  # the heartbeats since it changed phase or counted attempts up


def _silence(ctx: Context, c: Clock) -> list[Finding]:
    """A running run's silence since its last step record, read the first way that holds:
    heartbeats stuck (stalled), within the limit (nothing), the writer's clock behind this
    machine's (not a stall), heartbeats progressing (a slow phase), else stalled. Step times
    before 2000, judged at a date after it, count from the run's start (prime-rl's ``time``),
    not the wall clock: the silence since them cannot be told, and nothing is said of it."""
    last_time = float(c.times[-1])
    if last_time < WALL_CLOCK_FLOOR <= ctx.current_time():
        return []
    hb_times = np.array(
        [t for t in (to_float(h.get("time")) for h in ctx.data.heartbeats) if t is not None]
    )
    after = [h for h in ctx.data.heartbeats if (to_float(h.get("time")) or 0) > last_time]
    recent_hb = hb_times[hb_times > last_time] if len(hb_times) else hb_times
    progressing = False
    if len(after) >= 2:
        done = [to_float(h.get("attempts_done")) for h in after]
        phases = {str(h.get("phase")) for h in after}
        numeric = [d for d in done if d is not None]
        progressing = len(phases) > 1 or (len(numeric) >= 2 and numeric[-1] > numeric[0])
    now = ctx.current_time()
    s = Silence(
        now=now,
        gap=now - last_time,
        after=after,
        hb_gap=now - float(recent_hb.max()) if len(recent_hb) else math.inf,
        any_heartbeats=bool(len(hb_times)),
        progressing=progressing,
    )
    stuck = _stuck(ctx, c, s)
    if stuck is not None:
        return [stuck]
    if s.gap <= c.limit:
        return []
    for read in (_clock_behind, _slow_phase, _stalled):
        found = read(ctx, c, s)
        if found is not None:
            return [found]
    return []


def _stuck(ctx: Context, c: Clock, s: Silence) -> Finding | None:
    """Heartbeats reporting the same phase and attempts done for ``stuck_intervals`` typical
    steps (and ``stuck_min_seconds``): stalled, without waiting for the clock."""
    th = ctx.thresholds.of(LivenessLines)
    stuck = _stuck_span(s.after)
    stuck_limit = max(th.stuck_intervals * c.typical, th.stuck_min_seconds)
    if not math.isfinite(c.typical) or not stuck >= stuck_limit:
        return None
    last_hb = s.after[-1]
    return finding(
        NAME,
        "fail",
        "stalled",
        f"stalled: heartbeats report no progress for {stuck:.0f} s after step "
        f"{int(c.steps[-1])} ({last_hb.get('phase')}, {last_hb.get('attempts_done')} of "
        f"{last_hb.get('attempts_needed')} attempts); a typical step takes "
        f"{c.typical:.2f} s",
        first_step=int(c.steps[-1]) + 1,
        metric="perf/step_seconds",
        stuck_seconds=round_sig(stuck),
        limit_seconds=round_sig(stuck_limit),
        typical_step_seconds=round_sig(c.typical),
        phase=last_hb.get("phase"),
        attempts_done=last_hb.get("attempts_done"),
        action="Something the update waits for is hung: look at the rollout workers and "
        "the engine (a stuck sandbox, a dead engine answering 503, a deadlock in weight "
        "sync).",
    )


def _clock_behind(ctx: Context, c: Clock, s: Silence) -> Finding | None:
    """The silence is the writer's clock running behind this machine's: not a stall."""
    behind = _writer_clock_behind(ctx, float(c.times[-1]), s.now, c.limit)
    if behind is None:
        return None
    return finding(
        NAME,
        "info",
        "learning",
        f"the writer's clock is about {behind:.0f} s behind this machine's: its last step "
        f"record says {s.gap:.0f} s ago, but steps.jsonl was written within the last "
        f"{c.limit:.0f} s; not a stall",
        writer_clock_behind_seconds=round_sig(behind),
        action="Nothing wrong with the run; sync the clocks (NTP) of the training "
        "node and this machine to read times across them.",
    )


def _slow_phase(ctx: Context, c: Clock, s: Silence) -> Finding | None:
    """Recent heartbeats that show progress between updates: a slow phase, not a stall."""
    if not (s.hb_gap <= c.limit and s.progressing):
        return None
    last_hb = ctx.data.heartbeats[-1]
    return finding(
        NAME,
        "info",
        "learning",
        f"slow phase: no step record for {s.gap:.0f} s, but heartbeats show progress "
        f"({last_hb.get('phase')}, {last_hb.get('attempts_done')} attempts done)",
        first_step=int(c.steps[-1]) + 1,
        seconds_since_step=round(s.gap, 1),
        seconds_since_heartbeat=round(s.hb_gap, 1),
        limit_seconds=round_sig(c.limit),
        action="Nothing yet; it is making progress between updates.",
    )


_STALL_ACTION = (
    "Look at the rollout workers and the engine: a hung sandbox, a dead engine (503s that "
    "do not stop), a deadlock in weight sync. Set [output] progress_every_seconds so a slow "
    "phase can be told from a stall."
)


def _stalled(ctx: Context, c: Clock, s: Silence) -> Finding | None:
    """No step record past the limit and nothing that says progress: stalled. A format that
    records no end state (an rlwatch store, a bare JSONL log) looks the same stalled and
    finished: said one severity lower, with both readings; and once the silence is far past
    any stall a live reader would have caught (``old_silence_seconds``, and a thousand
    typical steps), as information: a file read long after its run."""
    why = (
        "heartbeats continue but show no progress"
        if s.hb_gap <= c.limit
        else "no heartbeat either"
        if s.any_heartbeats
        else "and the run writes no heartbeats"
    )
    unknown = ctx.status is None
    old_file = unknown and s.gap > max(
        ctx.thresholds.of(LivenessLines).old_silence_seconds,
        ctx.thresholds.of(LivenessLines).old_silence_steps * c.typical,
    )
    return finding(
        NAME,
        "info" if old_file else "warn" if unknown else "fail",
        "stalled",
        f"{'stalled or ended' if unknown else 'stalled'}: no step record for {s.gap:.0f} s "
        f"after step {int(c.steps[-1])} ({why}); "
        + (
            f"a typical step takes {c.typical:.2f} s"
            if math.isfinite(c.typical)
            else "one step record, so no typical step time"
        )
        + (f" ({ctx.data.format} records no end state)" if unknown else ""),
        first_step=int(c.steps[-1]) + 1,
        metric="perf/step_seconds",
        seconds_since_step=round(s.gap, 1),
        seconds_since_heartbeat=None if math.isinf(s.hb_gap) else round(s.hb_gap, 1),
        limit_seconds=round_sig(c.limit),
        typical_step_seconds=round_sig(c.typical) if math.isfinite(c.typical) else None,
        end_state_recorded=not unknown,
        action=(
            "If the run ended, nothing is wrong. If it still runs: "
            + _STALL_ACTION[0].lower()
            + _STALL_ACTION[1:]
            if unknown
            else _STALL_ACTION
        ),
    )
