"""One run followed: read what it wrote since last time, judge it when due, and tell what is
new to the outputs. ``Fleet`` (``fleet.py``) follows many; ``rlvitals watch``, ``rlvitals
serve``, the trainer and the hooks all follow runs through a ``Follower``.

    follower = Follower(Source("runs/my-run"), judge, [my_output], Throttle(every_s=1.0))
    while True:
        update = follower.poll()       # an ``Update``: new data? judged? new findings?
        if follower.finished:
            break
        time.sleep(1)
    follower.close()                   # the outputs finish delivering

Each update goes to the follower's outputs (``rlvitals.outputs.Output``: the terminal, the
live page, a webhook, the hooks), which only draw, publish or send it.

One throttle (``Throttle``) decides when to judge: at most every ``every_s`` while data
arrives, every ``idle_s`` while none does (liveness changes with the clock alone), and never
more often than ``cost_factor`` times what the last judgement cost, so a big run is not judged
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
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks.base import Report, severity_rank
from ..errors import RlvitalsError, UnknownFormatError
from ..judge import judging
from ..model import RunData
from ..outputs import AlertTracker, Output, Update, describe
from ..readers.base import open_binary
from ..safe import line
from ..source import Source

__all__ = ["Follower", "Throttle", "ended", "report_key", "run_id_for", "run_status"]

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


@dataclass(frozen=True)
class Throttle:
    """When the follow stage reads and judges, and by which clocks: the timing knobs of every
    front end, under one name each.

    Args:
        poll_s: seconds between two passes of a loop (``watch --interval``, ``serve --poll``).
        every_s: seconds between judgements of a run while data arrives.
        idle_s: seconds between judgements while nothing arrives (liveness changes with the
            clock alone).
        cost_factor: a judgement waits at least this many times what the last one cost.
        discover_s: seconds between looks for new runs under the folders (``Fleet``).
        budget_s: seconds of judging per pass of a ``Fleet`` (at least one run is judged).
        clock: the wall clock the checks judge liveness at (tests pass a fake one).
        timer: the throttle's own clock.
    """

    poll_s: float = 1.0
    every_s: float = 1.0
    idle_s: float = 5.0
    cost_factor: float = 5.0
    discover_s: float = 2.0
    budget_s: float = 0.05
    clock: Callable[[], float] = time.time
    timer: Callable[[], float] = time.monotonic


def report_key(report: Report) -> dict[str, Any]:
    """What a view shows of a report, without the liveness findings' ever-changing "seconds
    ago" evidence (so an idle run does not count as changed every second)."""
    from ..jsonio import clean

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
        judge: judges the run: ``judge(data, now) -> Report`` (a ``rlvitals.judge.Judge``;
            default: ``Judge()``).
        outputs: where each ``poll``'s update goes (``rlvitals.outputs.Output``).
        throttle: when to judge, and the clocks (default: ``THROTTLE``).
        min_alert: the lowest severity that counts as a new finding (default ``warn``).
        wait: a path that does not exist yet is waited for instead of an error.
    """

    SETTLE_S = 30.0
    THROTTLE = Throttle()

    def __init__(
        self,
        source: Source | str | os.PathLike[str] | Any,
        judge: Callable[[RunData, float], Report] | None = None,
        outputs: Iterable[Output] = (),
        throttle: Throttle | None = None,
        *,
        min_alert: str = "warn",
        wait: bool = False,
    ) -> None:
        if isinstance(source, (str, os.PathLike)):
            source = Source(os.fspath(source))
        self.throttle = throttle = throttle or self.THROTTLE
        self.clock = throttle.clock
        self.timer = throttle.timer
        self.min_alert = min_alert
        self._judge = judging(judge)
        self.outputs = list(outputs)
        self._opened = False
        self._failed_outputs: set[int] = set()
        self.id = ""  # the run's id where several are followed (``Fleet``)
        self.reader: Any = None
        self.path: Path | None = None  # a local path: watched for reruns, waited for
        self._spec: Source | None = source if isinstance(source, Source) else None
        if self._spec is None:
            self.reader = source
        elif _is_url(self._spec.path):  # read through a mirror: opened now, never waited for
            self.reader = self._open()
        else:
            self.path = Path(self._spec.path)
            if self.path.exists() or not wait:
                try:
                    self.reader = self._open()
                except UnknownFormatError:
                    # An empty run directory (the run is about to start) is waited for too;
                    # a file that is not a run is an error now.
                    if not (wait and self.path.is_dir() and _listable(self.path)):
                        raise
        self._empty = RunData(source=self.source, format="")
        self.resets = 0
        self.check_error: str | None = None  # why the last judgement failed, if it did
        self._reset_state()

    # -- state -----------------------------------------------------------------------------

    def _open(self) -> Any:
        assert self._spec is not None
        return self._spec.open()

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
        if self._spec is not None:
            return self._spec.path
        return str(self.reader.run.source)

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
        t = self.throttle
        wait = t.every_s if self.dirty else t.idle_s
        return now - self.last_judged >= max(wait, t.cost_factor * self.judge_cost)

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
        # Judged as check reads the run whole (units told by the values, placeholders between
        # periodic evaluations): the follower's own series keep the values as they came.
        from ..readers._settle import settled

        return self._judge(settled(self.data), now)

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
    from ..readers.remote import is_url

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
