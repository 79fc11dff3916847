"""The formats rlvitals reads and their mapping tables: terminal, JSON and Markdown.

docs/formats.md is ``formats_markdown()`` written to a file (``python -m
rlvitals.views.formats > docs/formats.md``); a test checks the two are equal, so the docs and
the tables cannot drift.
"""

from __future__ import annotations

from typing import IO, Any

from ..jsonio import dumps
from ..model import RunData
from ..readers import Format, formats

__all__ = [
    "explain_data",
    "explain_json",
    "explain_text",
    "formats_json",
    "formats_markdown",
    "formats_text",
]


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
    from ..safe import markdown_cell

    return markdown_cell(text)


NATIVE_NOTE = "Canonical names as written by rlvitals (docs/metrics.md); no mapping needed."
TENSORBOARD_NOTE = (
    "Scalars from any framework; the framework is recognised from the tag names (HF "
    "Trainer's `train/` prefix stripped) and its table below applied."
)


# docs/formats.md up to the table of formats.
_MD_INTRO = [
    "# Formats rlvitals reads",
    "",
    "Generated from the readers' mapping tables by `python -m rlvitals.views.formats`;",
    "a test keeps this page equal to the code. `rlvitals formats` prints the same tables,",
    "and `rlvitals formats --json` as JSON.",
    "",
    "`rlvitals metrics PATH` (and every command that reads a run) sniffs the format of a",
    "file or directory; `--from NAME` overrides, and `--mapping FILE` adds rules (below).",
    "A `--from` that reads nothing from a path another reader reads (a run directory read",
    "`--from json`) is an input error naming the format that reads it, exit 2; an empty file or",
    "folder is a run that has just started. `--format` is never the source: in `check` and",
    "`metrics` it names the output (text, json; markdown in `check`).",
    "Source keys are mapped to canonical names (docs/metrics.md) by meaning, through one",
    "chain for every format: a user mapping, then the format's table below, then the",
    "synonyms other frameworks and peers use (declared in `schema.py`), then normalised",
    "tokens (case, separators, `train/`-style prefixes, `_mean` suffixes); a key the table",
    "lists as not mapped stays out of the later steps. `rlvitals formats --explain FILE`",
    "prints each key of a file, its canonical name and the step that mapped it, and the",
    "keys left unmapped. A key that measures something else is not mapped, and the",
    "canonical metric is then absent rather than faked. A file from which no canonical",
    "metric can be read is refused with the keys named. Every source key also stays",
    "available under its own name (`rlvitals metrics --all`); one that spells a canonical",
    "name filled from another key here is kept as `<format>:<key>`, and",
    "`RunData.source_keys` lists them all, so a view can tell a framework's",
    "`rollout/truncated` (a batch rate) from the canonical `rollout/<metadata key>` family.",
    "When two rules give one canonical name, the first listed that the run logs wins for",
    "the whole run. Percentages printed by a console become fractions.",
    "",
    "## How a file is recognised",
    "",
    "By its content, never by its name alone. A JSON object with a `log_history` list,",
    "or the bare list of HF Trainer step records, is a TRL trainer state whatever the",
    "file is called (`training_logs.json`, `history.json`); another JSON table is the",
    "`json` format. Every format whose sniffer accepts a file",
    "reads a sample of it (256 kB; 8 MB where no reading finds a printed step in the",
    "first sample: a console whose first `step:N` line comes after long sample",
    "printouts), and the reading with the most steps whose numbers the file prints wins",
    "over one that numbers records itself (in order of appearance); a near tie goes to",
    "the framework's own reader. `rlvitals formats --explain FILE` says which readings",
    "were compared and what each read.",
    "",
    "In console logs, records are found by their shape wherever they are: inside",
    "markdown code fences, among sample printouts, after ANSI colour codes and Ray",
    "prefixes. Steps come from markers of any common shape, kept as printed (a resumed",
    "run starts at 101): `step:N - k:v`, `step N/M`, `Step N |`, `[step N]`, `iter N:`, `update N`,",
    "`steps=N/M`, `[it N]`, `it N`, `Episode N/M:`, `EPISODE: N`, `epoch=N` where no other",
    "counter is printed (`epoch 1 iter 20` is update 20),",
    "`Epoch:[e/E]` then `(i/N)` (MiniMind: update (e - 1) * N + i), a `step` key or",
    "column. Pairs are",
    "`k: v`, `k=v` (spaces after `=` kept), separated by `, `, ` - ` or `|`, or `k v k v`",
    "runs after a step marker (`[tag] it 40 reward 0.5 lr 3e-4`); values such as `np.float64(0.3)`,",
    "`tensor(0.5)`, `nan`. Once a file prints a step with each record, key/value text",
    "away from any record (an `x = 3` of a sample, a `{'A': 'true'}` ground truth) is",
    "passed over, and `--explain` counts it.",
    "",
    "Every table, whatever holds it (JSON: a list of records, an object of per-step lists",
    "with or without a `step` list, either nested under sections, pandas' orients; JSON",
    "Lines; CSV, TSV, aligned columns; Parquet; a log's markdown and ASCII tables), goes",
    "through one table layer (`readers/tables.py`). Its step column is found by name",
    "(`step`, `global_step`, `_step`, `iteration`, `iter`, `it`, `update`, `training_step`,",
    "`train_step`, `num_updates`, ..., or `epoch` with `batch`, the batches counted on), else",
    "by content (the first column, or one named like a row index, of integers that never",
    "decrease), else the records are numbered in order from 1 and a warning says so;",
    "`--explain` says which column was the step and why. A step-named column is never a",
    "metric, nor a pandas row index. Cells read as values: numbers, quoted numbers",
    "(`'0.9513'`), percents (`85%` is 0.85), `NaN`, `Infinity`; `null`, `None`, an empty",
    "cell or `N/A` is no value there (a periodic evaluation null between evaluations is",
    "absent, not non-finite; a key null for good is missing from there on, as one that",
    "vanished is); other text is kept as a label.",
    "",
    "Keys by meaning reach short names too: abbreviations and spellings (`rew`, `rwd`,",
    "`KL_ref`, `ent`, `gn`, `grad`, `len`, `resp_len`, `Avg Response Len`, `Adv Std`,",
    "`acc`, `success_rate`, `GrpStd`, `R`) normalise to the synonyms of docs/metrics.md;",
    "tests/data/handwritten/names.toml holds 121 names real loops log and what each reads as.",
    "A console key table of a framework is chosen from the first records' keys; one",
    "chosen on words any loop prints (`loss`, `reward`, `lr`, `kl`) does not lend its",
    "meaning to a bare `kl`. Held-out",
    "splits (`eval_reward`, `eval/`, `val/`, `test/`, `dev_`, `heldout_`, `val-core/`, or",
    "named last: `success_rate/eval`, `reward_test`; a benchmark's `eval/gsm8k_acc` is the",
    "score of suite `gsm8k`) read as",
    "held-out evaluations `eval/<suite>/score` when they name a score, never as training",
    "metrics. A percent of a fraction metric (`truncated_pct`, `clip %`, or a",
    "`clip_ratio` whose values reach past 1 within 0..100) is divided by 100, and",
    "`--explain` says so. A field that is null on every record was never measured: it is",
    "left out, and `--explain` names it. A file",
    "from which nothing at all could be read is an input error (exit 2). `rlvitals check`",
    "lists under the verdict each numeric key that maps to nothing, with the `--mapping`",
    "line that would map it (`info.unmapped` in `--json`).",
    "",
    "| format | kind | what it reads |",
    "|---|---|---|",
]
# docs/formats.md after the formats' tables.
_MD_END = [
    "",
    "## User mapping files",
    "",
    "`--mapping FILE` (TOML, or JSON when the name ends in `.json`) adds rules ahead of",
    'the format\'s own: `canonical name = "source key"`, or',
    '`"response/truncated_rate" = { source = "trunc_pct", scale = 0.01 }`. A source',
    "starting with `^` is a regular expression. A canonical name that is not in the",
    "vocabulary is refused with the file named.",
    "",
    "## Readers from other packages",
    "",
    "A package adds a format without a change to rlvitals: it names a module (or a `Format`",
    "object) in the `rlvitals.readers` entry-point group, in its pyproject.toml:",
    "",
    "```toml",
    '[project.entry-points."rlvitals.readers"]',
    'myformat = "my_package.rlvitals_reader"',
    "```",
    "",
    "The module registers its format when imported:",
    "`rlvitals.readers.register(Format(name, description, sniff, factory, priority=N,",
    "table=TABLE))`, where `sniff(path)` says whether a file or folder is of this format,",
    "`factory(path, **options)` returns a reader (its `name`, its `run`, a `RunData`, and",
    "`poll()`, which reads what is new and says whether anything was) and `TABLE`, a",
    "`rlvitals.readers.mapping.MappingTable`, maps its keys to canonical names (keys",
    "`schema.py` already knows need no rule). Installed readers load on first use: the",
    "format is listed by `rlvitals formats`, sniffed like the built-in ones (`priority`",
    "places it among them) and read by every command. A name rlvitals uses already stays",
    "rlvitals' own; a reader that cannot be imported is left out, and a path no format",
    "reads names it in its error.",
    "",
    "The same `Format` tells the one discovery (`check DIR`, `serve DIR`, `watch`,",
    '`export`) what it needs, as rlvitals\' own readers do: `markers=("run.pts",)` (names,',
    "glob patterns allowed, whose presence makes a folder one run of this format),",
    "`marks=fn` (`fn(folder, names) -> bool`, for a layout a name cannot say),",
    '`sample_dirs=("samples",)` (folder names, regular expressions, beside its log that hold',
    'its samples, never runs of their own), `suffixes=(".pts",)` (file suffixes worth',
    "sniffing) and `passes_over=fn` (`fn(names)`: the names in a folder that are never runs).",
    "A sample-dump format (a `readers.samples.base.DumpFormat`) registers with",
    "`register_dump(cls)` and is looked for beside every log.",
    "",
]


