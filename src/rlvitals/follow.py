"""One follow stage: read what a live run wrote since last time, judge it when due, and tell
what is new. ``rlvitals watch``, ``rlvitals serve`` and any training hook use it; the views only
draw and publish what it returns.

    follower = Follower("runs/my-run", checks_every_s=1.0, outputs=[my_output])
    while True:
        update = follower.poll()       # an ``Update``: new data? judged? new findings?
        if follower.finished:
            break
        time.sleep(1)
    follower.close()                   # the outputs finish delivering

Each update goes to the follower's outputs (``rlvitals.outputs.Output``: the terminal, the
live page, a webhook, the hooks), which only draw, publish or send it. ``Fleet`` follows many
runs in one loop: those given and those the one discovery (``rlvitals.source``) finds under
folders, new ones as they start, one ``Follower`` each (``rlvitals serve``).

One throttle decides when to judge: at most every ``checks_every_s`` while data arrives, every
``idle_check_s`` while none does (liveness changes with the clock alone), and never more often
than ``cost_factor`` times what the last judgement cost, so a big run is not judged
back to back. A run that does not exist yet is waited for (``wait=True``). A run deleted and
recreated under the same path (a rerun) is noticed, by the reader or by the files' identity,
and followed again from its start with fresh state, never a mix of the two runs.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checks.base import Finding, Report, severity_rank
from .errors import ReadError, RlvitalsError, UnknownFormatError
from .model import RunData
from .outputs import AlertTracker, Output, describe
from .readers.base import open_binary
from .source import Finder, Source, find_runs
from .views.safe import line

__all__ = ["Fleet", "Follower", "Update", "report_key", "run_id_for"]

log = logging.getLogger("rlvitals.follow")


def _listable(p: Path) -> bool:
    """Whether the folder ``p`` can be listed: one that cannot is an error, not waited for."""
    try:
        os.listdir(p)
    except PermissionError:
        return False
    except OSError:
        return True
    return True


# Files whose identity (device, inode) marks a run as the same one: the path itself and the
# append-only record files of a run directory (run.json is replaced on every status change).
_IDENTITY_FILES = ("steps.jsonl", "rollouts.jsonl")
_HEAD = 256


@dataclass
class Update:
    """What one ``Follower.poll`` found."""

    new_data: bool = False  # new records were read
    reset: bool = False  # the run was recreated: everything before is gone
    waiting: bool = False  # the run does not exist (yet)
    judged: bool = False  # the checks ran in this poll
    report_changed: bool = False  # what the report shows changed
    new_step: int | None = None  # the run's last step, when it moved
    # Each series that grew: the index range of its new points in data.metrics.columns(name)
    # (0 to the end when earlier points changed too: a step recorded late, a rewrite).
    new_points: dict[str, tuple[int, int]] = field(default_factory=dict)
    new_findings: list[tuple[Finding, str | None]] = field(default_factory=list)
    error: str | None = None  # reading or judging failed (also kept in data.warnings)


def report_key(report: Report) -> dict[str, Any]:
    """What a view shows of a report, without the liveness findings' ever-changing "seconds
    ago" evidence (so an idle run does not count as changed every second)."""
    from .jsonio import clean

    d = clean(report.to_dict())
    for f in d["findings"]:
        if f.get("check") == "liveness":
            f.pop("evidence", None)
            f.pop("detail", None)
    return d


