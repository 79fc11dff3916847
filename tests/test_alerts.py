"""Webhook alerts: each new finding once, none lost, the caller never blocked."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from dashboard_runs import append_steps, make_run, step_record
from rlvitals.checks.base import Finding, Report
from rlvitals.errors import UsageError
from rlvitals.follow.watch import Watcher
from rlvitals.outputs import AlertTracker
from rlvitals.outputs.webhook import WebhookNotifier, alert_for


class Receiver:
    """A local webhook that follows a script: each request takes the next behaviour."""

    def __init__(self, script: list[str], tls: Any = None) -> None:
        self.script = list(script)
        self.accepted: dict[str, int] = {}  # Idempotency-Key -> times answered 200
        self.bodies: list[dict] = []
        self.requests = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    receiver.requests += 1
                    how = receiver.script.pop(0) if receiver.script else "ok"
                if how.startswith("slow"):  # "slow:SECONDS", then answer 200
                    time.sleep(float(how.split(":")[1]))
                    how = "ok"
                if how == "garbage":  # an answer that is not HTTP
                    self.wfile.write(b"NOT HTTP AT ALL\r\n\r\n")
                    self.close_connection = True
                    return
                if how == "drop":  # close the connection without an answer
                    self.close_connection = True
                    self.connection.close()
                    return
                if how.isdigit():
                    self.send_response(int(how))
                    if how == "429":
                        self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                key = self.headers["Idempotency-Key"]
                with receiver.lock:
                    receiver.accepted[key] = receiver.accepted.get(key, 0) + 1
                    if receiver.accepted[key] == 1:
                        receiver.bodies.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:  # an ssl.SSLContext: an https receiver
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}/hooks/SECRET"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(request: pytest.FixtureRequest) -> Iterator[Receiver]:
    r = Receiver(getattr(request, "param", []))
    yield r
    r.close()


def _f(check: str, verdict: str, metric: str | None, severity: str = "warn") -> Finding:
    return Finding(check, severity, verdict, f"{check} {verdict}", metric=metric, first_step=3)


def test_an_early_alarm_never_mutes_a_later_different_one() -> None:
    t = AlertTracker()
    early = _f("reward", "exploration_stopped", "reward/group_std_mean")
    assert t.new([early]) == [(early, None)]
    later = _f("agreement", "drift", "train/mismatch_kl")
    same_check_other_metric = _f("agreement", "drift", "train/mismatch_ess")
    got = t.new([early, later, same_check_other_metric])
    assert got == [(later, None), (same_check_other_metric, None)]
    assert t.new([early, later] * 50) == []  # known findings: no repeats, no cap used up


def test_a_finding_that_gets_worse_is_posted_again_and_info_never() -> None:
    t = AlertTracker(min_severity="warn")
    assert t.new([_f("groups", "too_hard", None, "info")]) == []
    warn = _f("groups", "too_hard", None, "warn")
    fail = _f("groups", "too_hard", None, "fail")
    assert t.new([warn]) == [(warn, None)]
    assert t.new([fail]) == [(fail, "warn")]
    assert t.new([warn, fail]) == []


def test_alert_body_is_slack_compatible_with_structured_fields() -> None:
    f = Finding("nonfinite", "fail", "non_finite", "train/loss is NaN", "train/loss", 7)
    a = alert_for(f, run="run-a", source="/runs/run-a")
    assert isinstance(a.body["text"], str) and "[FAIL] run-a: train/loss is NaN" in a.body["text"]
    s = a.body["rlvitals"]
    assert s["id"] == a.id and s["check"] == "nonfinite" and s["first_step"] == 7
    assert s["severity"] == "fail" and s["verdict"] == "non_finite"
    json.dumps(a.body, allow_nan=False)
    # the same finding of the same run always gets the same id; another run another one
    assert alert_for(f, run="run-a", source="/runs/run-a").id == a.id
    assert alert_for(f, run="run-b", source="/runs/run-b").id != a.id


@pytest.mark.parametrize(
    "receiver", [["slow:0.6", "500", "503", "drop", "garbage", "429", "502", "ok"]], indirect=True
)
def test_slow_then_failing_then_recovered_webhook_gets_each_alert_once(
    receiver: Receiver,
) -> None:
    n = WebhookNotifier(receiver.url, timeout=3, backoff=0.02, max_backoff=0.1)
    alerts = [alert_for(_f("c", "drift", f"m{i}"), run="r", source=str(i)) for i in range(6)]
    for a in alerts:
        t0 = time.perf_counter()
        n.send(a)
        assert time.perf_counter() - t0 < 0.05  # never waits on the network
    assert n.flush(20)
    assert n.close(1) == 0
    assert receiver.accepted == {a.id: 1 for a in alerts}
    # Delivered independently (no head-of-line blocking), so not necessarily in order.
    assert sorted(b["rlvitals"]["id"] for b in receiver.bodies) == sorted(a.id for a in alerts)
    assert n.delivered == 6 and n.dropped == 0 and n.retries == 6


@pytest.mark.parametrize("receiver", [["slow:1.0"]], indirect=True)
def test_a_timeout_is_retried_and_the_copy_carries_the_same_key(receiver: Receiver) -> None:
    n = WebhookNotifier(receiver.url, timeout=0.3, backoff=0.02)
    a = alert_for(_f("c", "drift", "m"), run="r")
    n.send(a)
    assert n.flush(10)
    n.close(1)
    # The slow first answer came too late: at-least-once, one key, the receiver dedupes.
    time.sleep(1.0)
    assert set(receiver.accepted) == {a.id} and receiver.accepted[a.id] == 2
    assert n.delivered == 1 and n.retries >= 1


@pytest.mark.parametrize("receiver", [["404"]], indirect=True)
def test_a_refused_alert_is_not_retried_forever(receiver: Receiver) -> None:
    n = WebhookNotifier(receiver.url, backoff=0.01)
    n.send(alert_for(_f("c", "drift", "a"), run="r"))
    n.send(alert_for(_f("c", "drift", "b"), run="r"))
    assert n.flush(10)
    n.close(1)
    assert n.dropped == 1 and n.delivered == 1 and receiver.requests == 2


def test_closing_reports_what_was_not_delivered() -> None:
    n = WebhookNotifier("http://127.0.0.1:9/", timeout=0.2, backoff=0.05)  # discard port
    n.send(alert_for(_f("c", "drift", "a"), run="r"))
    n.send(alert_for(_f("c", "drift", "b"), run="r"))
    assert n.close(0.3) == 2
    with pytest.raises(UsageError):
        n.send(alert_for(_f("c", "drift", "c"), run="r"))


def test_only_http_urls() -> None:
    with pytest.raises(UsageError, match="http"):
        WebhookNotifier("file:///etc/passwd")


@pytest.mark.parametrize("receiver", [["slow:1.5", "slow:1.5", "500", "ok"]], indirect=True)
def test_watch_never_blocks_on_a_slow_webhook(receiver: Receiver, tmp_path: Path) -> None:
    d = make_run(tmp_path, "w", 10, status="running")
    findings: list[Finding] = []

    def judge(data, now) -> Report:
        return Report(data.source, "learning", list(findings))

    n = WebhookNotifier(receiver.url, timeout=5, backoff=0.02)
    w = Watcher(d, judge, [n], replace(Watcher.THROTTLE, every_s=0))
    slowest = 0.0
    for step in range(10, 16):
        findings.append(_f("c", "drift", f"m{step}"))  # a new finding every tick
        append_steps(d, [step_record(step, time.time())])
        t0 = time.perf_counter()
        w.tick()
        slowest = max(slowest, time.perf_counter() - t0)
    assert slowest < 0.5
    assert n.flush(20) and n.close(1) == 0
    assert len(receiver.accepted) == 6 and set(receiver.accepted.values()) == {1}


class RawReceiver:
    """A webhook on a raw socket that misbehaves on purpose: ``how(conn, request)`` answers."""

    def __init__(self, how) -> None:  # type: ignore[no-untyped-def]
        import socket

        self.how = how
        self.keys: list[str] = []
        self.last_head = ""
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.url = f"http://user:s3cr3t@127.0.0.1:{self.sock.getsockname()[1]}/services/T/B/SECRET"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn) -> None:  # type: ignore[no-untyped-def]
        conn.settimeout(5)
        try:
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(4096)
                if not chunk:
                    return  # closed before a whole head
                buf += chunk
            head, _, body = buf.partition(b"\r\n\r\n")
            headers = dict(
                line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if ": " in line
            )
            while len(body) < int(headers.get("Content-Length", 0)):
                body += conn.recv(4096)
            self.keys.append(headers.get("Idempotency-Key", ""))
            self.last_head = head.decode()
            self.how(conn, json.loads(body) if body else None, self)  # CONNECT has none
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        self.sock.close()


def _ok(conn, body, r) -> None:  # type: ignore[no-untyped-def]
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")


def test_a_receiver_that_trickles_bytes_is_abandoned_at_the_deadline() -> None:
    def trickle(conn, body, r) -> None:  # type: ignore[no-untyped-def]
        for c in b"HTTP/1.1 200 OK\r\n":  # one byte every 0.3 s: never a whole status line
            if r.stop.is_set():
                return
            conn.sendall(bytes([c]))
            time.sleep(0.3)

    r = RawReceiver(trickle)
    try:
        n = WebhookNotifier(r.url, timeout=0.6, backoff=0.05, max_unanswered=2)
        t0 = time.monotonic()
        n.send(alert_for(_f("c", "drift", "m"), run="r"))
        assert n.flush(5)
        took = time.monotonic() - t0
        assert took < 2.5  # two attempts of 0.6 s each, not 17 bytes x 0.3 s each
        assert n.delivered == 0 and n.dropped == 1
        assert "no answer within 0.6 s" in n.failures[0][1]
        assert len(r.keys) == 2 and len(set(r.keys)) == 1  # the retry reused the key
    finally:
        r.close()


def test_one_retrying_alert_does_not_hold_back_the_others() -> None:
    def picky(conn, body, r) -> None:  # type: ignore[no-untyped-def]
        if body["rlvitals"]["metric"] == "stuck":
            conn.sendall(b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n")
        else:
            _ok(conn, body, r)

    r = RawReceiver(picky)
    try:
        n = WebhookNotifier(r.url, timeout=2, backoff=0.3, max_backoff=0.3, give_up_after=30)
        n.send(alert_for(_f("c", "drift", "stuck"), run="r"))
        for i in range(4):
            n.send(alert_for(_f("c", "drift", f"m{i}"), run="r"))
        deadline = time.monotonic() + 3
        while n.delivered < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert n.delivered == 4 and n.pending == 1  # the stuck one is still being retried
        assert n.close(0.1) == 1
    finally:
        r.close()


def test_a_connection_closed_mid_answer_delivers_a_bounded_number_of_copies_with_one_key() -> None:
    def half(conn, body, r) -> None:  # type: ignore[no-untyped-def]
        conn.sendall(b"HTTP/1.1 2")  # and hang up

    r = RawReceiver(half)
    try:
        n = WebhookNotifier(r.url, timeout=2, backoff=0.02)
        a = alert_for(_f("c", "drift", "m"), run="r")
        n.send(a)
        assert n.flush(5)
        assert n.dropped == 1 and n.delivered == 0
        assert r.keys == [a.id] * 3  # at least once, at most max_unanswered (3) copies
    finally:
        r.close()


def test_an_explicit_rejection_is_retried_until_the_receiver_recovers() -> None:
    calls = [0]

    def flaky(conn, body, r) -> None:  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] <= 5:  # 503 five times: the receiver said no, nothing was delivered
            conn.sendall(b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n")
        else:
            _ok(conn, body, r)

    r = RawReceiver(flaky)
    try:
        n = WebhookNotifier(r.url, timeout=2, backoff=0.02, max_backoff=0.05)
        n.send(alert_for(_f("c", "drift", "m"), run="r"))
        assert n.flush(5) and n.delivered == 1 and n.dropped == 0 and calls[0] == 6
    finally:
        r.close()


def test_a_redirect_is_not_followed_and_counts_as_not_delivered() -> None:
    def moved(conn, body, r) -> None:  # type: ignore[no-untyped-def]
        conn.sendall(
            b"HTTP/1.1 302 Found\r\nLocation: http://elsewhere/\r\nContent-Length: 0\r\n\r\n"
        )

    r = RawReceiver(moved)
    try:
        n = WebhookNotifier(r.url, timeout=2)
        n.send(alert_for(_f("c", "drift", "m"), run="r"))
        assert n.close(5) == 1 and "HTTP 302" in n.failures[0][1]
    finally:
        r.close()


def test_credentials_reach_the_receiver_as_basic_auth_but_are_never_displayed() -> None:
    seen: list[str] = []

    def auth(conn, body, r) -> None:  # type: ignore[no-untyped-def]
        seen.append("Basic dXNlcjpzM2NyM3Q=" in r.last_head)
        _ok(conn, body, r)

    r = RawReceiver(auth)
    try:
        n = WebhookNotifier(r.url, timeout=2)
        assert n.target == f"http://127.0.0.1:{r.sock.getsockname()[1]}"
        assert "s3cr3t" not in n.target and "SECRET" not in n.target and "user" not in n.target
        n.send(alert_for(_f("c", "drift", "m"), run="r"))
        assert n.close(5) == 0 and n.delivered == 1 and seen == [True]
    finally:
        r.close()


def test_webhook_text_escapes_slack_markup_and_drops_controls() -> None:
    f = Finding(
        "transcripts",
        "fail",
        "exploit_suspected",
        "rewarded answers '<!channel>' and <https://evil.example|click> & \x1b[2J\x9b\u202eend",
        first_step=3,
        action="run `rlvitals transcripts RUN`",
    )
    text = alert_for(f, run="r\x1b]0;x\x07<!here>", source="s").body["text"]
    assert "<" not in text and ">" not in text
    assert "&lt;!channel&gt;" in text and "&lt;https://evil.example|click&gt;" in text
    assert "&amp;" in text and "&lt;!here&gt;" in text
    for ch in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert ch not in text


def test_watch_tells_the_user_when_an_alert_was_not_delivered(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from rlvitals.follow.watch import watch

    def refuse(conn, body, r) -> None:  # type: ignore[no-untyped-def]
        conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")

    r = RawReceiver(refuse)
    try:
        d = make_run(tmp_path, "w", 10, status="finished")

        def judge(data, now) -> Report:  # type: ignore[no-untyped-def]
            return Report(data.source, "drift", [_f("agreement", "drift", "train/mismatch_kl")])

        n = WebhookNotifier(r.url, timeout=2)
        w = Watcher(d, judge, [n])
        buf = io.StringIO()
        watch(w, console=Console(file=buf, force_terminal=False, width=300), fail_on=None)
        out = buf.getvalue()
        lines = [ln for ln in out.splitlines() if ln.startswith("alert not delivered")]
        assert len(lines) == 1 and "HTTP 403" in lines[0] and "SECRET" not in out
        assert "1 alert(s) not delivered" in out
    finally:
        r.close()


def _proxy(answer: bytes) -> tuple[RawReceiver, list[str]]:
    """A local HTTP proxy: records each request (its head, then its body) and answers."""
    seen: list[str] = []

    def how(conn, body, r) -> None:  # type: ignore[no-untyped-def]
        seen.append(r.last_head + "\r\n\r\n" + (json.dumps(body) if body is not None else ""))
        conn.sendall(answer)

    return RawReceiver(how), seen


def test_a_webhook_goes_through_the_environments_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # Clusters reach the internet through a proxy: http webhooks are forwarded by it, https
    # ones tunnelled (CONNECT: the proxy sees the host, never the alert); credentials of
    # both are sent, never shown.
    ok, ok_heads = _proxy(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    refuse, refuse_heads = _proxy(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
    ok_port, refuse_port = ok.sock.getsockname()[1], refuse.sock.getsockname()[1]
    try:
        for var in ("no_proxy", "NO_PROXY", "HTTPS_PROXY", "HTTP_PROXY"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("http_proxy", f"http://pu:pp@127.0.0.1:{ok_port}")
        monkeypatch.setenv("https_proxy", f"http://pu:pp@127.0.0.1:{refuse_port}")
        n = WebhookNotifier("http://hooks.example.invalid:8080/services/SECRET", timeout=5)
        assert n.target == f"http://hooks.example.invalid:8080 via http://127.0.0.1:{ok_port}"
        n.send(alert_for(_f("c", "drift", "m"), run="r"))
        assert n.close(5) == 0 and n.delivered == 1
        (head,) = ok_heads
        assert head.startswith("POST http://hooks.example.invalid:8080/services/SECRET HTTP/1.1")
        assert "Proxy-Authorization: Basic cHU6cHA=" in head and '"drift"' in head

        n = WebhookNotifier(
            "https://hooks.example.invalid/services/SECRET", timeout=5, give_up_after=0.5
        )
        assert "pu" not in n.target and "pp" not in n.target
        n.send(alert_for(_f("c", "drift", "m"), run="r"))
        assert n.close(5) == 1 and n.dropped == 1 and n.delivered == 0
        assert "403" in n.failures[0][1]
        assert refuse_heads[0].startswith("CONNECT hooks.example.invalid:443 HTTP/1.")
        assert "Proxy-Authorization: Basic cHU6cHA=" in refuse_heads[0]
        assert not any("SECRET" in h or "drift" in h for h in refuse_heads)
    finally:
        ok.close()
        refuse.close()


def test_no_proxy_and_loopback_receivers_are_reached_directly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from urllib.parse import urlsplit

    from rlvitals.outputs.webhook import _proxy_for

    monkeypatch.setenv("https_proxy", "proxy.corp:3128")
    monkeypatch.setenv("no_proxy", "internal.corp,.lan")
    via = _proxy_for(urlsplit("https://hooks.slack.com/x"))
    assert via is not None and (via.hostname, via.port) == ("proxy.corp", 3128)
    for url in (
        "https://chat.internal.corp/h",
        "https://box.lan/h",
        "https://127.0.0.1:9/h",
        "https://localhost/h",
        "https://[::1]:8/h",
    ):
        assert _proxy_for(urlsplit(url)) is None, url
    monkeypatch.delenv("https_proxy")
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    assert _proxy_for(urlsplit("https://hooks.slack.com/x")) is None


def test_a_webhook_through_a_forwarding_proxy_arrives_once(
    monkeypatch: pytest.MonkeyPatch, receiver: Receiver
) -> None:
    # A small forwarding proxy on 127.0.0.1 (a cluster's way out): it passes the request on to
    # the receiver, whatever host the URL names, and the answer back.
    import socket
    from urllib.parse import urlsplit

    target = urlsplit(receiver.url)
    lines: list[str] = []

    def forward(conn, body, r) -> None:  # type: ignore[no-untyped-def]
        method, url, version = r.last_head.split("\r\n")[0].split(" ")
        lines.append(f"{method} {url}")
        path = urlsplit(url).path
        head = r.last_head.split("\r\n", 1)[1]
        data = json.dumps(body).encode()
        head = "\r\n".join(
            h for h in head.split("\r\n") if not h.lower().startswith(("content-length", "host"))
        )
        with socket.create_connection((target.hostname, target.port), timeout=5) as up:
            up.sendall(
                f"{method} {path} {version}\r\nHost: {target.netloc}\r\n{head}\r\n"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
                + data
            )
            while chunk := up.recv(65536):
                conn.sendall(chunk)

    proxy = RawReceiver(forward)
    try:
        for var in ("no_proxy", "NO_PROXY", "http_proxy", "https_proxy"):
            monkeypatch.delenv(var, raising=False)
        port = proxy.sock.getsockname()[1]
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
        url = "http://hooks.example.invalid/hooks/SECRET"
        n = WebhookNotifier(url, timeout=5)
        assert n.target == f"http://hooks.example.invalid via http://127.0.0.1:{port}"
        a = alert_for(_f("c", "drift", "m"), run="r")
        n.send(a)
        assert n.close(5) == 0 and n.delivered == 1 and n.retries == 0
        assert lines == ["POST http://hooks.example.invalid/hooks/SECRET"]
        assert receiver.accepted == {a.id: 1} and receiver.requests == 1  # arrived once
    finally:
        proxy.close()


def test_webhook_without_the_extra_names_it_in_one_line(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    make_run(tmp_path, "w", 3)
    code = (
        "import sys\n"
        "sys.modules['httpx'] = None\n"  # as if httpx were not installed
        "from rlvitals.cli import main\n"
        f"sys.exit(main(['watch', {str(tmp_path / 'w')!r}, '--webhook', 'https://h.example/x']))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    from rlvitals.errors import install_command

    assert len(lines) == 1 and install_command("alerts") in lines[0], out.stderr


def test_an_https_webhook_through_a_tunnelling_proxy_arrives_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # HTTPS_PROXY on 127.0.0.1 that tunnels (CONNECT) to an https receiver whose certificate
    # comes from a private CA, trusted through SSL_CERT_FILE as a cluster's own CA would be.
    import select
    import socket
    import ssl

    import trustme

    ca = trustme.CA()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("hooks.example.invalid").configure_cert(tls)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    receiver = Receiver([], tls=tls)
    port = receiver.server.server_address[1]
    tunnels: list[str] = []

    def tunnel(conn, body, r) -> None:  # type: ignore[no-untyped-def]
        tunnels.append(r.last_head.split("\r\n")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as up:
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            while True:
                ready, _, _ = select.select([conn, up], [], [], 5)
                if not ready:
                    return
                for a in ready:
                    data = a.recv(65536)
                    if not data:
                        return
                    (up if a is conn else conn).sendall(data)

    proxy = RawReceiver(tunnel)
    try:
        for var in ("no_proxy", "NO_PROXY", "http_proxy", "https_proxy", "HTTP_PROXY"):
            monkeypatch.delenv(var, raising=False)
        proxy_port = proxy.sock.getsockname()[1]
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy_port}")
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
        n = WebhookNotifier("https://hooks.example.invalid/hooks/SECRET", timeout=5)
        assert n.target == f"https://hooks.example.invalid via http://127.0.0.1:{proxy_port}"
        a = alert_for(_f("c", "drift", "m"), run="r")
        n.send(a)
        assert n.close(10) == 0 and n.delivered == 1 and n.retries == 0, n.failures
        assert tunnels == ["CONNECT hooks.example.invalid:443 HTTP/1.1"]
        assert receiver.accepted == {a.id: 1} and receiver.requests == 1  # arrived once
    finally:
        proxy.close()
        receiver.close()
