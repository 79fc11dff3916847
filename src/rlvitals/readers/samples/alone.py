"""A sample dump read as a run of its own, where no scalar log is beside it.

A TRL output folder with only ``completions/`` (``report_to="none"``, no checkpoint yet), a
NeMo-RL log folder without TensorBoard, a Miles ``--dump-details`` folder: the run is its
attempts and the step aggregates computed from them. Sniffed only from the folder that holds
the framework's default layout (``<output_dir>`` with ``completions/``, not ``completions/``
itself), so a dump inside a run is never taken for a second run; ``--from samples`` reads any
dump folder, a verl ``rollout_data_dir`` included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...model import RunData
from .._format import Format, register
from ..mapping import MappingTable
from . import dump_formats, open_samples

__all__ = ["DumpReader"]


def _sniff(p: Path) -> bool:
    if not p.is_dir():
        return False
    for fmt in dump_formats():
        if not fmt.beside:
            continue  # read alone only where named (--from samples)
        if fmt.name == "prime-rl-stream" and _prime_metrics_beside(p):
            continue  # its metrics are beside it: read as prime-rl, the stream attached
        sub = p / fmt.default_subdir if fmt.default_subdir else p
        if sub.is_dir() and fmt.step_files(sub):
            return True
    return False


def _prime_metrics_beside(p: Path) -> bool:
    """Whether prime-rl's own ``metrics.jsonl`` is at ``p``, beside it or in its
    ``monitors/file/`` (the ``prime-rl`` format reads it and attaches the trace stream)."""
    from ..primerl import is_prime_metrics

    return any(
        (m := p / q / "metrics.jsonl").is_file() and is_prime_metrics(m)
        for q in (".", "..", "monitors/file")
    )


class DumpReader:
    """Reads a sample dump alone: attempts, aggregates and transcripts, no step log."""

    name = "samples"

    def __init__(self, path: Path, **_: Any) -> None:
        d = path if path.is_dir() else path.parent
        self.run = RunData(source=str(d), format=self.name)
        self.source = open_samples(d, self.run)

    def poll(self) -> bool:
        return self.source.poll()

    def finish(self) -> None:
        self.source.poll(final=True)


register(
    Format(
        "samples",
        "a framework's sample dump alone (TRL completions/, prime-rl rollouts/ or traces/, NeMo-RL "
        "train_data_step*.jsonl, tinker iteration_*/, Miles rollout_data/; verl with --from)",
        _sniff,
        DumpReader,
        priority=98,
        table=MappingTable(
            "samples",
            (),
            notes=(
                "No scalar keys: one attempt per sample, and the step metrics computed from them "
                "(reward/*, groups/*, discard/groups/*, response/*, freshness/* where versioned, "
                "train/mismatch_* where both logprobs are dumped); docs/integrations.md.",
                "Dump formats (found beside a log or read alone, verl only with --samples or "
                "--from samples; `formats --explain` names the one read): "
                + ", ".join(f.name for f in dump_formats())
                + ".",
            ),
        ),
        kind="sample dump",
        files="the folder holding the dump",
    )
)
