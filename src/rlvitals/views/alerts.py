"""Alerts: each new finding posted once to a webhook (Slack-compatible JSON).

Two parts. ``AlertTracker`` decides what is new: a finding is known by a stable key, (check,
verdict, metric), so an early alarm never mutes a later, different one, and there is no global
cap to use up. A known finding is posted again only when its severity rises (warn, then fail).
``WebhookNotifier`` delivers: a background thread posts each alert in order with a timeout,
retrying with exponential backoff (and ``Retry-After``) on timeouts, connection errors, 408, 429
and 5xx, so the caller never waits on the network. Each alert carries an id (also sent as the
``Idempotency-Key`` header) so a receiver can drop the copy a retry after a lost answer sends.

The body is ``{"text": ...}`` (what Slack, Mattermost, Discord's /slack endpoint and most chat
webhooks read) plus an ``rlvitals`` object with the structured fields.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .. import __version__
from ..checks.base import VERDICTS, Finding, severity_rank
from ..errors import UsageError
from ..jsonio import clean

__all__ = ["Alert", "AlertTracker", "WebhookNotifier", "alert_for", "finding_key"]

log = logging.getLogger("rlvitals.alerts")

Key = tuple[str, str, str | None]


def finding_key(f: Finding) -> Key:
    """What makes a finding the same one over time: its check, verdict and metric."""
    return (f.check, f.verdict, f.metric)


@dataclass
class Alert:
    """One message to deliver."""

    id: str
    body: dict[str, Any]
    created: float = field(default_factory=time.time)


def alert_for(
    finding: Finding,
    *,
    run: str,
    source: str = "",
    previous: str | None = None,
) -> Alert:
    """The Slack-compatible message for ``finding`` of run ``run``.

    ``previous`` is the severity it had when last posted (an escalation), or None.
    """
    key = finding_key(finding)
    aid = hashlib.sha1(
        json.dumps([source or run, *key, finding.severity]).encode("utf-8")
    ).hexdigest()[:20]
    where = finding.check + (f", {finding.metric}" if finding.metric else "")
    if finding.first_step is not None:
        where += f", from step {finding.first_step}"
    head = f"[{finding.severity.upper()}] {run}: {finding.title}"
    if previous:
        head += f" (was {previous})"
    text = f"{head}\n{VERDICTS.get(finding.verdict, finding.verdict)} ({where})"
    if finding.action:
        text += f"\nNext: {finding.action}"
    body = {
        "text": text,
        "rlvitals": clean(
            {
                "id": aid,
                "run": run,
                "source": source,
                "check": finding.check,
                "severity": finding.severity,
                "previous_severity": previous,
                "verdict": finding.verdict,
                "verdict_text": VERDICTS.get(finding.verdict, finding.verdict),
                "title": finding.title,
                "metric": finding.metric,
                "first_step": finding.first_step,
                "action": finding.action,
                "evidence": finding.evidence,
                "time": time.time(),
            }
        ),
    }
    return Alert(aid, body)


class AlertTracker:
    """Which findings are new since the last call.

    Args:
        min_severity: findings below this are never alerted (default ``warn``).
    """

    def __init__(self, min_severity: str = "warn") -> None:
        self.min_rank = severity_rank(min_severity)
        self.sent: dict[Key, str] = {}  # key -> severity last posted

    def new(self, findings: Iterable[Finding]) -> list[tuple[Finding, str | None]]:
        """The findings to post now, each with the severity it was last posted at (None when
        it is new). Marks them as posted."""
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
        """Let ``key`` alert again (a stall that ended: the next stall is news)."""
        self.sent.pop(key, None)


class _Permanent(Exception):
    """The receiver refused the alert for good (a 4xx other than 408/429)."""


class WebhookNotifier:
    """Posts alerts to ``url`` from a background thread; ``send`` never blocks.

    Args:
        url: the webhook (http or https).
        timeout: seconds to wait for one answer.
        backoff: first wait before a retry, doubled each time up to ``max_backoff``.
        give_up_after: seconds after which an alert that still fails is dropped (logged).
        on_event: called with ("delivered" | "retry" | "dropped", alert, detail) from the thread.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 5.0,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        give_up_after: float = 3600.0,
        on_event: Callable[[str, Alert, str], None] | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(f"--webhook: expected an http(s) URL (not {url!r})")
        self.url = url
        self.timeout = timeout
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.give_up_after = give_up_after
        self.on_event = on_event
        self.delivered = 0
        self.dropped = 0
        self.retries = 0
        self._queue: queue.Queue[Alert | None] = queue.Queue()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._inflight = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="rlvitals-webhook", daemon=True)
        self._thread.start()

    @property
    def target(self) -> str:
        """The webhook's scheme and host, for display (its path is often a secret)."""
        p = urlsplit(self.url)
        return f"{p.scheme}://{p.netloc}/…"

    @property
    def pending(self) -> int:
        with self._lock:
            return self._inflight

    def send(self, alert: Alert) -> None:
        """Queue ``alert`` for delivery and return at once."""
        if self._stop.is_set():
            raise UsageError("webhook notifier is closed")
        with self._lock:
            self._inflight += 1
            self._idle.clear()
        self._queue.put(alert)

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every queued alert; True if all are done."""
        return self._idle.wait(timeout)

    def close(self, timeout: float = 10.0) -> int:
        """Flush for up to ``timeout`` seconds, then stop; returns alerts left undelivered."""
        self.flush(timeout)
        dropped = self.dropped
        self._stop.set()
        self._queue.put(None)
        self._thread.join(timeout=max(1.0, self.timeout + 1))
        return self.pending + (self.dropped - dropped)

    def _done(self) -> None:
        with self._lock:
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()

    def _emit(self, kind: str, alert: Alert, detail: str) -> None:
        if self.on_event is not None:
            try:
                self.on_event(kind, alert, detail)
            except Exception as exc:  # a display callback must not stop delivery
                log.warning("alert callback failed: %s", exc)

    def _run(self) -> None:
        while True:
            alert = self._queue.get()
            if alert is None:
                return
            self._deliver(alert)
            self._done()
            if self._stop.is_set():
                # Closing: what is still queued stays counted in ``pending``.
                return

    def _deliver(self, alert: Alert) -> None:
        data = json.dumps(alert.body, ensure_ascii=False).encode("utf-8")
        wait = self.backoff
        started = time.monotonic()
        while True:
            try:
                self._post(data, alert.id)
            except _Permanent as exc:
                self.dropped += 1
                log.warning("webhook refused alert %s: %s; not retried", alert.id, exc)
                self._emit("dropped", alert, str(exc))
                return
            except _Retry as exc:
                if time.monotonic() - started + wait > self.give_up_after or self._stop.is_set():
                    self.dropped += 1
                    log.warning("webhook alert %s dropped after retries: %s", alert.id, exc)
                    self._emit("dropped", alert, str(exc))
                    return
                self.retries += 1
                self._emit("retry", alert, str(exc))
                pause = exc.retry_after if exc.retry_after is not None else wait
                if self._stop.wait(min(pause, self.max_backoff)):
                    self.dropped += 1
                    self._emit("dropped", alert, "closing")
                    return
                wait = min(wait * 2, self.max_backoff)
                continue
            self.delivered += 1
            self._emit("delivered", alert, "")
            return

    def _post(self, data: bytes, alert_id: str) -> None:
        req = urllib.request.Request(
            self.url,
            data=data,
            method="POST",
            headers={
                "Content-Type": "application/json; charset=utf-8",
                "User-Agent": f"rlvitals/{__version__}",
                "Idempotency-Key": alert_id,
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                resp.read()
        except urllib.error.HTTPError as exc:
            code = exc.code
            if code in (408, 429) or code >= 500:
                raise _Retry(f"HTTP {code}", _retry_after(exc.headers.get("Retry-After"))) from None
            raise _Permanent(f"HTTP {code}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
            # Timeouts, refused or reset connections, garbled answers: all worth a retry.
            reason = getattr(exc, "reason", exc)
            raise _Retry(f"{type(exc).__name__}: {reason}", None) from None


class _Retry(Exception):
    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