def formats_markdown() -> str:
    """docs/formats.md, generated from the registered formats and their tables."""
    lines = [*_MD_INTRO]
    for f in formats():
        lines.append(f"| `{f.name}` | {f.kind} | {_md_escape(f.description)} |")
    for f in formats():
        lines += _md_section(f)
    lines += _MD_END
    return "\n".join(lines)


def _md_section(f: Format) -> list[str]:
    """One format's section of docs/formats.md: what it reads and its mapping table."""
    lines = ["", f"## `{f.name}`", "", _md_escape(f.description) + ".", ""]
    if f.name == "rlvitals":
        return [*lines, NATIVE_NOTE]
    if f.table is None:
        return [*lines, TENSORBOARD_NOTE]
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
    return lines


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


def explain_data(run: RunData) -> dict[str, Any]:
    """Each source key of ``run``: its canonical name and the rule that mapped it; the keys
    left unmapped and why; the metrics missing from a step on (``RunData.missing``)."""
    mapped: list[dict[str, Any]] = []
    unmapped: list[dict[str, str]] = []
    renamed = f"{run.format}:"
    seen: set[str] = set()
    for key, (target, kind, detail) in sorted(run.resolved.items()):
        seen.add(key)
        used = run.original.get(target) == key
        mapped.append(
            {
                "source": key,
                "canonical": target,
                "rule": kind,
                "detail": detail or None,
                "used": used,
                "instead": None if used else run.original.get(target),
            }
        )
    for key, why in sorted(run.unmapped.items()):
        seen.add(key)
        unmapped.append({"source": key, "why": why})
    if not run.resolved and not run.unmapped and not run.source_keys:
        # rlvitals' own runs: every name is canonical as written.
        for name in run.canonical_names():
            mapped.append(
                {
                    "source": name,
                    "canonical": name,
                    "rule": "canonical",
                    "detail": "written by rlvitals",
                    "used": True,
                    "instead": None,
                }
            )
    for key in sorted(run.source_keys - seen):
        if key.startswith(renamed) or key in seen:
            continue
        if key in run.original.values():
            continue
        unmapped.append({"source": key, "why": "kept under its own name"})
    return {
        "path": run.source,
        "format": run.format,
        "reading": reading_notes(run),
        "mapped": mapped,
        "unmapped": unmapped,
        "never_measured": list(run.info.get("never_measured") or []),
        "missing": dict(sorted(run.missing.items())),
    }


