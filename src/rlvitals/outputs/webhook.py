"""Alerts: each new finding posted once to a webhook, an ``Output`` (``rlvitals.outputs``).

What is news comes from the follow stage (``rlvitals.outputs.AlertTracker``: a finding is
known by (check, verdict, metric), told again only when its severity rises). This module
delivers: ``WebhookNotifier`` posts with httpx (the ``alerts`` extra) from one background
event loop, each attempt within one overall deadline, retrying with exponential backoff (and
``Retry-After``) on timeouts, connection errors, 408, 429 and 5xx, one alert never holding back
another, so the caller never waits on the network. Each alert carries an id (also sent as the
``Idempotency-Key`` header, the same on every retry) so a receiver can drop the copy a retry
after a lost answer sends; such retries are bounded. An alert that cannot be delivered is
reported (``failures``).

One body builder per target (``BODIES``): ``slack`` is ``{"text": ...}`` (what Slack,
Mattermost and most chat webhooks read, ``&<>`` escaped as Slack asks) plus an ``rlvitals``
object with the structured fields; ``discord`` is Discord's own ``{"content": ...}``, markdown
escaped and no mention allowed to ping; ``generic`` is the ``rlvitals`` object and the plain
text. ``--webhook URL`` picks ``discord`` for a Discord webhook URL, else ``slack``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, urlsplit
from urllib.request import getproxies, proxy_bypass

from .. import __version__, safe
from ..checks.base import VERDICTS, Finding
from ..errors import MissingExtraError, UsageError
from ..jsonio import clean
from . import Output, finding_key

__all__ = [
    "BODIES",
    "Alert",
    "WebhookNotifier",
    "alert_for",
    "body_for_url",
    "discord_output",
    "slack_output",
    "webhook_output",
]

log = logging.getLogger("rlvitals.alerts")


@dataclass
class Alert:
    """One message to deliver."""

    id: str
    body: dict[str, Any]


def _lines(finding: Finding, run: str, previous: str | None) -> list[str]:
    """The message's lines, each one line of run text with its controls made visible."""
    where = finding.check + (f", {finding.metric}" if finding.metric else "")
    if finding.first_step is not None:
        where += f", from step {finding.first_step}"
    head = f"[{finding.severity.upper()}] {safe.line(run)}: {safe.line(finding.title)}"
    if previous:
        head += f" (was {previous})"
    lines = [head, f"{VERDICTS.get(finding.verdict, finding.verdict)} ({safe.line(where)})"]
    if finding.action:
        lines.append(f"Next: {safe.line(finding.action)}")
    return lines


def _fields(aid: str, finding: Finding, run: str, source: str, previous: str | None) -> Any:
    return clean(
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
    )


# Discord markdown (and its masked links, mentions and emoji) shown as written.
_DISCORD_MARKUP = re.compile(r"([\\*_~`|>#\[\]()<@:-])")
DISCORD_LIMIT = 2000  # characters of a message's content


def _slack_body(lines: list[str], fields: dict[str, Any]) -> dict[str, Any]:
    # Run text (run names, titles quoting model output) is untrusted: Slack markup escaped,
    # so ``<!channel>`` in an answer pings nobody.
    return {"text": safe.slack("\n".join(lines)), "rlvitals": fields}


def _discord_body(lines: list[str], fields: dict[str, Any]) -> dict[str, Any]:
    text = "\n".join(_DISCORD_MARKUP.sub(r"\\\1", ln) for ln in lines)
    if len(text) > DISCORD_LIMIT:
        text = text[: DISCORD_LIMIT - 1] + "…"
    return {"content": text, "allowed_mentions": {"parse": []}}


def _generic_body(lines: list[str], fields: dict[str, Any]) -> dict[str, Any]:
    return {"rlvitals": fields, "text": "\n".join(lines)}


BODIES: dict[str, Callable[[list[str], dict[str, Any]], dict[str, Any]]] = {
    "slack": _slack_body,
    "discord": _discord_body,
    "generic": _generic_body,
}


