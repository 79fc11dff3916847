"""The live dashboard over HTTP: ``rlvitals serve DIR_OR_RUNS...`` (the ``serve`` extra).

Starlette under uvicorn; the runs, their judgements and what changed come from the hub it is
handed (``rlvitals.follow.hub.Hub``, which ``follow.hub.serve`` runs beside it), so this
module only serves. Event streams are async: an idle page holds
a socket and a few kilobytes, never a thread. Work that reads or encodes runs runs in
Starlette's thread pool, at most ``THREADS_PER_CLIENT`` requests of one client address at a
time, so no one client can hold the pool; ``/healthz`` takes no thread and no lock.

Routes: ``/`` the page; ``/events?runs=ID,...`` the event stream (an ``index`` of the runs,
then a ``snapshot`` of each run asked for, then ``delta`` events); ``/api/runs``,
``/api/run/ID``, ``/api/transcripts/ID/STEP`` as JSON; ``/metrics`` in Prometheus text
format; ``/healthz``. Nothing else: a run is addressed by an id the hub made, never by a
path, so no request can reach a file the server was not given. It binds 127.0.0.1 unless told
otherwise. It refuses requests whose Host header names a host it does not serve under (DNS
rebinding: a page elsewhere that points its own name at this address): on a loopback address
only loopback names; on another address, IP literals, this machine's names and the names given
with ``allowed_hosts`` (``"*"``: any).

Limits: a request's line and headers must arrive within ``header_timeout`` (uvicorn has no
such deadline, hence ``_protocol``); an idle kept-alive connection is closed after 5 s
(uvicorn's); a client that stops reading its answer for ``write_timeout`` is cut off; one
client address holds at most ``MAX_PER_CLIENT`` connections and half of those the process's
open-file limit leaves after a reserve (``connection_caps``; beyond, new ones are closed at
once), so one client can fill neither the thread pool nor the file descriptors for the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ipaddress
import logging
import os
import re
import resource
import socket
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from ..errors import MissingExtraError, RlvitalsError
from ..outputs import describe

try:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route
    from uvicorn.protocols.http.h11_impl import H11Protocol
except ImportError as exc:  # pragma: no cover - tested in a subprocess
    raise MissingExtraError("serve", "the live dashboard (rlvitals serve)") from exc

from ..safe import unsurrogate
from .dashboard import csp_header, page_html, page_json

__all__ = ["Server", "make_server"]

THREADS_PER_CLIENT = 8  # requests of one client address in the thread pool at once
MAX_PER_CLIENT = 4096  # open connections of one client address (idle event streams included)
FD_RESERVE = 256  # descriptors never given to connections (connection_caps)
KEEPALIVE = 15.0  # seconds between comments on an idle event stream
_ID_OK = re.compile(r"^[A-Za-z0-9._-]{1,80}$")  # a run id the hub made (``run_id_for``)
_STEP_OK = re.compile(r"^\d{1,9}$")
_HEADERS = [
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


# -- which Host headers are ours ---------------------------------------------------------

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


def _machine_names() -> set[str]:
    """This machine's own names (a page can only rebind a name its author controls)."""
    names = set()
    for get in (socket.gethostname, socket.getfqdn):
        with contextlib.suppress(OSError):
            name = get().lower().rstrip(".")
            if name:
                names.add(name)
    return names


# -- the application ---------------------------------------------------------------------


class _SlowClient(Exception):
    """A client that did not take its answer within the write deadline."""


# The connection a request came on (set by ``_protocol`` for the request's task), so a client
# past the write deadline is aborted: closing would wait to flush what it does not read.
_CONNECTION: contextvars.ContextVar[Any] = contextvars.ContextVar("rlvitals_connection")