def reading_notes(run: RunData) -> list[str]:
    """What the reader chose and why, one sentence each: the format (the readings compared),
    where the steps came from, lines passed over, units converted, fields never filled."""
    info = run.info
    out = []
    if info.get("sniffed"):
        out.append(str(info["sniffed"]))
    samples = info.get("samples")
    if isinstance(samples, dict) and samples.get("rule"):
        out.append(
            f"samples at {samples.get('path')} read as {samples['format']}: {samples['rule']}"
        )
    by = info.get("records_by_step_source")
    if isinstance(by, dict) and by:
        parts = ", ".join(f"{n} by {how}" for how, n in sorted(by.items()))
        out.append(f"records by where their step came from: {parts}")
    steps_from = info.get("steps_from")
    if isinstance(steps_from, dict):
        for where, why in sorted(steps_from.items()):
            out.append(f"steps of {where}: {why}")
    if info.get("steps_numbered"):
        out.append(
            f"{info['steps_numbered']} step(s) numbered by the reader (in order of appearance): "
            "the file prints no step for them"
        )
    if info.get("stray_records"):
        out.append(
            f"{info['stray_records']} key/value line(s) passed over: away from any step's "
            "record in a file that prints its steps (sample printouts, not metrics)"
        )
    for target, why in sorted((info.get("units") or {}).items()):
        out.append(f"{target}: {why}")
    never = info.get("never_measured") or []
    if never:
        shown = ", ".join(never[:10]) + (f", ... ({len(never)} in all)" if len(never) > 10 else "")
        out.append(f"declared but never filled (null on every record), so not metrics: {shown}")
    labels = info.get("labels")
    if isinstance(labels, dict) and labels:
        out.append("text fields kept as labels: " + ", ".join(sorted(map(str, labels))))
    return out


