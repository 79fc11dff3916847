"""``rlvitals watch RUN``: follow a live run in the terminal, alert on new findings.

Each tick reads only the bytes the run wrote since the last one (the reader is incremental),
re-judges the run when something changed (and now and then when nothing did: liveness changes
with the clock), posts each new finding once to the webhook from a background thread, and
redraws. On a terminal it is a rich live view; elsewhere (CI logs, pipes) it prints one line
per step reached and per finding, or JSON Lines with ``--json``. It ends when the run's status
in run.json is no longer ``running``, with the exit code ``rlvitals check --fail-on`` gives.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from ..checks.base import VERDICTS, Finding, Report, severity_rank
from ..jsonio import dumps
from ..model import RunData
from ..schema import key_metrics
from .alerts import AlertTracker, WebhookNotifier, alert_for, finding_key
from .series import fmt_value

__all__ = ["KEY_METRICS", "Watcher", "watch"]

# The numbers the live view shows, in the seeds' reading order, with short labels: the
# metrics schema.py marks ``key=True``.
KEY_METRICS: tuple[tuple[str, str], ...] = key_metrics()

SEV_STYLE = {"ok": "green", "info": "blue", "warn": "yellow", "fail": "bold red"}


@dataclass
class Event:
    """Something a line-mode watch prints: a step reached, a finding, liveness, the end."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


