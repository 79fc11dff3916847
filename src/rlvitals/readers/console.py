"""Any console log: records found by their shape (``shapes.py``), whatever printed them.

Registered last among the console formats, so a framework's own reader wins where it fits;
this one reads what none of them recognises (NeMo-RL, torchforge, DeepSpeed-Chat, LlamaFactory,
Marin, mlx-lm, OpenPipe ART, TRL's PPOTrainer, a notebook's table, a pasted fragment...).
Keys are mapped by the framework table whose keys the log's first records match best (two
keys at least), then by canonical name; the rest are kept under their own names.

Lines that are not records become ``RunData.events`` (tracebacks, errors, OOM, 5xx, refused
connections) for the liveness check; log timestamps give each step its ``time`` and
``info["log_last_time"]`` the last time any line was stamped.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import Format, register
from .mapping import Mapper, MappingTable, Rule
from .shapes import MAX_EVENTS, Record, ShapeParser
from .textlog import TextLogReader, _FileState, clean_line, head, sniff_files

__all__ = ["CONSOLE", "ConsoleReader", "looks_like_records"]

_IDENTITY = Rule(r"^(.+)$", r"\1", "a key that already is a canonical name is taken as such")
CONSOLE = MappingTable(
    "console",
    (_IDENTITY,),
    (("anything else", "kept under its own name; map it with --mapping FILE"),),
    (
        "Records are found by shape: k: v, k=v, dicts (Python or JSON), markdown / HTML / "
        "box-drawing tables, tqdm postfixes; a record without a step takes its order.",
        "Keys of a known framework are mapped by that framework's table (chosen from the "
        "first records' keys).",
    ),
)


def _score(table: MappingTable, keys: set[str]) -> int:
    score = 0
    for r in table.rules:
        if r.is_pattern:
            pat = re.compile(r.source)
            score += any(pat.match(k) for k in keys)
        else:
            score += r.source in keys
    return score


def framework_table(keys: set[str]) -> tuple[str, MappingTable] | None:
    """The registered framework table that names the most of ``keys`` (at least two)."""
    from . import FORMATS

    best: tuple[int, str, MappingTable] | None = None
    seen: set[int] = set()
    for fmt in sorted(FORMATS.values(), key=lambda f: f.priority):
        table = getattr(fmt.factory, "table", None) or fmt.table
        if table is None or id(table) in seen or table.name in ("generic", "rlvitals", "console"):
            continue
        seen.add(id(table))
        score = _score(table, keys)
        if score >= 2 and (best is None or score > best[0]):
            best = (score, fmt.name, table)
    return None if best is None else (best[1], best[2])


class ConsoleReader(TextLogReader):
    """Reads records of any shape from console logs (a file, or a directory's logs)."""

    name = "console"
    table = CONSOLE
    patterns = ("*.log", "*.txt", "*.out", "*.err", "*.md", "*.html", "*.ipynb")

    def __init__(self, path: Path, *, extra_rules: tuple[Rule, ...] = ()) -> None:
        super().__init__(path, extra_rules=extra_rules)
        self._extra = extra_rules
        self.mapper = Mapper(self.table, self.run, extra=extra_rules)
        self._decided = False
        self._timed: set[int] = set()

    def accept(self, p: Path) -> bool:
        return looks_like_records(p)

    def feed(self, st: _FileState, text: str, p: Path, lineno: int) -> None:
        parser = st.extra.get("shapes")
        if parser is None:
            parser = st.extra["shapes"] = ShapeParser(str(p), _file_date(p))
        if p.suffix == ".ipynb":
            # A notebook is JSON written whole: its outputs are read once it closes.
            buf = st.extra.setdefault("notebook", [])
            buf.append(text)
            if text.rstrip() == "}":
                try:
                    nb = json.loads("\n".join(buf))
                except ValueError:
                    return
                buf.clear()
                for i, line in enumerate(notebook_output_lines(nb), 1):
                    parser.feed(clean_line(line), i)
                self._take(parser)
            return
        parser.feed(text, lineno)
        self._take(parser)

    def finish(self) -> None:
        """The files are complete: close records, tables and tracebacks still open."""
        for p, st in self._states.items():
            parser = st.extra.get("shapes")
            if parser is not None and st.extra.get("notebook"):
                # The notebook's last line had no newline: read the whole file.
                st.extra["notebook"] = []
                for i, line in enumerate(notebook_output_lines(_load_notebook(p)), 1):
                    parser.feed(clean_line(line), i)
            if parser is not None:
                parser.finish()
                self._take(parser)
        super().finish()

    def _take(self, parser: ShapeParser) -> None:
        records, events = parser.drain()
        if parser.warnings:
            self.run.warnings.extend(parser.warnings)
            parser.warnings.clear()
        if records:
            if not self._decided:
                self._decide(records)
            for rec in records:
                self._record(rec)
        room = MAX_EVENTS - len(self.run.events)
        if len(events) > room:
            self.run.info["events_dropped"] = (
                self.run.info.get("events_dropped", 0) + len(events) - max(room, 0)
            )
            events = events[: max(room, 0)]
        self.run.events.extend(events)
        if parser.last_time is not None:
            last = self.run.info.get("log_last_time")
            if last is None or parser.last_time > last:
                self.run.info["log_last_time"] = parser.last_time

    def _decide(self, records: list[Record]) -> None:
        self._decided = True
        keys: set[str] = set()
        for rec in records[:5]:
            keys.update(rec.values)
        hit = framework_table(keys)
        self.run.info["key_table"] = None if hit is None else hit[0]
        if hit is not None:
            table = MappingTable(
                f"console+{hit[1].name}", (*hit[1].rules, _IDENTITY), hit[1].unmapped
            )
            self.mapper = Mapper(table, self.run, extra=self._extra)

    def _record(self, rec: Record) -> None:
        self.mapper.add(rec.step, rec.values)
        if rec.time is not None and rec.step not in self._timed and "time" not in rec.values:
            self._timed.add(rec.step)
            self.run.metrics.add(rec.step, "time", rec.time)


def notebook_output_lines(nb: Any) -> Iterator[str]:
    """The text lines of a Jupyter notebook's cell outputs: streams, HTML (else plain text)
    results, and errors as a traceback block. Cell sources are not read."""
    cells = nb.get("cells") if isinstance(nb, dict) else None
    for cell in cells if isinstance(cells, list) else ():
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        for out in outputs if isinstance(outputs, list) else ():
            if not isinstance(out, dict):
                continue
            kind = out.get("output_type")
            if kind == "stream":
                text: Any = out.get("text", "")
            elif kind == "error":
                yield "Traceback (most recent call last):"
                for line in out.get("traceback") or ():
                    yield from ("  " + t for t in str(line).split("\n"))
                yield f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"
                continue
            else:
                data = out.get("data") or {}
                text = data.get("text/html") or data.get("text/plain") or ""
            if isinstance(text, list):
                text = "".join(str(t) for t in text)
            yield from str(text).split("\n")


def _load_notebook(p: Path) -> Any:
    try:
        if p.stat().st_size > 256 << 20:
            return None
        return json.loads(p.read_bytes())
    except (OSError, ValueError):
        return None


def _file_date(p: Path) -> _dt.date | None:
    try:
        return _dt.date.fromtimestamp(p.stat().st_mtime)
    except (OSError, ValueError, OverflowError):
        return None


def looks_like_records(p: Path, max_lines: int = 4000) -> bool:
    """Whether the start of ``p`` holds at least one metric record of any shape."""
    if p.suffix == ".ipynb":
        lines = [clean_line(t) for t in notebook_output_lines(_load_notebook(p))]
    else:
        lines = head(p).split("\n")
    parser = ShapeParser(str(p), _file_date(p))
    for i, line in enumerate(lines[:max_lines], 1):
        parser.feed(line, i)
        if parser.records:
            return True
    parser.finish()
    return bool(parser.records)


register(
    Format(
        "console",
        "any console log: step markers and key/value pairs, dicts, tables, tqdm postfixes "
        "(NeMo-RL, torchforge, DeepSpeed-Chat, LlamaFactory, Marin, mlx-lm, ART, notebooks...)",
        lambda p: sniff_files(p, ConsoleReader.patterns, looks_like_records),
        ConsoleReader,
        priority=95,
        table=CONSOLE,
        kind="console log",
        files="a console log (or a directory of them), a pasted fragment, a notebook table",
    )
)
