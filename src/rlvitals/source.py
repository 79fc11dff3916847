"""What a user points at, resolved once: one run (``Source``) or every run under a folder
(``find_runs``), for every front end (check, report, export, watch, serve, the hooks).

    source = Source("runs/my-run", format=None, mapping=None, samples=None, run=None)
    data = source.read()                 # the whole run, RunData
    reader = source.open()               # an incremental reader (watch, serve)
    store = source.transcripts(data)     # where its transcripts are, or None
    find_runs("runs/").runs              # every run under a folder

``transcripts`` is the one choice of where a run's transcripts are: a framework's sample dump
that the reader attached (prime-rl ``rollouts/``, tinker ``iteration_*/``, ``--samples``), else
the run directory's own ``transcripts/``. The checks scan what it returns and the report and the
live page offer the same.

``find_runs`` is the one discovery. A directory is one run when it carries a run's own marker,
as each reader's ``Format`` declares it (an rlvitals ``run.json``, a TRL ``trainer_state.json``,
TensorBoard event files, a W&B ``*.wandb`` log, a prime-rl run's ``{trainer,orchestrator}/``,
an MLflow file store, ...: ``readers.discovery``). Otherwise its files that a reader recognises
are runs each (two logs in one folder are two runs), its sub-folders are searched the same way,
and what no reader recognises (``launcher.log`` with no record, a ``summary.csv`` without a step
column) is listed as skipped. A sample dump's files (verl's ``rollout_data_dir/<step>.jsonl``)
and the sample folders beside a log are the samples of that run, not runs of their own. A
folder with no run in it that reads as one run as a whole (a format whose files sit loose in
one folder) is that run.
"""

from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ReadError, UnknownFormatError
from .readers.base import is_regular_file, local_path, open_binary

if TYPE_CHECKING:
    from .model import RunData
    from .readers.registry import Reader
    from .transcripts.store import TranscriptStore

__all__ = ["Discovery", "Finder", "Source", "find_runs", "run_dir", "transcript_store"]


