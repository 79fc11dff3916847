"""W&B tables of completions, as the history of a W&B run names them, read as its samples.

TRL's GRPOTrainer with ``log_completions=True`` and ``report_to="wandb"`` logs each logging
step's rows as ``wandb.log({"completions": wandb.Table(dataframe=df)})``, the same rows it
writes to ``completions/completions_{step:05d}.parquet`` (trl 1.16.0
``trl/trainer/grpo_trainer.py:3323-3381``); other trainers and users log tables of the same
kind. W&B writes each logged table to ``files/media/table/<key>_<n>_<hash>.table.json``
(``<n>`` a counter, not the step) as ``{"columns": [...], "data": [[...], ...]}``, NaN as the
bare token, at most ``wandb.Table.MAX_ROWS`` (10000) rows, and names it in the history row
(``readers.wandb.TableRef``): the step a table belongs to is the step its row is plotted at
(HF's callback plots every key against ``train/global_step``, synced into the table's row).

A table of any key is read when it has a prompt column (``prompt``, ``input``, ``query``,
``question``) and a completion column (``completion``, ``response``, ``output``,
``generation``; plurals too); a table without them (numbers only, a histogram's data) is
left alone, silently. Rows are then read as TRL's parquet rows are (``trl.CompletionRows``:
one group per prompt within a step, the reward the sum of the reward-function columns, the
repeat of a ``num_iterations > 1`` generation counted once), except that a table not of TRL's
shape (no ``advantage`` column) takes its reward from one ``reward`` or ``score`` column, and
is ungraded without one. A ``MUTABLE`` table (one ``wandb.Table(log_mode="MUTABLE")`` added to
and logged again each step) is written whole at each log: a file's rows are those after the
rows of the file logged before it (a table rebuilt or edited between logs is read file by file
whole, with one warning). An ``INCREMENTAL`` table's file holds only the rows added since its
last log. Only the rows in the file are read: W&B keeps the first 10000 of a bigger table (one
warning).

TRL's own parquet is preferred where it is beside the run (``attach``): it holds the same rows,
and all of them with ``log_unique_prompts=True``, which keeps one row per prompt in the table
(its groups then have one member each: one warning says the group statistics mean nothing).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ...jsonio import loads
from ...model import RunData
from ..base import open_binary
from .base import Sample, SampleSource
from .trl import CompletionRows, numeric_column

__all__ = ["TablesReader", "WandbTables", "table_columns", "text_columns"]

PROMPTS = ("prompt", "prompts", "input", "inputs", "query", "queries", "question", "questions")
COMPLETIONS = (
    "completion",
    "completions",
    "response",
    "responses",
    "output",
    "outputs",
    "generation",
    "generations",
)
TOTALS = ("reward", "rewards", "score", "scores", "total_reward")
_HEAD = 1 << 16  # bytes read to find a table's columns
_COLUMNS = re.compile(r'\s*\{\s*"columns"\s*:\s*')


def _load_json(raw: bytes) -> Any:
    """A table file's JSON, its values deeper than 64 levels null (never RecursionError);
    ValueError when it is not JSON (UTF-8 text)."""
    try:
        return loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(str(exc)) from None


def table_columns(p: Path) -> list[Any]:
    """The column names of a W&B table file, from its head (W&B writes ``columns`` first),
    else from the whole file. Raises OSError or ValueError for a file that is not one."""
    with open_binary(p) as f:
        head = f.read(_HEAD)
        text = head.decode("utf-8", "replace")
        m = _COLUMNS.match(text)
        if m:
            try:
                cols, _end = json.JSONDecoder().raw_decode(text, m.end())
            except (ValueError, RecursionError):
                cols = None  # cut within the head: the whole file says
            if isinstance(cols, list):
                return cols
        f.seek(0)
        doc = _load_json(f.read())
    cols = doc.get("columns") if isinstance(doc, dict) else None
    if not isinstance(cols, list):
        raise ValueError('expected {"columns": [...], "data": [...]}')
    return cols


def _pick(names: list[str], wanted: tuple[str, ...]) -> str | None:
    lower = {n.lower(): n for n in reversed(names)}
    return next((lower[w] for w in wanted if w in lower), None)


def text_columns(columns: list[Any]) -> tuple[str, str] | None:
    """The (prompt, completion) columns of a table, or None if it has not both."""
    names = [c for c in columns if isinstance(c, str)]
    prompt, completion = _pick(names, PROMPTS), _pick(names, COMPLETIONS)
    if prompt is None or completion is None or prompt == completion:
        return None
    return prompt, completion


class WandbTables(CompletionRows):
    """The completions tables of one W&B run (``readers.wandb.WandbReader.tables``)."""

    name = "wandb-tables"
    description = "W&B tables with prompt and completion columns (files/media/table/*.table.json)"

    def __init__(self, reader: Any) -> None:
        super().__init__()
        self.reader = reader
        self._seen = 0  # refs of reader.tables looked at
        self._tables: list[Any] = []  # refs of text tables, in logging order
        self._unique = self._unique_told = False
        self._rebuilt: set[str] = set()  # MUTABLE tables whose files are read whole
        # MUTABLE files read so far: their columns, rows and the digest of those rows as JSON
        # text, so the next file is checked against them without parsing the file again.
        self._read: dict[Path, tuple[Any, int, bytes]] = {}
        self._warn: Callable[[str], None] = reader.run.warnings.append

    def bind(self, run: RunData) -> None:
        super().bind(run)
        self._warn = run.warnings.append
        config = run.info.get("config")
        self._unique = isinstance(config, dict) and config.get("log_unique_prompts") is True
        self.grouped = not self._unique

    def sniff(self, d: Path) -> bool:
        return bool(self.step_files(d))

    def step_files(self, d: Path) -> dict[int, list[Path]]:
        refs = self.reader.tables
        if len(refs) < self._seen:  # the log was read again from its start
            self._seen, self._tables, self._read = 0, [], {}
        for ref in refs[self._seen :]:
            self._classify(ref)
        self._seen = len(refs)
        if self._unique and self._tables and not self._unique_told:
            self._unique_told = True
            self._warn(
                f"{self._tables[0].path}: TRL's log_unique_prompts=True keeps one completion per "
                "prompt in its W&B tables: read as transcripts, without group statistics (its "
                "completions/ parquet has every row: --samples)"
            )
        out: dict[int, list[Path]] = {}
        for ref in self._tables:
            out.setdefault(ref.step, []).append(ref.path)
        return out

    def _classify(self, ref: Any) -> None:
        try:
            cols = table_columns(ref.path)
        except FileNotFoundError:
            self._warn(f"{ref.path}: W&B table {ref.key!r} of step {ref.step}: no such file")
            return
        except OSError as exc:
            self._warn(f"{ref.path}: W&B table {ref.key!r}: cannot read ({exc.strerror or exc})")
            return
        except ValueError:
            # No columns to tell its kind by: listed, so reading it says what is wrong (one
            # line naming the file) rather than a completions table lost without a word.
            self._tables.append(ref)
            return
        if text_columns(cols) is None:
            return  # numbers, or text of another kind: not samples
        self._tables.append(ref)

    def reward_columns(self, columns: dict[str, list[Any]]) -> list[str]:
        if "advantage" in columns or (self.known_rewards & set(columns)):
            return super().reward_columns(columns)  # TRL's shape
        names = [c for c in columns if c not in ("step", "prompt", "completion")]
        total = _pick(names, TOTALS)
        return [total] if total is not None and numeric_column(columns[total]) else []

    def _load(self, p: Path, warn: Callable[[str], None]) -> dict[str, list[Any]] | None:
        try:
            with open_binary(p) as f:
                try:
                    doc = json.load(f)
                except RecursionError:
                    f.seek(0)
                    doc = _load_json(f.read())
        except FileNotFoundError:
            warn(f"{p}: W&B table: no such file; skipped")
            return None
        except (OSError, ValueError) as exc:
            warn(f"{p}: not a readable W&B table ({type(exc).__name__}: {exc}); skipped")
            return None
        columns = doc.get("columns") if isinstance(doc, dict) else None
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(columns, list) or not isinstance(data, list):
            warn(f'{p}: expected a W&B table {{"columns": [...], "data": [...]}}; skipped')
            return None
        pair = text_columns(columns)
        if pair is None:
            warn(f"{p}: expected prompt and completion columns (not {columns!r}); skipped")
            return None
        width = len(columns)
        bad = next(
            (i for i, r in enumerate(data) if not isinstance(r, list) or len(r) != width), None
        )
        if bad is not None:
            warn(f"{p}: row {bad} does not have the {width} columns {columns!r}; skipped")
            return None
        at = next((i for i, r in enumerate(self._tables) if r.path == p), None)
        if at is not None:
            ref = self._tables[at]
            logged = self._logged_rows(at, ref)
            if logged is not None and logged > len(data):
                warn(
                    f"{p}: W&B kept {len(data)} of the {logged} rows logged in its file; "
                    "the rest are not read"
                )
            if ref.log_mode == "MUTABLE":
                data = self._new_rows(at, ref, columns, data, warn)
        prompt, completion = pair
        rename = {prompt: "prompt", completion: "completion"}
        cols: dict[str, list[Any]] = {}
        for j, c in enumerate(columns):
            name = rename.get(c, str(c))
            if name in cols and c not in rename:
                continue  # a second column named like the prompt or completion
            cols[name] = [r[j] for r in data]
        if not self.reward_columns(cols):
            self.missing_reward_is_nan = False  # no reward column: ungraded, not NaN
        return cols

    def _before(self, at: int, ref: Any) -> Any:
        """The table of the same key and log mode logged before ``self._tables[at]``."""
        same = (
            r for r in reversed(self._tables[:at]) if (r.key, r.log_mode) == (ref.key, ref.log_mode)
        )
        return next(same, None)

    def _logged_rows(self, at: int, ref: Any) -> int | None:
        """Rows the log put in ``ref``'s file: the table's (``nrows``), less the rows of its
        earlier logs for an ``INCREMENTAL`` table (whose ``nrows`` counts every increment)."""
        if ref.nrows is None or ref.log_mode != "INCREMENTAL":
            return ref.nrows
        before = self._before(at, ref)
        if before is None:
            return ref.nrows
        return None if before.nrows is None else ref.nrows - before.nrows

    def _new_rows(
        self,
        at: int,
        ref: Any,
        columns: list[Any],
        data: list[Any],
        warn: Callable[[str], None],
    ) -> list[Any]:
        """The rows a ``MUTABLE`` table's file adds to the file logged before it (W&B writes
        the whole table at each log, so rows added at earlier steps are in every later file).

        The earlier file's rows must be this file's first rows (the table grew); otherwise the
        table was rebuilt or edited between logs, and the file is read whole (one warning)."""
        before = self._before(at, ref)
        if before is not None and before.path not in self._read:
            # Not digested in this pass (it did not load as a table): its rows read now.
            try:
                with open_binary(before.path) as f:
                    doc = json.load(f)
                rows = doc["data"]
                if isinstance(rows, list):
                    self._read[before.path] = (doc["columns"], len(rows), _digests(rows, 0)[1])
            except (OSError, ValueError, KeyError, TypeError, RecursionError):
                pass  # not comparable: this file is read whole
        earlier = self._read.get(before.path) if before is not None else None
        first, whole = _digests(data, earlier[1] if earlier is not None else 0)
        self._read[ref.path] = (columns, len(data), whole)
        if before is None:
            return data
        # Compared as JSON text: NaN rewards are equal there, never as floats.
        if earlier is not None and earlier[0] == columns and first == earlier[2]:
            return data[earlier[1] :]
        if ref.key not in self._rebuilt:
            self._rebuilt.add(ref.key)
            warn(
                f"{ref.path}: W&B table {ref.key!r} is logged MUTABLE but its rows of "
                f"{before.path.name} are not this file's first rows (rebuilt or edited "
                "between logs): each such file is read whole"
            )
        return data

    def read_step(
        self,
        step: int,
        files: list[Path],
        index: Callable[[Path], int],
        warn: Callable[[str], None],
    ) -> Iterator[Sample]:
        self.missing_reward_is_nan = True  # TRL's: no function applied (until a file says)
        yield from super().read_step(step, files, index, warn)


def _digests(data: list[Any], at: int) -> tuple[bytes | None, bytes]:
    """Digests of a table's rows as JSON text: of its first ``at`` rows (None when it has fewer)
    and of all of them, so that a file can be checked to begin with another's rows without
    keeping either's text."""
    h = hashlib.sha256()
    first = h.digest() if at == 0 else None
    for i, row in enumerate(data, 1):
        h.update(json.dumps(row).encode())
        h.update(b"\n")
        if i == at:
            first = h.digest()
    return first, h.digest()


class TablesReader:
    """A W&B reader whose run also gets its completions tables as samples, once its history
    names one (the sample source is made then, so a run without them reads as before).

    With ``dump`` (TRL's parquet found beside the run), the dump is the run's samples and the
    tables are only looked at to say, in one note, that they were not counted again."""

    def __init__(self, inner: Any, dump: SampleSource | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.run: RunData = inner.run
        self.format = WandbTables(inner)
        self.source: SampleSource | None = dump
        self._dump = dump is not None
        self._noted = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _source(self) -> SampleSource | None:
        if self.source is None or (self._dump and not self._noted):
            self.format.bind(self.run)
            d = self.inner.file.parent / "files"
            if self.format.step_files(d):
                if self.source is None:
                    self.source = SampleSource(d, self.format, self.run)
                else:
                    self._noted = True
                    self.run.notes.append(
                        f"the W&B completions tables are not read as samples: {self.source.dir} "
                        "beside the run holds the same rows (every row), read instead"
                    )
        return self.source

    def poll(self) -> bool:
        changed = bool(self.inner.poll())
        source = self._source()
        return (source.poll() if source is not None else False) or changed

    def finish(self) -> None:
        self.inner.finish()
        source = self._source()
        if source is not None:
            source.poll(final=True)
