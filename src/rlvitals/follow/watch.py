"""``rlvitals watch RUN``: follow a live run in the terminal, alert on new findings.

Each tick reads only the bytes the run wrote since the last one (the reader is incremental),
re-judges the run when something changed (and now and then when nothing did: liveness changes
with the clock), hands each update to the outputs (a webhook posts each new finding once,
from a background thread) and redraws the terminal (``outputs.terminal.TerminalOutput``). On a
terminal it is a rich live view; elsewhere (CI logs, pipes) it prints one line per step
reached and per finding, or JSON Lines with ``--json``. It ends when the run's status in
run.json is no longer ``running``, with the exit code ``rlvitals check --fail-on`` gives.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import IO, Any

from .. import safe
from ..checks.base import VERDICTS, Report
from ..jsonio import dumps
from ..model import RunData
from ..outputs import Output
from ..outputs.terminal import Event, TerminalOutput, sanitize
from ..source import Source
from .fleet import Fleet
from .follower import Follower, Throttle

__all__ = ["Watcher", "watch"]


class Watcher:
    """Follows one run for the terminal: a ``Follower`` reads and judges and hands each
    update to the outputs: the ``TerminalOutput`` (``panel``, ``line``, the events ``tick``
    returns) and the others (a webhook).

    Args:
        source: the run (a ``Source``, or the path of any format rlvitals reads).
        judge: judges the run (a ``rlvitals.judge.Judge``; default: ``Judge()``).
        outputs: more outputs (``rlvitals.outputs.Output``) each update goes to.
        throttle: when to judge, the loop's pace, the clocks (default: ``THROTTLE``: the
            wall clock for both).
        min_alert: the lowest severity posted (default ``warn``).
        wait: a run that does not exist yet is waited for.
    """

    THROTTLE = Throttle(timer=time.time)

    def __init__(
        self,
        source: Source | str | os.PathLike[str],
        judge: Callable[[RunData, float], Report] | None = None,
        outputs: Iterable[Output] = (),
        throttle: Throttle | None = None,
        *,
        min_alert: str = "warn",
        wait: bool = False,
    ) -> None:
        if not isinstance(source, Source):
            source = Source(os.fspath(source))
        self.path = source.path
        self.throttle = throttle = throttle or self.THROTTLE
        others = list(outputs)
        self.terminal = TerminalOutput(self.path, clock=throttle.clock, shown=others)
        # The follow stage, one run as given: the one loop serve's fleet runs; the terminal
        # last, so it tells what the others did with the same update.
        self.follower = Follower(
            source, judge, [*others, self.terminal], throttle, min_alert=min_alert, wait=wait
        )
        self.fleet = Fleet([self.follower], throttle=throttle)
        self.terminal.run = self.follower

    def tick(self, *, force: bool = False) -> list[Event]:
        """Read what is new, judge if due, hand it to the outputs; the events line mode
        prints."""
        self.fleet.poll(force=force)
        return self.terminal.take()

    @property
    def data(self) -> RunData:
        return self.follower.data

    @property
    def report(self) -> Report | None:
        return self.follower.report

    @property
    def finished(self) -> bool:
        return self.follower.finished

    def close(self, timeout: float) -> int:
        """Close the outputs; how many alerts were not delivered."""
        return self.fleet.close(timeout)


def watch(
    watcher: Watcher,
    *,
    console: Any,
    fail_on: str | None = "fail",
    json_lines: bool = False,
    out: IO[str] | None = None,
    flush_timeout: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Follow the run until its status leaves ``running``, a tick every ``poll_s`` of the
    watcher's throttle; returns the exit code."""
    interactive = console.is_terminal and not json_lines
    term = watcher.terminal
    interval = watcher.throttle.poll_s

    def emit(ev: Event) -> None:
        if json_lines:
            assert out is not None
            out.write(safe.json_for_terminal(dumps({"event": ev.kind, **ev.data})) + "\n")
            out.flush()
        elif not interactive:
            console.print(sanitize(term.line(ev)), markup=False, highlight=False, soft_wrap=True)

    interrupted = False
    try:
        if interactive:
            from rich.live import Live

            with Live(term.panel(), console=console, refresh_per_second=4) as live:
                while True:
                    watcher.tick()
                    live.update(term.panel())
                    if watcher.finished:
                        break
                    sleep(interval)
                watcher.tick(force=True)
                live.update(term.panel())
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
        undelivered = watcher.close(min(2.0, flush_timeout) if interrupted else flush_timeout)
    for ev in term.alert_failures():  # those given up on while flushing
        if json_lines or not interactive:
            emit(ev)
        else:
            console.print(sanitize(term.line(ev)), markup=False, highlight=False)
    code = term.exit_code(fail_on)
    report = watcher.report
    end = {
        "status": term.status,
        "verdict": report.verdict if report else None,
        "worst": report.worst if report else None,
        "exit_code": code,
        "alerts_undelivered": undelivered,
    }
    if report is None and term.check_error:
        end["error"] = term.check_error
    if json_lines:
        emit(Event("finished", end))
    else:
        verdict = VERDICTS.get(report.verdict, "") if report else "not judged"
        if report is None and term.check_error:
            verdict += f" ({term.check_error})"
        msg = f"run {term.status}: {verdict} (worst {end['worst']}); exit {code}"
        if undelivered:
            msg += f"; {undelivered} alert(s) not delivered"
            failures = [f for o in term.shown for f in o.undelivered()]
            if failures:
                msg += f" (last: {failures[-1][1]})"
        console.print(sanitize(msg), markup=False, highlight=False, soft_wrap=True)
    return code
