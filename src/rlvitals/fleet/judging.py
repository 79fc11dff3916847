"""Read and judge many runs, in one process or N.

Each run is read and checked on its own: a run that cannot be read is an Outcome with an
error line, and the others are still judged. Workers send back plain dicts (the report's
JSON form), so what ``--jobs 4`` prints is what ``--jobs 1`` prints.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..checks.base import severity_rank

__all__ = ["Outcome", "judge"]


@dataclass
class Outcome:
    """One run of a fleet: its report (as ``Report.to_dict()``) or why it could not be read."""

    path: str
    report: dict[str, Any] | None = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    warning_count: int = 0

    @property
    def worst(self) -> str:
        """The worst finding's severity; ``error`` for a run that could not be read."""
        return "error" if self.report is None else str(self.report["worst"])

    @property
    def rank(self) -> int:
        """How bad, for sorting: an unreadable run above a failing one."""
        return 4 if self.report is None else severity_rank(self.worst)

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape of one run: ``path`` and the report's fields, or ``error``."""
        if self.report is None:
            return {"path": self.path, "error": self.error}
        return {"path": self.path, **self.report}


def _read_and_check(path: str, options: dict[str, Any]) -> tuple[Any, Any, str | None]:
    """Read and check one run: ``(data, report, None)``, or ``(None, None, error line)``."""
    from ..checks import run_checks
    from ..errors import RlvitalsError
    from ..readers import read
    from ..readers.keys import require_metrics, unmapped_numeric

    try:
        data = read(
            path,
            options.get("source_format"),
            mapping=options.get("mapping"),
            samples=options.get("samples"),
            run=options.get("run"),
        )
        require_metrics(data, path)  # keys but no canonical metric: an error, not "too early"
        report = run_checks(
            data,
            baseline=options.get("baseline"),
            thresholds=options.get("thresholds"),
            stall_after=options.get("stall_after"),
            only=options.get("only"),
            transcript_rules=options.get("transcript_rules"),
        )
        unmapped = unmapped_numeric(data)
        if unmapped:  # numbers read that mean nothing to the checks, each with its mapping
            report.info["unmapped"] = unmapped
    except RlvitalsError as exc:
        return None, None, str(exc)
    except (OSError, MemoryError, RecursionError, ValueError) as exc:
        return None, None, f"{path}: could not be read: {type(exc).__name__}: {exc}"
    return data, report, None


def _one(path: str, options: dict[str, Any]) -> Outcome:
    """Read and check one run; every failure becomes the Outcome's error line."""
    data, report, error = _read_and_check(path, options)
    if error is not None:
        return Outcome(path, error=error)
    keep = int(options.get("keep_warnings", 20))
    return Outcome(
        path,
        report=report.to_dict(),
        warnings=list(data.warnings[:keep]),
        warning_count=len(data.warnings),
    )


def _one_star(args: tuple[str, dict[str, Any]]) -> Outcome:
    return _one(*args)


def _context() -> Any:
    # fork is cheap and inherits the imported modules; elsewhere the platform's default.
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def ordered_map(fn: Callable[[Any], Any], items: Sequence[Any], jobs: int = 1) -> Iterator[Any]:
    """``fn`` of each item, in the items' order, in ``jobs`` processes (0: one per core); each
    result as soon as it (and those before it) is ready. Judging and exporting share it."""
    if jobs <= 0:
        jobs = os.cpu_count() or 1
    jobs = max(1, min(int(jobs), len(items)))
    if jobs == 1:
        yield from map(fn, items)
        return
    # Small chunks keep the order-preserving stream flowing; several per worker keep
    # inter-process overhead low on fleets of short runs.
    chunk = max(1, min(16, len(items) // (jobs * 8)))
    with ProcessPoolExecutor(max_workers=jobs, mp_context=_context()) as pool:
        yield from pool.map(fn, items, chunksize=chunk)


def judge_iter(paths: Sequence[str], *, jobs: int = 1, **options: Any) -> Iterator[Outcome]:
    """Outcomes in the order of ``paths``, each as soon as it (and those before it) is ready.

    ``options`` are ``run_checks``'s keywords (baseline, thresholds, stall_after, only,
    transcript_rules) and the reader's (source_format, mapping, run).
    """
    yield from ordered_map(_one_star, [(p, options) for p in paths], jobs)


def judge(
    paths: Sequence[str],
    *,
    jobs: int = 1,
    on_outcome: Callable[[Outcome], None] | None = None,
    **options: Any,
) -> list[Outcome]:
    """Read and check every run in ``paths`` with ``jobs`` processes; see ``judge_iter``."""
    out = []
    for o in judge_iter(paths, jobs=jobs, **options):
        if on_outcome is not None:
            on_outcome(o)
        out.append(o)
    return out
