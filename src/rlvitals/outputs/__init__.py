"""Outputs: where the follow stage hands what is new about a run.

An output is one class behind one small interface (``Output``): ``open(run)`` when a run is
first followed, ``update(run, update)`` after each read and each judgement (an ``Update``: new
data, the new step, the new findings...), ``close(timeout)`` at the end, returning how many
things it could not deliver. ``run`` is the ``rlvitals.follow.Follower`` of that run: its
``name``, ``id``, ``source``, ``data`` and ``report``. The same outputs serve ``rlvitals
watch``, ``rlvitals serve``, the TRL callback and the trainer, so a new one (a Discord
notifier, an OpenTelemetry exporter) is one module.

Every output of rlvitals is a module of this folder, as apprise keeps its notifiers:

    webhook.py     ``webhook``, ``slack``, ``discord``: each new finding posted once
    wandb_alerts.py  ``wandb``: each new finding a W&B alert on the run's W&B run
    otel.py        ``otel``: the ``/metrics`` gauges to an OpenTelemetry collector (OTLP/HTTP)
    terminal.py    ``watch``'s terminal: the live view, or one line per event
    console.py     the trainer's live console, and the TRL callback's finding lines
    page.py        ``serve``'s live page: server-sent events to the pages that show a run
    prometheus.py  ``serve``'s ``/metrics``

Other packages add outputs through the ``rlvitals.outputs`` entry-point group::

    [project.entry-points."rlvitals.outputs"]
    myout = "my_package.module:MyOutput"

``load_output("myout=ARG")`` (the CLI's ``--to myout=ARG``) calls ``MyOutput("ARG")``, or
``MyOutput()`` without ``=ARG``, and runs it apart from the follow loop (``Isolated``: its
calls on a thread of its own, its failures reported once), so one bad output never stops
the others, the page or ``/metrics``. ``AlertTracker`` (which findings are news) and
``Update`` live here too, so the follow stage and its outputs share one vocabulary.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from ..checks.base import Finding, severity_rank
from ..errors import RlvitalsError, UsageError

__all__ = [
    "ENTRY_POINT_GROUP",
    "AlertTracker",
    "Isolated",
    "Output",
    "Update",
    "available_outputs",
    "describe",
    "finding_key",
    "load_output",
]

ENTRY_POINT_GROUP = "rlvitals.outputs"
QUEUE = 1024  # updates waiting for a slow output of another package before new ones are dropped
BUSY_SAID_S = 5.0  # an output of another package in one call this long: its status says so

log = logging.getLogger("rlvitals.outputs")

Key = tuple[str, str, str | None]


@dataclass
class Update:
    """What one read or judgement of a run found: what the follow stage hands each output."""

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


def finding_key(f: Finding) -> Key:
    """What makes a finding the same one over time: its check, verdict and metric."""
    return (f.check, f.verdict, f.metric)


class AlertTracker:
    """Which findings are new since the last call. A finding is known by ``finding_key``, so
    an early alarm never mutes a later, different one; a known finding is news again only
    when its severity rises (warn, then fail).

    Args:
        min_severity: findings below this are never news (default ``warn``).
    """

    def __init__(self, min_severity: str = "warn") -> None:
        self.min_rank = severity_rank(min_severity)
        self.sent: dict[Key, str] = {}  # key -> severity last told

    def new(self, findings: Iterable[Finding]) -> list[tuple[Finding, str | None]]:
        """The findings to tell now, each with the severity it was last told at (None when
        it is new). Marks them as told."""
        out: list[tuple[Finding, str | None]] = []
        for f in findings:
            rank = severity_rank(f.severity)
            if rank < self.min_rank:
                continue
            key = finding_key(f)
            before = self.sent.get(key)
            if before is not None and severity_rank(before) >= rank:
                continue
            self.sent[key] = f.severity
            out.append((f, before))
        return out

    def forget(self, key: Key) -> None:
        """Let ``key`` be news again (a stall that ended: the next stall is news)."""
        self.sent.pop(key, None)


class Output(ABC):
    """Where the follow stage hands each run's news. Only ``update`` must be written.

    ``update`` is called from the follow loop: it must return quickly (deliver over the
    network from a thread of its own, as ``WebhookNotifier`` does) and should not raise; an
    exception is caught, reported once, and the follow goes on.
    """

    def open(self, run: Any) -> None:  # noqa: B027 - optional
        """``run`` (a ``Follower``) is followed from now on."""

    @abstractmethod
    def update(self, run: Any, update: Update) -> None:
        """What one read or judgement of ``run`` found (``update.new_findings`` holds the
        findings that are news, each with the severity it was last told at)."""

    def close(self, timeout: float = 10.0) -> int:
        """The follow ended: finish within ``timeout`` seconds; returns how many things
        could not be delivered."""
        return 0

    def describe(self) -> str:
        """Where it sends, for display: never a secret (no credentials, no token in a path)."""
        return type(self).__name__

    def status_line(self) -> str | None:
        """One line for a live view (``alerts to ...: 3 delivered``), or None."""
        return None

    def undelivered(self) -> list[tuple[str, str]]:
        """(title, reason) of each thing given up on so far, oldest first."""
        return []

    def busy_for(self) -> float:
        """Seconds the call it is in has run, for an output run apart (``Isolated``: another
        package's); 0 otherwise. ``/healthz`` names one stuck past its limit."""
        return 0.0


def describe(out: Output) -> str:
    """``out.describe()`` for display: escaped, and the class's name when it raises (an
    output of another package must not end the command that shows where alerts go)."""
    from ..safe import line

    try:
        return line(out.describe())
    except Exception as exc:
        return line(f"{type(out).__name__} (describe() failed: {type(exc).__name__})")


# rlvitals' own outputs, declared as a package declares its entry points.
BUILTIN = {
    "webhook": "rlvitals.outputs.webhook:webhook_output",
    "slack": "rlvitals.outputs.webhook:slack_output",
    "discord": "rlvitals.outputs.webhook:discord_output",
    "wandb": "rlvitals.outputs.wandb_alerts:wandb_output",
    "otel": "rlvitals.outputs.otel:otel_output",
}


def _entry_points() -> dict[str, Any]:
    from importlib.metadata import EntryPoint, entry_points

    found = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    for name, value in BUILTIN.items():  # rlvitals' own win over a package's of that name
        found[name] = EntryPoint(name, value, ENTRY_POINT_GROUP)
    return found


def available_outputs() -> list[str]:
    """The names ``load_output`` accepts: rlvitals' own, then those of installed packages."""
    return [*BUILTIN, *sorted(n for n in _entry_points() if n not in BUILTIN)]


def load_output(spec: str) -> Output:
    """The output ``NAME`` or ``NAME=ARG`` names: a built-in one (``webhook=URL``,
    ``slack=URL``, ``discord=URL``) or one registered by a package under the
    ``rlvitals.outputs`` entry-point group, called with ``ARG`` (or nothing)."""
    name, sep, arg = spec.partition("=")
    name = name.strip()
    ep = _entry_points().get(name)
    if ep is None:
        known = ", ".join(available_outputs())
        raise UsageError(f"output {name!r}: no such output (known: {known})")
    try:
        make = ep.load()
    except Exception as exc:
        raise UsageError(
            f"output {name}: cannot load {ep.value} ({type(exc).__name__}: {exc})"
        ) from None
    try:
        out = make(arg) if sep else make()
    except RlvitalsError:  # already one line for the user (a missing extra, a bad URL)
        raise
    except Exception as exc:  # the argument is often a secret (a webhook URL): not shown
        raise UsageError(f"output {name}: {type(exc).__name__}: {exc}") from None
    if not isinstance(out, Output):
        raise UsageError(f"output {name}: {type(out).__name__} is not an rlvitals.outputs.Output")
    if name in BUILTIN:
        return out
    return Isolated(out)  # another package's: a bad one never stops the others


class Isolated(Output):
    """An output of another package, run apart from the follow loop (``load_output`` wraps
    each in one).

    A plugin's ``update`` ran on the loop that reads every run, judges it and answers the page
    and ``/metrics`` (under the hub's lock): one that blocked (a webhook with no timeout) froze
    all of it; one whose ``describe`` raised ended ``watch`` and ``serve`` at start. Here its
    ``open``, ``update`` and ``close`` run in order on a thread of its own behind a bounded
    queue (the loop never waits; when the queue is full, updates are dropped and counted),
    every exception is reported once, escaped, and its name is asked once and never raises.
    ``busy_for`` says how long its current call has run, so ``/healthz`` can name an output
    stuck while the page goes on. It sees the ``Follower`` a moment later than the update was
    made (the ``Update`` itself is the moment's).
    """

    def __init__(self, inner: Output, *, queue_size: int = QUEUE) -> None:
        self.inner = inner
        self.name = describe(inner)
        self.dropped = 0  # updates not handed on: the queue was full
        self.failures = 0  # calls that raised
        self._q: queue.Queue[tuple[str, tuple[Any, ...], Future[Any] | None]] = queue.Queue(
            queue_size
        )
        self._since: float | None = None  # when the call now running began
        self._calling = ""
        self._said: set[str] = set()
        self._thread = threading.Thread(
            target=self._work, name=f"rlvitals-output-{type(inner).__name__}", daemon=True
        )
        self._thread.start()

    # -- what the follow loop calls: never waits, never raises ------------------------------

    def open(self, run: Any) -> None:
        self._put("open", (run,))

    def update(self, run: Any, update: Update) -> None:
        self._put("update", (run, update))

    def describe(self) -> str:
        return self.name

    def status_line(self) -> str | None:
        busy = self.busy_for()
        if busy >= BUSY_SAID_S:  # its own line would wait on the same stuck code: say so instead
            return f"{self.name}: {self._calling}() has not returned for {busy:.0f} s"
        got = self._ask(self.inner.status_line)
        return None if got is None else str(got)

    def undelivered(self) -> list[tuple[str, str]]:
        got = [] if self.busy_for() >= BUSY_SAID_S else self._ask(self.inner.undelivered)
        lost = [(str(a), str(b)) for a, b in got or []]
        if self.dropped:
            lost.append(("updates", f"{self.dropped} dropped while {self.name} was busy"))
        return lost

    def close(self, timeout: float = 10.0) -> int:
        """Close the output after what is queued, within ``timeout`` seconds; what it could
        not deliver (an output still busy at the end counts its queued updates)."""
        done: Future[Any] = Future()
        deadline = time.monotonic() + timeout
        try:
            self._q.put(("close", (timeout,), done), timeout=max(0.0, timeout))
            got = done.result(max(0.0, deadline - time.monotonic()))
        except (queue.Full, FutureTimeout):
            self._once("close", f"did not finish within {timeout:g} s; given up")
            return self._q.qsize() + self.dropped + 1
        except Exception:  # the output's close raised: reported by the worker
            return self.dropped + 1
        return (got if isinstance(got, int) else 0) + self.dropped

    def busy_for(self) -> float:
        """Seconds the output's current call has run (0 when it is idle)."""
        since = self._since
        return 0.0 if since is None else time.monotonic() - since

    # -- the output's own thread ------------------------------------------------------------

    def _put(self, name: str, args: tuple[Any, ...]) -> None:
        try:
            self._q.put_nowait((name, args, None))
        except queue.Full:
            self.dropped += 1
            self._once("full", f"busy for {self.busy_for():.0f} s; updates are dropped")

    def _work(self) -> None:
        while True:
            name, args, done = self._q.get()
            self._calling = name
            self._since = time.monotonic()
            try:
                got = getattr(self.inner, name)(*args)
            except BaseException as exc:  # SystemExit too: this thread is not the follow's
                self.failures += 1
                self._once(name, f"{name}() failed: {type(exc).__name__}: {exc}")
                if done is not None:
                    done.set_exception(exc if isinstance(exc, Exception) else RuntimeError())
            else:
                if done is not None:
                    done.set_result(got)
            finally:
                self._since = None
            if name == "close":
                return

    def _ask(self, fn: Any) -> Any:
        try:
            return fn()
        except Exception as exc:
            self._once(fn.__name__, f"{fn.__name__}() failed: {type(exc).__name__}: {exc}")
            return None

    def _once(self, key: str, message: str) -> None:
        if key in self._said:
            return
        self._said.add(key)
        from ..safe import line

        log.warning("rlvitals: output %s: %s", self.name, line(message))
