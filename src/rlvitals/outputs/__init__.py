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
``MyOutput()`` without ``=ARG``. ``AlertTracker`` (which findings are news) and ``Update``
live here too, so the follow stage and its outputs share one vocabulary.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..checks.base import Finding, severity_rank
from ..errors import RlvitalsError, UsageError

__all__ = [
    "ENTRY_POINT_GROUP",
    "AlertTracker",
    "Output",
    "Update",
    "available_outputs",
    "finding_key",
    "load_output",
]

ENTRY_POINT_GROUP = "rlvitals.outputs"

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
    return out
