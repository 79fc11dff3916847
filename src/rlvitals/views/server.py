"""The live dashboard: ``rlvitals serve DIR_OR_RUNS...`` (standard library only).

One poller thread follows every run it was given (a run, or a folder whose runs it discovers,
new ones included), reading only the bytes that arrived since its last pass. Each pass sends
the new points of each run's series to the pages that show that run, as server-sent events,
and re-judges a changed run at most once a second (less often when judging is slow).

Routes: ``/`` the page; ``/events?runs=ID,...`` the event stream (an ``index`` of the runs,
then a ``snapshot`` of each run asked for, then ``delta`` events); ``/api/runs``,
``/api/run/ID``, ``/api/transcripts/ID/STEP`` as JSON; ``/metrics`` in Prometheus text
format; ``/healthz``. Nothing else: a run is addressed by an id the server made, never by a
path, so no request can reach a file the server was not given. It binds 127.0.0.1 unless told
otherwise. It refuses requests whose Host header names a host it does not serve under (DNS
rebinding: a page elsewhere that points its own name at this address): on a loopback address
only loopback names; on another address, IP literals, this machine's names and the names given
with ``allowed_hosts`` (``"*"``: any).
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import math
import os
import queue
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec

from ..checks.base import SEVERITIES, Report
from ..errors import ReadError, RlvitalsError, UnknownFormatError
from ..follow import Follower
from ..model import RunData
from ..schema import TRANSCRIPTS, is_canonical
from .dashboard import (
    csp_header,
    dashboard_metrics,
    flagged_ids,
    load_transcripts,
    page_html,
    run_payload,
    run_summary,
    series_payload,
    transcript_steps,
)
from .safe import json_for_html

__all__ = ["Hub", "make_server", "prometheus_text", "serve", "serve_in_background"]

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


class _Run:
    """One followed run: its follower (reader and judge), and what the pages already have."""

    def __init__(self, run_id: str, path: Path, follower: Follower) -> None:
        self.id = run_id
        self.path = path
        self.follower = follower
        self.sent: dict[str, tuple[int, int, float]] = {}  # name -> (points, last step, value)
        self.tsteps: list[dict[str, Any]] = []
        self.n_warnings = 0

    @property
    def reader(self) -> Any:
        return self.follower.reader

    @property
    def data(self) -> RunData:
        return self.follower.data

    @property
    def report(self) -> Report | None:
        return self.follower.report

    @property
    def last_check(self) -> float:
        return self.follower.last_judged


class _Subscriber:
    def __init__(self, runs: set[str]) -> None:
        self.runs = runs
        self.queue: queue.Queue[bytes | None] = queue.Queue(QUEUE_EVENTS)
        self.dead = False

    def put(self, event: bytes) -> None:
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


def _encode(data: Any) -> bytes:
    """JSON for the page: bidi, C1 and separator characters in run text arrive as visible
    ``\\u202e`` text (``safe.json_for_html``), never as characters that reorder the page."""
    raw = _ENC.encode(data)
    if raw.isascii():
        return raw
    return json_for_html(raw.decode("utf-8")).encode("utf-8")


def _event(kind: str, data: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + _encode(data) + b"\n\n"


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
    ) -> None:
        self.source_format = source_format  # for the runs given directly
        self.store_run = run  # likewise
        self.mapping = mapping  # for every run
        self.roots: list[Path] = []
        self.explicit: list[Path] = []
        for p in paths:
            path = Path(p)
            if not path.exists():
                raise ReadError("no such file or directory", path=str(path))
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
        self.runs: dict[str, _Run] = {}
        self._by_path: dict[Path, str] = {}
        self._not_runs: dict[Path, float] = {}  # path -> mtime when it was not a run
        self._subs: list[_Subscriber] = []
        self._last_discover = -math.inf
        self.stopped = threading.Event()
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
        )
        run = _Run(run_id_for(path, name), path, follower)
        while run.id in self.runs:  # two paths, one hash prefix: keep ids unique
            run.id += "x"
        self.runs[run.id] = run
        self._by_path[key] = run.id
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
                is_dir = e.is_dir()
            except OSError:
                continue
            if not is_dir and Path(e.name).suffix not in _LOG_SUFFIXES:
                continue
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

    def _delta(self, run: _Run, names: list[str]) -> dict[str, Any]:
        data = run.data
        derived = run.report.series if run.report is not None else {}
        since: dict[str, int] = {}
        replace: set[str] = set()
        for name in names:
            s = data.series(name)
            if s is None:
                s = derived.get(name)
            if s is None:
                continue
            n = len(s)
            old = run.sent.get(name)
            if old is None:
                since[name] = 0
            elif n > old[0] and old[0] and s.steps[old[0] - 1] == old[1]:
                since[name] = old[0]
                if float(s.values[old[0] - 1]) != old[2] and not (
                    math.isnan(old[2]) and math.isnan(s.values[old[0] - 1])
                ):
                    replace.add(name)
            elif n == old[0] and n and s.steps[-1] == old[1] and _same(s.values[-1], old[2]):
                continue
            else:
                replace.add(name)
            if n:
                run.sent[name] = (n, int(s.steps[-1]), float(s.values[-1]))
        for name in replace:
            since[name] = 0
        out = series_payload(data, list(since), since, derived=derived)
        for name in replace:
            if name in out:
                out[name]["r"] = True
        return out

    def _snapshot(self, run: _Run) -> dict[str, Any]:
        payload = run_payload(run.id, run.data, run.report, transcript_steps=run.tsteps)
        return payload

    def _publish(self, run: _Run, *, report_changed: bool) -> None:
        """Send what changed in ``run`` since the pages last heard of it."""
        names = dashboard_metrics(run.data, run.report)
        summary = run_summary(run.id, run.data, run.report)
        event: dict[str, Any] = {
            "id": run.id,
            "summary": summary,
            "series": self._delta(run, names),
        }
        if report_changed:
            event["report"] = _report_dict(run.report)
            event["transcript_steps"] = run.tsteps
        if len(run.data.warnings) != run.n_warnings:
            run.n_warnings = len(run.data.warnings)
            event["warnings"] = run.data.warnings[:50]
            event["n_warnings"] = run.n_warnings
        blob = _event("delta", event)
        for sub in self._subs:
            if run.id in sub.runs:
                sub.put(blob)

    def poll(self, now: float | None = None) -> int:
        """One pass: read every run's new records and send them, then re-judge the runs that
        are due, oldest judgement first, for at most ``judge_budget`` seconds (at least one).
        Returns how many events went out."""
        now = time.monotonic() if now is None else now
        found = self.discover()
        changed = 0
        for run in list(self.runs.values()):
            with self.lock:  # per run, so a long first read does not hold every page up
                up = run.follower.read()
                if up.reset:
                    # Recreated under the same path: the pages get it afresh, never a mix.
                    run.sent = {}
                    run.tsteps = []
                    run.n_warnings = 0
                    blob = _event("snapshot", self._snapshot(run))
                    for sub in self._subs:
                        if run.id in sub.runs:
                            sub.put(blob)
                    changed += 1
                elif up.new_data:
                    self._publish(run, report_changed=False)
                    changed += 1
        t0 = time.perf_counter()
        due = sorted(
            (r for r in self.runs.values() if r.follower.due(now)), key=lambda r: r.last_check
        )
        for run in due:
            with self.lock:
                up = run.follower.judge(now=now)
                if up.report_changed:
                    run.tsteps = transcript_steps(run.data, run.report)
                    self._publish(run, report_changed=True)
                    changed += 1
                elif up.error and len(run.data.warnings) != run.n_warnings:
                    self._publish(run, report_changed=False)
                    changed += 1
            if time.perf_counter() - t0 > self.judge_budget:
                break
        with self.lock:
            if changed or found:
                index = _event("index", {"runs": self._index()})
                for sub in self._subs:
                    sub.put(index)
            self._subs = [s for s in self._subs if not s.dead]
        return changed

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
        self.stopped.set()
        with self.lock:
            for sub in self._subs:
                with contextlib.suppress(queue.Full):
                    sub.queue.put_nowait(None)
            self._subs = []

    # -- what handlers ask for -------------------------------------------------------------

    def _index(self) -> list[dict[str, Any]]:
        return [run_summary(r.id, r.data, r.report) for r in self.runs.values()]

    def index(self) -> list[dict[str, Any]]:
        with self.lock:
            return self._index()

    def snapshot(self, run_id: str) -> dict[str, Any] | None:
        with self.lock:
            run = self.runs.get(run_id)
            return None if run is None else self._snapshot(run)

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

    def subscribe(self, run_ids: Iterable[str]) -> _Subscriber:
        """A new page: the index and a snapshot of each run asked for, then every delta."""
        with self.lock:
            wanted = {r for r in run_ids if r in self.runs}
            sub = _Subscriber(wanted)
            sub.put(_event("index", {"runs": self._index()}))
            for rid in wanted:
                sub.put(_event("snapshot", self._snapshot(self.runs[rid])))
            self._subs.append(sub)
            return sub

    def unsubscribe(self, sub: _Subscriber) -> None:
        with self.lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def metrics(self) -> str:
        with self.lock:
            return prometheus_text((r.id, r.data, r.report) for r in self.runs.values())


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _report_dict(report: Report | None) -> dict[str, Any]:
    from ..jsonio import clean

    return clean(report.to_dict()) if report is not None else {}


# -- Prometheus --------------------------------------------------------------------------


def _label(v: Any) -> str:
    s = "" if v is None else str(v)
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _pvalue(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def prometheus_text(runs: Iterable[tuple[str, RunData, Report | None]]) -> str:
    """Every run's latest canonical metric values and its verdict, in Prometheus text format
    (exposition format 0.0.4). Metric names are a label, so any canonical name fits."""
    fams: dict[str, tuple[str, list[str]]] = {
        "rlvitals_metric": ("Latest value of a canonical rlvitals metric of the run.", []),
        "rlvitals_last_step": ("Last update (optimizer step) recorded.", []),
        "rlvitals_last_step_timestamp_seconds": ("Unix time of the last step record.", []),
        "rlvitals_heartbeat_timestamp_seconds": ("Unix time of the last progress heartbeat.", []),
        "rlvitals_running": ("1 while the run's status is running, else 0.", []),
        "rlvitals_status": ("The run's status (the one that holds is 1).", []),
        "rlvitals_verdict": ("The run's verdict from the checks (the one that holds is 1).", []),
        "rlvitals_worst_severity": ("Worst finding: 0 ok, 1 info, 2 warn, 3 fail.", []),
        "rlvitals_findings": ("Findings of the run by severity.", []),
    }

    def add(fam: str, labels: dict[str, Any], value: float) -> None:
        lab = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
        fams[fam][1].append(f"{fam}{{{lab}}} {_pvalue(value)}")

    for run_id, data, report in runs:
        base = {"run": data.info.get("name") or Path(data.source).name, "run_id": run_id}
        for name in data.names():
            if not is_canonical(name):
                continue
            s = data.series(name)
            if s is not None and len(s):
                add("rlvitals_metric", {**base, "metric": name}, float(s.values[-1]))
        if data.last_step is not None:
            add("rlvitals_last_step", base, data.last_step)
        t = data.series("time")
        if t is not None and len(t):
            add("rlvitals_last_step_timestamp_seconds", base, float(t.values[-1]))
        if data.heartbeats:
            hb = data.heartbeats[-1].get("time")
            if isinstance(hb, (int, float)):
                add("rlvitals_heartbeat_timestamp_seconds", base, float(hb))
        status = data.info.get("status")
        if status is not None:
            add("rlvitals_running", base, 1.0 if status == "running" else 0.0)
            add("rlvitals_status", {**base, "status": status}, 1.0)
        if report is not None:
            add("rlvitals_verdict", {**base, "verdict": report.verdict}, 1.0)
            add("rlvitals_worst_severity", base, SEVERITIES.index(report.worst))
            counts = dict.fromkeys(SEVERITIES, 0)
            for f in report.findings:
                counts[f.severity] += 1
            for sev, n in counts.items():
                add("rlvitals_findings", {**base, "severity": sev}, n)
    lines = []
    for fam, (help_text, samples) in fams.items():
        lines.append(f"# HELP {fam} {help_text}")
        lines.append(f"# TYPE {fam} gauge")
        lines.extend(samples)
    return "\n".join(lines) + "\n"


# -- HTTP --------------------------------------------------------------------------------

_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


def _is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_allowed(header: str, loopback_only: bool, allowed: frozenset[str]) -> bool:
    """Whether a request's Host ``header`` names a host this server answers under.

    Loopback names and addresses always; names in ``allowed`` (``"*"``: any); and, bound to an
    address other than loopback, any IP literal: a page elsewhere that points its own name at
    this address (DNS rebinding) sends that name, never an address typed by hand.
    """
    if "*" in allowed:
        return True
    m = re.match(r"^\[([^\]]+)\](?::\d+)?$|^([^:]+)(?::\d+)?$", header)
    name = (m.group(1) or m.group(2)) if m else None
    if name is None:
        return False
    name = name.lower().rstrip(".")
    if name in _LOOPBACK_NAMES or name in allowed:
        return True
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return False
    if ip.is_loopback:  # 127.0.0.2 and the rest of 127/8 (the address it was bound to)
        return ip.version == 6 or name.count(".") == 3
    return not loopback_only


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "rlvitals"
    sys_version = ""
    _head_only = False

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    # Only GET and HEAD.
    def do_POST(self) -> None:
        self._send(
            HTTPStatus.METHOD_NOT_ALLOWED, b"method not allowed\n", headers={"Allow": "GET, HEAD"}
        )

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_POST

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def setup(self) -> None:
        super().setup()
        # The request line and headers must arrive within ``header_timeout`` in all (a client
        # that sends one byte every few seconds is cut off, slowloris), and an idle socket
        # times out after ``idle_timeout`` (a kept-alive connection nobody uses).
        self.connection.settimeout(self.server.idle_timeout)
        self._header_timer = threading.Timer(self.server.header_timeout, self._too_slow)
        self._header_timer.daemon = True
        self._header_timer.start()

    def _too_slow(self) -> None:
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def parse_request(self) -> bool:
        ok = super().parse_request()
        self._header_timer.cancel()
        if ok and (self.headers.get("Content-Length") or self.headers.get("Transfer-Encoding")):
            # GET and HEAD take no body: never read one as a second, pipelined request.
            self.close_connection = True
        return ok

    def finish(self) -> None:
        self._header_timer.cancel()
        super().finish()

    def _host_ok(self) -> bool:
        srv = self.server
        return host_allowed(self.headers.get("Host", ""), srv.loopback_only, srv.allowed_hosts)

    def _dispatch(self, *, head: bool) -> None:
        self._head_only = head
        hub = self.server.hub
        if not self._host_ok():
            self._send(
                HTTPStatus.FORBIDDEN,
                b"unexpected Host header: this server is not served under that name (start "
                b"`rlvitals serve` with --allow-host NAME to serve under it)\n",
            )
            return
        url = urlsplit(self.path)
        parts = url.path.split("/")[1:]
        try:
            if url.path == "/":
                self._page()
            elif url.path == "/events":
                runs = parse_qs(url.query).get("runs", [""])[0]
                self._events([r for r in runs.split(",") if _ID_OK.match(r)])
            elif url.path == "/metrics":
                self._send(
                    HTTPStatus.OK,
                    hub.metrics().encode("utf-8"),
                    "text/plain; version=0.0.4; charset=utf-8",
                )
            elif url.path == "/healthz":
                self._send(HTTPStatus.OK, b"ok\n")
            elif url.path == "/api/runs":
                self._json({"runs": hub.index()})
            elif len(parts) == 3 and parts[:2] == ["api", "run"] and _ID_OK.match(parts[2]):
                snap = hub.snapshot(parts[2])
                self._json(snap) if snap is not None else self._not_found()
            elif (
                len(parts) == 4
                and parts[:2] == ["api", "transcripts"]
                and _ID_OK.match(parts[2])
                and re.fullmatch(r"\d{1,9}", parts[3])
            ):
                got = hub.transcripts(parts[2], int(parts[3]))
                self._json(got) if got is not None else self._not_found()
            else:
                self._not_found()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _not_found(self) -> None:
        self._send(HTTPStatus.NOT_FOUND, b"not found\n")

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        ctype: str = "text/plain; charset=utf-8",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not self._head_only:
            self.wfile.write(body)

    def _json(self, value: Any) -> None:
        self._send(HTTPStatus.OK, _encode(value), "application/json")

    def _page(self) -> None:
        hub = self.server.hub
        html = page_html(
            {
                "index": hub.index(),
                "runs": [],
                "baseline": hub.shading,
                "stall_after": hub.stall_after or 600,
            },
            live=True,
            title="rlvitals live",
        )
        self._send(
            HTTPStatus.OK,
            html.encode("utf-8"),
            "text/html; charset=utf-8",
            {"Content-Security-Policy": csp_header(live=True), "X-Frame-Options": "DENY"},
        )

    def _events(self, run_ids: list[str]) -> None:
        hub = self.server.hub
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Accel-Buffering", "no")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if self._head_only:
            return
        sub = hub.subscribe(run_ids)
        try:
            self.wfile.write(b"retry: 1000\n\n")
            self.wfile.flush()
            while not hub.stopped.is_set():
                try:
                    ev = sub.queue.get(timeout=self.server.keepalive)
                except queue.Empty:
                    self.wfile.write(b": keepalive\n\n")
                    self.wfile.flush()
                    continue
                if ev is None:
                    break
                self.wfile.write(ev)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        finally:
            hub.unsubscribe(sub)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # the listen backlog (the standard library's is 5)
    max_connections = 256  # connections served at once; more are closed at once
    header_timeout = 10.0
    idle_timeout = 30.0
    hub: Hub
    loopback_only: bool
    allowed_hosts: frozenset[str]
    verbose: bool
    keepalive: float

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(self.max_connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        """One thread per connection, at most ``max_connections`` at once: a flood of idle
        sockets is closed, not given a thread each."""
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-answer is routine (a closed tab, a malformed request
        answered with an error it did not wait for): nothing to say. Anything else is one
        line, never a traceback in the user's terminal."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            return
        print(
            f"rlvitals serve: request from {client_address[0]} failed: {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )


def make_server(
    hub: Hub,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    verbose: bool = False,
    header_timeout: float = 10.0,
    idle_timeout: float = 30.0,
    allowed_hosts: Iterable[str] = (),
) -> _Server:
    """An HTTP server for ``hub`` on ``host:port`` (0: any free port), not yet serving.

    A request's line and headers must arrive within ``header_timeout`` seconds; a connection
    idle for ``idle_timeout`` is closed. ``allowed_hosts``: host names it answers under beside
    loopback ones (and, bound to another address, IP literals and this machine's names);
    ``"*"`` accepts any Host header."""
    try:
        server = _Server((host, port), _Handler)
    except OSError as exc:
        raise RlvitalsError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    server.hub = hub
    server.loopback_only = _is_loopback(host)
    names = {h.lower().rstrip(".") for h in allowed_hosts}
    if not server.loopback_only:
        names |= _machine_names()
    server.allowed_hosts = frozenset(names)
    server.verbose = verbose
    server.keepalive = 15.0
    server.header_timeout = header_timeout
    server.idle_timeout = idle_timeout
    return server


def _machine_names() -> set[str]:
    """This machine's own names (a page can only rebind a name its author controls)."""
    names = set()
    for get in (socket.gethostname, socket.getfqdn):
        with contextlib.suppress(OSError):
            name = get().lower().rstrip(".")
            if name:
                names.add(name)
    return names


def _url(server: _Server) -> str:
    host, port = server.server_address[:2]
    if isinstance(host, bytes):
        host = host.decode()
    shown = host if host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


def serve_in_background(
    paths: Sequence[str | os.PathLike[str]],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    baseline: dict[str, Any] | None = None,
    shading: dict[str, Any] | None = None,
    poll_interval: float = 0.1,
    stall_after: float | None = None,
    follow_links: bool = False,
    header_timeout: float = 10.0,
    **hub_options: Any,
) -> tuple[str, Callable[[], None]]:
    """Serve the live dashboard from daemon threads; returns ``(url, stop)``.

    ``rlvitals demo --serve`` uses it to show the run it trains. ``stop()`` closes the server
    and its event streams and returns once the threads are done. ``hub_options`` go to
    ``Hub`` (``thresholds``, ``transcript_rules``, ``judge``).
    """
    hub = Hub(
        paths,
        baseline=baseline,
        shading=shading,
        stall_after=stall_after,
        follow_links=follow_links,
        **hub_options,
    )
    server = make_server(hub, host, port, header_timeout=header_timeout)
    poller = threading.Thread(target=hub.run_forever, args=(poll_interval,), daemon=True)
    http = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    poller.start()
    http.start()

    def stop() -> None:
        hub.stop()
        server.shutdown()
        server.server_close()
        poller.join(timeout=5)
        http.join(timeout=5)

    return _url(server), stop


def serve(
    paths: Sequence[str | os.PathLike[str]],
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    baseline: dict[str, Any] | None = None,
    shading: dict[str, Any] | None = None,
    poll_interval: float = 0.1,
    stall_after: float | None = None,
    verbose: bool = False,
    on_ready: Callable[[str, Hub], None] | None = None,
    follow_links: bool = False,
    thresholds: Any = None,
    transcript_rules: str | None = None,
    source_format: str | None = None,
    mapping: str | os.PathLike[str] | None = None,
    run: str | None = None,
    allowed_hosts: Iterable[str] = (),
) -> None:
    """Serve in the foreground until interrupted (``source_format``, ``mapping``, ``run``:
    see Hub; ``allowed_hosts``: see ``make_server``)."""
    hub = Hub(
        paths,
        baseline=baseline,
        shading=shading,
        stall_after=stall_after,
        follow_links=follow_links,
        thresholds=thresholds,
        transcript_rules=transcript_rules,
        source_format=source_format,
        mapping=mapping,
        run=run,
    )
    server = make_server(hub, host, port, verbose=verbose, allowed_hosts=allowed_hosts)
    poller = threading.Thread(target=hub.run_forever, args=(poll_interval,), daemon=True)
    poller.start()
    if on_ready is not None:
        on_ready(_url(server), hub)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        hub.stop()
        server.server_close()
        poller.join(timeout=5)
