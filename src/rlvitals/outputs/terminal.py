"""``rlvitals watch``'s terminal, an output: what a followed run's updates show in a terminal.

``TerminalOutput`` turns each update into the events line mode prints (one line per step
reached and per finding, or JSON Lines with ``--json``; ``line``) and draws the rich live view
(``panel``) from the run's state only, with the status and failures of the other outputs it
is shown beside (a webhook's). The loop that polls the run and redraws is the follow stage's
(``rlvitals.follow.watch``).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import safe
from ..checks.base import VERDICTS, Finding, Report, severity_rank
from ..jsonio import dumps
from ..model import RunData
from ..schema import key_metrics
from ..views.series import fmt_value
from . import Output, Update, describe

__all__ = ["KEY_METRICS", "Event", "TerminalOutput", "sanitize"]

# The numbers the live view shows, in the seeds' reading order, with short labels: the
# metrics schema.py marks ``key=True``.
KEY_METRICS: tuple[tuple[str, str], ...] = key_metrics()

SEV_STYLE = {"ok": "green", "info": "blue", "warn": "yellow", "fail": "bold red"}


@dataclass
class Event:
    """Something a line-mode watch prints: a step reached, a finding, liveness, the end."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


class TerminalOutput(Output):
    """``watch``'s terminal, an ``Output``: turns each update of the run into the events line
    mode prints (``take``), and draws the rich live view (``panel``) and the lines (``line``)
    from the run's state only. ``shown`` are the other outputs whose status and failures it
    tells (a webhook's).
    """

    def __init__(
        self, path: str, *, clock: Callable[[], float] = time.time, shown: Iterable[Output] = ()
    ) -> None:
        self.path = path
        self.clock = clock
        self.shown = list(shown)
        self.run: Any = None  # the Follower, from ``open``
        self.alerted: list[tuple[Finding, str | None]] = []
        self._events: list[Event] = []
        self._liveness = ""
        self._was_waiting = False
        self._failures_told: dict[int, int] = {}

    def open(self, run: Any) -> None:
        self.run = run

    def update(self, run: Any, update: Update) -> None:
        self.run = run
        self._events += self._changes(update)

    def take(self) -> list[Event]:
        """The events since the last call, oldest first."""
        out, self._events = self._events, []
        return out

    def _changes(self, up: Update) -> list[Event]:
        events: list[Event] = []
        if up.waiting:
            if not self._was_waiting:
                self._was_waiting = True
                events.append(Event("waiting", {"path": self.path}))
            return events
        if self._was_waiting:
            self._was_waiting = False
            events.append(Event("appeared", {"path": self.path}))
        if up.reset:
            self._liveness = ""
            events.append(Event("reset", {"path": self.path}))
        if up.new_step is not None:
            events.append(Event("step", {"step": up.new_step, "metrics": self.key_numbers()}))
        for f, before in up.new_findings:
            self.alerted.append((f, before))
            events.append(Event("finding", {**f.to_dict(), "previous_severity": before}))
        events += self.alert_failures()
        state, words = self.liveness()
        if state != self._liveness:
            self._liveness = state
            events.append(Event("liveness", {"state": state, "text": words}))
        return events

    def alert_failures(self) -> list[Event]:
        """One event for each alert an output gave up on since the last call."""
        events = []
        for out in self.shown:
            got = out.undelivered()
            told = self._failures_told.get(id(out), 0)
            if len(got) <= told:
                continue
            self._failures_told[id(out)] = len(got)
            target = describe(out)
            events += [
                Event("alert_failed", {"target": target, "title": title, "reason": why})
                for title, why in got[told:]
            ]
        return events

    @property
    def data(self) -> RunData:
        return self.run.data if self.run is not None else RunData(source=self.path, format="")

    @property
    def report(self) -> Report | None:
        return self.run.report if self.run is not None else None

    @property
    def name(self) -> str:
        return str(self.data.info.get("name") or os.path.basename(self.path.rstrip("/")))

    @property
    def status(self) -> str | None:
        return self.run.status if self.run is not None else None

    @property
    def finished(self) -> bool:
        return bool(self.run is not None and self.run.finished)

    @property
    def check_error(self) -> str | None:
        return self.run.check_error if self.run is not None else None

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
        if not parts and self.data.last_step is not None:
            parts.append(f"step {self.data.last_step} read (this log records no times)")
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
        # The slow-phase finding: liveness says "learning" with the heartbeat's age.
        if any(f.verdict == "learning" and "seconds_since_heartbeat" in f.evidence for f in live):
            return "slow", "slow phase, still making progress: " + words
        if last is None and self.data.last_step is None:
            return "starting", words
        return "progress", words

    def exit_code(self, fail_on: str | None) -> int:
        """1 when the report has a finding at ``fail_on`` or worse, else 0 (as ``check``); 2
        when the run could not be judged at all (the checks failed), so a gate never passes
        a run nobody judged."""
        if self.report is None and self.check_error is not None:
            return 2
        if fail_on is None or self.report is None:
            return 0
        return 1 if severity_rank(self.report.worst) >= severity_rank(fail_on) else 0

    def panel(self) -> Any:
        """The rich live view."""
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        if self.run is None or self.run.waiting:
            body = Text(safe.line(f"waiting for {self.path} to appear (Ctrl-C to stop)"))
            return Panel(body, title=Text(safe.line(f"rlvitals watch · {self.name}")), expand=False)
        step = self.data.last_step
        head = Text()
        head.append(f"step {step}" if step is not None else "no steps yet", style="bold")
        head.append(sanitize(f"   {self.status or 'status unknown'}"))
        state, words = self.liveness()
        style = {"stalled": "bold red", "slow": "yellow", "finished": "cyan"}.get(state, "green")
        live = Text(sanitize(words), style=style)
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
            line.append(safe.line(f" {f.check}: "))
            line.append(sanitize(f.title))
            if f.first_step is not None:
                line.append(f" (step {f.first_step})", style="dim")
            parts.append(line)
        if len(shown) > 8:
            parts.append(Text(f"  … and {len(shown) - 8} more", style="dim"))
        for out in self.shown:
            told = out.status_line()
            if told:
                parts.append(Text(safe.line(told), style="dim"))
            failures = out.undelivered()
            if failures:
                what, why = failures[-1]
                parts.append(
                    Text(safe.line(f"last alert not delivered: {what}: {why}"), style="yellow")
                )
        title = Text(sanitize(f"rlvitals watch · {self.name}"))
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
            if at and at.strip() in str(d.get("title", "")):
                at = ""  # the title says it already
            return f"{d['severity'].upper()}{was} {d['check']}: {d['title']}{at}"
        if event.kind == "liveness":
            return f"liveness: {d['text']}"
        if event.kind == "alert_failed":
            return f"alert not delivered to {d['target']}: {d['title']}: {d['reason']}"
        if event.kind == "waiting":
            return f"waiting for {d['path']} to appear (Ctrl-C to stop)"
        if event.kind == "appeared":
            return f"{d['path']} appeared; following it"
        if event.kind == "reset":
            return f"{d['path']} was recreated; following the new run from its start"
        return f"{event.kind}: {dumps(d)}"


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def sanitize(text: str) -> str:
    """Run text for a terminal or a log: one line, control characters made visible
    (``safe.line``: escape sequences in a title could otherwise retitle or clear the
    terminal)."""
    return safe.line(text)
