"""The live dashboard's data side: which runs, what they hold, what changed (no HTTP here).

One poller thread follows every run it was given (a run, or a folder whose runs it discovers,
new ones included), reading only the bytes that arrived since its last pass: the follow stage,
``rlvitals.follow.Fleet``. Its updates go to the outputs, among them ``Publisher``, which sends
the new points of each run's series to the pages that show that run, as server-sent events;
a changed run is re-judged at most once a second (less often when judging is slow). The HTTP
side (``views/server.py``) only serves what this module hands it.

A run is addressed by an id the fleet made (``follow.run_id_for``), never by a path: nothing
a request says can name a file the hub was not given.
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from ..checks.base import Report
from ..follow import Fleet, Follower, Update
from ..judge import Judge
from ..model import RunData
from ..outputs import Output
from .dashboard import (
    dashboard_metrics,
    flagged_ids,
    load_transcripts,
    run_payload,
    run_summary,
    run_warnings,
    transcript_steps,
)
from .prometheus import prometheus_text
from .safe import json_for_html, line, unsurrogate

__all__ = ["Hub", "Publisher"]

_ENC = msgspec.json.Encoder()
_ID_OK = re.compile(r"^[A-Za-z0-9._-]{1,80}$")
QUEUE_EVENTS = 512  # a page further behind than this is dropped; its browser reconnects


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
        elif update.error and len(run_warnings(run.data, run.report)) != pages.n_warnings:
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
        warnings = run_warnings(run.data, run.report)
        if len(warnings) != pages.n_warnings:
            pages.n_warnings = len(warnings)
            event["warnings"] = warnings[:50]
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


class Hub(Fleet):
    """Follows the runs (a ``Fleet``: the one discovery, one ``Follower`` each, one loop),
    judges them, and fans their changes out to the pages (``Publisher``) and to ``outputs``.

    Args:
        paths: runs (any format rlvitals reads) and folders to discover runs under.
        baseline: a baseline (``rlvitals.baseline.load``) the checks hold runs against.
        shading: the same ranges for the plots (``dashboard.baseline_ranges``).
        stall_after: seconds without a step record or heartbeat that make a run stalled.
        judge: what judges a run: a ``rlvitals.judge.Judge`` or any ``judge(data) -> Report``
            (default: a ``Judge`` of ``baseline``, ``thresholds``, ``transcript_rules`` and
            ``stall_after``).
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
        self.baseline = baseline
        self.shading = shading or {}
        self.stall_after = stall_after
        judge_one = judge or Judge(
            baseline=baseline,
            thresholds=thresholds,
            rules=transcript_rules,
            stall_after=stall_after,
        )
        self.publisher = Publisher({})
        self._transcript_slots = threading.BoundedSemaphore(2)  # transcript reads at once
        self.stopped = threading.Event()
        # Liveness, for /healthz: when the poller last finished a pass, and what it reads now.
        self.last_pass = time.monotonic()
        super().__init__(
            paths,
            judge=lambda data, now: judge_one(data),
            outputs=[*outputs, self.publisher],
            source_format=source_format,
            mapping=mapping,
            run=run,
            follow_links=follow_links,
            check_interval=check_interval,
            idle_check=5.0,
            cost_factor=10.0,
            min_alert=min_alert,
            discover_interval=discover_interval,
        )
        self.publisher.runs = self.runs

    def poll(self, now: float | None = None, *, force: bool = False) -> int:
        """One pass of the fleet (new runs, new records, the judgements due), then the index
        to the pages if it changed. Returns how many events went to the pages."""
        super().poll(time.monotonic() if now is None else now, force=force)
        with self.lock:
            sent = self.publisher.changed
            self.publisher.end_pass(self.found)
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
                said = line(f"{type(exc).__name__}: {exc}")
                print(f"rlvitals serve: poll failed: {said}", file=sys.stderr)
            self.stopped.wait(max(0.0, interval - (time.monotonic() - t0)))

    def stop(self) -> None:
        """Stop polling and end every page's stream (``close`` then closes the outputs)."""
        self.stopped.set()
        with self.lock:
            self.publisher.close()

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
