"""A Report as text (terminal), JSON or Markdown. Run text is untrusted: it is shown as plain
text in the terminal (never as rich markup, every control character made visible by
``safe.line``) and escaped in Markdown (``safe.markdown``)."""

from __future__ import annotations

import math
import re
import shlex
from typing import IO, Any

from .. import safe
from ..checks.base import VERDICTS, Finding, Report
from ..jsonio import dumps

__all__ = ["render_json", "render_markdown", "render_text"]

_STYLE = {"ok": "green", "info": "cyan", "warn": "yellow", "fail": "bold red"}
_MARK = {"ok": "ok", "info": "info", "warn": "WARN", "fail": "FAIL"}


_RUN_WORD = re.compile(r"\bRUN\b")


def action_for(f: Finding, source: str) -> str:
    """The finding's next step with the placeholder ``RUN`` replaced by the run's path (quoted
    for a shell when it needs it), so the command can be pasted as it is."""
    action = f.action or ""
    if not source or "RUN" not in action:
        return action
    return _RUN_WORD.sub(lambda _m: shlex.quote(source), action)


# An evidence key that holds a z-score (trend_z, late_trend_z, trend_z_since, ...).
_Z_KEY = re.compile(r"(?:^|_)z(?:_|$)")


def _evidence_items(f: Finding, limit: int = 8) -> list[str]:
    """The finding's plain evidence (numbers, words, short lists) as ``key=value``; nested
    detail stays in ``--format json``."""
    items = []
    for k, v in f.evidence.items():
        if v is None or isinstance(v, dict) or (isinstance(v, list) and not v):
            continue
        if isinstance(v, list):
            if any(isinstance(x, (dict, list)) for x in v):
                continue
            v = dumps([*v[:6], "..."] if len(v) > 6 else v)
        elif _Z_KEY.search(k) and v in (math.inf, -math.inf, "Infinity", "-Infinity"):
            v = "exact (no noise)"  # a z-score of a noiseless line: no number to print
        items.append(safe.line(f"{k}={v}"))
        if len(items) >= limit:
            break
    return items


def render_text(
    reports: list[Report], file: IO[str], *, width: int | None = None, color: bool | None = None
) -> None:
    """The verdict and the findings behind it, in the seeds' order: one row a finding, its
    evidence and next action indented under it."""
    from rich.table import Table
    from rich.text import Text

    from .console import plain_console

    if width is None and not (hasattr(file, "isatty") and file.isatty()):
        width = 120
    console = plain_console(file, width=width, color=color)
    for i, rep in enumerate(reports):
        if i:
            console.print()
        head = Text()
        head.append("run ", style="dim")
        head.append(safe.line(rep.source), style="bold")
        info = rep.info
        bits = [info.get("format"), info.get("status"), steps_read(rep)]
        head.append(safe.line("  " + "  ".join(str(b) for b in bits if b)), style="dim")
        console.print(head)
        verdict = Text("verdict: ", style="bold")
        verdict.append(VERDICTS[rep.verdict].upper(), style=_STYLE[rep.worst])
        console.print(verdict)
        shown = [f for f in rep.findings if f.severity != "ok" or f.verdict == "learning"]
        if not shown:
            console.print(Text("no findings", style="dim"))
            _unmapped_text(console, rep)
            continue
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)  # severity
        grid.add_column(no_wrap=True)  # check
        grid.add_column(no_wrap=True, justify="right")  # step
        grid.add_column(overflow="fold")  # what was seen, evidence, next
        for f in shown:
            step = "" if f.first_step is None else f"step {f.first_step}"
            grid.add_row(
                Text(_MARK[f.severity], style=_STYLE[f.severity]),
                Text(safe.line(f.check), style="dim"),
                Text(step, style="dim"),
                Text(safe.line(f.title)),
            )
            ev = _evidence_items(f)
            if ev:
                grid.add_row("", "", "", Text("evidence: " + ", ".join(ev), style="dim"))
            if f.action and f.severity in ("warn", "fail"):
                grid.add_row("", "", "", Text("next: " + safe.line(action_for(f, rep.source))))
        console.print(grid)
        _unmapped_text(console, rep)


UNMAPPED_SHOWN = 8


def _unmapped_text(console: Any, rep: Report) -> None:
    """The numeric keys no rule maps (``info["unmapped"]``), each with its --mapping line."""
    from rich.text import Text

    rows = rep.info.get("unmapped") or []
    if not rows:
        return
    console.print(
        Text(
            f"unmapped: {len(rows)} numeric key(s) read but not judged; a line of a "
            "--mapping FILE (TOML) maps each:",
            style="dim",
        )
    )
    for row in rows[:UNMAPPED_SHOWN]:
        console.print(Text(f"  {safe.line(row['mapping'])}  # {safe.line(row['hint'])}"))
    if len(rows) > UNMAPPED_SHOWN:
        console.print(
            Text(
                f"  ... and {len(rows) - UNMAPPED_SHOWN} more (--json lists every one; "
                f"rlvitals formats --explain {safe.line(rep.source)})",
                style="dim",
            )
        )


def render_json(reports: list[Report]) -> str:
    """One report object for one run; a list for several."""
    if len(reports) == 1:
        return safe.json_for_terminal(dumps(reports[0].to_dict(), indent=2))
    return safe.json_for_terminal(dumps([r.to_dict() for r in reports], indent=2))


def steps_read(rep: Report) -> str:
    """``120 steps``; where the log holds fewer records than its last step (a logging interval
    over 1, as TRL's ``logging_steps``), ``100 records to step 500``."""
    n = int(rep.info.get("steps", 0) or 0)
    last = rep.last_step
    if last is not None and n and last > n:
        return f"{n} records to step {last}"
    return f"{n} steps"


def md_escape(text: Any) -> str:
    """Escape Markdown (and HTML) so untrusted text shows as itself (``safe.markdown``)."""
    return safe.markdown(text)


def render_markdown(reports: list[Report]) -> str:
    """A Markdown summary (for a PR comment or a CI job summary)."""
    lines: list[str] = []
    for rep in reports:
        lines.append(f"## {md_escape(rep.source)}: {VERDICTS[rep.verdict]}")
        lines.append("")
        info = rep.info
        lines.append(
            f"Format {md_escape(info.get('format'))}, status {md_escape(info.get('status'))}, "
            f"{steps_read(rep)}. Worst finding: **{rep.worst}**."
        )
        lines.append("")
        unmapped = rep.info.get("unmapped") or []
        if unmapped:
            keys = ", ".join(f"`{md_escape(r['key'])}`" for r in unmapped[:UNMAPPED_SHOWN])
            more = (
                f" and {len(unmapped) - UNMAPPED_SHOWN} more"
                if len(unmapped) > UNMAPPED_SHOWN
                else ""
            )
            lines.append(f"Read but not judged (map with `--mapping FILE`): {keys}{more}.")
            lines.append("")
        if not rep.findings:
            lines.append("No findings.")
            lines.append("")
            continue
        lines.append("| severity | check | step | finding | next |")
        lines.append("|---|---|---|---|---|")
        for f in rep.findings:
            step = "" if f.first_step is None else str(f.first_step)
            lines.append(
                f"| {f.severity} | {md_escape(f.check)} | {step} | {md_escape(f.title)} | "
                f"{md_escape(action_for(f, rep.source)) if f.severity in ('warn', 'fail') else ''} |"
            )
        lines.append("")
    return "\n".join(lines)