def body_for_url(url: str) -> str:
    """The body a webhook URL reads: ``discord`` for Discord's own webhook endpoint (its
    ``/slack`` endpoint reads Slack's), else ``slack`` (Slack, Mattermost, most others)."""
    try:
        p = urlsplit(url)
        host = (p.hostname or "").lower()
    except ValueError:
        return "slack"
    discord = host in ("discord.com", "discordapp.com") or host.endswith(
        (".discord.com", ".discordapp.com")
    )
    if discord and "/api/webhooks/" in p.path and not p.path.rstrip("/").endswith("/slack"):
        return "discord"
    return "slack"


def _identity(source: str) -> str:
    """The run's source as one string whatever way it was given: a local path made absolute
    with its links resolved (``watch ./runs/x`` and ``serve runs`` name one run), a URL as
    is; so a receiver can drop an alert one front end sent and another sends again."""
    if not source or "://" in source:
        return source
    return os.path.realpath(source)


def alert_for(
    finding: Finding,
    *,
    run: str,
    source: str = "",
    previous: str | None = None,
    body: str = "slack",
) -> Alert:
    """The message for ``finding`` of run ``run``, with the body of target ``body``.

    ``previous`` is the severity it had when last posted (an escalation), or None.
    """
    key = finding_key(finding)
    aid = hashlib.sha1(
        json.dumps([_identity(source) or run, *key, finding.severity]).encode("utf-8")
    ).hexdigest()[:20]
    fields = _fields(aid, finding, run, source, previous)
    return Alert(aid, BODIES[body](_lines(finding, run, previous), fields))


def webhook_output(url: str | None = None) -> WebhookNotifier:
    """``--to webhook=URL`` (and ``--webhook URL``): the body the URL reads."""
    return WebhookNotifier(_url("webhook", url))


def slack_output(url: str | None = None) -> WebhookNotifier:
    """``--to slack=URL``: Slack's body (Mattermost and most chat webhooks read it)."""
    return WebhookNotifier(_url("slack", url), body="slack")


def discord_output(url: str | None = None) -> WebhookNotifier:
    """``--to discord=URL``: Discord's own body."""
    return WebhookNotifier(_url("discord", url), body="discord")


def _url(name: str, url: str | None) -> str:
    if not url:
        raise UsageError(f"output {name}: expected {name}=URL")
    return url


class _Permanent(Exception):
    """The receiver refused the alert for good (a 3xx or a 4xx other than 408/429)."""


class _Retry(Exception):
    def __init__(self, message: str, retry_after: float | None, *, ambiguous: bool) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        # The request went out whole and no answer came back: the receiver may have it.
        self.ambiguous = ambiguous


