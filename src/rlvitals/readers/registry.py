"""The one ordered registry of source formats, and sniffing: which format reads a path best.

Each reader module registers its formats with ``register(Format(..., priority=N))`` at import
(``_format``); the modules of this package are found and imported on first use (a new format is
one file and one ``register`` line: nothing else lists it), then the readers other packages
declare in the ``rlvitals.readers`` entry-point group (docs/formats.md). ``priority`` orders the formats from the most
specific (a run directory, a framework's own file) to the most general (any JSONL, any CSV).

Sniffing (``detect``):

1. A format recognised by its layout (its reader is not a line reader: a run directory, a TRL
   output directory, event files, a tracker's store) takes the path in priority order.
2. A folder whose sub-folders are runs is a folder of runs (``RunFolderError``;
   ``rlvitals.source.find_runs`` lists them), unless a candidate format reads files inside those sub-folders as one run
   (prime-rl's ``trainer/`` and ``orchestrator/``). A stray ``summary.csv`` beside the runs
   does not make the folder one CSV run.
3. Every other format whose sniffer accepts the path reads a sample of it; the reading with
   the most evidence wins: steps whose numbers the file prints (a ``step:N`` marker, a step
   column or key), then records. A reading that numbers records itself (in order of
   appearance, by a progress bar) has less evidence than one whose steps are printed: the
   letters of a sample printout read as ``E: 1`` lines never outnumber the ``step:N`` lines
   of the same log. A near tie (within 10%) goes to the more specific format
   (the framework's own reader knows what its keys mean), with a note naming the other and
   the ``--from`` that picks it, unless the other is a catch-all reading (priority 90 and
   up: any JSONL, any CSV, any console log). Where no reading finds a printed step in the
   first ``SAMPLE_BYTES`` of a larger file, the candidates read a longer sample
   (``DEEP_SAMPLE_BYTES``): a console whose first step comes after 600 kB of printouts.
4. "Unreadable" is only for a path no format accepts; the error says what the path looked like
   and what was tried.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import sys
from pathlib import Path
from typing import NamedTuple

from ..errors import ReadError, RunFolderError, UnknownFormatError
from ._format import FORMATS, Format, Reader, register
from .base import FileReader, describe_path, local_path, open_binary

__all__ = ["FORMATS", "Detection", "Format", "Reader", "detect", "formats", "register"]

SAMPLE_BYTES = 256 << 10  # bytes of each file read to score a candidate format
DEEP_SAMPLE_BYTES = 8 << 20  # read when no candidate finds a printed step in the first sample
NEAR = 0.1  # records read within 10% are a tie
CATCH_ALL = 90  # priorities from here on are the catch-all readings (any JSONL, CSV, console)
SKIP_DIRS = {"transcripts", "checkpoints", "__pycache__", "node_modules", "site-packages"}
_NOT_READERS = {"base", "registry"}
ENTRY_POINTS = "rlvitals.readers"  # the entry-point group of other packages' readers


LOAD_ERRORS: dict[str, str] = {}  # reader module -> why it could not be imported


_loaded = False


def load_all() -> None:
    """Import every reader module of this package once (sub-packages' too: the ``samples``
    format), so each registers its formats; then the readers other packages declare in the
    ``rlvitals.readers`` entry-point group (``ENTRY_POINTS``)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    _import_modules(__package__ or "rlvitals.readers")
    _load_entry_points()


def _import_modules(package: str) -> None:
    # The package is imported already (this module is in it): its search path, as Python set it.
    for mod in sorted(pkgutil.iter_modules(sys.modules[package].__path__), key=lambda m: m.name):
        if mod.name.startswith("_") or mod.name in _NOT_READERS:
            continue
        try:
            importlib.import_module(f"{package}.{mod.name}")
        except ImportError as exc:  # a reader whose optional dependency is missing
            if (exc.name or "").partition(".")[0] == "rlvitals":
                raise  # a mistake of ours: never a format left out without a word
            LOAD_ERRORS[mod.name] = str(exc)
            continue
        if mod.ispkg:
            _import_modules(f"{package}.{mod.name}")


def _load_entry_points() -> None:
    """Register the formats of other packages' readers: an entry point names a module that
    calls ``register(Format(...))`` when imported, or a ``Format`` itself. A name already
    taken by a format of ours stays ours; a reader that fails to load is left out and named
    in ``LOAD_ERRORS`` (shown where a path cannot be read), never a reason to stop reading."""
    from importlib.metadata import entry_points

    for ep in sorted(entry_points(group=ENTRY_POINTS), key=lambda e: e.name):
        before = dict(FORMATS)
        try:
            obj = ep.load()
        except Exception as exc:
            LOAD_ERRORS[ep.name] = f"entry point {ep.value}: {type(exc).__name__}: {exc}"
            continue
        if isinstance(obj, Format) and FORMATS.get(obj.name) is not obj:
            register(obj)
        for name, fmt in before.items():
            if FORMATS[name] is not fmt:
                FORMATS[name] = fmt
                LOAD_ERRORS[ep.name] = (
                    f"entry point {ep.value}: format {name!r} is registered already, kept"
                )


def formats() -> list[Format]:
    """Every registered format, in sniffing order."""
    load_all()
    return sorted(FORMATS.values(), key=lambda f: f.priority)  # stable: ties keep module order


class Detection(NamedTuple):
    """The format chosen for a path, and a note when another read it about as well."""

    format: str
    note: str | None = None


# path -> which readings were compared and what each read, for ``formats --explain``
_WHY: dict[str, str] = {}


