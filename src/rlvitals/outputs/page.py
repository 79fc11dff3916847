"""The live page's output: ``rlvitals serve`` sends each run's news to the pages that show it,
as server-sent events (``Publisher``).

A page gets the index of the runs and a snapshot of each run it shows, then deltas: the new
points of each series, the report when it changed, the warnings when they did. Each page has a
bounded queue (``QUEUE_EVENTS``); a page too far behind is dropped, and its browser reconnects
for fresh snapshots. The HTTP side (``rlvitals.views.server``) only serves the queues.
"""

from __future__ import annotations

import contextlib
import math
import queue
from collections.abc import Callable, Iterable
from typing import Any

from ..checks.base import Report
from ..views.dashboard import (
    dashboard_metrics,
    page_json,
    run_payload,
    run_summary,
    run_warnings,
    transcript_steps,
)
from . import Output, Update

__all__ = ["QUEUE_EVENTS", "Publisher", "Subscriber"]

QUEUE_EVENTS = 512  # a page further behind than this is dropped; its browser reconnects


class Subscriber:
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


def _event(kind: str, data: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + page_json(data) + b"\n\n"


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

    def __init__(self, runs: dict[str, Any]) -> None:
        self.runs = runs
        self.pages: dict[str, _Pages] = {}
        self.subs: list[Subscriber] = []
        self.changed = 0  # events sent since the last ``end_pass``
        self.index_cache: list[dict[str, Any]] | None = None
        self._index_sent = b""  # the last index event sent to every page

    def _pages(self, run: Any) -> _Pages:
        got = self.pages.get(run.id)
        if got is None:
            got = self.pages[run.id] = _Pages()
        return got

    def update(self, run: Any, update: Update) -> None:
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

    def snapshot(self, run: Any) -> dict[str, Any]:
        return run_payload(run.id, run.data, run.report, transcript_steps=self._pages(run).tsteps)

    def _publish(self, run: Any, *, report_changed: bool) -> None:
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

    def subscribe(self, run_ids: Iterable[str], notify: Callable[[], None] | None) -> Subscriber:
        wanted = {r for r in run_ids if r in self.runs}
        sub = Subscriber(wanted, notify)
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


def _delta(run: Any, pages: _Pages, names: list[str]) -> dict[str, Any]:
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