class WebhookNotifier(Output):
    """Posts alerts to ``url`` with httpx from a background event loop; ``send`` never blocks.
    As an ``Output``, each new finding the follow stage tells (``update``) is one alert.

    Each attempt has one overall deadline (connecting, sending and reading the answer
    together), so a receiver that trickles a byte every few seconds is abandoned at it. Alerts
    are delivered independently: one that waits for a retry holds back no other. Delivery is
    at least once: a retry reuses the alert's ``Idempotency-Key``, and retries after an
    attempt that may have arrived (sent whole, no answer) are bounded by ``max_unanswered``,
    so a receiver that closes mid-answer gets a few copies with one key, not one per backoff.

    The proxy is the one curl, requests and urllib use: ``https_proxy`` / ``http_proxy`` (or
    ``HTTPS_PROXY`` / ``HTTP_PROXY``) for the webhook's scheme, unless ``no_proxy`` names its
    host; a loopback receiver is always reached directly. An https webhook goes through a
    ``CONNECT`` tunnel, so the proxy never sees the alert; ``user:password@`` in the proxy's
    URL becomes ``Proxy-Authorization``.

    Args:
        url: the webhook (http or https; ``user:password@`` becomes Basic auth).
        body: the target's body (``slack``, ``discord``, ``generic``; default: by the URL,
            ``body_for_url``).
        timeout: the deadline of one attempt, in seconds.
        backoff: first wait before a retry, doubled each time up to ``max_backoff``.
        give_up_after: seconds after which an alert that still fails is dropped.
        max_unanswered: attempts that went out with no answer before the alert is dropped.
        workers: alerts in flight at once.
        on_event: called with ("delivered" | "retry" | "dropped", alert, detail) from the
            delivery thread.
    """

    def __init__(
        self,
        url: str,
        *,
        body: str | None = None,
        timeout: float = 10.0,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        give_up_after: float = 600.0,
        max_unanswered: int = 3,
        workers: int = 4,
        on_event: Callable[[str, Alert, str], None] | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"--webhook: expected an http(s) URL (not {_display(url)!r})")
        try:
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError:
            raise UsageError(f"--webhook: bad port in {_display(url)!r}") from None
        try:
            import httpx
        except ImportError:
            raise MissingExtraError("alerts", "webhook alerts (--webhook)") from None
        if body is not None and body not in BODIES:
            raise UsageError(f"webhook body: expected one of {', '.join(BODIES)} (not {body!r})")
        self.url = url
        self.body = body or body_for_url(url)
        self.timeout = timeout
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.give_up_after = give_up_after
        self.max_unanswered = max(1, max_unanswered)
        self.on_event = on_event
        self.delivered = 0
        self.dropped = 0
        self.retries = 0
        self.failures: list[tuple[Alert, str]] = []  # dropped alerts and why
        self._inflight = 0
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._stop = threading.Event()
        proxy = _proxy_for(parts)
        # The environment's proxy (or none) is decided above, as curl would; certificates
        # from the system's store, as the standard library's client used them.
        self._client = httpx.AsyncClient(
            proxy=proxy.geturl() if proxy is not None else None,
            trust_env=False,
            verify=ssl.create_default_context(),
            timeout=timeout,
            follow_redirects=False,
            limits=httpx.Limits(max_connections=max(1, workers), max_keepalive_connections=0),
            headers={"User-Agent": f"rlvitals/{__version__}"},
        )
        self._transport_errors = (httpx.TransportError, httpx.DecodingError)
        self._loop = asyncio.new_event_loop()
        self._slots = asyncio.Semaphore(max(1, workers))
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="rlvitals-webhook", daemon=True
        )
        self._thread.start()

    @property
    def target(self) -> str:
        """The webhook's scheme and host only, for display: its credentials and path are
        often the secret (and the proxy it goes through, also without credentials)."""
        proxy = _proxy_for(urlsplit(self.url))
        via = f" via {_display(proxy.geturl())}" if proxy is not None else ""
        return _display(self.url) + via

    @property
    def pending(self) -> int:
        with self._lock:
            return self._inflight

    # -- Output ------------------------------------------------------------------------------

    def update(self, run: Any, update: Any) -> None:
        """One alert for each finding that is news (``update.new_findings``)."""
        for f, before in update.new_findings:
            self.send(
                alert_for(f, run=run.name, source=run.source, previous=before, body=self.body)
            )

    def describe(self) -> str:
        return self.target

    def status_line(self) -> str:
        return f"alerts to {self.target}: {self.delivered} delivered, {self.pending} pending" + (
            f", {self.dropped} not delivered" if self.dropped else ""
        )

    def undelivered(self) -> list[tuple[str, str]]:
        with self._lock:
            failed = list(self.failures)
        return [(str(_title(a)), why) for a, why in failed]

    def send(self, alert: Alert) -> None:
        """Queue ``alert`` for delivery and return at once."""
        if self._stop.is_set():
            raise UsageError("webhook notifier is closed")
        with self._lock:
            self._inflight += 1
            self._idle.clear()
        self._loop.call_soon_threadsafe(self._start, alert)

    def _start(self, alert: Alert) -> None:
        task = self._loop.create_task(self._deliver(alert))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every queued alert; True if all are done."""
        return self._idle.wait(timeout)

    def close(self, timeout: float = 10.0) -> int:
        """Flush for up to ``timeout`` seconds, then stop; returns how many alerts were not
        delivered (dropped, or still pending)."""
        self.flush(timeout)
        if not self._stop.is_set():
            self._stop.set()

            async def shut() -> None:  # what is still queued stays counted in ``pending``
                for task in list(self._tasks):
                    task.cancel()
                await asyncio.gather(*self._tasks, return_exceptions=True)
                await self._client.aclose()

            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(shut(), self._loop).result(2.0)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(2.0)
        return self.pending + self.dropped

    def _finish(self, kind: str, alert: Alert, detail: str) -> None:
        with self._lock:
            if kind == "delivered":
                self.delivered += 1
            else:
                self.dropped += 1
                self.failures.append((alert, detail))
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()
        if kind == "dropped":
            log.warning("webhook alert %s not delivered: %s", alert.id, detail)
        self._emit(kind, alert, detail)

    def _emit(self, kind: str, alert: Alert, detail: str) -> None:
        if self.on_event is not None:
            try:
                self.on_event(kind, alert, detail)
            except Exception as exc:  # a display callback must not stop delivery
                log.warning("alert callback failed: %s", exc)

    async def _deliver(self, alert: Alert) -> None:
        """Attempts until delivered, refused for good, or given up on; backoff between."""
        data = json.dumps(alert.body, ensure_ascii=False).encode("utf-8")
        started = time.monotonic()
        wait, attempts, unanswered = self.backoff, 0, 0
        while True:
            attempts += 1
            try:
                async with self._slots:
                    await self._post(data, alert.id)
            except _Permanent as exc:
                return self._finish("dropped", alert, f"{exc}; not retried")
            except _Retry as exc:
                unanswered += exc.ambiguous
                now = time.monotonic()
                pause = min(
                    exc.retry_after if exc.retry_after is not None else wait, self.max_backoff
                )
                tries = f"{attempts} attempt{'s' if attempts > 1 else ''}"
                if unanswered >= self.max_unanswered:
                    return self._finish("dropped", alert, f"{exc} ({tries})")
                if now - started + pause > self.give_up_after:
                    return self._finish(
                        "dropped", alert, f"{exc} ({tries} in {now - started:.0f} s)"
                    )
                self.retries += 1
                self._emit("retry", alert, str(exc))
                await asyncio.sleep(pause)
                wait = min(wait * 2, self.max_backoff)
                continue
            return self._finish("delivered", alert, "")

    async def _post(self, data: bytes, alert_id: str) -> None:
        """One attempt, within ``timeout`` seconds in all."""
        sent = False

        async def trace(event: str, info: Any) -> None:  # httpcore's progress of the request
            nonlocal sent
            if event.endswith("send_request_body.complete"):
                sent = True

        headers = {"Content-Type": "application/json; charset=utf-8", "Idempotency-Key": alert_id}
        try:
            async with asyncio.timeout(self.timeout):
                resp = await self._client.post(
                    self.url, content=data, headers=headers, extensions={"trace": trace}
                )
        except TimeoutError:
            raise _Retry(f"no answer within {self.timeout:g} s", None, ambiguous=sent) from None
        except self._transport_errors as exc:
            raise _Retry(_reason(exc), None, ambiguous=sent) from None
        status = resp.status_code
        if 200 <= status < 300:
            return
        if status in (408, 429) or status >= 500:
            raise _Retry(
                f"HTTP {status}", _retry_after(resp.headers.get("Retry-After")), ambiguous=False
            )
        raise _Permanent(f"HTTP {status}")


def _title(alert: Alert) -> Any:
    fields = alert.body.get("rlvitals")
    if isinstance(fields, dict):
        return fields.get("title")
    return str(alert.body.get("content", "")).split("\n", 1)[0]


_LOOPBACK = ("localhost", "127.", "::1", "[::1]")


def _proxy_for(parts: SplitResult) -> SplitResult | None:
    """The proxy a request to ``parts`` goes through (the environment's), or None."""
    host = parts.hostname or ""
    if host == "localhost" or host.startswith(_LOOPBACK):
        return None
    proxy = getproxies().get(parts.scheme)
    if not proxy or proxy_bypass(host):
        return None
    try:
        p = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        p.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return None
    return p if p.hostname else None


def _reason(exc: BaseException) -> str:
    text = str(exc)
    if "timed out" in text.lower() or type(exc).__name__.endswith("Timeout"):
        return f"no answer within the deadline ({type(exc).__name__})"
    if "refused" in text.lower():
        return "connection refused"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _display(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: never its credentials, path or query."""
    try:
        p = urlsplit(url)
        host = p.hostname or ""
        port = p.port
    except ValueError:
        return "(a webhook URL)"
    if ":" in host:
        host = f"[{host}]"
    return f"{p.scheme}://{host}" + (f":{port}" if port else "")


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
