"""Read and judge many runs, in one process or N.

Each run is read and checked on its own: a run that cannot be read is an Outcome with an
error line, and the others are still judged. Workers send back plain dicts (the report's
JSON form), so what ``--jobs 4`` prints is what ``--jobs 1`` prints.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..checks.base import Report, severity_rank
from ..judge import Judge, judging
from ..model import RunData
from ..source import Source

__all__ = ["Outcome", "judge", "judged", "plan", "run_bytes"]


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


def plan(options: dict[str, Any]) -> tuple[Source, Judge]:
    """The ``Source`` (its path left to fill) and ``Judge`` of a fleet's options: ``source``
    and ``judge`` as given, else built from the loose keywords (``source_format``,
    ``mapping``, ``samples``, ``run``; ``baseline``, ``thresholds``, ``stall_after``,
    ``only``, ``transcript_rules``)."""
    source = options.get("source") or Source(
        "",
        format=options.get("source_format"),
        mapping=options.get("mapping"),
        samples=options.get("samples"),
        run=options.get("run"),
    )
    judge = judging(
        options.get("judge"),
        baseline=options.get("baseline"),
        thresholds=options.get("thresholds"),
        rules=options.get("transcript_rules"),
        stall_after=options.get("stall_after"),
        only=options.get("only"),
    )
    return source, judge


def judged(data: RunData, judge: Judge) -> Report:
    """``data`` judged as ``rlvitals check`` judges it: ``judge``'s report, with the numbers
    read that mean nothing to the checks (each with its mapping) in ``info["unmapped"]``.
    Every front end that judges a read run (check, export, the MCP tools) goes through it."""
    from ..readers.keys import unmapped_numeric

    report = judge(data)
    unmapped = unmapped_numeric(data)
    if unmapped:
        report.info["unmapped"] = unmapped
    return report


def _read_and_check(path: str, options: dict[str, Any]) -> tuple[Any, Any, str | None]:
    """Read and check one run: ``(data, report, None)``, or ``(None, None, error line)``."""
    from ..errors import RlvitalsError
    from ..readers._split import side_by_side
    from ..readers.keys import require_metrics

    source, judge = plan(options)
    pre = None
    alone = options.get("prescan") and (os.cpu_count() or 1) > 1
    try:
        pre = _prescan(path, options, judge)
        with side_by_side() if alone else contextlib.nullcontext():
            data = source.at(path).read()  # a big rollouts file read in pieces side by side
        require_metrics(data, path)  # keys but no canonical metric: an error, not "too early"
        _take(pre)
        pre = None
        report = judged(data, judge)
    except RlvitalsError as exc:
        return None, None, str(exc)
    except Exception as exc:  # one run's failure (a reader's bug too) never loses the others
        return None, None, f"{path}: could not be read: {type(exc).__name__}: {exc}"
    finally:
        _take(pre)  # a failed read: its worker is waited for (it ends with its scan)
    return data, report, None


# A run whose transcripts are this big has them counted in a second process while this one
# reads its other files (rlvitals check of one run, or --jobs 1): on two cores a 10,000-update
# traced run's scan and its 2.56 million attempts are read side by side.
PRESCAN_BYTES = 64 << 20


def _prescan(path: str, options: dict[str, Any], judge: Judge) -> Any:
    """A future of the run's transcript counts (``transcripts.scan.cached_counts``), computed
    in a forked process, when the run is big and this process judges alone; else None."""
    if not options.get("prescan") or (os.cpu_count() or 1) < 2:
        return None
    from ..judge import load_run_rules
    from ..transcripts.store import TranscriptStore

    store = TranscriptStore(path)
    if not store.exists:
        return None
    try:
        with os.scandir(store.dir) as it:
            size = sum(e.stat().st_size for e in it if e.is_file())
    except OSError:
        return None
    if size < PRESCAN_BYTES:
        return None
    try:
        rules = load_run_rules(judge.rules, store.run_dir)
    except Exception:  # the check names a bad rules file itself
        return None
    from ..transcripts.scan import cached_counts

    pool = ProcessPoolExecutor(max_workers=1, mp_context=_context())
    future = pool.submit(cached_counts, str(store.run_dir), rules)
    pool.shutdown(wait=False)
    return future


def _take(pre: Any) -> None:
    """Take the pre-scan's counts into this process's cache (nothing if it failed)."""
    if pre is None:
        return
    from ..transcripts.scan import take_counts

    with contextlib.suppress(Exception):  # a worker that died: the files are counted here
        take_counts(pre.result())


def _one(path: str, options: dict[str, Any]) -> Outcome:
    """Read and check one run; every failure becomes the Outcome's error line."""
    data, report, error = _read_and_check(path, options)
    if error is not None:
        return Outcome(path, error=error)
    keep = int(options.get("keep_warnings", 20))
    said = data.warnings + [w for w in report.warnings if w not in data.warnings]
    return Outcome(
        path,
        report=report.to_dict(),
        warnings=said[:keep],
        warning_count=len(said),
    )