class Watcher:
    """Follows one run: poll, judge, alert. Drawing is separate (``panel``, ``line``).

    Args:
        path: the run (any format rlvitals reads).
        source_format: overrides sniffing.
        mapping: a user mapping file (``--mapping``), ahead of the format's own table.
        run: the run of a tracker store holding several (``--run``).
        stall_after: seconds without a step record or progress that make the run stalled
            (default: the checks' own, ten typical step intervals).
        baseline: healthy ranges for the checks (``rlvitals.baseline.load``).
        notifier: where new findings go (a ``WebhookNotifier``), or None.
        min_alert: the lowest severity posted (default ``warn``).
        clock: the wall clock (tests pass a fake one).
        check_interval: seconds between judgements while data arrives.
        idle_check: seconds between judgements while nothing arrives.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        source_format: str | None = None,
        mapping: str | os.PathLike[str] | None = None,
        run: str | None = None,
        stall_after: float | None = None,
        baseline: dict[str, Any] | None = None,
        notifier: WebhookNotifier | None = None,
        min_alert: str = "warn",
        clock: Callable[[], float] = time.time,
        check_interval: float = 1.0,
        idle_check: float = 5.0,
        judge: Callable[[RunData, float], Report] | None = None,
    ) -> None:
        from ..readers import open_reader

        self.reader = open_reader(path, source_format, mapping=mapping, run=run)
        self.path = os.fspath(path)
        self.stall_after = stall_after
        self.baseline = baseline
        self.notifier = notifier
        self.tracker = AlertTracker(min_alert)
        self.clock = clock
        self.check_interval = check_interval
        self.idle_check = idle_check
        self._judge = judge
        self.report: Report | None = None
        self.alerted: list[tuple[Finding, str | None]] = []
        self._last_judged = -math.inf
        self._judge_cost = 0.0
        self._dirty = True
        self._last_step_seen: int | None = None
        self._liveness = ""

    @property
    def data(self) -> RunData:
        return self.reader.run

    @property
    def name(self) -> str:
        return str(self.data.info.get("name") or os.path.basename(self.path.rstrip("/")))

    @property
    def status(self) -> str | None:
        s = self.data.info.get("status")
        return str(s) if s is not None else None

    @property
    def finished(self) -> bool:
        """The run's status says it ended (finished, stopped, crashed)."""
        return self.status not in (None, "running")

    def judge(self, now: float) -> Report:
        if self._judge is not None:
            return self._judge(self.data, now)
        from ..checks import run_checks

        return run_checks(self.data, baseline=self.baseline, now=now, stall_after=self.stall_after)

    def tick(self, *, force: bool = False) -> list[Event]:
        """Read what is new, judge if due, queue alerts; the events line mode prints."""
        events: list[Event] = []
        if self.reader.poll():
            self._dirty = True
        now = self.clock()
        step = self.data.last_step
        if step is not None and step != self._last_step_seen:
            self._last_step_seen = step
            events.append(Event("step", {"step": step, "metrics": self.key_numbers()}))
        since = now - self._last_judged
        wait = self.check_interval if self._dirty else self.idle_check
        if force or self.finished or since >= max(wait, 5 * self._judge_cost):
            t0 = time.perf_counter()
            self.report = self.judge(now)
            self._judge_cost = time.perf_counter() - t0
            self._last_judged = now
            self._dirty = False
            events += self._alerts(self.report)
        state = self.liveness()[0]
        if state != self._liveness:
            self._liveness = state
            events.append(Event("liveness", {"state": state, "text": self.liveness()[1]}))
        return events

    def _alerts(self, report: Report) -> list[Event]:
        current = {finding_key(f) for f in report.findings if severity_rank(f.severity) >= 2}
        # A stall that ended (the run moved on) may come back: the next one is news again.
        for key in list(self.tracker.sent):
            if key[0] == "liveness" and key[1] == "stalled" and key not in current:
                self.tracker.forget(key)
        events = []
        for f, before in self.tracker.new(report.findings):
            self.alerted.append((f, before))
            if self.notifier is not None:
                self.notifier.send(alert_for(f, run=self.name, source=self.path, previous=before))
            events.append(Event("finding", {**f.to_dict(), "previous_severity": before}))
        return events

    # -- what to show ----------------------------------------------------------------------

    def key_numbers(self) -> dict[str, tuple[float, float]]:
        """metric -> (last value, mean of the last five finite values)."""
        out = {}
        for name, _ in KEY_METRICS:
            s = self.data.series(name)
            if s is None or not len(s):
                continue
            tail = s.values[-5:]
            fin = tail[np.isfinite(tail)]
            out[name] = (float(s.values[-1]), float(fin.mean()) if len(fin) else math.nan)
        return out

    def liveness(self) -> tuple[str, str]:
        """(state, words): ``finished``, ``starting``, ``progress``, ``slow`` or ``stalled``."""
        now = self.clock()
        t = self.data.series("time")
        last = float(t.values[-1]) if t is not None and len(t) else None
        hb = self.data.heartbeats[-1] if self.data.heartbeats else None
        hb_time = hb.get("time") if hb else None
        parts = []
        if last is not None:
            parts.append(f"last step record {_ago(now - last)}")
        if isinstance(hb_time, (int, float)) and (last is None or hb_time > last):
            what = f"{hb.get('phase') or 'working'} on step {hb.get('step')}"  # type: ignore[union-attr]
            done, need = hb.get("attempts_done"), hb.get("attempts_needed")  # type: ignore[union-attr]
            if need:
                what += f", {done}/{need} attempts"
            parts.append(f"heartbeat {_ago(now - hb_time)}: {what}")
        words = "; ".join(parts) or "no step record yet"
        if self.finished:
            return "finished", f"run {self.status}" + (
                f" ({self.data.info.get('stop_reason')})"
                if self.data.info.get("stop_reason")
                else ""
            )
        live = [f for f in (self.report.findings if self.report else []) if f.check == "liveness"]
        if any(f.verdict == "stalled" and f.severity == "fail" for f in live):
            return "stalled", "STALLED: " + words
        if any(f.title.startswith("slow phase") for f in live):
            return "slow", "slow phase, still making progress: " + words
        if last is None:
            return "starting", words
        return "progress", words

    def exit_code(self, fail_on: str | None) -> int:
        """1 when the report has a finding at ``fail_on`` or worse, else 0 (as ``check``)."""
        if fail_on is None or self.report is None:
            return 0
        return 1 if severity_rank(self.report.worst) >= severity_rank(fail_on) else 0

    def panel(self) -> Any:
        """The rich live view."""
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        step = self.data.last_step
        head = Text()
        head.append(f"step {step}" if step is not None else "no steps yet", style="bold")
        head.append(_sanitize(f"   {self.status or 'status unknown'}"))
        state, words = self.liveness()
        style = {"stalled": "bold red", "slow": "yellow", "finished": "cyan"}.get(state, "green")
        live = Text(_sanitize(words), style=style)
        nums = Table.grid(padding=(0, 2))
        nums.add_column(style="dim")
        nums.add_column(justify="right")
        nums.add_column(justify="right", style="dim")
        labels = dict(KEY_METRICS)
        for name, (last, mean5) in self.key_numbers().items():
            nums.add_row(labels[name], fmt_value(last), f"5-step mean {fmt_value(mean5)}")
        verdict = Text("verdict: ")
        if self.report is None:
            verdict.append("not judged yet", style="dim")
        else:
            verdict.append(VERDICTS.get(self.report.verdict, self.report.verdict), style="bold")
            verdict.append(f" ({self.report.worst})", style=SEV_STYLE[self.report.worst])
        parts: list[Any] = [head, live, nums, verdict]
        shown = [f for f in (self.report.findings if self.report else []) if f.severity != "ok"]
        for f in shown[:8]:
            line = Text("  ")
            line.append(f"{f.severity.upper():<4}", style=SEV_STYLE[f.severity])
            line.append(f" {f.check}: ")
            line.append(_sanitize(f.title))
            if f.first_step is not None:
                line.append(f" (step {f.first_step})", style="dim")
            parts.append(line)
        if len(shown) > 8:
            parts.append(Text(f"  … and {len(shown) - 8} more", style="dim"))
        if self.notifier is not None:
            n = self.notifier
            parts.append(
                Text(
                    f"alerts to {n.target}: {n.delivered} delivered, {n.pending} pending"
                    + (f", {n.dropped} dropped" if n.dropped else ""),
                    style="dim",
                )
            )
        title = Text(_sanitize(f"rlvitals watch · {self.name}"))
        return Panel(Group(*parts), title=title, expand=False)

    def line(self, event: Event) -> str:
        """One plain line for an event (line mode)."""
        d = event.data
        if event.kind == "step":
            nums = " ".join(
                f"{dict(KEY_METRICS)[k]}={fmt_value(v[0])}" for k, v in d["metrics"].items()
            )
            verdict = VERDICTS.get(self.report.verdict, "") if self.report else "not judged"
            return f"step {d['step']}: {nums} | {verdict}"
        if event.kind == "finding":
            was = f" (was {d['previous_severity']})" if d.get("previous_severity") else ""
            at = f" from step {d['first_step']}" if d.get("first_step") is not None else ""
            return f"{d['severity'].upper()}{was} {d['check']}: {d['title']}{at}"
        if event.kind == "liveness":
            return f"liveness: {d['text']}"
        return f"{event.kind}: {dumps(d)}"


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _sanitize(text: str) -> str:
    """Run text for a terminal or a log: one line, no control characters (escape sequences
    in a finding's title could otherwise retitle or clear the user's terminal)."""
    return "".join(c if c.isprintable() else " " if c in "\t\n\r" else "?" for c in str(text))


