"""Every run under a folder: run directories and log files, never a folder taken for a run
because one stray file in it looks like a log.

A directory is one run when it carries a run's own marker (an rlvitals ``run.json`` or
``steps.jsonl``, a TRL/HF ``trainer_state.json`` or ``checkpoint-*/trainer_state.json``,
TensorBoard event files, a W&B ``*.wandb`` log, an rlprobe ``manifest.json`` with its
``steps.parquet`` or ``steps/`` parts). Otherwise its files that a reader recognises
are runs each, its sub-folders are searched the same way, and what no reader recognises
(``launcher.log`` with no record, a ``summary.csv`` without a step column) is listed as
skipped. Numbered sample dumps (verl's ``rollout_data_dir/<step>.jsonl``) are the samples of
a run beside them, not runs of their own.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ReadError, UnknownFormatError
from ..readers.base import is_regular_file, local_path, open_binary

__all__ = ["Discovery", "find_runs"]

_LOG_SUFFIXES = {".jsonl", ".json", ".csv", ".log", ".txt", ".out", ".err", ".tsv", ".md"}
_SAMPLE_DUMP = re.compile(r"^\d+\.jsonl$")
_SKIP_DIRS = {"__pycache__", "node_modules", ".git", ".ipynb_checkpoints"}
# W&B's own logs of its service, beside the runs in a wandb/ folder: never a run.
_WANDB_LOGS = {"debug.log", "debug-internal.log", "debug-cli.log", "debug-core.log"}
_WANDB_RUN = re.compile(r"^(offline-)?run-\d{8}_\d{6}-\w+$")
# Folders where frameworks put a run's samples beside its log: not runs of their own when the
# folder above holds a log.
_SAMPLE_DIRS = re.compile(
    r"^(completions|rollouts?|samples|rollout_data|train_data|traces|checkpoints?|"
    r"step_\d+|iteration_\d+|global_step_?\d+)$"
)


@dataclass
class Discovery:
    """What ``find_runs`` found: the runs, in a stable order, and the files passed over."""

    runs: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _is_run_dir(d: Path) -> bool:
    """Whether ``d`` is one run by its own markers (see the module docstring)."""
    try:
        names = set(os.listdir(d))
    except OSError:
        return False
    if names & {"run.json", "steps.jsonl", "trainer_state.json"}:
        return True
    if "manifest.json" in names and names & {"steps.parquet", "steps"}:
        return True  # an rlprobe recording (readers/rlprobe.py)
    for n in names:
        if "tfevents" in n or n.endswith(".wandb"):
            return True
        if n.startswith("steps.") and n.endswith(".jsonl"):
            return True  # a sharded rlvitals run without the trainer's own file yet
    return any(
        (d / n / "trainer_state.json").is_file() for n in names if n.startswith("checkpoint-")
    )


def _recognised(p: Path) -> bool:
    from ..readers import sniff

    try:
        sniff(p)
    except (UnknownFormatError, ReadError, OSError):
        return False
    return True


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


def _walk(d: Path, found: Discovery, depth: int) -> None:
    if _is_run_dir(d):
        found.runs.append(str(d))
        return
    if depth > 12:
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
    wandb_dir = any(e.name == "latest-run" or _WANDB_RUN.match(e.name) for e in entries)
    for e in entries:
        if e.name.startswith(".") or e.name in _SKIP_DIRS:
            continue
        p = Path(e.path)
        try:
            is_dir = e.is_dir()
        except OSError:
            continue
        if is_dir:
            if e.is_symlink() and Path(os.path.realpath(p)).parent == Path(os.path.realpath(d)):
                continue  # an alias of a sibling (W&B's latest-run): the run once, by name
            subdirs.append(p)
        elif _SAMPLE_DUMP.match(e.name) or (wandb_dir and e.name in _WANDB_LOGS):
            continue
        elif p.suffix.lower() in _LOG_SUFFIXES or ".log" in e.name:
            if _recognised(p):
                found.runs.append(str(p))
                has_log = True
            elif _unreadable(p):
                found.runs.append(str(p))  # judged as one error line: "cannot read"
            else:
                found.skipped.append(str(p))
    for p in subdirs:
        if has_log and _SAMPLE_DIRS.match(p.name):
            continue
        _walk(p, found, depth + 1)


def find_runs(path: str | os.PathLike[str]) -> Discovery:
    """Every run at or under ``path``.

    A file is one run (reading it says whether it is one); a run directory is one run; any
    other folder is searched. Raises ``UnknownFormatError`` when ``path`` does not exist or
    a folder holds no run at all (naming what was passed over).
    """
    from ..readers.remote import is_url

    if is_url(path):
        from ..readers.remote import remote_runs

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
    found = Discovery()
    _walk(p, found, 0)
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
