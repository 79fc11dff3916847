"""Metric series as JSON and as terminal tables (``rlvitals metrics``)."""

from __future__ import annotations

import difflib
import math
from typing import IO

import numpy as np

from .. import safe
from ..errors import UsageError
from ..jsonio import dumps
from ..model import RunData

__all__ = ["fmt_value", "metrics_json", "metrics_text", "select_metrics"]


def select_metrics(
    data: RunData, wanted: list[str], *, include_original: bool = False
) -> list[str]:
    """The metric names to show: ``wanted`` (a trailing ``/`` selects a prefix) or all."""
    names = data.names()
    if not wanted:
        return [n for n in names if include_original or data.is_canonical(n)]
    out: list[str] = []
    for w in wanted:
        if w.endswith("/"):
            hits = [n for n in names if n.startswith(w)]
        else:
            hits = [w] if w in names else []
        if not hits:
            close = difflib.get_close_matches(w, names, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UsageError(f"metric {w!r} is not in {data.source}{hint}")
        out.extend(h for h in hits if h not in out)
    return out


def metrics_json(data: RunData, wanted: list[str], *, include_original: bool = False) -> str:
    """``{"steps": [...], "metrics": {name: [...]}}`` with null where not measured.

    A value measured as NaN or infinite is written as the string ``"NaN"``/``"Infinity"`` (as
    in our files), so it stays distinct from null.
    """
    names = select_metrics(data, wanted, include_original=include_original)
    steps = data.steps()
    metrics: dict[str, list[float | str | None]] = {}
    for name in names:
        col: list[float | str | None] = [None] * len(steps)
        s = data.series(name)
        if s is not None and len(s):
            for i, v in zip(np.searchsorted(steps, s.steps).tolist(), s.values.tolist()):
                col[i] = v  # non-finite become strings in dumps()
        metrics[name] = col
    return safe.json_for_terminal(dumps({"steps": steps.tolist(), "metrics": metrics}))


def fmt_value(v: float | None) -> str:
    """A number as a person reads it: 4 significant digits, NaN and inf spelled out."""
    if v is None:
        return "-"
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "0"
    if v == int(v) and abs(v) < 1e9:
        return str(int(v))
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.3e}"
    return f"{v:.4g}"


def metrics_text(
    data: RunData,
    wanted: list[str],
    *,
    include_original: bool = False,
    file: IO[str],
    width: int | None = None,
) -> None:
    """A table: steps down, metrics across when a few are asked for; else one row a metric."""
    from rich.table import Table
    from rich.text import Text  # names and paths come from the run: never read as markup

    from .console import plain_console

    names = select_metrics(data, wanted, include_original=include_original)
    console = plain_console(file, width=width or 120)
    if wanted and len(names) <= 8:
        steps = data.steps()
        table = Table(box=None, pad_edge=False)
        table.add_column("step", justify="right")
        for n in names:
            table.add_column(Text(safe.line(n)), justify="right")
        for step in steps.tolist():
            row = []
            for n in names:
                s = data.series(n)
                row.append(fmt_value(s.at(step)) if s is not None else "-")
            table.add_row(str(step), *row)
        console.print(table)
        return
    table = Table(box=None, pad_edge=False, title=Text(safe.line(f"{data.source} ({data.format})")))
    for col, justify in (
        ("metric", "left"),
        ("steps", "right"),
        ("first", "right"),
        ("last", "right"),
        ("last value", "right"),
        ("mean last 5", "right"),
        ("min", "right"),
        ("max", "right"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for n in names:
        s = data.series(n)
        if s is None or not len(s):
            continue
        fin = s.values[np.isfinite(s.values)]
        tail = s.values[-5:]
        table.add_row(
            Text(safe.line(n)),
            str(len(s)),
            str(int(s.steps[0])),
            str(int(s.steps[-1])),
            fmt_value(float(s.values[-1])),
            fmt_value(float(np.mean(tail))),
            fmt_value(float(fin.min())) if len(fin) else "-",
            fmt_value(float(fin.max())) if len(fin) else "-",
        )
    console.print(table)