def watch(
    watcher: Watcher,
    *,
    console: Any,
    interval: float = 1.0,
    fail_on: str | None = "fail",
    json_lines: bool = False,
    out: IO[str] | None = None,
    flush_timeout: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Follow the run until its status leaves ``running``; returns the exit code."""
    interactive = console.is_terminal and not json_lines

    def emit(ev: Event) -> None:
        if json_lines:
            assert out is not None
            out.write(dumps({"event": ev.kind, **ev.data}) + "\n")
            out.flush()
        elif not interactive:
            console.print(
                _sanitize(watcher.line(ev)), markup=False, highlight=False, soft_wrap=True
            )

    interrupted = False
    try:
        if interactive:
            from rich.live import Live

            with Live(watcher.panel(), console=console, refresh_per_second=4) as live:
                while True:
                    watcher.tick()
                    live.update(watcher.panel())
                    if watcher.finished:
                        break
                    sleep(interval)
                watcher.tick(force=True)
                live.update(watcher.panel())
        else:
            while True:
                for ev in watcher.tick():
                    emit(ev)
                if watcher.finished:
                    break
                sleep(interval)
            for ev in watcher.tick(force=True):
                emit(ev)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        undelivered = 0
        if watcher.notifier is not None:
            undelivered = watcher.notifier.close(
                min(2.0, flush_timeout) if interrupted else flush_timeout
            )
    code = watcher.exit_code(fail_on)
    report = watcher.report
    end = {
        "status": watcher.status,
        "verdict": report.verdict if report else None,
        "worst": report.worst if report else None,
        "exit_code": code,
        "alerts_undelivered": undelivered,
    }
    if json_lines:
        emit(Event("finished", end))
    else:
        verdict = VERDICTS.get(report.verdict, "") if report else "not judged"
        msg = f"run {watcher.status}: {verdict} (worst {end['worst']}); exit {code}"
        if undelivered:
            msg += f"; {undelivered} alert(s) not delivered"
        console.print(_sanitize(msg), markup=False, highlight=False, soft_wrap=True)
    return code
