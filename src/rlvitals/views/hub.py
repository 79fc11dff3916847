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

from ..checks.base import SEVERITIES, Report
from ..errors import ReadError, UnknownFormatError
from ..follow import Follower
from ..judge import Judge
from ..model import RunData
from ..schema import is_canonical
from ..source import Finder, Source, find_runs
from .dashboard import (
    dashboard_metrics,
    flagged_ids,
    load_transcripts,
    run_payload,
    run_summary,
    run_warnings,
    transcript_steps,
)
from .safe import json_for_html

__all__ = ["Hub", "prometheus_text", "run_id_for"]

_ENC = msgspec.json.Encoder()
_ID_OK = re.compile(r"^[A-Za-z0-9._-]{1,80}$")
QUEUE_EVENTS = 512  # a page further behind than this is dropped; its browser reconnects


def _one_run(folder: Path) -> bool:
    """Whether ``folder``, given to serve, is one run rather than a folder of runs, as
    ``rlvitals check`` reads it (``source.find_runs``); an empty folder is a folder of runs to
    come."""
    try:
        return find_runs(folder).runs == [str(folder)]
    except ReadError:
        return False


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


def fs_text(s: str) -> str:
    """``s`` with the bytes of a file name that is not UTF-8 (``surrogateescape``'s lone
    surrogates) shown as visible ``\\xff`` escapes: text every encoder accepts."""
    if s.isascii():
        return s
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def unsurrogate(data: Any) -> Any:
    """``data`` with every string (keys too) passed through ``fs_text``."""
    if isinstance(data, str):
        return fs_text(data)
    if isinstance(data, dict):
        return {unsurrogate(k): unsurrogate(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [unsurrogate(v) for v in data]
    return data


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


class Hub:
    """Follows the runs, judges them, and fans their changes out to the pages.

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
            if path.is_dir() and not _one_run(path):
                self.roots.append(path)  # a folder of runs: found by the one discovery
            else:
                self.explicit.append(path)
        self.baseline = baseline
        self.shading = shading or {}
        self.stall_after = stall_after
        self.check_interval = check_interval
        self.discover_interval = discover_interval
        self.recheck_idle = 5.0
        self.judge_budget = 0.05
        self._judge = judge or Judge(
            baseline=baseline,
            thresholds=thresholds,
            rules=transcript_rules,
            stall_after=stall_after,
        )
        self.follow_links = follow_links
        self._finder = Finder(links=follow_links, within=None if follow_links else self.roots)
        self._transcript_slots = threading.BoundedSemaphore(2)  # transcript reads at once
        self.lock = threading.RLock()
        self.runs: dict[str, _Run] = {}
        self._by_path: dict[Path, str] = {}
        self._subs: list[_Subscriber] = []
        self._last_discover = -math.inf
        self.stopped = threading.Event()
        # Liveness, for /healthz: when the poller last finished a pass, and what it reads now.
        self.last_pass = time.monotonic()
        self.reading: str | None = None
        self._index_cache: list[dict[str, Any]] | None = None
        self._index_sent = b""  # the last index event sent to every page
        for path in self.explicit:
            self._add(path, must=True)
        self.discover(force=True)

    # -- runs ------------------------------------------------------------------------------

    def _add(self, path: Path, *, must: bool = False) -> bool:
        key = path.resolve()
        if key in self._by_path:
            return False
        fmt = self.source_format if must else None
        mapping = None if self.mapping is None else os.fspath(self.mapping)
        source = Source(
            str(path), format=fmt, mapping=mapping, run=self.store_run if must else None
        )
        try:
            reader = source.open()
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
            run=source.run,
            checks_every_s=self.check_interval,
            idle_check_s=self.recheck_idle,
            cost_factor=10.0,
            judge=lambda data, now: self.judge(data),
        )
        run = _Run(run_id_for(path, name), path, follower)
        while run.id in self.runs:  # two paths, one hash prefix: keep ids unique
            run.id += "x"
        self.runs[run.id] = run
        self._index_cache = None
        self._by_path[key] = run.id
        return True

    def discover(self, *, force: bool = False) -> bool:
        """Look for new runs under the folders (``rlvitals.source``'s one discovery, as
        ``rlvitals check DIR`` finds them); True if one was found."""
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
                if key in self._by_path or self._inside_run(key):
                    continue
                with self.lock:
                    found |= self._add(p)
        return found

    def _inside_run(self, key: Path) -> bool:
        return any(parent in self._by_path for parent in key.parents)

    # -- judging ---------------------------------------------------------------------------

    def judge(self, data: RunData) -> Report:
        return self._judge(data)

    # -- the poll loop ---------------------------------------------------------------------

    def _delta(self, run: _Run, names: list[str]) -> dict[str, Any]:
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
            old = run.sent.get(name)
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
                run.sent[name] = (n, int(steps[-1]), float(values[-1]))
            if start >= n:
                continue
            out[name] = {"s": steps[start:].tolist(), "v": _json_floats(values[start:].tolist())}
            if replace:
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
        warnings = run_warnings(run.data, run.report)
        if len(warnings) != run.n_warnings:
            run.n_warnings = len(warnings)
            event["warnings"] = warnings[:50]
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
                self.reading = str(run.path)
                up = run.follower.read()
                self.reading = None
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
                elif up.error and len(run_warnings(run.data, run.report)) != run.n_warnings:
                    self._publish(run, report_changed=False)
                    changed += 1
            if time.perf_counter() - t0 > self.judge_budget:
                break
        with self.lock:
            if changed or found:
                self._index_cache = self._index()
                index = _event("index", {"runs": self._index_cache})
                if index != self._index_sent:  # a re-judged idle run often shows the same
                    self._index_sent = index
                    for sub in self._subs:
                        sub.put(index)
            self._subs = [s for s in self._subs if not s.dead]
        self.last_pass = time.monotonic()
        return changed

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
        self.stopped.set()
        with self.lock:
            for sub in self._subs:
                sub.put(None)
            self._subs = []

    # -- what handlers ask for -------------------------------------------------------------

    def _index(self) -> list[dict[str, Any]]:
        return [run_summary(r.id, r.data, r.report) for r in self.runs.values()]

    def index(self) -> list[dict[str, Any]]:
        """Every run's summary, as of the poller's last pass that changed one: no lock taken
        then, so the page and /api/runs never wait for a run being read or judged."""
        cached = self._index_cache
        if cached is not None:
            return cached
        with self.lock:
            self._index_cache = self._index()
            return self._index_cache

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

    def subscribe(
        self, run_ids: Iterable[str], notify: Callable[[], None] | None = None
    ) -> _Subscriber:
        """A new page: the index and a snapshot of each run asked for, then every delta
        (``notify`` is called after each event is queued)."""
        with self.lock:
            wanted = {r for r in run_ids if r in self.runs}
            sub = _Subscriber(wanted, notify)
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


# -- Prometheus --------------------------------------------------------------------------


def _label(v: Any) -> str:
    s = "" if v is None else fs_text(str(v))
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