@dataclass(frozen=True)
class Source:
    """One run and how to read it: ``format`` overrides sniffing (``--from``), ``mapping`` adds
    a user's ``canonical = "source key"`` rules (``--mapping``), ``samples`` names a sample dump
    read as its attempts (``--samples``), ``run`` picks one run of a tracker store that holds
    several (``--run``)."""

    path: str
    format: str | None = None
    mapping: str | None = None
    samples: str | None = None
    run: str | None = None

    def __post_init__(self) -> None:
        for name in ("path", "mapping", "samples"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                object.__setattr__(self, name, os.fspath(value))

    def at(self, path: str | os.PathLike[str]) -> Source:
        """The same options for another run (a run found under a folder)."""
        return dataclasses.replace(self, path=os.fspath(path))

    def open(self) -> Reader:
        """An incremental reader of the run (``poll()`` reads what is new)."""
        from .readers import open_reader

        kw: dict[str, Any] = {"mapping": self.mapping}
        if self.samples is not None:
            kw["samples"] = self.samples
        if self.run is not None:
            kw["run"] = self.run
        return open_reader(self.path, self.format, **kw)

    def read(self) -> RunData:
        """The whole run, read once into the canonical model."""
        from .readers import read

        data = read(
            self.path, self.format, mapping=self.mapping, samples=self.samples, run=self.run
        )
        if self.format is not None:
            _require_forced(data, self.format)
        return data

    def transcripts(self, data: RunData) -> TranscriptStore | None:
        """The run's transcripts (see ``transcript_store``)."""
        return transcript_store(data)


def _require_forced(data: RunData, fmt: str) -> None:
    """Refuse a ``--from`` that read nothing at all from a path that holds something another
    reader reads (a run directory read ``--from json``): an input error, not a run "too early
    to tell". Nothing read where the format itself is what the path sniffs as, or from an
    empty path, is a run that has just started."""
    if data.steps().size or data.evals or (data.attempts is not None and len(data.attempts)):
        return
    if any("skipped" in w or "not read" in w for w in data.warnings):
        return  # records it could not read: the reader's own error names them (require_metrics)
    from .readers.base import describe_path
    from .readers.registry import detect

    p = local_path(data.source)
    try:
        names = sorted(e.name for e in os.scandir(p) if not e.name.startswith("."))
    except NotADirectoryError:
        names = None
    except OSError:
        return
    if names == [] or (names is None and not p.stat().st_size):
        return
    try:
        sniffed: str | None = detect(p).format
    except ReadError:
        sniffed = None
    if sniffed == fmt:
        return
    held = (
        describe_path(p)
        if names is None
        else f"a folder of {len(names)} entries ({', '.join(names[:6])}"
        + (", ...)" if len(names) > 6 else ")")
    )
    other = f"; without --from it reads as {sniffed}" if sniffed else ""
    raise ReadError(
        f"--from {fmt} read nothing from {held}{other} (`rlvitals formats {fmt}` says what "
        f"the {fmt} reader reads)",
        path=data.source,
    )


def run_dir(data: RunData) -> Path | None:
    """The folder of a run: its directory, or the folder of its log file."""
    p = Path(data.source)
    d = p if p.is_dir() else p.parent
    return d if d.is_dir() else None


def transcript_store(
    data: RunData, warn: Callable[[str], None] | None = None
) -> TranscriptStore | None:
    """Where the run's transcripts are, or None when it has none: the sample dump the reader
    attached (``data.transcripts``), else ``<run>/transcripts/``. A problem file of a new store
    is one line in its ``warnings`` (and to ``warn``); nothing is written into ``data``."""
    if data.transcripts is not None:  # a framework's sample dump (readers.samples)
        return data.transcripts
    d = run_dir(data)
    if d is None:
        return None
    from .transcripts.store import TranscriptStore

    store = TranscriptStore(d, warn=warn)
    return store if store.exists else None


# -- discovery -----------------------------------------------------------------------------

_SKIP_DIRS = {"__pycache__", "node_modules", ".git", ".ipynb_checkpoints"}
_MAX_DEPTH = 12


@dataclass
class Discovery:
    """What ``find_runs`` found: the runs, in a stable order, and the files passed over."""

    runs: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _recognised(p: Path) -> bool:
    """Whether a file found loose in a folder is a run: a format reads it, and that format
    takes such a file for a run of its own (``Format.loose``)."""
    from .readers import FORMATS, sniff

    try:
        fmt = FORMATS[sniff(p)]
        return fmt.loose is None or bool(fmt.loose(p))
    except (UnknownFormatError, ReadError, OSError, ValueError):
        return False


def _unreadable(p: Path) -> bool:
    """Whether ``p`` is a file or folder the user cannot read (a run, then, that is reported as
    one error line, not passed over); a FIFO, socket or device is no run and not this."""
    try:
        if p.is_dir():
            os.listdir(p)
            return False
        if not is_regular_file(p):
            return False
        with open_binary(p):
            return False
    except PermissionError:
        return True
    except OSError:
        return False


# Whether a file is a run, by path, as of its size and modification time: a pass over an
# unchanged folder (serve looks every few seconds; a folder and its sub-folders searched one
# after the other) sniffs nothing again.
_SNIFFED: OrderedDict[str, tuple[int, int, bool]] = OrderedDict()
_SNIFFED_MAX = 100_000


class Finder:
    """The discovery, for one folder or many passes over it (``rlvitals serve`` looks for new
    runs every few seconds).

    ``links``: False passes over every symbolic link (the served folder's own runs only);
    ``within``: also passes over whatever lies outside these folders."""

    def __init__(self, *, links: bool = True, within: list[Path] | None = None) -> None:
        from .readers.discovery import clues

        self.links = links
        self.within = [r.resolve() for r in within or []]
        self.clues = clues()  # what the registered formats say of runs, samples and dumps

    def find(self, path: str | os.PathLike[str]) -> Discovery:
        """Every run at or under ``path``, never raising for what lies beneath."""
        found = Discovery()
        self._walk(Path(path), found, 0)
        return found

    def _recognised(self, p: Path) -> bool:
        try:
            st = p.stat()
        except OSError:
            return False
        key = os.path.abspath(p)
        got = _SNIFFED.get(key)
        if got is not None and got[:2] == (st.st_size, st.st_mtime_ns):
            return got[2]
        ok = _recognised(p)
        _SNIFFED[key] = (st.st_size, st.st_mtime_ns, ok)
        if len(_SNIFFED) > _SNIFFED_MAX:
            _SNIFFED.popitem(last=False)
        return ok

    def _outside(self, p: Path) -> bool:
        if not self.within:
            return False
        try:
            real = p.resolve()
        except (OSError, RuntimeError):
            return True
        return not any(real == r or r in real.parents for r in self.within)

    def _walk(self, d: Path, found: Discovery, depth: int) -> None:
        clues = self.clues
        if clues.is_run_dir(d):
            found.runs.append(str(d))
            return
        if depth > _MAX_DEPTH:
            found.skipped.append(str(d))
            return
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except PermissionError:
            if depth == 0:
                raise UnknownFormatError("cannot read (Permission denied)", path=str(d)) from None
            found.runs.append(str(d))  # judged as one error line: "cannot read"
            return
        except OSError:
            found.skipped.append(str(d))
            return
        subdirs: list[Path] = []
        has_log = False
        first = len(found.runs)
        dumps = False
        never = clues.never_runs([e.name for e in entries])  # a format's own files, no runs
        for e in entries:
            if e.name.startswith(".") or e.name in _SKIP_DIRS:
                continue
            p = Path(e.path)
            try:
                link = e.is_symlink()
                is_dir = e.is_dir()
            except OSError:
                continue
            if link and (not self.links or self._outside(p)):
                continue  # a link out of the served folder: not served (serve --follow-links)
            if is_dir and link:
                real, here = Path(os.path.realpath(p)), Path(os.path.realpath(d))
                if real.parent == here:
                    continue  # an alias of a sibling (W&B's latest-run): the run once, by name
                if real == here or real in here.parents:
                    continue  # a link back into a folder being searched: a loop, not a run
            if is_dir:
                subdirs.append(p)
            elif e.name in never:
                continue
            elif (dump := clues.dump_file(e.name)) is not None:
                dumps = dumps or dump == "alone"  # a dump's files: the samples of a run
            elif p.suffix.lower() in clues.suffixes or ".log" in e.name:  # (train.log.1 too)
                if not is_regular_file(p):
                    if _unreadable(p):
                        found.runs.append(str(p))  # judged as one error line: "cannot read"
                    continue  # a FIFO, socket or device is never opened: it can block
                if self._recognised(p):
                    found.runs.append(str(p))
                    has_log = True
                elif _unreadable(p):
                    found.runs.append(str(p))  # judged as one error line: "cannot read"
                else:
                    found.skipped.append(str(p))
        for p in subdirs:
            if has_log and clues.sample_dir(p.name):
                continue
            self._walk(p, found, depth + 1)
        if dumps and len(found.runs) == first:
            found.runs.append(str(d))  # a dump's files and no log: the folder is one samples run


def find_runs(path: str | os.PathLike[str], *, within: list[Path] | None = None) -> Discovery:
    """Every run at or under ``path``.

    A file is one run (reading it says whether it is one); a run directory is one run; any
    other folder is searched. Raises ``UnknownFormatError`` when ``path`` does not exist or
    a folder holds no run at all (naming what was passed over). ``within``: symbolic links
    that lead outside these folders are passed over (``Finder``).
    """
    from .readers.remote import is_url

    if is_url(path):
        from .readers.remote import remote_runs

        return Discovery(runs=remote_runs(os.fspath(path)))
    text = os.fspath(path)
    p = local_path(text)  # a tracking URI (sqlite:///mlflow.db, file:///x/mlruns) names one
    if not p.exists():
        raise UnknownFormatError("no such file or directory", path=text)
    if p.is_file():
        return Discovery(runs=[text])
    if not p.is_dir():
        raise UnknownFormatError(
            "not a regular file (a FIFO, a socket or a device); not read", path=str(p)
        )
    finder = Finder(within=within)
    found = finder.find(p)
    if not found.runs:
        if _recognised(p):  # a format whose files sit loose in one folder
            return Discovery(runs=[str(p)])
        what = (
            f"; passed over {len(found.skipped)} files no reader recognises"
            if found.skipped
            else ""
        )
        raise UnknownFormatError(f"no run found in this folder{what}", path=str(p))
    return found