def _one_star(args: tuple[str, dict[str, Any]]) -> Outcome:
    return _one(*args)


def _context() -> Any:
    # fork is cheap and inherits the imported modules; elsewhere the platform's default.
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


# What judging costs, roughly (one core, rlvitals check): a run's fixed share (its metadata,
# every check) and each MB of its files. A fleet estimated under SERIAL_SECONDS is judged in
# one process: starting workers and sending reports back costs more than it saves there
# (200 runs of 60 updates, 19 MB: --jobs 2 took 0.98-1.48x the time of --jobs 1).
RUN_SECONDS = 0.01
MB_SECONDS = 1 / 60
SERIAL_SECONDS = 1.0
BATCH_SECONDS = 0.05  # small runs travel to a worker in batches of about this much work


def run_bytes(path: str) -> int:
    """Bytes of a run's files: a file's size, or a directory's files and its subdirectories'
    (transcripts, checkpoints) one level down; 0 where it cannot be read."""
    try:
        if not os.path.isdir(path):
            return os.path.getsize(path)
        total = 0
        with os.scandir(path) as it:
            for e in it:
                if e.is_file(follow_symlinks=False):
                    total += e.stat(follow_symlinks=False).st_size
                elif e.is_dir(follow_symlinks=False):
                    with os.scandir(e.path) as sub:
                        for f in sub:
                            if f.is_file(follow_symlinks=False):
                                total += f.stat(follow_symlinks=False).st_size
        return total
    except OSError:
        return 0


def estimate(sizes: Sequence[int]) -> list[float]:
    """Estimated seconds to judge runs of these sizes, one each."""
    return [RUN_SECONDS + b / 1e6 * MB_SECONDS for b in sizes]


def _batch(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    return [fn(x) for x in items]


def ordered_map(
    fn: Callable[[Any], Any],
    items: Sequence[Any],
    jobs: int = 1,
    sizes: Sequence[int] | None = None,
) -> Iterator[Any]:
    """``fn`` of each item, in the items' order, in ``jobs`` processes (0: one per core); each
    result as soon as it (and those before it) is ready. Judging and exporting share it.

    With ``sizes`` (each item's bytes, ``run_bytes``) the work is planned by size: a fleet
    estimated to take under ``SERIAL_SECONDS`` stays in this process, and the biggest items
    are sent first, the small ones in batches, so that no worker is left with a big run at
    the end while the other waits."""
    if jobs <= 0:
        jobs = os.cpu_count() or 1
    jobs = max(1, min(int(jobs), len(items)))
    if sizes is not None and jobs > 1:
        cost = estimate(sizes)
        if sum(cost) < SERIAL_SECONDS:
            jobs = 1
    if jobs == 1:
        yield from map(fn, items)
        return
    if sizes is None:
        # Small chunks keep the order-preserving stream flowing; several per worker keep
        # inter-process overhead low on fleets of short runs.
        chunk = max(1, min(16, len(items) // (jobs * 8)))
        with ProcessPoolExecutor(max_workers=jobs, mp_context=_context()) as pool:
            yield from pool.map(fn, items, chunksize=chunk)
        return
    # The smallest item here, first: what it imports, the forked workers have (else each
    # imports the readers and the checks again). Then the biggest first; consecutive small
    # items (in that order) share a batch.
    order = sorted(range(len(items)), key=lambda i: -cost[i])
    first = order.pop()
    done = {first: fn(items[first])}
    batches: list[list[int]] = []
    work = 0.0
    for i in order:
        if not batches or work + cost[i] > BATCH_SECONDS:
            batches.append([])
            work = 0.0
        batches[-1].append(i)
        work += cost[i]
    with ProcessPoolExecutor(max_workers=jobs, mp_context=_context()) as pool:
        futures = [pool.submit(_batch, fn, [items[i] for i in b]) for b in batches]
        where = {i: (k, n) for k, b in enumerate(batches) for n, i in enumerate(b)}
        for i in range(len(items)):
            if i == first:
                yield done.pop(i)
                continue
            k, n = where[i]
            yield futures[k].result()[n]


def judge_iter(paths: Sequence[str], *, jobs: int = 1, **options: Any) -> Iterator[Outcome]:
    """Outcomes in the order of ``paths``, each as soon as it (and those before it) is ready.

    ``options``: ``source`` (a ``Source`` whose options read each run) and ``judge`` (a
    ``Judge``), or the loose keywords ``plan`` takes.
    """
    sizes = [run_bytes(p) for p in paths] if jobs != 1 and len(paths) > 1 else None
    if jobs == 1 or len(paths) == 1:  # judged here alone: a second core may count transcripts
        options = {**options, "prescan": True}
    yield from ordered_map(_one_star, [(p, options) for p in paths], jobs, sizes)


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
