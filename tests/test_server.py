"""The live server: discovery, events, /metrics, and what it refuses to serve."""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from dashboard_runs import append_steps, make_run, step_record, write_run_json
from rlvitals.checks.base import Finding, Report
from rlvitals.cli import build_parser
from rlvitals.follow.hub import Hub, serve_in_background
from rlvitals.outputs import page as page_mod
from rlvitals.outputs.prometheus import prometheus_text
from rlvitals.views.dashboard import page_json


def _judge(data, now=None) -> Report:  # fast and deterministic: the checks have their own tests
    return Report(data.source, "learning", [Finding("reward", "ok", "learning", "fine")])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "runs"
    root.mkdir()
    make_run(root, "run-a", 20, status="running", transcripts=(5,))
    (tmp_path / "secret.txt").write_text("TOPSECRET")
    url, stop = serve_in_background([root], poll_interval=0.05)
    try:
        yield url, root
    finally:
        stop()


def _get(url: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any, bytes]:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    conn.putrequest("GET", path, skip_host=bool(headers and "Host" in headers))
    for k, v in (headers or {}).items():
        conn.putheader(k, v)
    conn.endheaders()
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, resp.headers, body  # names in any case


def _runs(url: str) -> list[dict]:
    return json.loads(_get(url, "/api/runs")[2])["runs"]


def test_binds_loopback_unless_told(served: tuple[str, Path]) -> None:
    url, _ = served
    assert url.startswith("http://127.0.0.1:")
    args = build_parser().parse_args(["serve", "x"])
    assert args.host == "127.0.0.1"


@pytest.mark.parametrize(
    "path",
    [
        "/run.json",
        "/run-a/run.json",
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/..%2fsecret.txt",
        "/api/run/..",
        "/api/run/..%2f..%2fsecret.txt",
        "/api/run/../../secret.txt",
        "/api/transcripts/RUN/../../run.json",
        "/api/transcripts/RUN/..%2f..%2frun.json",
        "/api/transcripts/RUN/-1",
        "/api/transcripts/RUN/5.json",
        "/api/transcripts/RUN/00000000005",
        "//etc/passwd",
        "/static/../../secret.txt",
        "/runs/run-a/steps.jsonl",
    ],
)
def test_no_path_reaches_a_file(served: tuple[str, Path], path: str) -> None:
    url, _ = served
    rid = _runs(url)[0]["id"]
    status, _, body = _get(url, path.replace("RUN", rid))
    assert status == 404
    assert b"TOPSECRET" not in body and b"rlvitals-run/1" not in body


def test_transcripts_only_by_run_id_and_step(served: tuple[str, Path]) -> None:
    url, _ = served
    rid = _runs(url)[0]["id"]
    status, headers, body = _get(url, f"/api/transcripts/{rid}/5")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert json.loads(body)[0]["attempt_id"].startswith("5-")
    assert _get(url, f"/api/transcripts/{rid}/6")[0] == 404
    assert _get(url, "/api/transcripts/nope-000000/5")[0] == 404


def test_other_host_names_are_refused_on_loopback(served: tuple[str, Path]) -> None:
    url, _ = served
    port = urlsplit(url).port
    assert _get(url, "/api/runs", {"Host": "evil.example"})[0] == 403
    assert _get(url, "/api/runs", {"Host": f"evil.example:{port}"})[0] == 403
    assert _get(url, "/api/runs", {"Host": f"localhost:{port}"})[0] == 200


def test_only_get_is_allowed(served: tuple[str, Path]) -> None:
    u = urlsplit(served[0])
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    conn.request("POST", "/api/runs", body=b"{}")
    assert conn.getresponse().status == 405
    conn.close()


def test_page_carries_a_strict_policy(served: tuple[str, Path]) -> None:
    status, headers, body = _get(served[0], "/")
    assert status == 200
    csp = headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    assert "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]
    assert headers["X-Frame-Options"] == "DENY"
    assert b'id="rlv-data"' in body


def test_new_runs_are_discovered(served: tuple[str, Path]) -> None:
    url, root = served
    make_run(root / "group", "run-b", 3, status="running")  # one folder deeper
    deadline = time.time() + 8
    while time.time() < deadline:
        names = {r["name"] for r in _runs(url)}
        if "run-b" in names:
            break
        time.sleep(0.1)
    assert names == {"run-a", "run-b"}


