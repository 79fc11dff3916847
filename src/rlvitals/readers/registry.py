"""The one ordered registry of source formats, and sniffing: which format reads a path best.

Each reader module registers its formats with ``register(Format(..., priority=N))`` at import;
the modules of this package are found and imported on first use (a new format is one file and
one ``register`` line: nothing else lists it). ``priority`` orders the formats from the most
specific (a run directory, a framework's own file) to the most general (any JSONL, any CSV).

Sniffing (``detect``):

1. A format recognised by its layout (its reader is not a line reader: a run directory, a TRL
   output directory, event files, a tracker's store) takes the path in priority order.
2. A folder whose sub-folders are runs is a folder of runs (``RunFolderError``; ``discover``
   lists them), unless a candidate format reads files inside those sub-folders as one run
   (prime-rl's ``trainer/`` and ``orchestrator/``). A stray ``summary.csv`` beside the runs
   does not make the folder one CSV run.
3. Every other format whose sniffer accepts the path reads a sample of it; the reading with
   the most records (steps) wins. A near tie (within 10%) goes to the more specific format
   (the framework's own reader knows what its keys mean), with a note naming the other and
   the ``--from`` that picks it, unless the other is a catch-all reading (priority 90 and
   up: any JSONL, any CSV, any console log).
4. "Unreadable" is only for a path no format accepts; the error says what the path looked like
   and what was tried.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ..errors import ReadError, RunFolderError, UnknownFormatError
from ..model import RunData
from .base import FileReader, head_bytes, local_path, open_binary

if TYPE_CHECKING:
    from .mapping import MappingTable

__all__ = ["FORMATS", "Detection", "Format", "Reader", "detect", "discover", "formats", "register"]

SAMPLE_BYTES = 256 << 10  # bytes of each file read to score a candidate format
NEAR = 0.1  # records read within 10% are a tie
CATCH_ALL = 90  # priorities from here on are the catch-all readings (any JSONL, CSV, console)
SKIP_DIRS = {"transcripts", "checkpoints", "__pycache__", "node_modules", "site-packages"}
_NOT_READERS = {"base", "registry"}


class Reader(Protocol):
    """An incremental reader of one run."""

    name: str
    run: RunData

    def poll(self) -> bool:
        """Read what is new since the last call; True if anything was."""
        ...


class Format:
    """A registered source format: its name, how to recognise it, how to read it.

    ``priority`` places it in sniffing order (lower: more specific). ``over`` names formats
    this one refines (Miles over slime): where this one's sniffer accepts a path, those are
    not candidates.
    """

    def __init__(
        self,
        name: str,
        description: str,
        sniff: Callable[[Path], Any],
        factory: Callable[..., Reader],
        priority: int = 50,
        *,
        table: MappingTable | None = None,
        kind: str = "",
        files: str = "",
        over: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.description = description
        self.sniff = sniff
        self.factory = factory
        self.priority = priority
        self.table = table  # the mapping table shown by `rlvitals formats` and docs/formats.md
        self.kind = kind  # "run directory", "console log", "JSONL", "event files", ...
        self.files = files  # what to point it at
        self.over = over

    @property
    def scored(self) -> bool:
        """Whether sniffing compares a sample reading of this format with others'."""
        f = self.factory
        return isinstance(f, type) and issubclass(f, FileReader) and f.scored

    def accepts(self, p: Path) -> bool:
        """Whether this format's sniffer accepts ``p`` (a sniffer that fails says no)."""
        try:
            return bool(self.sniff(p))
        except (OSError, ValueError, TypeError, KeyError, IndexError, RecursionError):
            return False


FORMATS: dict[str, Format] = {}
LOAD_ERRORS: dict[str, str] = {}  # reader module -> why it could not be imported


def register(fmt: Format) -> Format:
    """Add a format to the registry (reader modules call this at import)."""
    FORMATS[fmt.name] = fmt
    return fmt


_loaded = False


