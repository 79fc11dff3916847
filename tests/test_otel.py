"""The OpenTelemetry output: a small OTLP/HTTP receiver on 127.0.0.1 decodes what the SDK's
exporter sends (``ExportMetricsServiceRequest``, with the opentelemetry-proto classes) and gets
the gauges ``/metrics`` shows, point for point, each run under a resource that names it."""

from __future__ import annotations

import gzip
import math
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk.metrics")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)

from rlvitals.errors import UsageError
from rlvitals.outputs import load_output
from rlvitals.outputs.otel import OtelMetrics
from synth import synth_run


class Receiver:
    """An OTLP/HTTP metrics receiver: every request decoded, kept in ``requests``."""

    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.paths: list[str] = []
        me = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                req = ExportMetricsServiceRequest()
                req.ParseFromString(body)
                me.requests.append(req)
                me.paths.append(self.path)
                out = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def points(self) -> dict[str, set[tuple[str, tuple[tuple[str, str], ...], float]]]:
        """run name (from the resource) -> {(gauge, attributes, value)} of the last export."""
        out: dict[str, set[Any]] = {}
        for req in self.requests:
            for rm in req.resource_metrics:
                res = {a.key: a.value.string_value for a in rm.resource.attributes}
                got: set[Any] = set()
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        assert m.WhichOneof("data") == "gauge", m.name
                        for p in m.gauge.data_points:
                            attrs = tuple(
                                sorted((a.key, a.value.string_value) for a in p.attributes)
                            )
                            got.add((m.name, attrs, p.as_double))
                out[res["rlvitals.run.name"]] = got
                assert res["service.name"] == "rlvitals"
                assert res["rlvitals.run.source"].endswith(res["rlvitals.run.name"])
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    r = Receiver()
    yield r
    r.close()


def prometheus_points(text: str) -> dict[str, set[tuple[str, tuple[tuple[str, str], ...], float]]]:
    """run name -> {(gauge, labels, value)} of a Prometheus text page."""
    out: dict[str, set[Any]] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        m = re.fullmatch(r"(\w+)\{(.*)\} (\S+)", line)
        assert m, line
        labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2))))
        run = dict(labels)["run"]
        out.setdefault(run, set()).add((m.group(1), labels, float(m.group(3))))
    return out


def test_a_collector_gets_the_gauges_of_metrics_with_the_runs_attributes(
    receiver: Receiver, tmp_path: Path
) -> None:
    from rlvitals.follow.hub import Hub

    runs = tmp_path / "runs"
    synth_run(runs, "healthy", steps=20)
    synth_run(runs, "nan-loss", steps=20, nan_loss_from=8, seed=1)
    out = load_output(f"otel={receiver.url}")
    assert isinstance(out, OtelMetrics) and out.endpoint == f"{receiver.url}/v1/metrics"
    hub = Hub([runs], outputs=[out])
    for _ in range(200):
        hub.poll()
        if len(hub.runs) == 2 and all(r.report is not None for r in hub.runs.values()):
            break
    page = hub.metrics()  # what GET /metrics answers
    hub.stop()
    assert hub.close(10) == 0
    assert receiver.paths and set(receiver.paths) == {"/v1/metrics"}
    got, want = receiver.points(), prometheus_points(page)
    assert set(got) == set(want) == {"healthy", "nan-loss"}
    for run in want:
        # what the SDK cannot carry: a NaN or infinite latest value (/metrics shows NaN)
        non_finite = {p for p in want[run] if not math.isfinite(p[2])}
        assert got[run] == want[run] - non_finite, run
    assert {dict(a)["metric"] for _n, a, _v in non_finite} == {"train/loss"}  # nan-loss's
    families = {name for name, _a, _v in got["nan-loss"]}
    assert {"rlvitals_metric", "rlvitals_verdict", "rlvitals_last_step"} <= families
    verdict = {dict(a)["verdict"] for n, a, v in got["nan-loss"] if n == "rlvitals_verdict"}
    assert verdict == {"non_finite"}
    last = [v for n, _a, v in got["healthy"] if n == "rlvitals_last_step"]
    assert last == [19.0]


def test_a_bad_otel_url_is_one_error_line() -> None:
    for bad in ("otel=ftp://x", "otel=http://", "otel=http://h:99999"):
        with pytest.raises(UsageError, match="output otel"):
            load_output(bad)


def test_a_collector_that_is_down_is_reported_not_raised(tmp_path: Path) -> None:
    import socket

    from rlvitals.follow.hub import Hub

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    synth_run(tmp_path, "r", steps=6)
    out = OtelMetrics(f"http://127.0.0.1:{port}", timeout=1.0)
    hub = Hub([tmp_path / "r"], outputs=[out])
    for _ in range(100):
        hub.poll()
        if hub.runs and all(r.report is not None for r in hub.runs.values()):
            break
    hub.stop()
    assert hub.close(3) == 1
    ((what, why),) = out.undelivered()
    assert "OpenTelemetry" in what and "did not take" in why