def _read_events(resp: http.client.HTTPResponse, want: str, timeout: float) -> dict:
    """Read SSE events until one of kind ``want``; its data."""
    deadline = time.time() + timeout
    kind = None
    while time.time() < deadline:
        line = resp.fp.readline().decode()
        if line.startswith("event: "):
            kind = line[7:].strip()
        elif line.startswith("data: ") and kind == want:
            return json.loads(line[6:])
    raise AssertionError(f"no {want} event within {timeout} s")


def test_events_send_a_snapshot_then_new_steps(served: tuple[str, Path]) -> None:
    url, root = served
    rid = _runs(url)[0]["id"]
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request("GET", f"/events?runs={rid}")
    resp = conn.getresponse()
    assert resp.getheader("Content-Type").startswith("text/event-stream")
    snap = _read_events(resp, "snapshot", 5)
    assert snap["id"] == rid and snap["last_step"] == 19
    assert snap["series"]["reward/mean"]["s"][-1] == 19
    t0 = time.time()
    append_steps(root / "run-a", [step_record(20, time.time())])
    delta = _read_events(resp, "delta", 5)
    while 20 not in delta["series"].get("reward/mean", {}).get("s", []):
        delta = _read_events(resp, "delta", 5)
    assert time.time() - t0 < 2
    assert delta["series"]["reward/mean"]["s"] == [20] and "r" not in delta["series"]["reward/mean"]
    assert delta["summary"]["last_step"] == 20
    conn.close()


def _hub(tmp_path: Path, **kw) -> tuple[Hub, Path]:
    d = make_run(tmp_path, "h", 10, status="running")
    hub = Hub([d], judge=_judge, **kw)
    hub.poll()
    return hub, d


def _drain(sub) -> list[tuple[str, dict]]:
    out = []
    while not sub.queue.empty():
        blob = sub.queue.get_nowait()
        if blob is None:
            out.append(("closed", {}))
            continue
        kind, data = blob.decode().split("\n")[:2]
        out.append((kind[7:], json.loads(data[6:])))
    return out


def test_steps_out_of_order_replace_the_series(tmp_path: Path) -> None:
    hub, d = _hub(tmp_path)
    rid = next(iter(hub.runs))
    sub = hub.subscribe([rid])
    _drain(sub)
    append_steps(d, [step_record(12, 0.0)])
    hub.poll()
    (delta,) = [e for k, e in _drain(sub) if k == "delta"]
    assert delta["series"]["reward/mean"]["s"] == [12] and "r" not in delta["series"]["reward/mean"]
    append_steps(d, [step_record(11, 0.0)])  # a shard that lagged behind
    hub.poll()
    (delta,) = [e for k, e in _drain(sub) if k == "delta"]
    assert delta["series"]["reward/mean"]["r"] is True
    assert delta["series"]["reward/mean"]["s"] == [*range(10), 11, 12]


def test_a_delta_sends_only_new_points_non_finite_ones_as_text(tmp_path: Path) -> None:
    hub, d = _hub(tmp_path)
    rid = next(iter(hub.runs))
    sub = hub.subscribe([rid])
    _drain(sub)
    bad = {"train/loss": "NaN", "train/grad_norm": "Infinity", "reward/mean": "-Infinity"}
    append_steps(d, [step_record(10, 0.0, **bad), step_record(11, 0.0)])
    hub.poll()
    (delta,) = [e for k, e in _drain(sub) if k == "delta"]
    got = {n: delta["series"][n] for n in bad}
    assert got["train/loss"]["s"] == [10, 11] and got["train/loss"]["v"][0] == "NaN"
    assert got["train/grad_norm"]["v"][0] == "Infinity"
    assert got["reward/mean"]["v"][0] == "-Infinity"
    assert all(isinstance(x["v"][1], float) and "r" not in x for x in got.values())
    # The last point sent rewritten in place (the same step again, another value): replaced.
    append_steps(d, [step_record(11, 0.0, **{"train/loss": 7.0})])
    hub.poll()
    (delta,) = [e for k, e in _drain(sub) if k == "delta"]
    assert delta["series"]["train/loss"]["r"] is True
    assert delta["series"]["train/loss"]["s"] == list(range(12))
    assert delta["series"]["train/loss"]["v"][10:] == ["NaN", 7.0]


