"""The live dashboard's data side: which runs, what they hold, what changed (no HTTP here).

One poller thread follows every run it was given (a run, or a folder whose runs it discovers,
new ones included), reading only the bytes that arrived since its last pass. Each pass sends
the new points of each run's series to the pages that show that run, as server-sent events,
and re-judges a changed run at most once a second (less often when judging is slow). Reading
and judging is the one follow stage (``rlvitals.follow.Follower``); the HTTP side
(``views/server.py``) only serves what this module hands it.

A run is addressed by an id made here (``run_id_for``), never by a path: nothing a request
says can name a file the hub was not given.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import queue
import re
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from ..checks.base import Report
from ..errors import ReadError, UnknownFormatError
from ..follow import Follower, Update
from ..model import RunData
from ..outputs import Output
from ..schema import TRANSCRIPTS
from .dashboard import (
    dashboard_metrics,
    flagged_ids,
    load_transcripts,
    run_payload,
    run_summary,
    transcript_steps,
)
from .prometheus import prometheus_text
from .safe import json_for_html, unsurrogate

__all__ = ["Hub", "Publisher", "run_id_for"]

_ENC = msgspec.json.Encoder()
_ID_OK = re.compile(r"^[A-Za-z0-9._-]{1,80}$")
_SKIP_DIRS = {TRANSCRIPTS, "checkpoints", "__pycache__", "node_modules"}
_LOG_SUFFIXES = {".jsonl", ".json", ".log", ".txt", ".csv"}
QUEUE_EVENTS = 512  # a page further behind than this is dropped; its browser reconnects


def run_id_for(path: Path, name: str) -> str:
    """A stable, URL-safe id: the run's name and a hash of its absolute path."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:48] or "run"
    digest = hashlib.sha1(str(path.resolve()).encode("utf-8", "surrogateescape")).hexdigest()
    return f"{slug}-{digest[:6]}"


class _Subscriber:
    """One page's event stream: a bounded queue of encoded events (None: the stream ends) and
    ``notify``, called after each put, from the poller thread (the server's wake-up call)."""

    def __init__(self, runs: set[str], notify: Callable[[], None] | None = None) -> None:
        self.runs = runs
        self.queue: queue.Queue[bytes | None] = queue.Queue(QUEUE_EVENTS)
        self.dead = False
        self.notify = notify

    def put(self, event: bytes | None) -> None:
        if self.dead:
            return
        try:
            self.queue.put_nowait(event)
        except queue.Full:
            # Too far behind: drop it. Its EventSource reconnects and gets fresh snapshots.
            self.dead = True
            with contextlib.suppress(queue.Empty):
                while True:
                    self.queue.get_nowait()
            self.queue.put_nowait(None)
        if event is None:
            self.dead = True
        if self.notify is not None:
            self.notify()

    def take(self) -> list[bytes | None]:
        """Every event queued so far (None last when the stream ends), without waiting."""
        out: list[bytes | None] = []
        with contextlib.suppress(queue.Empty):
            while True:
                out.append(self.queue.get_nowait())
        return out


def _encode(data: Any) -> bytes:
    """JSON for the page: bidi, C1 and separator characters in run text arrive as visible
    ``\\u202e`` text (``safe.json_for_html``), never as characters that reorder the page; a
    file name that is not UTF-8 arrives with its odd bytes as ``\\xff`` text."""
    try:
        raw = _ENC.encode(data)
    except UnicodeEncodeError:
        raw = _ENC.encode(unsurrogate(data))
    if raw.isascii():
        return raw
    return json_for_html(raw.decode("utf-8")).encode("utf-8")


