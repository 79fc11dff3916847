"""The consoles: outputs that print a followed run's news in a terminal.

``FindingLines`` prints one line per new finding (the TRL callback's live log); ``LiveView`` is
the trainer's live console (``rlvitals demo``, ``rlvitals train``): progress bars and the key
numbers drawn from the trainer's events (``rlvitals.views.live``), and the verdict so far from
the run's follow stage. Run text is made safe for a terminal first (``rlvitals.safe``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from .. import safe
from ..views.live import RunTally, findings, fmt, intro, numbers, warm_source
from . import Output, Update

__all__ = ["FindingLines", "LiveView"]


class FindingLines(Output):
    """An ``Output`` that prints one line per new finding (``rlvitals: WARN check: title``),
    run text made safe for a terminal: the TRL callback's live log."""

    def __init__(self, stream: IO[str], prefix: str = "rlvitals: ") -> None:
        self.stream = stream
        self.prefix = prefix

    def update(self, run: Any, update: Any) -> None:
        for f, before in update.new_findings:
            was = f" (was {before})" if before else ""
            line = f"{f.severity.upper()}{was} {f.check}: {f.title}"
            print(self.prefix + safe.line(line), file=self.stream, flush=True)


class LiveView(Output):
    """The trainer's console: a rich Live display drawn from the trainer's events (``event``)
    and, as an output of the run's follow stage (``rlvitals.follow.train.TrainFollow``), the
    verdict and findings under the numbers; use as a context manager.
    """

    def __init__(
        self,
        steps: int,
        *,
        console: Console | None = None,
        title: str = "",
        started: float | None = None,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.tally = RunTally(steps, title, started=started)
        self.report: Any = None
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[count]}"),
            TimeElapsedColumn(),
            console=self.console,
        )
        self._warm = self.progress.add_task("warm start", total=None, count="")
        self._train = self.progress.add_task(
            "updates", total=steps, visible=False, start=False, count=f"0/{steps}"
        )
        self._live = Live(
            self._render(), console=self.console, refresh_per_second=4, transient=False
        )

    def __enter__(self) -> LiveView:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._live.update(self._render())
        self._live.__exit__(*exc)

    def update(self, run: Any, update: Update) -> None:
        """The follow stage's news: the report to show under the numbers."""
        if update.judged and run.report is not None:
            self.report = run.report
            self._live.update(self._render())

    def checks_off(self, why: str) -> None:
        """The live checks stopped (the follow stage failed): said under the numbers."""
        self.tally.note = f"live checks off: {why}"
        self._live.update(self._render())

    def event(self, kind: str, data: Mapping[str, Any]) -> None:
        self.tally.event(kind, data)
        t = self.tally
        if kind == "warm_begin":
            self.progress.update(
                self._warm,
                description=f"warm start ({warm_source(t)})" if t.warm_cached else "warm start",
            )
        elif kind == "warm_step":
            self.progress.update(
                self._warm,
                description=f"warm start, step {t.warm_step}",
                count=f"greedy solves {fmt(t.warm_greedy, '.0%')}",
            )
        elif kind == "warm_check":
            self.progress.update(
                self._warm,
                description=f"warm start, step {t.warm_step}",
                count=f"pass rate {fmt(t.warm_rate, '.2f')} of {fmt(t.warm_target, '.2f')}",
            )
        elif kind == "warm_done":
            how = warm_source(t) if t.warm_cached else f"{t.warm_step} steps"
            self.progress.update(
                self._warm,
                description=f"warm start ({how}, pass rate {fmt(t.warm_rate, '.2f')})",
                total=1,
                completed=1,
                count="done",
            )
            self.progress.update(self._train, visible=True)
            self.progress.start_task(self._train)
        elif kind == "step":
            self.progress.update(self._train, completed=t.done, count=f"{t.done}/{t.steps}")
        self._live.update(self._render())

    def _render(self) -> Group:
        parts: list[Any] = [intro(self.tally), self.progress, numbers(self.tally)]
        if self.report is not None:
            parts.append(findings(self.report))
        return Group(*parts)
