"""A fleet of runs in the terminal (one line a run, then a summary sorted by severity) and as
JSON (``{"runs": [...]}``, the same shape for one run or many); query results as a table."""

from __future__ import annotations

from collections import Counter
from typing import IO, Any

from .. import safe
from ..checks.base import VERDICTS
from ..jsonio import dumps

__all__ = ["fleet_json", "render_outcome_line", "render_query", "render_summary"]

_MARK = {"ok": "ok", "info": "info", "warn": "WARN", "fail": "FAIL", "error": "ERROR"}
_STYLE = {"ok": "green", "info": "cyan", "warn": "yellow", "fail": "bold red", "error": "red"}


def _headline(report: dict[str, Any]) -> str:
    """The worst finding's check and title (the reason for the verdict)."""
    worst = report.get("worst", "ok")
    for f in report.get("findings", []):
        if f.get("severity") == worst and worst in ("warn", "fail", "info"):
            step = "" if f.get("first_step") is None else f" step {f['first_step']}"
            return f"{f['check']}{step}: {f['title']}"
    return ""


def _line(o: Any, width: int) -> tuple[str, str, str, str]:
    if o.report is None:
        return ("ERROR", safe.line(o.path), "unreadable", safe.line(o.error))
    r = o.report
    verdict = VERDICTS.get(r["verdict"], r["verdict"]).upper()
    steps = r.get("info", {}).get("steps", 0)
    why = _headline(r)
    text = f"{steps} steps" + (f"  {why}" if why else "")
    return (_MARK[o.worst], safe.line(o.path), verdict, safe.line(text)[: max(20, width)])


def render_outcome_line(
    o: Any, file: IO[str], *, width: int = 100, color: bool | None = None
) -> None:
    """One line for one run: severity, path, verdict, the worst finding."""
    from rich.text import Text

    from .console import plain_console

    console = plain_console(file, width=None, color=color)
    mark, path, verdict, text = _line(o, width)
    line = Text()
    line.append(f"{mark:<5} ", style=_STYLE[o.worst])
    line.append(path, style="bold")
    line.append(f"  {verdict}  ", style=_STYLE[o.worst])
    line.append(text, style="dim")
    console.print(line, soft_wrap=True, overflow="ignore", crop=False)


def render_summary(outcomes: list[Any], file: IO[str], *, color: bool | None = None) -> None:
    """How many runs at each severity and verdict, the worst first, with the runs named."""
    from rich.table import Table
    from rich.text import Text

    from .console import plain_console

    console = plain_console(file, width=None if file.isatty() else 120, color=color)
    by = Counter(
        (o.rank, o.worst, o.report["verdict"] if o.report else "unreadable") for o in outcomes
    )
    counts = Counter(o.worst for o in outcomes)
    order = ("fail", "warn", "info", "ok", "error")
    parts = [f"{counts[k]} {k if k != 'error' else 'unreadable'}" for k in order if counts[k]]
    console.print(Text(f"summary: {len(outcomes)} runs: " + ", ".join(parts), style="bold"))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column(overflow="fold")
    for (_rank, worst, verdict), n in sorted(by.items(), key=lambda kv: (-kv[0][0], -kv[1])):
        names = [
            safe.line(o.path)
            for o in outcomes
            if o.worst == worst and (o.report["verdict"] if o.report else "unreadable") == verdict
        ]
        shown = ", ".join(names[:5]) + (f", ... {len(names) - 5} more" if len(names) > 5 else "")
        label = "unreadable" if verdict == "unreadable" else VERDICTS.get(verdict, verdict)
        grid.add_row(
            Text(_MARK[worst], style=_STYLE[worst]), Text(label), str(n), Text(shown, style="dim")
        )
    console.print(grid)


def fleet_json(outcomes: list[Any]) -> str:
    """``{"runs": [...]}``: each run's path and report fields, or its path and error."""
    return safe.json_for_terminal(dumps({"runs": [o.to_dict() for o in outcomes]}, indent=2))


def render_query(result: Any, file: IO[str], *, color: bool | None = None) -> None:
    """A query's rows as a table (values are run text: shown as plain, escaped text)."""
    from rich.table import Table

    from .console import plain_console

    console = plain_console(file, width=None if file.isatty() else 200, color=color)
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for c in result.columns:
        table.add_column(safe.line(c), overflow="fold")
    for row in result.rows:
        table.add_row(*("" if v is None else safe.line(_fmt(v)) for v in row))
    console.print(table)
    console.print(f"{len(result.rows)} rows", style="dim")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)