class _Guard:
    """Around the whole application: the Host check, the headers every answer carries, no
    second request read from a GET's body, and the write deadline."""

    def __init__(
        self, app: Any, *, loopback_only: bool, allowed: frozenset[str], write_timeout: float
    ) -> None:
        self.app = app
        self.loopback_only = loopback_only
        self.allowed = allowed
        self.write_timeout = write_timeout

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        extra = list(_HEADERS)
        if headers.get(b"content-length", b"0") != b"0" or b"transfer-encoding" in headers:
            # GET and HEAD take no body: never read one as a second, pipelined request.
            extra.append((b"connection", b"close"))
        if not host_allowed(
            headers.get(b"host", b"").decode("latin-1"), self.loopback_only, self.allowed
        ):
            body = (
                b"unexpected Host header: this server is not served under that name (start "
                b"`rlvitals serve` with --allow-host NAME to serve under it)\n"
            )
            return await Response(body, 403, media_type="text/plain")(scope, receive, send)

        async def guarded(message: Any) -> None:
            if message["type"] == "http.response.start":
                have = {k for k, _ in message.get("headers", [])}
                message["headers"] = [
                    *message.get("headers", []),
                    *(h for h in extra if h[0] not in have),
                ]
            try:
                async with asyncio.timeout(self.write_timeout):  # no task per send
                    await send(message)
            except TimeoutError:
                raise _SlowClient from None

        try:
            await self.app(scope, receive, guarded)
        except _SlowClient:
            conn = _CONNECTION.get(None)
            if conn is not None:
                conn.transport.abort()


class _Clients:
    """How many requests of each client address are in the thread pool (at most ``limit``)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.slots: dict[str, tuple[asyncio.Semaphore, int]] = {}

    async def run(self, request: Request, fn: Callable[..., Any], *args: Any) -> Any:
        addr = request.client.host if request.client else ""
        sem, users = self.slots.get(addr) or (asyncio.Semaphore(self.limit), 0)
        self.slots[addr] = (sem, users + 1)
        try:
            async with sem:
                return await run_in_threadpool(fn, *args)
        finally:
            sem, users = self.slots[addr]
            if users == 1:
                del self.slots[addr]
            else:
                self.slots[addr] = (sem, users - 1)


def create_app(
    hub: Any,
    *,
    page: dict[str, Any] | None = None,
    loopback_only: bool = True,
    allowed_hosts: frozenset[str] = frozenset(),
    write_timeout: float = 30.0,
    stuck_after: float = 60.0,
    keepalive: float = KEEPALIVE,
) -> Any:
    """The ASGI application serving ``hub`` (a ``rlvitals.follow.hub.Hub``: ``index``,
    ``snapshot``, ``transcripts``, ``subscribe``, ``metrics``, ``stuck_for``); ``page``: what
    the page shows beside the runs (``baseline``: shading ranges, ``stall_after``)."""
    page = page or {}
    clients = _Clients(THREADS_PER_CLIENT)

    def text(body: str, status: int = 200, **kw: Any) -> Response:
        return Response(body.encode("utf-8"), status, media_type="text/plain", **kw)

    def as_json(value: Any) -> Response:
        if value is None:
            return text("not found\n", 404)
        return Response(page_json(value), media_type="application/json")

    def render_page() -> bytes:
        payload = {
            "index": hub.index(),
            "runs": [],
            "baseline": page.get("baseline") or {},
            "stall_after": page.get("stall_after") or 600,
        }
        return page_html(unsurrogate(payload), live=True, title="rlvitals live").encode("utf-8")

    async def front(request: Request) -> Response:
        html = await clients.run(request, render_page)
        policy = {"Content-Security-Policy": csp_header(live=True), "X-Frame-Options": "DENY"}
        return Response(html, media_type="text/html", headers=policy)

    async def healthz(request: Request) -> Response:
        stuck = hub.stuck_for()
        if stuck > stuck_after:  # the poller is blocked: the page would silently stop updating
            where = f" (reading {unsurrogate(hub.reading)})" if hub.reading else ""
            return text(f"poller stuck: no pass finished for {stuck:.0f} s{where}\n", 503)
        for out in hub.outputs:  # an output run apart: the page goes on, its alerts do not
            busy = out.busy_for()
            if busy > stuck_after:
                return text(f"output stuck: {describe(out)} busy for {busy:.0f} s\n", 503)
        return text("ok\n")

    async def metrics(request: Request) -> Response:
        body = await clients.run(request, hub.metrics)
        return Response(body.encode("utf-8"), media_type="text/plain; version=0.0.4")

    async def runs(request: Request) -> Response:
        return as_json({"runs": await clients.run(request, hub.index)})

    async def one_run(request: Request) -> Response:
        rid = request.path_params["rid"]
        return as_json(await clients.run(request, hub.snapshot, rid) if _ID_OK.match(rid) else None)

    async def transcripts(request: Request) -> Response:
        rid, step = request.path_params["rid"], request.path_params["step"]
        if not (_ID_OK.match(rid) and _STEP_OK.match(step)):
            return text("not found\n", 404)
        return as_json(await clients.run(request, hub.transcripts, rid, int(step)))

    async def events(request: Request) -> Response:
        headers = {"X-Accel-Buffering": "no", "Connection": "close"}
        if request.method == "HEAD":
            return Response(media_type="text/event-stream", headers=headers)
        wanted = [r for r in request.query_params.get("runs", "").split(",") if _ID_OK.match(r)]
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()

        def notify() -> None:  # from the poller thread
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody to wake
                loop.call_soon_threadsafe(wake.set)

        sub = await clients.run(request, hub.subscribe, wanted, notify)
        return StreamingResponse(
            _stream(hub, sub, wake, keepalive), media_type="text/event-stream", headers=headers
        )

    get = ["GET", "HEAD"]
    routes = [
        Route("/", front, methods=get),
        Route("/events", events, methods=get),
        Route("/metrics", metrics, methods=get),
        Route("/healthz", healthz, methods=get),
        Route("/api/runs", runs, methods=get),
        Route("/api/run/{rid}", one_run, methods=get),
        Route("/api/transcripts/{rid}/{step}", transcripts, methods=get),
    ]
    app = Starlette(routes=routes)
    app.router.redirect_slashes = False
    app.router.default = _not_found_app
    return _Guard(
        app, loopback_only=loopback_only, allowed=allowed_hosts, write_timeout=write_timeout
    )


async def _not_found_app(scope: Any, receive: Any, send: Any) -> None:
    await Response(b"not found\n", 404, media_type="text/plain")(scope, receive, send)


async def _stream(
    hub: Any, sub: Any, wake: asyncio.Event, keepalive: float
) -> AsyncIterator[bytes]:
    """A page's events as they are queued; a comment when idle, so a vanished client is found."""
    try:
        yield b"retry: 1000\n\n"
        while not hub.stopped.is_set():
            wake.clear()
            got = sub.take()
            if got:
                done = got[-1] is None
                chunk = b"".join(ev for ev in got if ev is not None)
                if chunk:
                    yield chunk
                if done:
                    return
                continue
            try:
                async with asyncio.timeout(keepalive):
                    await wake.wait()
            except TimeoutError:
                yield b": keepalive\n\n"
    finally:
        sub.dead = True  # the poller drops it on its next pass (no lock taken on this loop)


