"""Live terminal view of a training run: a progress bar and the run's key numbers.

``LiveView`` takes the reference trainer's events (``warm_check``, ``warm_done``, ``step``,
``eval``, ``stall``, ``stopped``) and redraws: the warm start, a bar over the updates, and a
small table of the numbers a person watches (reward and its 5-update mean, learning signal,
held-out score, sampler/trainer mismatch, entropy, truncation, failures). ``summary`` renders
the end: reward over the first and last five updates, held-out first and last.

Rendering is deterministic for a given Console width, so tests render into a string.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ..schema import label

__all__ = ["LiveView", "RunTally", "summary"]


def _fmt(x: float | None, spec: str = ".3f") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return format(x, spec)


def _num(record: Mapping[str, Any], key: str) -> float | None:
    v = record.get(key)
    if v is None:
        return None
    if isinstance(v, str):  # the writer's spelling of non-finite numbers
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(v)
    return float(v)


def _mean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return sum(xs) / len(xs) if xs else None


class RunTally:
    """What the live view and the summary need, accumulated from the events."""

    def __init__(self, steps: int, title: str = "", *, started: float | None = None) -> None:
        self.steps = steps
        self.title = title
        self.started = time.perf_counter() if started is None else started
        self.warm_step = 0
        self.warm_rate: float | None = None
        self.warm_cached: bool | None = None
        self.warm_seconds: float | None = None
        self.rewards: list[float] = []
        self.last: dict[str, Any] = {}
        self.evals: list[tuple[int, float]] = []
        self.note: str | None = None

    def event(self, kind: str, data: Mapping[str, Any]) -> None:
        if kind == "warm_check":
            self.warm_step, self.warm_rate = int(data["step"]), float(data["pass_rate"])
        elif kind == "warm_done":
            self.warm_cached = bool(data["cached"])
            self.warm_rate = float(data["pass_rate"])
            self.warm_step = int(data["steps"])
            self.warm_seconds = float(data["seconds"])
        elif kind == "step":
            self.last = dict(data)
            r = _num(data, "reward/mean")
            self.rewards.append(math.nan if r is None else r)
        elif kind == "eval":
            self.evals.append((int(data["step"]), float(data["score"])))
        elif kind == "stall":
            self.note = f"update {data['step']}: no progress, waiting {data['seconds']:g} s"
        elif kind == "stopped":
            self.note = f"stopped: {data['reason']}"

    @property
    def done(self) -> int:
        return len(self.rewards)

    def first5(self) -> float | None:
        return _mean(self.rewards[:5])

    def last5(self) -> float | None:
        return _mean(self.rewards[-5:]) if len(self.rewards) >= 5 else None


class LiveView:
    """A rich Live display driven by trainer events; use as a context manager."""

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
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
        )
        self._warm = self.progress.add_task("warm start", total=None)
        self._train = self.progress.add_task("updates", total=steps, visible=False, start=False)
        self._live = Live(
            self._render(), console=self.console, refresh_per_second=4, transient=False
        )

    def __enter__(self) -> LiveView:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._live.update(self._render())
        self._live.__exit__(*exc)

    def event(self, kind: str, data: Mapping[str, Any]) -> None:
        self.tally.event(kind, data)
        t = self.tally
        if kind == "warm_check":
            self.progress.update(
                self._warm,
                description=f"warm start (pass rate {_fmt(t.warm_rate, '.2f')})",
                completed=t.warm_step,
            )
        elif kind == "warm_done":
            how = "cached" if t.warm_cached else f"{t.warm_step} steps"
            self.progress.update(
                self._warm,
                description=f"warm start ({how}, pass rate {_fmt(t.warm_rate, '.2f')})",
                total=1,
                completed=1,
            )
            self.progress.update(self._train, visible=True)
            self.progress.start_task(self._train)
        elif kind == "step":
            self.progress.update(self._train, completed=t.done)
        self._live.update(self._render())

    def _render(self) -> Group:
        return Group(self.progress, numbers(self.tally))


def numbers(t: RunTally) -> Table:
    """The key numbers of the latest update, as a two-column table."""
    rec = t.last
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="dim")
    table.add_column(justify="right")
    table.add_column(style="dim")
    table.add_column(justify="right")
    held = f"{t.evals[-1][1]:.2f} (update {t.evals[-1][0]})" if t.evals else "-"
    failed = sum(
        float(v)
        for k, v in rec.items()
        if k.startswith("discard/rollouts/") and isinstance(v, (int, float))
    )
    rows = [
        (
            label("reward/mean"),
            _fmt(_num(rec, "reward/mean")),
            "reward, last 5",
            _fmt(t.last5() if t.done >= 5 else None),
        ),
        (
            label("reward/group_std_mean"),
            _fmt(_num(rec, "reward/group_std_mean")),
            "held-out",
            held,
        ),
        (
            label("train/mismatch_kl"),
            _fmt(_num(rec, "train/mismatch_kl"), ".1e"),
            label("freshness/lag_mean"),
            _fmt(_num(rec, "freshness/lag_mean"), ".1f"),
        ),
        (
            label("sampling/entropy_estimate"),
            _fmt(_num(rec, "sampling/entropy_estimate")),
            label("response/truncated_rate"),
            _fmt(_num(rec, "response/truncated_rate"), ".2f"),
        ),
        (
            label("discard/groups/no_variance"),
            _fmt(_num(rec, "discard/groups/no_variance"), ".0f"),
            "failed attempts",
            f"{failed:.0f}",
        ),
        (
            label("train/loss"),
            _fmt(_num(rec, "train/loss"), ".4f"),
            label("perf/step_seconds"),
            _fmt(_num(rec, "perf/step_seconds"), ".2f"),
        ),
    ]
    for row in rows:
        table.add_row(*row)
    if t.note:
        table.add_row(Text(escape(t.note), style="yellow"), "", "", "")
    return table


def summary(t: RunTally, run_dir: str, *, fault: str | None = None) -> Table:
    """The end of a run: where it is, reward first/last 5 updates, held-out first/last."""
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("run", escape(run_dir))
    if fault:
        table.add_row("fault", escape(fault))
    table.add_row("updates", str(t.done))
    table.add_row("reward", f"{_fmt(t.first5())} (first 5 updates) -> {_fmt(t.last5())} (last 5)")
    if t.evals:
        first, last = t.evals[0], t.evals[-1]
        table.add_row(
            "held-out", f"{first[1]:.3f} (update {first[0]}) -> {last[1]:.3f} (update {last[0]})"
        )
    table.add_row("wall time", f"{time.perf_counter() - t.started:.1f} s")
    if t.note:
        table.add_row("note", escape(t.note))
    return table


def fault_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """``rlvitals demo --list-faults``: each fault, its default onset, what it does and shows."""
    table = Table(title="faults (--fault NAME[@STEP])", title_justify="left")
    table.add_column("fault", style="bold")
    table.add_column("from update", justify="right")
    table.add_column("what it does")
    table.add_column("where it shows")
    for r in rows:
        table.add_row(
            escape(str(r["name"])),
            str(r["default_step"]),
            escape(str(r["does"])),
            escape(str(r["shows"])),
        )
    return table
