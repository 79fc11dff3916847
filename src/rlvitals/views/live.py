"""What the trainer's live view draws: the run's key numbers, the verdict so far, the end.

``RunTally`` keeps what the reference trainer's events (``warm_check``, ``warm_done``,
``step``, ``eval``, ``stall``, ``stopped``) said; ``intro``, ``numbers`` and ``findings`` draw
the live view's parts (the console, ``outputs.console.LiveView``, puts them under its progress
bars): the warm start, a small table of the numbers a person watches (reward and its 5-update
mean, learning signal, held-out score, sampler/trainer mismatch, entropy, truncation,
failures) and the verdict so far. ``summary`` renders the end: reward over the first and last
five updates, how many held-out evaluations and the last (the held-out change is the check's,
printed below it: one pair on the screen).

Rendering is deterministic for a given Console width, so tests render into a string.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group
from rich.markup import escape as _markup_escape
from rich.table import Table
from rich.text import Text

from .. import safe
from ..schema import label

# The reward the live view and the summary follow: every graded attempt's. The trained
# groups' (reward/mean) leaves out the groups every attempt solved, so it stays near the middle
# as the policy learns; it is the fallback for a record without the other.
REWARD = "reward/mean_with_unusable"


def _reward_key(record: Mapping[str, Any]) -> str:
    return REWARD if _num(record, REWARD) is not None else "reward/mean"


def escape(text: str) -> str:
    """Run text for a rich markup string: controls made visible, then markup escaped."""
    return _markup_escape(safe.line(text))


__all__ = ["RunTally", "findings", "fmt", "intro", "numbers", "summary", "warm_source"]


def fmt(x: float | None, spec: str = ".3f") -> str:
    """A number for the view (``-`` when missing, non-finite ones as their words)."""
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


def warm_missed(steps: int, rate: float, target: float | None) -> str:
    """The line that says a warm start gave up below its target (GRPO will find little to
    learn from: most groups score all zeros)."""
    goal = f" of its target {target:.2f}" if target is not None else ""
    return (
        f"warm start gave up after {steps} steps at pass rate {rate:.2f}{goal}: most groups "
        "will score all zeros and GRPO has little to learn from; raise [optim] warm_max_steps "
        "or make the tasks easier ([task] digits)"
    )


class RunTally:
    """What the live view and the summary need, accumulated from the events."""

    def __init__(self, steps: int, title: str = "", *, started: float | None = None) -> None:
        self.steps = steps
        self.title = title
        self.started = time.perf_counter() if started is None else started
        self.warm_step = 0
        self.warm_rate: float | None = None
        self.warm_cached: bool | None = None
        self.rewards: list[float] = []
        self.last: dict[str, Any] = {}
        self.evals: list[tuple[int, float]] = []
        self.note: str | None = None
        self.warm_target: float | None = None
        self.warm_greedy: float | None = None
        self.cache: str | None = None
        self.warm_shipped = False
        self.run_dir: str | None = None

    def event(self, kind: str, data: Mapping[str, Any]) -> None:
        if kind == "warm_begin":
            self.warm_cached = bool(data.get("cached"))
            self.warm_shipped = bool(data.get("shipped"))
            target = data.get("target")
            self.warm_target = float(target) if target is not None else None
            self.cache = str(data.get("cache") or "")
        elif kind == "warm_step":
            self.warm_step, self.warm_greedy = int(data["step"]), float(data["greedy"])
        elif kind == "run":
            self.run_dir = str(data["run_dir"])
        elif kind == "warm_check":
            self.warm_step, self.warm_rate = int(data["step"]), float(data["pass_rate"])
        elif kind == "warm_done":
            self.warm_cached = bool(data["cached"])
            self.warm_rate = float(data["pass_rate"])
            self.warm_step = int(data["steps"])
            if data.get("reached_target") is False:
                self.note = warm_missed(self.warm_step, self.warm_rate, self.warm_target)
        elif kind == "step":
            self.last = dict(data)
            r = _num(data, _reward_key(data))
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


def warm_source(t: RunTally) -> str:
    """Where a warm start that was not trained now came from, in a word."""
    return "shipped" if t.warm_shipped else "cached"


def intro(t: RunTally) -> Text:
    """What the demo is doing, before the numbers mean anything."""
    target = fmt(t.warm_target, ".0%") if t.warm_target is not None else "enough"
    if t.warm_shipped:
        warm = (
            "Warm start: loaded, shipped with rlvitals (trained once for these settings and "
            "this seed, so GRPO starts at once)."
        )
    elif t.warm_cached:
        where = f" in {t.cache}" if t.cache else ""
        warm = f"Warm start: loaded from the cache{where} (trained once for this seed)."
    else:
        where = f" in {t.cache}" if t.cache else ""
        warm = (
            f"Warm start: supervised training of a tiny transformer on additions until it "
            f"solves {target} of them, so GRPO has a signal; once per seed, then cached{where} "
            "(about 15-60 s on two cores)."
        )
    return Text(
        f"{warm}\nThen {t.steps} GRPO updates on the CPU, judged live by rlvitals' checks.",
        style="dim",
    )


def findings(report: Any, limit: int = 5) -> Group:
    """The verdict so far and the findings behind it (what ``rlvitals check`` would say)."""
    from ..checks.base import VERDICTS

    style = {"ok": "green", "info": "cyan", "warn": "yellow", "fail": "bold red"}
    head = Text("verdict so far: ", style="bold")
    head.append(VERDICTS.get(report.verdict, report.verdict), style=style[report.worst])
    lines: list[Any] = [head]
    shown = [f for f in report.findings if f.severity != "ok" or f.verdict == "learning"]
    shown.sort(key=lambda f: -("ok", "info", "warn", "fail").index(f.severity))
    for f in shown[:limit]:
        line = Text("  ")
        line.append(f"{f.severity.upper():<4}", style=style[f.severity])
        line.append(safe.line(f" {f.check}: {f.title}"))
        if f.first_step is not None:
            line.append(f" (step {f.first_step})", style="dim")
        lines.append(line)
    if len(shown) > limit:
        lines.append(Text(f"  … and {len(shown) - limit} more", style="dim"))
    return Group(*lines)


def numbers(t: RunTally) -> Table:
    """The key numbers of the latest update, as a two-column table."""
    rec = t.last
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="dim")
    table.add_column(justify="right")
    table.add_column(style="dim")
    table.add_column(justify="right")
    held = f"{t.evals[-1][1]:.2f} (update {t.evals[-1][0]})" if t.evals else "-"
    # Attempts dropped as stale (older than the run allows) did not fail: counted apart.
    failed = stale = 0.0
    for k, v in rec.items():
        if k.startswith("discard/rollouts/") and isinstance(v, (int, float)):
            if k == "discard/rollouts/stale":
                stale += float(v)
            else:
                failed += float(v)
    shown = _reward_key(rec)
    rows = [
        (
            label(shown),
            fmt(_num(rec, shown)),
            "reward, last 5",
            fmt(t.last5() if t.done >= 5 else None),
        ),
        (
            label("reward/group_std_mean"),
            fmt(_num(rec, "reward/group_std_mean")),
            "held-out",
            held,
        ),
        (
            label("train/mismatch_kl"),
            fmt(_num(rec, "train/mismatch_kl"), ".1e"),
            label("freshness/lag_mean"),
            fmt(_num(rec, "freshness/lag_mean"), ".1f"),
        ),
        (
            label("sampling/entropy_estimate"),
            fmt(_num(rec, "sampling/entropy_estimate")),
            label("response/truncated_rate"),
            fmt(_num(rec, "response/truncated_rate"), ".2f"),
        ),
        (
            label("discard/groups/no_variance"),
            fmt(_num(rec, "discard/groups/no_variance"), ".0f"),
            "failed attempts",
            f"{failed:.0f}" + (f" (+{stale:.0f} dropped stale)" if stale else ""),
        ),
        (
            label("train/loss"),
            fmt(_num(rec, "train/loss"), ".4f"),
            label("perf/step_seconds"),
            fmt(_num(rec, "perf/step_seconds"), ".2f"),
        ),
    ]
    for row in rows:
        table.add_row(*row)
    if t.note:
        table.add_row(Text(escape(t.note), style="yellow"), "", "", "")
    return table


def summary(t: RunTally, run_dir: str, *, fault: str | None = None) -> Table:
    """The end of a run: where it is, reward first/last 5 updates, held-out evaluations."""
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("run", escape(run_dir))
    if fault:
        table.add_row("fault", escape(fault))
    table.add_row("updates", str(t.done))
    table.add_row(
        "reward",
        f"{fmt(t.first5())} (mean of the first 5 updates) -> {fmt(t.last5())} (of the last 5)",
    )
    if t.evals:  # the change is the held-out check's (below): one pair on the screen
        last = t.evals[-1]
        table.add_row(
            "held-out",
            f"{len(t.evals)} evaluation(s), the last {last[1]:.3f} (update {last[0]})",
        )
    table.add_row(
        "",
        Text(
            "the checks below compare windows of their own (their lines say which), with "
            "every update and eval in",
            style="dim",
        ),
    )
    table.add_row("wall time", f"{time.perf_counter() - t.started:.1f} s")
    if t.note:
        table.add_row("note", escape(t.note))
    return table


def fault_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """``rlvitals demo --list-faults``: each fault, its default onset, what it does and shows."""
    table = Table(title=escape("faults (--fault NAME[@STEP])"), title_justify="left")
    # Every cell wraps, and a word longer than its column (``discard/rollouts/stale``) folds
    # onto the next line: at any terminal width the whole text shows, nothing ends in "…".
    table.add_column("fault", style="bold", overflow="fold")
    table.add_column("from update", justify="right", overflow="fold")
    table.add_column("what it does", overflow="fold", ratio=1)
    table.add_column("where it shows", overflow="fold", ratio=1)
    for r in rows:
        table.add_row(
            escape(str(r["name"])),
            str(r["default_step"]),
            escape(str(r["does"])),
            escape(str(r["shows"])),
        )
    return table


def next_steps(run_dir: str, *, command: str = "demo", fault: str | None = None) -> list[str]:
    """What to try after a run, with its real paths (each line pastes as it is)."""
    import os
    import shlex

    run = shlex.quote(run_dir)
    parent = shlex.quote(os.path.dirname(run_dir.rstrip("/")) or ".")
    lines = [
        f"rlvitals report {run} -o report.html   # the same judgement as one page: plots, "
        "findings, transcripts",
        f"rlvitals serve {parent}   # a live dashboard of every run under {parent}",
    ]
    if fault:
        lines.insert(0, f"rlvitals transcripts {run}   # what the policy wrote, flags marked")
        if command == "demo":
            lines.append("rlvitals demo   # a healthy run, for comparison")
    elif command == "demo":
        lines.append(
            "rlvitals demo --fault grader_exploit   # a run that games its grader: "
            "see it caught (rlvitals demo --list-faults for the rest)"
        )
    lines.append(
        "rlvitals check path/to/your/run   # your own run: verl, TRL, OpenRLHF and more "
        "(rlvitals formats)"
    )
    return lines