def sniff_reason(path: str | os.PathLike[str]) -> str | None:
    """Why the last ``detect`` of ``path`` chose its format (one sentence), if it compared."""
    return _WHY.get(str(local_path(path)))


def _chosen(p: Path, name: str, note: str | None, why: str) -> Detection:
    if len(_WHY) > 256:
        _WHY.clear()
    _WHY[str(p)] = why
    return Detection(name, note)


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


class Score(NamedTuple):
    """What a candidate format read from a sample: steps whose numbers the file prints,
    steps in all, canonical values, all values."""

    printed: int
    records: int
    canonical: int
    values: int


def _score(fmt: Format, p: Path, sample: int = SAMPLE_BYTES) -> Score:
    """What ``fmt`` reads from the first ``sample`` bytes of ``p``; a record is a step read.
    A reader that numbers records itself says how many steps it numbered in
    ``info["steps_numbered"]`` (those are not printed)."""
    try:
        reader = fmt.factory(p)
        if isinstance(reader, FileReader):
            reader.sample_bytes = sample
        reader.poll()
    except (OSError, ValueError, TypeError, KeyError, IndexError, RecursionError, ReadError):
        return Score(0, 0, 0, 0)
    run = reader.run
    canon = total = 0
    for name in run.metrics.names():
        s = run.metrics.get(name)
        n = 0 if s is None else len(s)
        total += n
        if run.is_canonical(name):
            canon += n
    steps = len(run.steps())
    numbered = run.info.get("steps_numbered", 0)
    numbered = numbered if isinstance(numbered, int) else 0
    return Score(max(steps - numbered, 0), steps, canon, total)


def _evidence(s: Score, by_printed: bool) -> tuple[int, ...]:
    return (s.printed, s.records, s.canonical, s.values) if by_printed else tuple(s[1:])


_ANY_MARKER = re.compile(
    rb"(?i)(?:^|[\s\](|])(?:global[ _]step|step|iter(?:ation)?|epoch|update)\s*[:=#\[(]?\s*\d"
)


def _marker_beyond(p: Path) -> bool:
    """Whether a step marker of any shape appears past the first sample (a quick byte scan,
    so a large log without any is not read twice)."""
    try:
        with open(p, "rb") as f:
            f.seek(SAMPLE_BYTES)
            data = f.read(DEEP_SAMPLE_BYTES - SAMPLE_BYTES)
    except OSError:
        return False
    return _ANY_MARKER.search(data) is not None


def _size(p: Path) -> int:
    try:
        return p.stat().st_size if p.is_file() else 0
    except OSError:
        return 0


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
            why = f"read as {f.name}: recognised by its content ({f.description})"
            return _chosen(p, f.name, None, why)
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
        why = f"read as {cands[0].name}: the only format whose sniffer accepts it"
        return _chosen(p, cands[0].name, None, why)
    scores = {f.name: _score(f, p) for f in cands}
    if (
        max(s.printed for s in scores.values()) < 2
        and _size(p) > SAMPLE_BYTES
        and _marker_beyond(p)
    ):
        # The framework readers first (fast); the catch-all readings only if none of them
        # finds printed steps further in (their head readings found none either).
        for group in ([f for f in cands if f.priority < CATCH_ALL], cands):
            deep = {f.name: _score(f, p, DEEP_SAMPLE_BYTES) for f in group}
            if deep and max(s.printed for s in deep.values()) >= 2:
                scores = {**scores, **deep}
                break
    # Printed steps are the evidence where some reading finds at least two of them.
    by_printed = max(s.printed for s in scores.values()) >= 2
    best = max(cands, key=lambda f: (_evidence(scores[f.name], by_printed), -f.priority))
    top = _evidence(scores[best.name], by_printed)[0]
    ties = [f for f in cands if _near(_evidence(scores[f.name], by_printed)[0], top)]
    winner = min(ties, key=lambda f: f.priority)
    others = [
        f for f in ties if f is not winner and f.priority < CATCH_ALL and scores[f.name].records > 0
    ]
    note = None
    if others:
        o = others[0]
        note = (
            f"{p}: read as {winner.name} ({winner.description}); it reads about as well as "
            f"{o.name}: use --from {o.name} to read it so"
        )
    return _chosen(p, winner.name, note, _why(winner, cands, scores, by_printed))


def _why(winner: Format, cands: list[Format], scores: dict[str, Score], by_printed: bool) -> str:
    """One sentence on the readings compared, for ``formats --explain``."""

    def one(f: Format) -> str:
        s = scores[f.name]
        numbered = s.records - s.printed
        extra = f", {numbered} numbered by the reader" if numbered else ""
        return f"{f.name} {s.printed} printed steps of {s.records}{extra}"

    rest = [one(f) for f in cands if f is not winner]
    rule = (
        "the reading with the most steps whose numbers the file prints wins"
        if by_printed
        else "no reading finds printed step numbers: the one with the most records wins"
    )
    tie = "; a near tie goes to the more specific format" if rest else ""
    return (
        f"read as {one(winner)}"
        + (f"; compared with {', '.join(rest)}" if rest else "")
        + (f" ({rule}{tie})")
    )


def _unreadable(p: Path, fmts: list[Format]) -> str:
    tried = ", ".join(f.name for f in fmts)
    hint = f"tried {len(fmts)} formats ({tried}); name one with --from FORMAT"
    if LOAD_ERRORS:
        hint += "; not loaded: " + "; ".join(f"{k} ({v})" for k, v in sorted(LOAD_ERRORS.items()))
    return f"not a run this version can read: {describe_path(p)}; {hint}"