# -- the server --------------------------------------------------------------------------


def connection_caps(max_per_client: int = MAX_PER_CLIENT) -> tuple[int, int, int]:
    """(per client address, in all, listen backlog): what this process's descriptor limit
    leaves room for. The backlog is an eighth of the limit (at most 1,024): asyncio accepts
    that many at once before a refused one is closed. ``FD_RESERVE`` (or an eighth, if more),
    that burst and the descriptors open now stay out of the connections (the runs' files,
    the poller, logs), so the server never meets "Too many open files"; one address gets at
    most half of the rest, so a page from another (or ``/healthz``) is still served."""
    soft = 1 << 20
    with contextlib.suppress(ValueError, OSError):
        got, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if got != resource.RLIM_INFINITY:
            soft = min(soft, got)
    try:
        now = len(os.listdir("/proc/self/fd"))
    except OSError:
        now = 64
    backlog = max(16, min(1024, soft // 8))
    total = max(8, soft - max(FD_RESERVE, soft // 8) - backlog - now)
    return max(1, min(max_per_client, total // 2)), total, backlog


def _protocol(header_timeout: float, per_client: int, total: int) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a deadline for a request's line and headers (a client that
    sends a byte now and then, slowloris, is closed at it) and bounds on the connections of
    one client address and of all (``connection_caps``; beyond, a new connection is closed at
    once, and the first refusal of each address is one log line)."""
    open_by: dict[str, int] = {}
    refused: set[str] = set()
    log = logging.getLogger("uvicorn.error")

    class Protocol(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _addr: str | None = None
        opened = 0  # connections held now, all addresses

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            addr = self.client[0] if self.client else ""
            held = open_by.get(addr, 0)
            if held >= per_client or Protocol.opened >= total:
                transport.close()
                if addr not in refused:
                    refused.add(addr)
                    log.error(
                        "connections from %s refused past %d (%d from all; the open-file "
                        "limit's share)",
                        addr,
                        per_client if held >= per_client else held,
                        total,
                    )
                return
            open_by[addr] = held + 1
            Protocol.opened += 1
            self._addr = addr
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._addr is not None:
                left = open_by.pop(self._addr) - 1
                if left:
                    open_by[self._addr] = left
                Protocol.opened -= 1
                self._addr = None
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._timer = self.loop.call_later(header_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _too_slow(self) -> None:
            self._timer = None
            if not self.transport.is_closing():
                self.transport.close()

        def handle_events(self) -> None:
            cycle = self.cycle
            token = _CONNECTION.set(self)  # the request's task, made in there, inherits it
            try:
                super().handle_events()
            finally:
                _CONNECTION.reset(token)
            if self.cycle is not cycle:  # a whole request line and headers arrived
                self._disarm()

        def on_response_complete(self) -> None:
            self._arm()  # the next request on this connection gets its own deadline
            super().on_response_complete()

    return Protocol


class _OneLine(logging.Formatter):
    """uvicorn's messages as one line each: never a traceback in the user's terminal."""

    def format(self, record: logging.LogRecord) -> str:
        msg = f"rlvitals serve: {record.getMessage()}".rstrip()
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            msg += f" {type(exc).__name__}: {exc}"
        return msg


def _quiet_logs(verbose: bool) -> None:
    err = logging.getLogger("uvicorn.error")
    if not any(isinstance(h.formatter, _OneLine) for h in err.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_OneLine())
        # An answer left unfinished on purpose (the write deadline) is no error.
        handler.addFilter(lambda r: "without completing response" not in r.getMessage())
        for name in ("uvicorn.error", "uvicorn.access"):
            log = logging.getLogger(name)
            log.handlers = [handler]
            log.propagate = False
    err.setLevel(logging.INFO if verbose else logging.ERROR)
    logging.getLogger("uvicorn.access").setLevel(logging.INFO if verbose else logging.WARNING)


class Server:
    """The dashboard's HTTP server, bound (so its address is known) but not yet serving."""

    def __init__(
        self,
        hub: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        page: dict[str, Any] | None = None,
        verbose: bool = False,
        header_timeout: float = 10.0,
        write_timeout: float = 30.0,
        allowed_hosts: Iterable[str] = (),
        max_per_client: int = MAX_PER_CLIENT,
        stuck_after: float = 60.0,
    ) -> None:
        self.hub = hub
        loopback_only = _is_loopback(host)
        names = {h.lower().rstrip(".") for h in allowed_hosts}
        if not loopback_only:
            names |= _machine_names()
        self.allowed_hosts = frozenset(names)
        per_client, total, backlog = connection_caps(max_per_client)
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self.sock = socket.socket(family, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((host, port))
            self.sock.listen(backlog)  # connections wait in the backlog until uvicorn runs
        except OSError as exc:
            self.sock.close()
            raise RlvitalsError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self.sock.set_inheritable(True)
        _quiet_logs(verbose)
        app = create_app(
            hub,
            page=page,
            loopback_only=loopback_only,
            allowed_hosts=self.allowed_hosts,
            write_timeout=write_timeout,
            stuck_after=stuck_after,
        )
        config = uvicorn.Config(
            app,
            http=_protocol(header_timeout, per_client, total),
            loop="asyncio",
            ws="none",
            lifespan="off",
            log_config=None,
            access_log=verbose,
            server_header=False,
            backlog=backlog,
            timeout_graceful_shutdown=2,
        )
        self.uvicorn = uvicorn.Server(config)
        self.host, self.port = self.sock.getsockname()[:2]

    @property
    def url(self) -> str:
        shown = self.host if self.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        return f"http://{f'[{shown}]' if ':' in shown else shown}:{self.port}/"

    def run(self) -> None:
        """Serve until ``stop()`` (or, in the main thread, SIGINT or SIGTERM)."""
        self.uvicorn.run(sockets=[self.sock])

    def stop(self) -> None:
        self.uvicorn.should_exit = True


def make_server(hub: Any, host: str = "127.0.0.1", port: int = 0, **options: Any) -> Server:
    """An HTTP server for ``hub`` on ``host:port`` (0: any free port), bound, not yet serving.

    ``page``: what the page shows beside the runs (``{"baseline": shading ranges,
    "stall_after": seconds}``);
    ``header_timeout``: seconds for a request's line and headers; ``write_timeout``: for a
    client to take each part of its answer; ``allowed_hosts``: host names it answers under
    beside loopback ones (and, bound to another address, IP literals and this machine's
    names; ``"*"`` accepts any Host header); ``max_per_client``: open connections of one
    client address; ``stuck_after``: seconds without a finished poll pass after which
    ``/healthz`` answers 503."""
    return Server(hub, host, port, **options)