def test_a_page_too_far_behind_is_dropped_not_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(page_mod, "QUEUE_EVENTS", 4)
    hub, d = _hub(tmp_path)
    rid = next(iter(hub.runs))
    slow = hub.subscribe([rid])
    fast = hub.subscribe([rid])
    for s in range(10, 20):
        append_steps(d, [step_record(s, 0.0)])
        hub.poll()
        _drain(fast)
    assert slow.dead and _drain(slow)[-1][0] == "closed"
    assert slow not in hub.publisher.subs and not fast.dead


def test_metrics_are_prometheus_text_with_escaped_labels(tmp_path: Path) -> None:
    hub, d = _hub(tmp_path)
    run = next(iter(hub.runs.values()))
    run.data.info["name"] = 'a "quoted" \\ name\nnext'
    append_steps(d, [step_record(10, 0.0, **{"train/loss": "NaN", "train/grad_norm": "Infinity"})])
    hub.poll()
    text = hub.metrics()
    assert 'run="a \\"quoted\\" \\\\ name\\nnext"' in text
    sample = re.compile(
        r'^[a-zA-Z_:][a-zA-Z0-9_:]*\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*\} '
        r"(NaN|[+-]Inf|-?[0-9.eE+-]+)$"
    )
    families = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            families.add(line.split()[2])
            assert line.endswith(" gauge")
        elif not line.startswith("# HELP "):
            assert sample.match(line), line
            assert line.split("{")[0] in families
    assert re.search(r'rlvitals_metric\{[^}]*metric="train/loss"\} NaN', text)
    assert re.search(r'rlvitals_metric\{[^}]*metric="train/grad_norm"\} \+Inf', text)
    assert re.search(r"rlvitals_last_step\{[^}]*\} 10", text)
    assert re.search(r'rlvitals_verdict\{[^}]*verdict="learning"\} 1', text)
    assert 'metric="time"' not in text and 'metric="policy_version"' not in text


