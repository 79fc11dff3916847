"""What a reader module registers: a ``Format`` (name, sniffer, factory) in ``FORMATS``.

The bottom of the readers' layering: reader modules import ``Format`` and ``register`` from
here, and the registry (sniffing, ``formats()``) and the package face import the reader
modules, never the other way round. A ``Format`` also says what the one discovery
(``rlvitals.source.find_runs``) needs to know of it (``readers.discovery``): the files that
make a folder one of its runs, the folders beside its log that hold its samples, the file
suffixes worth sniffing, the names in a folder that are never runs. So a new reader, a folder
layout included, is one file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..model import RunData
from .base import FileReader

if TYPE_CHECKING:
    from .mapping import MappingTable

__all__ = ["FORMATS", "Format", "Reader", "register"]


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

    What discovery needs (all optional):

    - ``markers``: names (glob patterns, ``"*tfevents*"``) whose presence in a folder makes it
      one run of this format (``run.json``, ``trainer_state.json``);
    - ``marks(folder, names)``: the same for a layout a name cannot say (prime-rl's
      ``trainer/`` and ``orchestrator/``, an MLflow store);
    - ``sample_dirs``: folder names (regular expressions) beside its log that hold its samples
      or checkpoints, never runs of their own;
    - ``suffixes``: file suffixes (lower case) discovery sniffs for it (``.jsonl``, ``.log``);
    - ``passes_over(names)``: the names among a folder's entries that are never runs (W&B's
      own service logs beside its run folders);
    - ``loose(path)``: whether a file it reads, found loose in a folder, is a run of its own
      (default: every one): a table without a step column is read when a user names it, and
      passed over beside runs (a stray ``summary.csv``).
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
        markers: tuple[str, ...] = (),
        marks: Callable[[Path, set[str]], bool] | None = None,
        sample_dirs: tuple[str, ...] = (),
        suffixes: tuple[str, ...] = (),
        passes_over: Callable[[list[str]], Iterable[str]] | None = None,
        loose: Callable[[Path], Any] | None = None,
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
        self.markers = markers
        self.marks = marks
        self.sample_dirs = sample_dirs
        self.suffixes = suffixes
        self.passes_over = passes_over
        self.loose = loose

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


def register(fmt: Format) -> Format:
    """Add a format to the registry (reader modules call this at import)."""
    FORMATS[fmt.name] = fmt
    return fmt
