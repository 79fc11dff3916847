"""Webhook alerts: each new finding once, none lost, the caller never blocked."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from dashboard_runs import append_steps, make_run, step_record
from rlvitals.checks.base import Finding, Report
from rlvitals.errors import UsageError
from rlvitals.views.alerts import AlertTracker, WebhookNotifier, alert_for
from rlvitals.views.watch import Watcher


class Receiver:
    """A local webhook that follows a script: each request takes the next behaviour."""

    def __init__(self, script: list[str]) -> None:
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
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/SECRET"
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
    assert [b["rlvitals"]["id"] for b in receiver.bodies] == [a.id for a in alerts]  # in order
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
    w = Watcher(d, notifier=n, judge=judge, check_interval=0)
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