def load_all() -> None:
    """Import every reader module of this package once, so each registers its formats."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    from . import __path__ as pkg_path

    for mod in sorted(pkgutil.iter_modules(pkg_path), key=lambda m: m.name):
        if mod.name.startswith("_") or mod.name in _NOT_READERS:
            continue
        try:
            importlib.import_module(f"{__package__}.{mod.name}")
        except ImportError as exc:  # a reader whose optional dependency is missing
            LOAD_ERRORS[mod.name] = str(exc)


def formats() -> list[Format]:
    """Every registered format, in sniffing order."""
    load_all()
    return sorted(FORMATS.values(), key=lambda f: f.priority)  # stable: ties keep module order


class Detection(NamedTuple):
    """The format chosen for a path, and a note when another read it about as well."""

    format: str
    note: str | None = None


def _check_readable(p: Path) -> None:
    if not os.path.lexists(p) or not p.exists():
        raise UnknownFormatError("no such file or directory", path=str(p))
    try:
        if p.is_dir():
            with os.scandir(p) as it:
                next(it, None)
        else:
            with open_binary(p) as f:
                f.read(1)
    except OSError as exc:
        raise UnknownFormatError(f"cannot read ({exc.strerror or exc})", path=str(p)) from None


def _child_dirs(p: Path) -> list[Path]:
    """The sub-folders of ``p`` a run can be in, by name: not hidden, not ``SKIP_DIRS``; an
    unreadable folder has none."""
    try:
        children = sorted(os.scandir(p), key=lambda e: e.name)
    except OSError:
        return []
    out = []
    for e in children:
        if e.name.startswith(".") or e.name in SKIP_DIRS:
            continue
        try:
            if e.is_dir():
                out.append(Path(e.path))
        except OSError:
            continue
    return out


def _sub_runs(p: Path, fmts: list[Format], *, nested: bool) -> list[Path]:
    """The sub-folders of ``p`` that are runs (read alone). ``nested``: the check for a
    sub-folder itself, where its own sub-folders need only be accepted by some format."""
    out = []
    for child in _child_dirs(p):
        if nested:
            if any(f.accepts(child) for f in fmts):
                out.append(child)
            continue
        try:
            _detect(child, fmts, nested=True)
        except ReadError:
            continue
        out.append(child)
    return out


def _layout(p: Path, fmts: list[Format]) -> str | None:
    """The first layout format (not scored) that accepts ``p``."""
    return next((f.name for f in fmts if not f.scored and f.accepts(p)), None)


def _reader_files(fmt: Format, p: Path) -> list[Path] | None:
    try:
        reader = fmt.factory(p)
    except (OSError, ValueError, TypeError, ReadError):
        return []
    return reader.files() if isinstance(reader, FileReader) else None


def _score(fmt: Format, p: Path) -> tuple[int, int, int]:
    """(records, canonical values, all values) read from a sample of ``p`` by ``fmt``; a
    record is a step read."""
    try:
        reader = fmt.factory(p)
        if isinstance(reader, FileReader):
            reader.sample_bytes = SAMPLE_BYTES
        reader.poll()
    except (OSError, ValueError, TypeError, KeyError, IndexError, RecursionError, ReadError):
        return (0, 0, 0)
    run = reader.run
    canon = total = 0
    for name in run.metrics.names():
        s = run.metrics.get(name)
        n = 0 if s is None else len(s)
        total += n
        if run.is_canonical(name):
            canon += n
    return len(run.steps()), canon, total


def _near(a: int, b: int) -> bool:
    return abs(a - b) <= NEAR * max(a, b)


def detect(path: str | os.PathLike[str]) -> Detection:
    """The format that reads ``path`` (a file or a folder) best; see the module docstring."""
    return _detect(local_path(path), formats(), nested=False)


def _detect(p: Path, fmts: list[Format], *, nested: bool) -> Detection:
    _check_readable(p)
    cands = [f for f in fmts if f.accepts(p)]
    if not p.is_dir():
        from ._trackers import sqlite_refusal

        refused = sqlite_refusal(p, [f.name for f in cands])
        if refused is not None:
            raise UnknownFormatError(refused, path=str(p))
    subs = _sub_runs(p, fmts, nested=nested) if p.is_dir() else []
    layout_subs = [(s, _layout(s, fmts)) for s in subs]
    layout_subs = [(s, name) for s, name in layout_subs if name is not None]
    for f in cands:
        # A layout format takes the path, unless it only found its files in sub-folders that
        # are runs of another layout (event files somewhere under a folder of run directories).
        if not f.scored and all(name == f.name for _, name in layout_subs):
            return Detection(f.name)
    cands = [f for f in cands if f.scored]
    if p.is_dir() and subs:
        keep = []
        for f in cands:
            files = _reader_files(f, p)
            if files is None or any(s in q.parents for q in files for s in subs):
                keep.append(f)
        if not keep:
            names = [s.name for s in subs]
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            raise RunFolderError(
                f"a folder of {len(subs)} run(s) ({shown}), not one run: name one of "
                f"them, pass {p}/* to read each, or serve the folder (rlvitals serve {p})",
                path=str(p),
                runs=[str(s) for s in subs],
            )
        cands = keep
    if not cands:
        raise UnknownFormatError(_unreadable(p, fmts), path=str(p))
    refined = {name for f in cands for name in f.over}
    cands = [f for f in cands if f.name not in refined] or cands
    if len(cands) == 1 or nested:
        return Detection(cands[0].name)
    scores = {f.name: _score(f, p) for f in cands}
    best = max(cands, key=lambda f: (scores[f.name], -f.priority))
    top = scores[best.name][0]
    ties = [f for f in cands if _near(scores[f.name][0], top)]
    winner = min(ties, key=lambda f: f.priority)
    others = [
        f for f in ties if f is not winner and f.priority < CATCH_ALL and scores[f.name][0] > 0
    ]
    note = None
    if others:
        o = others[0]
        note = (
            f"{p}: read as {winner.name} ({winner.description}); it reads about as well as "
            f"{o.name}: use --from {o.name} to read it so"
        )
    return Detection(winner.name, note)


def _unreadable(p: Path, fmts: list[Format]) -> str:
    tried = ", ".join(f.name for f in fmts)
    hint = f"tried {len(fmts)} formats ({tried}); name one with --from FORMAT"
    if LOAD_ERRORS:
        hint += "; not loaded: " + "; ".join(f"{k} ({v})" for k, v in sorted(LOAD_ERRORS.items()))
    return f"not a run this version can read: {_looks_like(p)}; {hint}"


def _looks_like(p: Path) -> str:
    """A few words on what ``p`` holds, for the 'cannot read' message."""
    if p.is_dir():
        try:
            names = sorted(e.name for e in os.scandir(p) if not e.name.startswith("."))
        except OSError:
            names = []
        if not names:
            return "an empty folder"
        shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        return f"a folder of {len(names)} entries, none a run or a log this version knows ({shown})"
    data = head_bytes(p, 64 << 10)
    if not data:
        return "an empty file"
    if len(data) > 8 and (data[1:8:2] == b"\0\0\0\0" or data[0:8:2] == b"\0\0\0\0"):
        return "UTF-16 text (convert it to UTF-8, e.g. iconv -f UTF-16 -t UTF-8)"
    if data[:2] == b"\x1f\x8b":
        return "a gzip file (decompress it first)"
    text = data.decode("utf-8", errors="replace")
    bad = sum(1 for c in text if (c < " " and c not in "\t\r\n") or c == "\ufffd")
    if bad > len(text) // 10:
        return "binary data, not text"
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "a file of blank lines"
    first = lines[0].strip()
    if first.startswith("{"):
        from .base import decode_json

        try:
            rec, _ = decode_json(first)
        except ValueError:
            rec = None
        if isinstance(rec, dict):
            keys = ", ".join(list(map(str, rec))[:6])
            return f"JSON lines with no step field (first keys: {keys})"
    shown = first[:60].encode("unicode_escape").decode("ascii")
    where = "its one line" if len(lines) == 1 else f"its first {len(lines)} lines"
    return f"text with no step record in {where} (first: {shown!r})"


def discover(path: str | os.PathLike[str], *, depth: int = 2) -> list[Path]:
    """The runs at or under ``path``: ``[path]`` when it is one run, the runs in its
    sub-folders (down ``depth`` levels) when it is a folder of runs, else ``[]``."""
    p = Path(path)
    try:
        detect(p)
        return [p]
    except RunFolderError as exc:
        return [Path(r) for r in exc.runs]
    except ReadError:
        pass
    if depth <= 1 or not p.is_dir():
        return []
    out: list[Path] = []
    for child in _child_dirs(p):
        out.extend(discover(child, depth=depth - 1))
    return out
