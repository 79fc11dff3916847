"""The formats rlvitals reads and their mapping tables: terminal, JSON and Markdown.

docs/formats.md is ``formats_markdown()`` written to a file (``python -m
rlvitals.views.formats > docs/formats.md``); a test checks the two are equal, so the docs and
the tables cannot drift.
"""

from __future__ import annotations

from typing import IO, Any

from ..jsonio import dumps
from ..readers import Format, formats

__all__ = ["formats_json", "formats_markdown", "formats_text"]


def _select(names: list[str] | None) -> list[Format]:
    from ..errors import UsageError

    all_formats = formats()
    if not names:
        return all_formats
    known = {f.name: f for f in all_formats}
    bad = [n for n in names if n not in known]
    if bad:
        raise UsageError(f"unknown format {bad[0]!r}; expected one of: {', '.join(sorted(known))}")
    return [known[n] for n in names]


def formats_data(names: list[str] | None = None) -> list[dict[str, Any]]:
    out = []
    for f in _select(names):
        entry: dict[str, Any] = {
            "name": f.name,
            "kind": f.kind,
            "description": f.description,
            "sniff_priority": f.priority,
        }
        if f.table is not None:
            entry["mapping"] = f.table.to_dict()
        else:
            entry["mapping"] = None
        out.append(entry)
    return out


def formats_json(names: list[str] | None = None) -> str:
    return dumps({"formats": formats_data(names)}, indent=2)


def _md_escape(text: str) -> str:
    from .safe import markdown_cell

    return markdown_cell(text)


NATIVE_NOTE = "Canonical names as written by rlvitals (METRICS.md); no mapping needed."
TENSORBOARD_NOTE = (
    "Scalars from any framework; the framework is recognised from the tag names (HF "
    "Trainer's `train/` prefix stripped) and its table below applied."
)


def formats_markdown() -> str:
    """docs/formats.md, generated from the registered formats and their tables."""
    lines = [
        "# Formats rlvitals reads",
        "",
        "Generated from the readers' mapping tables by `python -m rlvitals.views.formats`;",
        "a test keeps this page equal to the code. `rlvitals formats` prints the same tables,",
        "and `rlvitals formats --json` as JSON.",
        "",
        "`rlvitals metrics PATH` (and every command after it) sniffs the format of a file or",
        "directory; `--format NAME` overrides. Source keys are mapped to canonical names",
        "(METRICS.md) by meaning: a key that measures something else is not mapped, and the",
        "canonical metric is then absent rather than faked. Every source key also stays",
        "available under its own name (`rlvitals metrics --all`); one that spells a canonical",
        "name filled from another key here is kept as `<format>:<key>`, and",
        "`RunData.source_keys` lists them all, so a view can tell a framework's",
        "`rollout/truncated` (a batch rate) from the canonical `rollout/<metadata key>` family.",
        "When two rules give one canonical name, the first listed that the run logs wins for",
        "the whole run. Percentages printed by a console become fractions.",
        "",
        "| format | kind | what it reads |",
        "|---|---|---|",
    ]
    for f in formats():
        lines.append(f"| `{f.name}` | {f.kind} | {_md_escape(f.description)} |")
    for f in formats():
        lines += ["", f"## `{f.name}`", "", _md_escape(f.description) + ".", ""]
        if f.name == "rlvitals":
            lines += [NATIVE_NOTE]
            continue
        if f.table is None:
            lines += [TENSORBOARD_NOTE]
            continue
        lines += ["| source key | canonical | transform | note |", "|---|---|---|---|"]
        for r in f.table.rules:
            lines.append(
                f"| `{_md_escape(r.source)}` | `{_md_escape(r.target)}` | "
                f"{r.transform_text() or ''} | {_md_escape(r.note)} |"
            )
        if f.table.unmapped:
            lines += ["", "Not mapped:", ""]
            for src, why in f.table.unmapped:
                lines.append(f"- `{src}`: {why}")
        if f.table.notes:
            lines += [""]
            lines += [f"Note: {n}" for n in f.table.notes]
    lines += [
        "",
        "## User mapping files",
        "",
        "`--mapping FILE` (TOML, or JSON when the name ends in `.json`) adds rules ahead of",
        'the format\'s own: `canonical name = "source key"`, or',
        '`"response/truncated_rate" = { source = "trunc_pct", scale = 0.01 }`. A source',
        "starting with `^` is a regular expression. A canonical name that is not in the",
        "vocabulary is refused with the file named.",
        "",
    ]
    return "\n".join(lines)


def formats_text(names: list[str] | None = None, *, file: IO[str], width: int = 120) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=file, width=width, highlight=False, soft_wrap=False)
    chosen = _select(names)
    if not names:
        t = Table(box=None, pad_edge=False, title="formats (sniffed in this order)")
        for col in ("format", "kind", "what it reads"):
            t.add_column(col)
        for f in chosen:
            t.add_row(f.name, f.kind, escape(f.description))
        console.print(t)
        console.print("rlvitals formats NAME shows a format's mapping table.")
        return
    for f in chosen:
        console.print(f"[bold]{escape(f.name)}[/]: {escape(f.description)}")
        if f.table is None:
            console.print(escape(NATIVE_NOTE if f.name == "rlvitals" else TENSORBOARD_NOTE))
            continue
        t = Table(box=None, pad_edge=False)
        for col in ("source key", "canonical", "transform", "note"):
            t.add_column(col)
        for r in f.table.rules:
            t.add_row(escape(r.source), r.target, r.transform_text(), escape(r.note))
        console.print(t)
        for src, why in f.table.unmapped:
            console.print(f"  not mapped: {escape(src)}: {escape(why)}")
        for n in f.table.notes:
            console.print(f"  note: {escape(n)}")
        console.print()


if __name__ == "__main__":  # pragma: no cover - regenerates docs/formats.md
    import sys

    sys.stdout.write(formats_markdown())
