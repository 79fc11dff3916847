"""The frameworks' per-sample dumps, read as the run's attempts and transcripts.

One module per dump format:

| format | files | module |
|---|---|---|
| verl | ``trainer.rollout_data_dir``: ``DIR/<global_step>.jsonl`` | ``verl`` |
| TRL | ``log_completions``: ``<output_dir>/completions/completions_{step:05d}.parquet`` | ``trl`` |
| prime-rl | ``<output_dir>/rollouts/step_N/train/{all,effective}/traces.jsonl`` | ``primerl`` |
| prime-rl (newer) | ``<output_dir>/monitors/file/traces/stream/NNNNN.jsonl[.zst]`` | ``primerl_traces`` |
| NeMo-RL | ``<log_dir>/train_data_step{N}.jsonl`` | ``nemorl`` |
| tinker-cookbook | ``<log_path>/iteration_NNNNNN/train_rollout_summaries.jsonl`` | ``tinker`` |
| Miles / slime | ``--save-debug-rollout-data``: ``<dir>/{rollout_id}.pt`` | ``miles`` |
| W&B tables | a W&B run's tables with prompt and completion columns (TRL's ``completions``) | ``wandb`` |

``attach(reader, samples)`` wraps any reader so each ``poll`` also reads the dump's settled
steps (``base.SampleSource``): the run gets its attempts table, the per-step aggregates its
step records lack, and ``run.transcripts``, a lazy store over the dump's own files. Without
``samples``, the dump is looked for where the framework puts it by default beside the log
(``find``); verl has no default place, so it needs ``--samples DIR``. A W&B run reads the
tables its history names (``wandb``), unless such a dump is beside it.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from pathlib import Path
from typing import Any

from ...errors import UnknownFormatError
from ...model import RunData
from .base import DUMP_FORMATS, DumpFormat, SampleSource, SampleTranscripts

__all__ = [
    "SampleSource",
    "SampleTranscripts",
    "SampledReader",
    "attach",
    "dump_formats",
    "find",
    "open_samples",
]


def dump_formats() -> list[DumpFormat]:
    """A fresh instance of every registered dump format (each module of this package registers
    its own, ``base.register_dump``), in sniffing order (``priority``)."""
    _load_dumps()
    found = sorted(DUMP_FORMATS.values(), key=lambda cls: cls.priority)
    return [cls() for cls in found]


_loaded = False


def _load_dumps() -> None:
    """Import every module of this package once, so each registers its dump format (a module
    that asks for the list while it is imported gets the whole of it)."""
    global _loaded
    if _loaded:
        return
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
    _loaded = True


def _sniff(d: Path, fmt: DumpFormat) -> Path | None:
    """The dump directory of ``fmt`` at ``d`` (itself, or its default sub-folder)."""
    if fmt.sniff(d):
        return d
    if fmt.default_subdir:
        sub = d / fmt.default_subdir
        if sub.is_dir() and fmt.sniff(sub):
            return sub
    return None


def open_samples(
    directory: str | os.PathLike[str], run: RunData, format: str | None = None
) -> SampleSource:
    """The sample dump at ``directory`` (sniffed, or ``format``: a dump format's name)."""
    d = Path(directory)
    if not d.is_dir():
        raise UnknownFormatError("--samples: expected a directory of sample files", path=str(d))
    for fmt in dump_formats():
        if format is not None and fmt.name != format:
            continue
        got = _sniff(d, fmt)
        if got is not None:
            return SampleSource(got, fmt, run)
    raise UnknownFormatError(
        "--samples: no sample dump found here; expected one of: "
        + "; ".join(f.description for f in dump_formats()),
        path=str(d),
    )


def find(path: str | os.PathLike[str]) -> tuple[Path, DumpFormat] | None:
    """The dump the framework wrote by default beside the log at ``path``, if any: TRL's
    ``completions/`` in its output directory (a TensorBoard folder ``runs/<x>`` is two below
    it), prime-rl's ``rollouts/``, NeMo-RL's ``train_data_step*.jsonl`` (its TensorBoard is
    ``<log_dir>/tensorboard``), prime-rl's ``traces/`` beside ``monitors/file/metrics.jsonl``, tinker's ``iteration_*/``, Miles' ``rollout_data/``."""
    p = Path(path)
    d = p if p.is_dir() else p.parent
    places = [d, d.parent, d.parent.parent]
    for place in places:
        if not place.is_dir():
            continue
        for fmt in dump_formats():
            if not fmt.beside:
                continue  # no default place (verl's: a numbered JSONL folder could be anything)
            got = fmt.step_files(place / fmt.default_subdir) if fmt.default_subdir else None
            if got:
                return place / (fmt.default_subdir or ""), fmt
            if fmt.default_subdir is None and fmt.step_files(place):
                return place, fmt
    return None


class SampledReader:
    """A reader whose run also gets a sample dump's attempts, aggregates and transcripts."""

    def __init__(self, inner: Any, source: SampleSource) -> None:
        self.inner = inner
        self.source = source
        self.name = inner.name
        self.run: RunData = inner.run

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def poll(self) -> bool:
        changed = bool(self.inner.poll())
        # The step records first: the aggregates fill only what they lack.
        return self.source.poll() or changed

    def finish(self) -> None:
        finish = getattr(self.inner, "finish", None)
        if finish is not None:
            finish()
        self.source.poll(final=True)


def attach(reader: Any, samples: str | os.PathLike[str] | None = None, *, path: Any = None) -> Any:
    """``reader`` with the sample dump at ``samples`` attached, or the one found beside
    ``path`` by default; the reader itself when there is none (or the run is a run directory
    of ours, which has its attempts already)."""
    run = reader.run
    if samples is not None:
        return SampledReader(reader, open_samples(samples, run))
    if path is None or reader.name in ("rlvitals", "samples"):
        return reader
    got = find(path)
    if reader.name == "wandb":
        # The run's own completions tables, unless the framework's dump is beside it: TRL
        # writes the same rows to both, and its parquet has them all (``wandb`` module).
        from .wandb import TablesReader

        return TablesReader(reader, SampleSource(got[0], got[1], run) if got else None)
    if got is None:
        return reader
    d, fmt = got
    return SampledReader(reader, SampleSource(d, fmt, run))