def explain_json(run: RunData) -> str:
    """``explain_data`` as JSON."""
    from .. import safe

    return safe.json_for_terminal(dumps(explain_data(run), indent=2))


def explain_text(run: RunData, *, file: IO[str], width: int = 120) -> None:
    """``rlvitals formats --explain FILE``: the mapped keys, the unmapped ones, what is missing."""
    from rich.console import Console
    from rich.markup import escape as _escape
    from rich.table import Table

    from .. import safe

    def escape(text: Any) -> str:  # untrusted (a run's path, its keys): one safe line
        return _escape(safe.line(text))

    d = explain_data(run)
    console = Console(file=file, width=width, highlight=False, soft_wrap=False)
    console.print(f"[bold]{escape(d['path'])}[/] read as [bold]{escape(d['format'])}[/]")
    for note in d["reading"]:
        console.print(f"  {escape(note)}")
    t = Table(box=None, pad_edge=False, title=f"{len(d['mapped'])} keys mapped")
    for col in ("source key", "canonical", "rule", "detail"):
        t.add_column(col)
    for row in d["mapped"]:
        detail = row["detail"] or ""
        if not row["used"]:
            detail = (detail + "; " if detail else "") + f"not used: {row['instead']} fills it"
        t.add_row(
            escape(row["source"]), escape(row["canonical"]), escape(row["rule"]), escape(detail)
        )
    console.print(t)
    if d["unmapped"]:
        console.print(f"[bold]{len(d['unmapped'])} keys left unmapped[/] (kept under their names)")
        for row in d["unmapped"]:
            console.print(f"  {escape(row['source'])}: {escape(row['why'])}")
    else:
        console.print("no key left unmapped")
    for name, step in d["missing"].items():
        console.print(f"  missing from step {step}: {escape(name)}")


if __name__ == "__main__":  # pragma: no cover - regenerates docs/formats.md
    import sys

    sys.stdout.write(formats_markdown())