class Follower:
    """Follows one run.

    A file that has not changed for ``SETTLE_S`` seconds is taken as complete, as ``rlvitals
    check`` takes it: its last line without a newline is read and a record still open at its
    end is read as far as it goes (once; more data later is read on as before). So a run that
    ended, or an excerpt cut mid-record, reads the same in ``watch`` and ``serve`` as in
    ``check``, while a line being written now is still waited for.

    Args:
        source: a run (a ``rlvitals.source.Source``, or the path of any format rlvitals
            reads) or an open reader (anything with ``poll() -> bool`` and ``.run``).
        source_format: overrides sniffing.
        mapping: a user mapping file (``--mapping``), ahead of the format's own table.
        run: which run of a source that holds several (``--run``), as ``open_reader`` takes.
        samples: a framework's sample dump read as the run's attempts (``--samples``).
        path: the run's path when ``source`` is a reader (to notice it recreated).
        wait: a path that does not exist yet is waited for instead of an error.
        baseline, thresholds, transcript_rules, stall_after: as ``rlvitals check``
            (``--baseline``, ``--set``, ``--rules``, ``--stall-after``).
        checks_every_s: seconds between judgements while data arrives.
        idle_check_s: seconds between judgements while nothing arrives.
        cost_factor: a judgement waits at least this many times what the last one cost.
        min_alert: the lowest severity that counts as a new finding (default ``warn``).
        clock: the wall clock the checks judge liveness at (tests pass a fake one).
        timer: the clock of the throttle (default ``time.monotonic``).
        judge: judges the run: ``judge(data, now) -> Report`` (a ``rlvitals.judge.Judge``;
            default: one of ``baseline``, ``thresholds``, ``transcript_rules``, ``stall_after``).
        outputs: where each ``poll``'s update goes (``rlvitals.outputs.Output``).
    """

    SETTLE_S = 30.0

    def __init__(
        self,
        source: str | os.PathLike[str] | Any,
        *,
        source_format: str | None = None,
        mapping: str | os.PathLike[str] | None = None,
        run: str | None = None,
        samples: str | os.PathLike[str] | None = None,
        path: str | os.PathLike[str] | None = None,
        wait: bool = False,
        baseline: dict[str, Any] | None = None,
        thresholds: Any = None,
        transcript_rules: str | None = None,
        stall_after: float | None = None,
        checks_every_s: float = 1.0,
        idle_check_s: float = 5.0,
        cost_factor: float = 5.0,
        min_alert: str = "warn",
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.monotonic,
        judge: Callable[[RunData, float], Report] | None = None,
        outputs: Iterable[Output] = (),
    ) -> None:
        if isinstance(source, Source):  # its options, unless given here too
            source_format = source_format or source.format
            mapping = mapping or source.mapping
            run = run or source.run
            samples = samples or source.samples
            source = source.path
        self.source_format = source_format
        self.mapping = mapping
        self.run = run
        self.samples = samples
        self.baseline = baseline
        self.thresholds = thresholds
        self.transcript_rules = transcript_rules
        self.stall_after = stall_after
        self.checks_every_s = checks_every_s
        self.idle_check_s = idle_check_s
        self.cost_factor = cost_factor
        self.min_alert = min_alert
        self.clock = clock
        self.timer = timer
        self._judge = judge
        self.outputs = list(outputs)
        self._opened = False
        self._failed_outputs: set[int] = set()
        self.id = ""  # the run's id where several are followed (``Fleet``)
        self.reader: Any = None
        self.path: Path | None = None  # a local path: watched for reruns, waited for
        self._source: str | None = None
        if isinstance(source, (str, os.PathLike)):
            self._source = os.fspath(source)
            if _is_url(self._source):  # read through a mirror: opened now, never waited for
                self.reader = self._open()
            else:
                self.path = Path(source)
        if self.path is not None and self.reader is None:
            if self.path.exists() or not wait:
                try:
                    self.reader = self._open()
                except UnknownFormatError:
                    # An empty run directory (the run is about to start) is waited for too;
                    # a file that is not a run is an error now.
                    if not (wait and self.path.is_dir() and _listable(self.path)):
                        raise
        elif self._source is None:
            self.reader = source
            self.path = Path(path) if path is not None else None
        self._empty = RunData(source=self._source or os.fspath(self.path or ""), format="")
        self.resets = 0
        self.check_error: str | None = None  # why the last judgement failed, if it did
        self._reset_state()

    # -- state -----------------------------------------------------------------------------

    def _open(self) -> Any:
        target = self._source if self._source is not None else self.path
        assert target is not None
        return Source(
            os.fspath(target),
            format=self.source_format,
            mapping=None if self.mapping is None else os.fspath(self.mapping),
            samples=None if self.samples is None else os.fspath(self.samples),
            run=self.run,
        ).open()

    def _reset_state(self) -> None:
        self.tracker = AlertTracker(self.min_alert)
        self.report: Report | None = None
        self.report_blob = b""
        self.last_judged = -math.inf
        self.judge_cost = 0.0
        self.dirty = True
        self._judged_final = False  # judged once since the run ended and nothing came after
        self._settled = False  # the files, quiet for SETTLE_S, were read as complete
        self.last_step: int | None = None
        self._data_ref = self.reader.run if self.reader is not None else None
        self._seen: dict[str, tuple[int, int]] = {}  # name -> (points, last step) told
        self._reader_resets = getattr(self.reader, "resets", 0)
        self._identity = self._files_identity()

    def _files_identity(self) -> dict[str, tuple[int, int, bytes]]:
        """(device, inode, first bytes) of the run's path and its record files. Inodes are
        reused after a delete, so the first bytes (a rerun's first record differs, if only in
        its time) tell a recreated file from one that grew."""
        if self.path is None:
            return {}
        out = {}
        for p in (self.path, *(self.path / f for f in _IDENTITY_FILES)):
            try:
                st = p.stat()
                head = b""
                if not p.is_dir():
                    with open_binary(p) as f:
                        head = f.read(_HEAD)
            except OSError:
                continue
            out[str(p)] = (st.st_dev, st.st_ino, head)
        return out

    def _recreated(self) -> bool:
        """The files are not the ones first read: one vanished, has another inode, or its
        first bytes changed."""
        if self.path is None:
            return False
        now = self._files_identity()
        for k, (dev, ino, head) in self._identity.items():
            got = now.get(k)
            if got is None or got[:2] != (dev, ino) or got[2][: len(head)] != head:
                return True
        for k, v in now.items():  # files that appeared, or grew past their first bytes
            old = self._identity.get(k)
            if old is None or len(v[2]) > len(old[2]):
                self._identity[k] = v
        return False

    @property
    def waiting(self) -> bool:
        """The run does not exist (yet)."""
        return self.reader is None

    @property
    def data(self) -> RunData:
        return self.reader.run if self.reader is not None else self._empty

    @property
    def name(self) -> str:
        got = self.data.info.get("name")
        if got:
            return str(got)
        return self.path.name if self.path is not None else str(self.data.source)

    @property
    def source(self) -> str:
        """The run's path or URL, as given."""
        if self._source is not None:
            return self._source
        return os.fspath(self.path) if self.path is not None else str(self.data.source)

    @property
    def status(self) -> str | None:
        return run_status(self.data)

    @property
    def finished(self) -> bool:
        """The run's status says it ended (finished, stopped, crashed)."""
        return ended(self.status)

    # -- the stage -------------------------------------------------------------------------

    def read(self) -> Update:
        """Read what is new; notice a run that appeared, vanished or was recreated."""
        up = Update()
        if self.reader is not None and self._recreated():
            gone = self.path is not None and not self.path.exists()
            self.reader = None if gone else self._try_open(up)
            self.resets += 1
            self._reset_state()
            up.reset = True
        if self.reader is None:
            if self.path is not None and self.path.exists():
                self.reader = self._try_open(up)
                if self.reader is not None:
                    self._reset_state()
            if self.reader is None:
                up.waiting = True
                return up
        try:
            up.new_data = bool(self.reader.poll())
        except (OSError, RlvitalsError) as exc:
            up.error = f"read failed: {exc}"
            _warn_once(self.data, up.error)
        if (
            self.reader.run is not self._data_ref
            or getattr(self.reader, "resets", 0) != self._reader_resets
        ):
            # The reader started over (it saw the run recreated): so does everything else.
            self.resets += 1
            self._reset_state()
            up.reset = True
            up.new_data = True
        if up.new_data:
            self._settled = False
        if not self._settled and self._quiet():  # quiet files: read as complete
            up.new_data = self._settle() or up.new_data
        if up.new_data:
            self.dirty = True
            self._judged_final = False
            up.new_points = self._grown()
        step = self.data.last_step
        if step is not None and step != self.last_step:
            self.last_step = step
            up.new_step = step
        return up

    def _quiet(self) -> bool:
        """Whether every file the reader reads has been unchanged for ``SETTLE_S``."""
        files = getattr(self.reader, "files", None)
        if files is None or not hasattr(self.reader, "finish"):
            return False
        try:
            newest = max((os.stat(p).st_mtime for p in files()), default=None)
        except (OSError, RlvitalsError):
            return False
        return newest is not None and self.clock() - newest >= self.SETTLE_S

    def _settle(self) -> bool:
        """Read the quiet files as complete (see the class docstring); True if that added
        anything."""
        self._settled = True
        run = self.reader.run
        before = _size(run)
        try:
            rest = getattr(self.reader, "read_rest", None)
            if rest is not None:
                rest()
            self.reader.finish()
        except (OSError, RlvitalsError) as exc:
            _warn_once(self.data, f"read failed: {exc}")
            return False
        after = _size(run)
        return after != before

    def _grown(self) -> dict[str, tuple[int, int]]:
        """The series that grew since the last read, and where their new points are."""
        metrics = self.data.metrics
        out = {}
        for name in metrics.names():
            cols = metrics.columns(name)
            if cols is None or not len(cols[0]):
                continue
            steps = cols[0]
            n, last = len(steps), int(steps[-1])
            old = self._seen.get(name)
            if old == (n, last):
                continue
            tail = old is not None and n > old[0] and steps[old[0] - 1] == old[1]
            out[name] = (old[0] if tail and old is not None else 0, n)
            self._seen[name] = (n, last)
        return out

    def _try_open(self, up: Update) -> Any:
        try:
            return self._open()
        except UnknownFormatError:
            return None  # a directory with nothing recognisable in it yet: keep waiting
        except (OSError, RlvitalsError) as exc:
            up.error = f"cannot open: {exc}"
            return None

    def due(self, now: float | None = None) -> bool:
        """Whether a judgement is due now (the one throttle; ``now`` on ``timer``'s clock).

        An ended run is judged once more at once, then only when something new arrives."""
        if self.reader is None:
            return False
        if self.finished:
            return not self._judged_final
        now = self.timer() if now is None else now
        wait = self.checks_every_s if self.dirty else self.idle_check_s
        return now - self.last_judged >= max(wait, self.cost_factor * self.judge_cost)

    def judge(self, up: Update | None = None, now: float | None = None) -> Update:
        """Judge the run now (``now`` on ``timer``'s clock); collect what is new in ``up``."""
        up = up if up is not None else Update()
        if self.reader is None:
            return up
        now = self.timer() if now is None else now
        t0 = time.perf_counter()
        self._judged_final = self.finished
        try:
            report = self._run_checks(self.clock())
        except Exception as exc:  # a bug in one check must not end the follow
            up.error = f"checks failed: {type(exc).__name__}: {exc}"
            _warn_once(self.data, up.error)
            report = None
            self.check_error = up.error
        else:
            self.check_error = None
        self.judge_cost = time.perf_counter() - t0
        self.last_judged = now
        self.dirty = False
        up.judged = True
        if report is None:
            return up
        self.report = report
        import msgspec

        key = report_key(report)
        try:
            blob = msgspec.json.encode(key)
        except UnicodeEncodeError:  # a file name that is not UTF-8 in the report's source
            blob = repr(key).encode("utf-8", "surrogateescape")
        up.report_changed = blob != self.report_blob
        self.report_blob = blob
        self._forget_ended_stalls(report)
        up.new_findings = self.tracker.new(report.findings)
        return up

    def poll(self, *, force: bool = False) -> Update:
        """Read what is new and judge when due (always with ``force``); what changed is in
        the returned ``Update``."""
        up = self.read()
        if self.reader is not None and (force or self.due()):
            self.judge(up)
        self.tell(up)
        return up

    def tell(self, up: Update) -> None:
        """Hand ``up`` to every output (each opened first, once); an output that fails is
        logged once and never ends the follow."""
        if not self._opened:
            self._opened = True
            for out in self.outputs:
                self._safely(out, out.open, self)
        for out in self.outputs:
            self._safely(out, out.update, self, up)

    def close(self, timeout: float = 10.0) -> int:
        """Close the outputs, ``timeout`` seconds each at most; how many things they could
        not deliver."""
        lost = 0
        for out in self.outputs:
            got = self._safely(out, out.close, timeout)
            lost += got if isinstance(got, int) else 0
        return lost

    def _safely(self, out: Output, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:  # an output must never end the follow
            if id(out) not in self._failed_outputs:
                self._failed_outputs.add(id(out))
                log.warning(
                    "rlvitals: output %s failed: %s",
                    describe(out),
                    line(f"{type(exc).__name__}: {exc}"),
                )
            return None

    def _run_checks(self, now: float) -> Report:
        if self._judge is None:
            from .judge import Judge

            self._judge = Judge(
                baseline=self.baseline,
                thresholds=self.thresholds,
                rules=self.transcript_rules,
                stall_after=self.stall_after,
            )
        return self._judge(self.data, now)

    def _forget_ended_stalls(self, report: Report) -> None:
        # A stall that ended (the run moved on) may come back: the next one is news again.
        current = {
            (f.check, f.verdict, f.metric)
            for f in report.findings
            if severity_rank(f.severity) >= 2
        }
        for key in list(self.tracker.sent):
            if key[0] == "liveness" and key[1] == "stalled" and key not in current:
                self.tracker.forget(key)


def _is_url(source: str) -> bool:
    try:
        from .readers.remote import is_url
    except ImportError:  # pragma: no cover - older readers
        return "://" in source
    return bool(is_url(source))


def run_status(data: RunData) -> str | None:
    """The status the run's own records give (``running``, ``finished``, ...), or None."""
    s = data.info.get("status")
    return str(s) if s is not None else None


def ended(status: str | None) -> bool:
    """Whether a status says the run ended (finished, stopped, crashed)."""
    return status not in (None, "running")


def _size(run: RunData) -> tuple[Any, int, int]:
    """How much a run holds: its last step, its warnings, its points (to tell a read that
    added something)."""
    metrics = run.metrics
    points = 0
    for name in metrics.names():
        cols = metrics.columns(name)
        points += len(cols[0]) if cols is not None else 0
    return run.last_step, len(run.warnings), points


def _warn_once(data: RunData, msg: str) -> None:
    if not data.warnings or data.warnings[-1] != msg:
        data.warnings.append(msg)


def run_id_for(path: Path, name: str) -> str:
    """A stable, URL-safe id: the run's name and a hash of its absolute path."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:48] or "run"
    digest = hashlib.sha1(str(path.resolve()).encode("utf-8", "surrogateescape")).hexdigest()
    return f"{slug}-{digest[:6]}"


def _one_run(folder: Path) -> bool:
    """Whether ``folder`` is one run rather than a folder of runs, as ``rlvitals check`` reads
    it (``source.find_runs``); an empty folder is a folder of runs to come."""
    try:
        return find_runs(folder).runs == [str(folder)]
    except ReadError:
        return False


class Fleet:
    """Follows many runs in one loop: the runs given, and every run the one discovery
    (``rlvitals.source.Finder``, as ``rlvitals check DIR`` finds them) finds under the folders
    given, new ones as they appear; one ``Follower`` each (``runs``: id -> Follower), every
    update handed to ``outputs``.

    Args:
        paths: runs (any format rlvitals reads) and folders to discover runs under.
        judge: judges a run, ``judge(data, now) -> Report`` (default: ``rlvitals.judge.Judge()``).
        outputs: where every run's updates go.
        source_format: the format of the runs given directly (``--from``), not of those
            discovered under folders.
        mapping: a user mapping file (``--mapping``) for every run.
        run: the run (``--run``) of the tracker stores given directly.
        samples: a framework's sample dump read as the attempts of the runs given directly.
        as_given: the paths are runs, followed as given (``watch``): none is a folder to
            discover runs under, and none is opened before its first poll.
        wait: with ``as_given``, a run that does not exist yet is waited for.
        follow_links: follow runs that symbolic links inside the folders point to outside
            them (by default only real paths inside are followed).
        check_interval, idle_check, cost_factor, min_alert, clock, timer: each
            ``Follower``'s.
        discover_interval: seconds between looks for new runs.
        judge_budget: seconds of judging per pass (at least one run is judged).
    """

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        judge: Callable[[RunData, float], Report] | None = None,
        outputs: Iterable[Output] = (),
        source_format: str | None = None,
        mapping: str | os.PathLike[str] | None = None,
        run: str | None = None,
        samples: str | os.PathLike[str] | None = None,
        as_given: bool = False,
        wait: bool = False,
        follow_links: bool = False,
        check_interval: float = 1.0,
        idle_check: float = 5.0,
        cost_factor: float = 10.0,
        min_alert: str = "warn",
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.monotonic,
        discover_interval: float = 2.0,
        judge_budget: float = 0.05,
    ) -> None:
        self.source_format = source_format  # for the runs given directly
        self.store_run = run  # likewise
        self.samples = samples  # likewise
        self.mapping = mapping  # for every run
        self.as_given = as_given
        self.wait = wait
        self.roots: list[Path] = []
        self.explicit: list[Path] = []
        for p in paths:
            path = Path(p)
            if as_given:
                self.explicit.append(path)
                continue
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
                self.explicit.append(path)
        if judge is None:
            from .judge import Judge

            judge = Judge()
        self._judge = judge
        self.outputs = list(outputs)
        self.follow_links = follow_links
        self.check_interval = check_interval
        self.idle_check = idle_check
        self.cost_factor = cost_factor
        self.min_alert = min_alert
        self.clock = clock
        self.timer = timer
        self.discover_interval = discover_interval
        self.judge_budget = judge_budget
        self._finder = Finder(links=follow_links, within=None if follow_links else self.roots)
        self.lock = threading.RLock()
        self.runs: dict[str, Follower] = {}
        self._by_path: dict[Path, str] = {}
        self._last_discover = -math.inf
        self.reading: str | None = None  # the run being read now (for a health check)
        self.found = False  # the last pass found a new run
        for path in self.explicit:
            self._add(path, must=True)
        self.discover(force=True)

    def _add(self, path: Path, *, must: bool = False) -> bool:
        key = path.resolve()
        if key in self._by_path:
            return False
        fmt = self.source_format if must else None
        source = Source(
            os.fspath(path),
            format=fmt,
            mapping=None if self.mapping is None else os.fspath(self.mapping),
            samples=None if self.samples is None or not must else os.fspath(self.samples),
            run=self.store_run if must else None,
        )
        common: dict[str, Any] = {
            "checks_every_s": self.check_interval,
            "idle_check_s": self.idle_check,
            "cost_factor": self.cost_factor,
            "min_alert": self.min_alert,
            "clock": self.clock,
            "timer": self.timer,
            "judge": self._judge,
            "outputs": self.outputs,
        }
        if self.as_given:  # opened (or waited for) by the follower itself
            follower = Follower(source, wait=self.wait, **common)
        else:
            try:
                reader = source.open()
            except UnknownFormatError:
                if must:
                    raise
                return False
            follower = Follower(reader, path=path, run=source.run, **common)
        rid = run_id_for(path, path.name if path.is_dir() else path.stem)
        while rid in self.runs:  # two paths, one hash prefix: keep ids unique
            rid += "x"
        follower.id = rid
        self.runs[rid] = follower
        self._by_path[key] = rid
        return True

    def discover(self, *, force: bool = False) -> bool:
        """Look for new runs under the folders (at most every ``discover_interval`` seconds
        unless ``force``); True if one was found."""
        now = time.monotonic()
        if not force and now - self._last_discover < self.discover_interval:
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
        judgement first, for at most ``judge_budget`` seconds (at least one); each update goes
        to the outputs. ``now`` is on the followers' ``timer`` (default: theirs, now). Returns
        how many updates had news (new records, a new report, new findings, a recreated
        run)."""
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
            if not force and time.perf_counter() - t0 > self.judge_budget:
                break
        return news

    def close(self, timeout: float = 10.0) -> int:
        """Close the outputs, ``timeout`` seconds each at most: how many things they could
        not deliver."""
        lost = 0
        for out in self.outputs:
            try:
                lost += out.close(timeout)
            except Exception as exc:  # one output's failure must not hide the others'
                log.warning("rlvitals: closing %s failed: %s", describe(out), line(exc))
        return lost
