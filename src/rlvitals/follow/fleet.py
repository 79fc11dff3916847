"""Many runs followed in one loop: the runs given, and every run the one discovery
(``rlvitals.source.Finder``, as ``rlvitals check DIR`` finds them) finds under the folders
given, new ones as they start; one ``Follower`` each, every update handed to the outputs.

``Fleet.poll`` is one pass; ``Fleet.run`` is the loop that repeats it until told to stop
(``rlvitals serve``'s poller). ``rlvitals watch`` is a fleet of one run, given as a
``Follower``.
"""

from __future__ import annotations

import logging
import math
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..checks.base import Report
from ..errors import ReadError, UnknownFormatError
from ..judge import judging
from ..model import RunData
from ..outputs import Output, describe
from ..safe import line
from ..source import Finder, Source, find_runs
from .follower import Follower, Throttle, run_id_for

__all__ = ["Fleet"]

log = logging.getLogger("rlvitals.follow")


def _one_run(folder: Path) -> bool:
    """Whether ``folder`` is one run rather than a folder of runs, as ``rlvitals check`` reads
    it (``source.find_runs``); an empty folder is a folder of runs to come."""
    try:
        return find_runs(folder).runs == [str(folder)]
    except ReadError:
        return False


class Fleet:
    """Follows many runs in one loop (``runs``: id -> ``Follower``).

    Args:
        runs: runs (any format rlvitals reads) and folders to discover runs under; or
            ``Follower``s, followed as they are (``watch``: one run, waited for).
        source: how to read them (a ``Source`` whose path is left out): its ``mapping`` holds
            for every run, its ``format``, ``samples`` and ``run`` for the runs given directly,
            not for those discovered under folders.
        judge: judges a run, ``judge(data, now) -> Report`` (default: ``Judge()``).
        outputs: where every run's updates go.
        throttle: when each run is judged, how often the folders are searched, how long a
            pass may judge (default: ``THROTTLE``).
        min_alert: the lowest severity that counts as a new finding for the outputs.
        follow_links: follow runs that symbolic links inside the folders point to outside
            them (by default only real paths inside are followed).
    """

    THROTTLE = Throttle(cost_factor=10.0)

    def __init__(
        self,
        runs: Sequence[str | os.PathLike[str] | Follower],
        source: Source | None = None,
        judge: Callable[[RunData, float], Report] | None = None,
        outputs: Iterable[Output] = (),
        throttle: Throttle | None = None,
        *,
        min_alert: str = "warn",
        follow_links: bool = False,
    ) -> None:
        self.source = source or Source("")
        self.roots: list[Path] = []
        explicit: list[Path | Follower] = []
        for p in runs:
            if isinstance(p, Follower):
                explicit.append(p)
                continue
            path = Path(p)
            try:
                mode = path.stat().st_mode
            except OSError:
                raise ReadError("no such file or directory", path=str(path)) from None
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                # A FIFO, socket or device: opening one can block for ever.
                raise ReadError("not a regular file or a directory", path=str(path))
            if path.is_dir() and not _one_run(path):
                self.roots.append(path)  # a folder of runs: found by the one discovery
            else:
                explicit.append(path)
        self._judge = judging(judge)
        self.outputs = list(outputs)
        self.throttle = throttle or self.THROTTLE
        self.min_alert = min_alert
        self.follow_links = follow_links
        self._finder = Finder(links=follow_links, within=None if follow_links else self.roots)
        self.lock = threading.RLock()
        self.runs: dict[str, Follower] = {}
        self._by_path: dict[Path, str] = {}
        self._last_discover = -math.inf
        self.reading: str | None = None  # the run being read now (for a health check)
        self.found = False  # the last pass found a new run
        for given in explicit:
            if isinstance(given, Follower):
                self._keep(Path(given.source), given)
            else:
                self._add(given, must=True)
        self.discover(force=True)

    def _add(self, path: Path, *, must: bool = False) -> bool:
        if path.resolve() in self._by_path:
            return False
        # The runs given directly are read with every option; those found, with the mapping.
        source = (
            self.source.at(path) if must else Source(os.fspath(path), mapping=self.source.mapping)
        )
        try:
            follower = Follower(
                source,
                self._judge,
                self.outputs,
                self.throttle,
                min_alert=self.min_alert,
            )
        except UnknownFormatError:
            if must:
                raise
            return False
        self._keep(path, follower)
        return True

    def _keep(self, path: Path, follower: Follower) -> None:
        rid = run_id_for(path, path.name if path.is_dir() else path.stem)
        while rid in self.runs:  # two paths, one hash prefix: keep ids unique
            rid += "x"
        follower.id = rid
        self.runs[rid] = follower
        self._by_path[path.resolve()] = rid

    def discover(self, *, force: bool = False) -> bool:
        """Look for new runs under the folders (at most every ``throttle.discover_s`` seconds
        unless ``force``); True if one was found."""
        now = time.monotonic()
        if not force and now - self._last_discover < self.throttle.discover_s:
            return False
        self._last_discover = now
        found = False
        for root in self.roots:
            try:
                runs = self._finder.find(root).runs
            except ReadError:  # the folder cannot be read (now): nothing found there
                continue
            for r in runs:
                p = Path(r)
                key = p.resolve()
                if key in self._by_path or any(k in self._by_path for k in key.parents):
                    continue
                with self.lock:
                    found |= self._add(p)
        return found

    def poll(self, now: float | None = None, *, force: bool = False) -> int:
        """One pass: look for new runs (``found``: whether one was), read every run's new
        records, then judge the runs that are due (every run with ``force``), oldest
        judgement first, for at most ``throttle.budget_s`` seconds (at least one); each update
        goes to the outputs. ``now`` is on the followers' ``timer`` (default: theirs, now).
        Returns how many updates had news (new records, a new report, new findings, a
        recreated run)."""
        self.found = self.discover()
        news = 0
        for run in list(self.runs.values()):
            with self.lock:  # per run, so a long first read does not hold the others up
                self.reading = str(run.path)
                up = run.read()
                self.reading = None
                run.tell(up)
            news += up.new_data or up.reset
        t0 = time.perf_counter()
        due = [r for r in self.runs.values() if r.reader is not None and (force or r.due(now))]
        for run in sorted(due, key=lambda r: r.last_judged):
            with self.lock:
                up = run.judge(now=now)
                run.tell(up)
            news += up.report_changed or bool(up.new_findings)
            if not force and time.perf_counter() - t0 > self.throttle.budget_s:
                break
        return news

    def run(self, stop: threading.Event, on_error: Callable[[Exception], None]) -> None:
        """The loop: a pass every ``throttle.poll_s`` seconds until ``stop`` is set; a pass
        that fails goes to ``on_error`` and the loop goes on."""
        interval = self.throttle.poll_s
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                self.poll()
            except Exception as exc:  # the loop must outlive one bad pass
                on_error(exc)
            stop.wait(max(0.0, interval - (time.monotonic() - t0)))

    def close(self, timeout: float = 10.0) -> int:
        """Close the outputs (the fleet's, and those of the followers it was given), each once,
        ``timeout`` seconds each at most: how many things they could not deliver."""
        outputs = {id(out): out for out in self.outputs}
        for run in self.runs.values():
            outputs.update((id(out), out) for out in run.outputs)
        lost = 0
        for out in outputs.values():
            try:
                lost += out.close(timeout)
            except Exception as exc:  # one output's failure must not hide the others'
                log.warning("rlvitals: closing %s failed: %s", describe(out), line(exc))
        return lost