def test_metrics_endpoint_content_type(served: tuple[str, Path]) -> None:
    status, headers, body = _get(served[0], "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert b'metric="reward/mean"' in body


def test_prometheus_text_of_no_runs_is_just_the_families() -> None:
    text = prometheus_text([])
    assert text.count("# TYPE") == text.count("# HELP") > 5


def test_a_finished_run_is_judged_once_more_and_marked(tmp_path: Path) -> None:
    hub, d = _hub(tmp_path)
    write_run_json(d, "finished")
    hub.poll()
    (summary,) = hub.index()
    assert summary["status"] == "finished" and summary["verdict"] == "learning"


def test_a_failing_check_is_a_warning_not_a_dead_dashboard(tmp_path: Path) -> None:
    d = make_run(tmp_path, "h", 10, status="running")

    def broken(data, now=None) -> Report:
        raise ZeroDivisionError("a bug in a check")

    hub = Hub([d], judge=broken)
    rid = next(iter(hub.runs))
    sub = hub.subscribe([rid])
    append_steps(d, [step_record(10, 0.0)])
    hub.poll()
    hub.poll(now=time.monotonic() + 10)
    (summary,) = hub.index()
    assert summary["last_step"] == 10 and summary["verdict"] is None
    warnings = [w for w in hub.runs[rid].data.warnings if "checks failed" in w]
    assert warnings == ["checks failed: ZeroDivisionError: a bug in a check"]
    assert any(k == "delta" for k, _ in _drain(sub))


def test_clients_that_hang_up_leave_no_traceback(
    served: tuple[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    import socket

    url, _ = served
    host, port = urlsplit(url).hostname, urlsplit(url).port
    for _ in range(20):  # a malformed request line, then gone before the 400 is written
        with socket.create_connection((host, port)) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.sendall(b"\x16\x03\x01 garbage\r\n\r\n")
    with socket.create_connection((host, port)) as s:  # still serving
        s.sendall(f"GET /api/runs HTTP/1.0\r\nHost: {host}:{port}\r\n\r\n".encode())
        assert s.recv(64).split(b" ")[1] == b"200"
    time.sleep(0.2)
    assert "Traceback" not in capfd.readouterr().err


# -- what the server refuses: links out, slow clients, bodies, big files ---------------------


def test_links_out_of_the_served_folder_are_not_served(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    inside = make_run(root, "inside", 10, transcripts=(2,))
    elsewhere = make_run(tmp_path / "elsewhere", "secret-run", 10, transcripts=(2,))
    (root / "outside_dir").symlink_to(elsewhere)
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps([{"attempt_id": "SECRET-OUTSIDE", "generations": []}]))
    t = inside / "transcripts" / "step-000003.json"
    t.symlink_to(secret)

    hub = Hub([root], judge=_judge)
    assert [r.path.name for r in hub.runs.values()] == ["inside"]
    (rid,) = hub.runs
    assert hub.transcripts(rid, 3) is None  # a transcript file linked out of the run
    assert hub.transcripts(rid, 2) is not None

    linked = Hub([root], judge=_judge, follow_links=True)
    assert sorted(r.path.name for r in linked.runs.values()) == ["inside", "outside_dir"]
    rid = next(r.id for r in linked.runs.values() if r.path.name == "inside")
    got = linked.transcripts(rid, 3)
    assert got is not None and got[0]["attempt_id"] == "SECRET-OUTSIDE"


def test_follow_links_flag_parses() -> None:
    args = build_parser().parse_args(["serve", "x", "--follow-links", "--set", "a=1"])
    assert args.follow_links and args.set == ["a=1"]
    assert not build_parser().parse_args(["serve", "x"]).follow_links


def test_slow_and_idle_connections_are_closed_and_hold_no_threads(tmp_path: Path) -> None:
    import socket
    import threading

    make_run(tmp_path, "r", 5)
    url, stop = serve_in_background([tmp_path / "r"], poll_interval=0.05, header_timeout=0.5)
    host, port = urlsplit(url).hostname, urlsplit(url).port
    try:
        before = threading.active_count()
        socks = []
        for _ in range(60):  # slowloris: a request line, then a header byte now and then
            s = socket.create_connection((host, port))
            s.sendall(f"GET /api/runs HTTP/1.1\r\nHost: {host}\r\nX-a: ".encode())
            socks.append(s)
        time.sleep(0.2)
        for s in socks:
            s.sendall(b"a")  # still trickling, within any per-read timeout
        time.sleep(1.0)
        closed = 0
        for s in socks:
            s.settimeout(1)
            try:
                closed += s.recv(10) == b""
            except OSError:
                closed += 1
            s.close()
        assert closed == 60  # cut off at the header deadline, not held open
        deadline = time.monotonic() + 3
        while threading.active_count() > before + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() <= before + 2
        status, _, _ = _get(url, "/healthz")
        assert status == 200
    finally:
        stop()


def test_a_get_body_is_never_read_as_a_second_request(served: tuple[str, Path]) -> None:
    import socket

    url, _ = served
    host, port = urlsplit(url).hostname, urlsplit(url).port
    smuggled = f"GET /api/runs HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    with socket.create_connection((host, port), timeout=3) as s:
        s.sendall(
            f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(smuggled)}\r\n\r\n".encode()
            + smuggled
        )
        got = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    assert got.count(b"HTTP/1.1 ") == 1 and got.endswith(b"ok\n")


def test_any_loopback_address_is_a_good_host_header(served: tuple[str, Path]) -> None:
    url, _ = served
    port = urlsplit(url).port
    assert _get(url, "/healthz", {"Host": f"127.0.0.2:{port}"})[0] == 200
    assert _get(url, "/healthz", {"Host": "127.1"})[0] == 403
    assert _get(url, "/healthz", {"Host": "2130706433"})[0] == 403


def test_transcripts_are_streamed_in_bounded_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tracemalloc

    from rlvitals.transcripts import store as store_mod

    # Files above FAST_LIMIT are streamed: make that 64 KB so a few MB count as "big".
    monkeypatch.setattr(store_mod, "FAST_LIMIT", 64 << 10)
    peaks, sizes = [], []
    for n in (40, 160):
        d = make_run(tmp_path, f"big{n}", 10)
        (d / "transcripts").mkdir()
        entries = [
            {
                "attempt_id": f"a{i}",
                "reward": i / 1000,
                "generations": [{"prompt": "p", "completion": chr(65 + i % 26) * 60_000}],
            }
            for i in range(n)
        ]
        p = d / "transcripts" / "step-000004.json"
        p.write_text(json.dumps(entries))
        del entries
        sizes.append(p.stat().st_size)
        hub = Hub([d], judge=_judge)
        (rid,) = hub.runs
        tracemalloc.start()
        try:
            for _ in range(3):
                got = hub.transcripts(rid, 4)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert got is not None and len(got) == 16 and got[0]["of"] == n
        assert [e["attempt_id"] for e in got[:2]] == [f"a{n - 1}", f"a{n - 2}"]  # best first
    # Four times the file costs little more memory: it is never held whole (the old loader
    # parsed the whole file on every request: memory grew with the file, times requests).
    assert peaks[1] - peaks[0] < (sizes[1] - sizes[0]) / 3, (peaks, sizes)


def test_live_json_shows_bidi_controls_as_visible_text(tmp_path: Path) -> None:
    d = make_run(tmp_path, "b", 10)
    hub = Hub([d], judge=_judge)
    (run,) = hub.runs.values()
    run.data.info["name"] = "safe\u202etxt.exe\u2066"
    blob = page_json(hub.snapshot(run.id))
    assert "\u202e".encode() not in blob and "\u2066".encode() not in blob
    assert json.loads(blob)["name"] == "safe\\u202etxt.exe\\u2066"


def test_a_run_deleted_and_recreated_is_followed_afresh(tmp_path: Path) -> None:
    import shutil

    d = make_run(tmp_path, "r", 10, status="running", **{"train/loss": 1.0})
    hub = Hub([d], judge=_judge)
    hub.poll()
    (rid,) = hub.runs
    sub = hub.subscribe([rid])
    _drain(sub)
    shutil.rmtree(d)
    make_run(tmp_path, "r", 30, status="running", **{"train/loss": 2.0})
    hub.poll()
    run = hub.runs[rid]
    assert set(run.data.series("train/loss").values.tolist()) == {2.0}
    assert run.data.last_step == 29 and not [w for w in run.data.warnings if "JSON" in w]
    kinds = [k for k, _ in _drain(sub)]
    assert "snapshot" in kinds  # the page gets the new run whole


def test_serve_thresholds_reach_the_checks(tmp_path: Path) -> None:
    from rlvitals.cli.check import _overrides
    from rlvitals.judge import Judge

    d = make_run(tmp_path, "r", 40)
    default, tuned = Hub([d]), Hub([d], judge=Judge(thresholds=_overrides(["rejected_warn=0.1"])))
    for h in (default, tuned):
        h.poll()
    checks = [
        [f.check for f in next(iter(h.runs.values())).report.findings] for h in (default, tuned)
    ]
    assert "groups" not in checks[0] and "groups" in checks[1]


def test_host_names_a_server_bound_elsewhere_answers_under() -> None:
    # Bound to 0.0.0.0 (tests bind loopback only, so the rule is asked directly): IP
    # literals, this machine's names and --allow-host names pass; any other name is a page
    # elsewhere pointing its own name at this address (DNS rebinding) and is refused.
    from rlvitals.views.server import _machine_names, host_allowed

    allowed = frozenset({"runs.lab.internal", *_machine_names()})
    for header in (
        "10.1.2.3:8765",
        "[fe80::1]:8765",
        "localhost:8765",
        "RUNS.lab.internal.",
        f"{sorted(_machine_names())[0]}:8765",
    ):
        assert host_allowed(header, False, allowed), header
    for header in ("evil.example", "evil.example:8765", "runs.lab.internal.evil.example", ""):
        assert not host_allowed(header, False, allowed), header
    assert not host_allowed("10.1.2.3", True, frozenset())  # on loopback: loopback only
    assert host_allowed("anything.example", False, frozenset({"*"}))


def test_allow_host_serves_under_another_name_on_loopback(tmp_path: Path) -> None:
    from rlvitals.follow.hub import Hub
    from rlvitals.views.server import make_server

    make_run(tmp_path, "r", 3)
    server = make_server(Hub([tmp_path]), "127.0.0.1", 0, allowed_hosts=["Runs.Lab.Internal"])
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    try:
        url = server.url
        deadline = time.monotonic() + 10
        while not server.uvicorn.started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _get(url, "/healthz", {"Host": "runs.lab.internal:80"})[0] == 200
        status, _, body = _get(url, "/healthz", {"Host": "evil.example"})
        assert status == 403 and b"--allow-host" in body
    finally:
        server.stop()
        t.join(5)