def _event(kind: str, data: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + _encode(data) + b"\n\n"


class _Pages:
    """What the pages already have of one run."""

    def __init__(self) -> None:
        self.sent: dict[str, tuple[int, int, float]] = {}  # name -> (points, last step, value)
        self.tsteps: list[dict[str, Any]] = []
        self.n_warnings = 0


class Publisher(Output):
    """``serve``'s server-sent events, an ``Output``: each update of a run goes to the pages
    that show it (a snapshot when the run was recreated, else the new points, the report
    when it changed, the warnings when they did); after each pass of the poller, the index of
    the runs when it changed. Called with the hub's lock held.

    Args:
        runs: the hub's runs (id -> ``Follower``), read for snapshots and the index.
    """

    def __init__(self, runs: dict[str, Follower]) -> None:
        self.runs = runs
        self.pages: dict[str, _Pages] = {}
        self.subs: list[_Subscriber] = []
        self.changed = 0  # events sent since the last ``end_pass``
        self.index_cache: list[dict[str, Any]] | None = None
        self._index_sent = b""  # the last index event sent to every page

    def _pages(self, run: Follower) -> _Pages:
        got = self.pages.get(run.id)
        if got is None:
            got = self.pages[run.id] = _Pages()
        return got

    def update(self, run: Follower, update: Update) -> None:
        if update.reset:
            # Recreated under the same path: the pages get it afresh, never a mix.
            self.pages[run.id] = _Pages()
            self._send(run.id, _event("snapshot", self.snapshot(run)))
        elif update.new_data:
            self._publish(run, report_changed=False)
        if not update.judged:
            return
        pages = self._pages(run)
        if update.report_changed:
            pages.tsteps = transcript_steps(run.data, run.report)
            self._publish(run, report_changed=True)
        elif update.error and len(run.data.warnings) != pages.n_warnings:
            self._publish(run, report_changed=False)

    def _send(self, run_id: str, blob: bytes) -> None:
        self.changed += 1
        for sub in self.subs:
            if run_id in sub.runs:
                sub.put(blob)

    def snapshot(self, run: Follower) -> dict[str, Any]:
        return run_payload(run.id, run.data, run.report, transcript_steps=self._pages(run).tsteps)

    def _publish(self, run: Follower, *, report_changed: bool) -> None:
        """Send what changed in ``run`` since the pages last heard of it."""
        pages = self._pages(run)
        names = dashboard_metrics(run.data, run.report)
        event: dict[str, Any] = {
            "id": run.id,
            "summary": run_summary(run.id, run.data, run.report),
            "series": _delta(run, pages, names),
        }
        if report_changed:
            event["report"] = _report_dict(run.report)
            event["transcript_steps"] = pages.tsteps
        if len(run.data.warnings) != pages.n_warnings:
            pages.n_warnings = len(run.data.warnings)
            event["warnings"] = run.data.warnings[:50]
            event["n_warnings"] = pages.n_warnings
        self._send(run.id, _event("delta", event))

    def index(self) -> list[dict[str, Any]]:
        return [run_summary(r.id, r.data, r.report) for r in self.runs.values()]

    def end_pass(self, found: bool) -> None:
        """After a pass: the index to every page if a run changed or appeared (and differs
        from the last one sent: a re-judged idle run often shows the same)."""
        if self.changed or found:
            self.index_cache = self.index()
            index = _event("index", {"runs": self.index_cache})
            if index != self._index_sent:
                self._index_sent = index
                for sub in self.subs:
                    sub.put(index)
        self.changed = 0
        self.subs = [s for s in self.subs if not s.dead]

    def subscribe(self, run_ids: Iterable[str], notify: Callable[[], None] | None) -> _Subscriber:
        wanted = {r for r in run_ids if r in self.runs}
        sub = _Subscriber(wanted, notify)
        sub.put(_event("index", {"runs": self.index()}))
        for rid in wanted:
            sub.put(_event("snapshot", self.snapshot(self.runs[rid])))
        self.subs.append(sub)
        return sub

    def close(self, timeout: float = 10.0) -> int:
        """End every page's stream."""
        for sub in self.subs:
            sub.put(None)
        self.subs = []
        return 0


class Hub:
    """Follows the runs, judges them, and fans their changes out to the pages.

    Args:
        paths: runs (any format rlvitals reads) and folders to discover runs under.
        baseline: a baseline (``rlvitals.baseline.load``) the checks hold runs against.
        shading: the same ranges for the plots (``dashboard.baseline_ranges``).
        stall_after: seconds without a step record or heartbeat that make a run stalled.
        judge: the function that judges a run (default: ``rlvitals.checks.run_checks``).
        thresholds, transcript_rules: as ``rlvitals check --set`` and ``--rules``.
        follow_links: serve runs and transcript files that symbolic links inside the folders
            point to outside them (by default only real paths inside are served).
        source_format: the format of the runs given directly (``--from``), not of those
            discovered under folders.
        mapping: a user mapping file (``--mapping``) for every run.
        run: the run (``--run``) of the tracker stores given directly.
        outputs: more outputs each run's updates go to (a webhook: ``serve --webhook``).
        min_alert: the lowest severity that counts as a new finding for them.
    """

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        baseline: dict[str, Any] | None = None,
        shading: dict[str, Any] | None = None,
        stall_after: float | None = None,
        check_interval: float = 1.0,
        discover_interval: float = 2.0,
        depth: int = 2,
        judge: Callable[[RunData], Report] | None = None,
        thresholds: Any = None,
        transcript_rules: str | None = None,
        follow_links: bool = False,
        source_format: str | None = None,
        mapping: str | os.PathLike[str] | None = None,
        run: str | None = None,
        outputs: Iterable[Output] = (),
        min_alert: str = "warn",
    ) -> None:
        self.source_format = source_format  # for the runs given directly
        self.store_run = run  # likewise
        self.mapping = mapping  # for every run
        self.roots: list[Path] = []
        self.explicit: list[Path] = []
        for p in paths:
            path = Path(p)
            try:
                mode = path.stat().st_mode
            except OSError:
                raise ReadError("no such file or directory", path=str(path)) from None
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                # A FIFO, socket or device: opening one can block for ever.
                raise ReadError("not a regular file or a directory", path=str(path))
            if path.is_dir() and self._sniff(path) is None:
                self.roots.append(path)
            else:
                self.explicit.append(path)
        self.baseline = baseline
        self.shading = shading or {}
        self.stall_after = stall_after
        self.check_interval = check_interval
        self.discover_interval = discover_interval
        self.depth = depth
        self.recheck_idle = 5.0
        self.judge_budget = 0.05
        self._judge = judge
        self.thresholds = thresholds
        self.transcript_rules = transcript_rules
        self.follow_links = follow_links
        self._real_roots = [r.resolve() for r in self.roots]
        self._transcript_slots = threading.BoundedSemaphore(2)  # transcript reads at once
        self.lock = threading.RLock()
        self.runs: dict[str, Follower] = {}
        self.outputs = list(outputs)
        self.min_alert = min_alert
        self.publisher = Publisher(self.runs)
        self._by_path: dict[Path, str] = {}
        self._not_runs: dict[Path, float] = {}  # path -> mtime when it was not a run
        self._last_discover = -math.inf
        self.stopped = threading.Event()
        # Liveness, for /healthz: when the poller last finished a pass, and what it reads now.
        self.last_pass = time.monotonic()
        self.reading: str | None = None
        for path in self.explicit:
            self._add(path, must=True)
        self.discover(force=True)

    # -- runs ------------------------------------------------------------------------------

    @staticmethod
    def _sniff(path: Path) -> str | None:
        from ..readers import sniff

        try:
            return sniff(path)
        except UnknownFormatError:
            return None

    def _add(self, path: Path, *, must: bool = False) -> bool:
        from ..readers import open_reader

        key = path.resolve()
        if key in self._by_path:
            return False
        try:
            fmt = self.source_format if must else None
            reader = open_reader(
                path, fmt, mapping=self.mapping, run=self.store_run if must else None
            )
        except UnknownFormatError:
            if must:
                raise
            return False
        name = path.name if path.is_dir() else path.stem
        follower = Follower(
            reader,
            path=path,
            source_format=fmt,
            mapping=self.mapping,
            baseline=self.baseline,
            thresholds=self.thresholds,
            transcript_rules=self.transcript_rules,
            stall_after=self.stall_after,
            checks_every_s=self.check_interval,
            idle_check_s=self.recheck_idle,
            cost_factor=10.0,
            judge=lambda data, now: self.judge(data),
            min_alert=self.min_alert,
            outputs=[*self.outputs, self.publisher],
        )
        rid = run_id_for(path, name)
        while rid in self.runs:  # two paths, one hash prefix: keep ids unique
            rid += "x"
        follower.id = rid
        self.runs[rid] = follower
        self.publisher.index_cache = None
        self._by_path[key] = rid
        return True

    def _candidates(self, root: Path, depth: int) -> Iterable[Path]:
        try:
            entries = sorted(os.scandir(root), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            if e.name.startswith(".") or e.name in _SKIP_DIRS:
                continue
            p = Path(e.path)
            try:
                if not self.follow_links and (e.is_symlink() or not self._inside(p)):
                    continue  # a link out of the served folder: not served (--follow-links)
                mode = e.stat().st_mode
            except OSError:
                continue
            is_dir = stat.S_ISDIR(mode)
            if not is_dir and (not stat.S_ISREG(mode) or Path(e.name).suffix not in _LOG_SUFFIXES):
                continue  # a FIFO, socket or device named *.jsonl is never opened: it can block
            yield p
            if is_dir and depth > 1:
                key = p.resolve()
                if key not in self._by_path:
                    yield from self._candidates(p, depth - 1)

    def _inside(self, p: Path) -> bool:
        """Whether ``p``'s real path lies inside one of the served folders."""
        try:
            real = p.resolve()
        except (OSError, RuntimeError):
            return False
        return any(real == r or r in real.parents for r in self._real_roots)

    def discover(self, *, force: bool = False) -> bool:
        """Look for new runs under the folders; True if one was found."""
        now = time.monotonic()
        if not force and now - self._last_discover < self.discover_interval:
            return False
        self._last_discover = now
        found = False
        for root in self.roots:
            for p in self._candidates(root, self.depth):
                key = p.resolve()
                if key in self._by_path or self._inside_run(key):
                    continue
                try:
                    mtime = p.stat().st_mtime
                except OSError:
                    continue
                if self._not_runs.get(key) == mtime:
                    continue
                if self._sniff(p) is None:
                    self._not_runs[key] = mtime
                    continue
                with self.lock:
                    found |= self._add(p)
        return found

    def _inside_run(self, key: Path) -> bool:
        return any(parent in self._by_path for parent in key.parents)

    # -- judging ---------------------------------------------------------------------------

    def judge(self, data: RunData) -> Report:
        if self._judge is not None:
            return self._judge(data)
        from ..checks import run_checks

        return run_checks(
            data,
            baseline=self.baseline,
            stall_after=self.stall_after,
            thresholds=self.thresholds,
            transcript_rules=self.transcript_rules,
        )

    # -- the poll loop ---------------------------------------------------------------------

    def poll(self, now: float | None = None) -> int:
        """One pass: read every run's new records and hand them to the outputs (the pages
        among them), then re-judge the runs that are due, oldest judgement first, for at most
        ``judge_budget`` seconds (at least one). Returns how many events went to the pages."""
        now = time.monotonic() if now is None else now
        found = self.discover()
        for run in list(self.runs.values()):
            with self.lock:  # per run, so a long first read does not hold every page up
                self.reading = str(run.path)
                up = run.read()
                self.reading = None
                run.tell(up)
        t0 = time.perf_counter()
        due = sorted((r for r in self.runs.values() if r.due(now)), key=lambda r: r.last_judged)
        for run in due:
            with self.lock:
                run.tell(run.judge(now=now))
            if time.perf_counter() - t0 > self.judge_budget:
                break
        with self.lock:
            sent = self.publisher.changed
            self.publisher.end_pass(found)
        self.last_pass = time.monotonic()
        return sent

    def stuck_for(self) -> float:
        """Seconds since the poller last finished a pass (0 while passes keep finishing)."""
        return time.monotonic() - self.last_pass

    def run_forever(self, interval: float = 0.1) -> None:
        """Poll until ``stop()``."""
        while not self.stopped.is_set():
            t0 = time.monotonic()
            try:
                self.poll()
            except Exception as exc:  # the dashboard must outlive one bad pass
                print(f"rlvitals serve: poll failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            self.stopped.wait(max(0.0, interval - (time.monotonic() - t0)))

    def stop(self) -> None:
        """Stop polling and end every page's stream (``close`` then ends the outputs)."""
        self.stopped.set()
        with self.lock:
            self.publisher.close()

    def close(self, timeout: float = 10.0) -> int:
        """Close the outputs (after ``stop`` and the poller's end): how many alerts they
        could not deliver."""
        lost = 0
        for out in self.outputs:
            try:
                lost += out.close(timeout)
            except Exception as exc:  # one output's failure must not hide the others'
                print(f"rlvitals serve: closing {out.describe()}: {exc}", file=sys.stderr)
        return lost

    # -- what handlers ask for -------------------------------------------------------------

    def index(self) -> list[dict[str, Any]]:
        """Every run's summary, as of the poller's last pass that changed one: no lock taken
        then, so the page and /api/runs never wait for a run being read or judged."""
        cached = self.publisher.index_cache
        if cached is not None:
            return cached
        with self.lock:
            self.publisher.index_cache = self.publisher.index()
            return self.publisher.index_cache

    def snapshot(self, run_id: str) -> dict[str, Any] | None:
        with self.lock:
            run = self.runs.get(run_id)
            return None if run is None else self.publisher.snapshot(run)

    def transcripts(self, run_id: str, step: int) -> list[dict[str, Any]] | None:
        """One step's transcripts, streamed from the file (``TranscriptStore``), at most two
        reads at a time; a file that is a link out of the run is not served."""
        with self.lock:
            run = self.runs.get(run_id)
            if run is None:
                return None
            data, flagged = run.data, flagged_ids(run.report)
        within = None if self.follow_links else run.path
        with self._transcript_slots:
            return load_transcripts(data, step, flagged=flagged, within=within)

    def subscribe(
        self, run_ids: Iterable[str], notify: Callable[[], None] | None = None
    ) -> _Subscriber:
        """A new page: the index and a snapshot of each run asked for, then every delta
        (``notify`` is called after each event is queued)."""
        with self.lock:
            return self.publisher.subscribe(run_ids, notify)

    def metrics(self) -> str:
        with self.lock:
            return prometheus_text((r.id, r.data, r.report) for r in self.runs.values())


def _delta(run: Follower, pages: _Pages, names: list[str]) -> dict[str, Any]:
    """The points of ``names`` the pages have not had (``"r": true``: the whole series,
    to replace theirs, where old points changed). Looks at the stored columns, so a read
    costs what is new, not a copy of every whole series (10,000 steps x 49 metrics x 20
    runs made that most of a pass)."""
    data = run.data
    derived = run.report.series if run.report is not None else {}
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        steps: Any
        values: Any
        cols = data.metrics.columns(name)
        if cols is not None:
            steps, values = cols  # array("q"), array("d"): indexed and sliced alike
        elif (s := derived.get(name)) is not None:
            steps, values = s.steps, s.values
        else:
            continue
        n = len(steps)
        old = pages.sent.get(name)
        start, replace = 0, False
        if old is None:
            pass
        elif n > old[0] and steps[old[0] - 1] == old[1]:
            start = old[0]
            v = float(values[start - 1])
            replace = v != old[2] and not (math.isnan(old[2]) and math.isnan(v))
        elif n == old[0] and n and steps[-1] == old[1] and _same(values[-1], old[2]):
            continue
        else:
            replace = True
        if replace:
            start = 0
        if n:
            pages.sent[name] = (n, int(steps[-1]), float(values[-1]))
        if start >= n:
            continue
        out[name] = {"s": steps[start:].tolist(), "v": _json_floats(values[start:].tolist())}
        if replace:
            out[name]["r"] = True
    return out


def _json_floats(values: list[float]) -> list[float | str]:
    """Numbers for JSON, non-finite ones as their strings (as ``series_payload`` writes them;
    a delta's few new points take no numpy)."""
    return [
        v if math.isfinite(v) else "NaN" if math.isnan(v) else "Infinity" if v > 0 else "-Infinity"
        for v in values
    ]


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _report_dict(report: Report | None) -> dict[str, Any]:
    from ..jsonio import clean

    return clean(report.to_dict()) if report is not None else {}
