"""``rlvitals serve``'s follow stage: which runs, what they hold, what changed (no HTTP here).

One poller thread (``Fleet.run``) follows every run it was given (a run, or a folder whose
runs it discovers, new ones included), reading only the bytes that arrived since its last pass.
Its updates go to the outputs, among them the live page's (``outputs.page.Publisher``: the new
points of each run's series to the pages that show that run, as server-sent events) and
/metrics' (``outputs.prometheus.Prometheus``); a changed run is re-judged at most once a
second (less often when judging is slow). ``serve`` and ``serve_in_background`` run the poller
beside the HTTP server (``rlvitals.views.server``), which only serves what the hub hands it.

A run is addressed by an id the fleet made (``run_id_for``), never by a path: nothing a
request says can name a file the hub was not given.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from ..checks.base import Report
from ..model import RunData
from ..outputs import Output
from ..outputs.page import Publisher, Subscriber
from ..outputs.prometheus import Prometheus
from ..safe import line
from ..source import Source
from ..views.dashboard import flagged_ids, load_transcripts
from .fleet import Fleet
from .follower import Throttle

__all__ = ["Hub", "serve", "serve_in_background"]


class Hub(Fleet):
    """Follows the runs (a ``Fleet``: the one discovery, one ``Follower`` each, one loop),
    judges them, and fans their changes out to the pages (``Publisher``), to /metrics
    (``Prometheus``) and to ``outputs``. Its arguments are ``Fleet``'s; the throttle's
    ``poll_s`` (default 0.1 s) paces the poller.
    """

    THROTTLE = Throttle(poll_s=0.1, cost_factor=10.0)

    def __init__(
        self,
        runs: Sequence[str | os.PathLike[str]],
        source: Source | None = None,
        judge: Callable[[RunData, float], Report] | None = None,
        outputs: Iterable[Output] = (),
        throttle: Throttle | None = None,
        *,
        min_alert: str = "warn",
        follow_links: bool = False,
    ) -> None:
        self.publisher = Publisher({})
        self.prometheus = Prometheus({})
        self._transcript_slots = threading.BoundedSemaphore(2)  # transcript reads at once
        self.stopped = threading.Event()
        # Liveness, for /healthz: when the poller last finished a pass, and what it reads now.
        self.last_pass = time.monotonic()
        super().__init__(
            runs,
            source,
            judge,
            [*outputs, self.publisher, self.prometheus],
            throttle,
            min_alert=min_alert,
            follow_links=follow_links,
        )
        self.publisher.runs = self.prometheus.runs = self.runs

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

    def run_forever(self) -> None:
        """Poll until ``stop()``."""
        self.run(self.stopped, _poll_failed)

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
    ) -> Subscriber:
        """A new page: the index and a snapshot of each run asked for, then every delta
        (``notify`` is called after each event is queued)."""
        with self.lock:
            return self.publisher.subscribe(run_ids, notify)

    def metrics(self) -> str:
        with self.lock:
            return self.prometheus.text()


def _poll_failed(exc: Exception) -> None:
    # the dashboard must outlive one bad pass
    print(f"rlvitals serve: poll failed: {line(f'{type(exc).__name__}: {exc}')}", file=sys.stderr)


def serve_in_background(
    paths: Sequence[str | os.PathLike[str]],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    poll_interval: float = 0.1,
    header_timeout: float = 10.0,
    **hub_options: Any,
) -> tuple[str, Callable[[], None]]:
    """Serve the live dashboard from daemon threads; returns ``(url, stop)``.

    ``rlvitals demo --serve`` uses it to show the run it trains. ``stop()`` closes the server
    and its event streams and returns once the threads are done. ``hub_options`` go to
    ``Hub`` (``source``, ``judge``, ``outputs``, ``throttle``, ``min_alert``,
    ``follow_links``); without a ``throttle``, the poller passes every ``poll_interval``
    seconds.
    """
    from ..views.server import make_server

    hub_options.setdefault("throttle", replace(Hub.THROTTLE, poll_s=poll_interval))
    hub = Hub(paths, **hub_options)
    server = make_server(hub, host, port, header_timeout=header_timeout)
    poller = threading.Thread(target=hub.run_forever, daemon=True)
    http = threading.Thread(target=server.run, daemon=True, name="rlvitals-serve")
    poller.start()
    http.start()
    deadline = time.monotonic() + 10
    while not server.uvicorn.started and http.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)

    def stop() -> None:
        hub.stop()
        server.stop()
        poller.join(timeout=5)
        http.join(timeout=5)
        hub.close()

    return server.url, stop


def _more_files() -> None:
    """Raise this process's open-file limit to its hard limit: each page holds a socket."""
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > 1 << 20:
            hard = 1 << 20
        if soft != resource.RLIM_INFINITY and soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def serve(
    paths: Sequence[str | os.PathLike[str]],
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    verbose: bool = False,
    on_ready: Callable[[str, Hub], None] | None = None,
    allowed_hosts: Iterable[str] = (),
    page: dict[str, Any] | None = None,
    **hub_options: Any,
) -> int:
    """Serve in the foreground until interrupted (``hub_options``: see ``Hub``;
    ``allowed_hosts`` and ``page``: see ``rlvitals.views.server.make_server``); returns how
    many alerts the outputs could not deliver."""
    from ..views.server import make_server

    _more_files()
    hub = Hub(paths, **hub_options)
    server = make_server(
        hub, host, port, verbose=verbose, allowed_hosts=allowed_hosts, page=page or {}
    )
    poller = threading.Thread(target=hub.run_forever, daemon=True)
    poller.start()
    if on_ready is not None:
        on_ready(server.url, hub)
    try:
        server.run()
    finally:
        hub.stop()
        poller.join(timeout=5)
        lost = hub.close()
    return lost
