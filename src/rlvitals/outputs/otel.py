"""OpenTelemetry metrics: the gauges of ``/metrics`` exported through the OpenTelemetry SDK over
OTLP/HTTP, an ``Output`` (``--to otel=URL``; the ``otel`` extra).

The gauges are ``outputs.prometheus.gauges``: the same families (``rlvitals_metric`` with a
``metric`` attribute, ``rlvitals_last_step``, ``rlvitals_verdict``...), the same attributes and
values as the Prometheus text ``rlvitals serve`` answers, so a collector that scrapes one and
receives the other holds the same series; but for a metric whose latest value is NaN or
infinite, which ``/metrics`` shows as ``NaN`` and the OpenTelemetry SDK does not send (it drops
such a measurement): that run's ``rlvitals_verdict`` (``non_finite``) and findings carry it. Each followed run has a ``MeterProvider`` of its own
whose resource names the run (``service.name`` = ``rlvitals``, ``rlvitals.run.name``,
``rlvitals.run.id``, ``rlvitals.run.source``, ``rlvitals.run.format``), so a collector can
route or drop runs by resource. None is installed as the process's global provider: a training
script's own OpenTelemetry setup is left alone.

``URL`` is the collector's OTLP/HTTP address (``http://collector:4318``; ``/v1/metrics`` is
added when the path is empty); without it, the SDK's own variables decide
(``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``, ``OTEL_EXPORTER_OTLP_ENDPOINT``, and
``OTEL_EXPORTER_OTLP_HEADERS`` for credentials). The SDK exports from its own thread every
``OTEL_METRIC_EXPORT_INTERVAL`` milliseconds (60 s by default) and once more at ``close``;
``update`` only stores the run's latest gauges, so the follow loop never waits on the network.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import MissingExtraError, UsageError
from . import Output
from .prometheus import FAMILIES, Sample, gauges

__all__ = ["OtelMetrics", "otel_output"]

log = logging.getLogger("rlvitals.otel")


def _exporter_class() -> Any:
    """The SDK's OTLP/HTTP metric exporter, keeping why its last export failed (``failed``:
    None after a success), so ``close`` can say whether the last values arrived."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics.export import MetricExportResult

    class Exporter(OTLPMetricExporter):
        failed: str | None = None

        def export(self, metrics_data: Any, timeout_millis: float | None = 10000, **kw: Any) -> Any:
            result = super().export(metrics_data, timeout_millis=timeout_millis, **kw)
            ok = result == MetricExportResult.SUCCESS
            self.failed = None if ok else "the collector did not take the export"
            return result

    return Exporter


def otel_output(url: str | None = None) -> OtelMetrics:
    """``--to otel`` (the SDK's environment decides where) or ``--to otel=URL``."""
    return OtelMetrics(url or None)


def _endpoint(url: str) -> str:
    """``url`` with ``/v1/metrics`` when it names no path; a bad URL is one error line."""
    try:
        p = urlsplit(url)
        p.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise UsageError(f"output otel: bad URL {url!r}") from None
    if p.scheme not in ("http", "https") or not p.hostname:
        raise UsageError(f"output otel: expected an http(s) OTLP URL (not {url!r})")
    path = p.path if p.path not in ("", "/") else "/v1/metrics"
    return urlunsplit((p.scheme, p.netloc, path, p.query, ""))


class OtelMetrics(Output):
    """Exports every followed run's gauges over OTLP/HTTP (see the module docstring).

    Args:
        url: the collector's OTLP/HTTP address (default: the SDK's environment variables).
        interval: seconds between exports (default: ``OTEL_METRIC_EXPORT_INTERVAL``, else 60).
        timeout: seconds an export may take.
    """

    def __init__(
        self, url: str | None = None, *, interval: float | None = None, timeout: float = 10.0
    ) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,  # noqa: F401
            )
            from opentelemetry.sdk.metrics import MeterProvider  # noqa: F401
        except ImportError:
            raise MissingExtraError("otel", "the OpenTelemetry output (--to otel)") from None
        self.endpoint = _endpoint(url) if url else None
        self.interval = interval
        self.timeout = timeout
        self._lock = threading.Lock()
        # id(follower) -> ((its MeterProvider, its exporter), its latest gauges)
        self._runs: dict[int, tuple[Any, list[Sample]]] = {}
        self.failures: list[tuple[str, str]] = []

    def describe(self) -> str:
        if self.endpoint is None:
            return "OpenTelemetry (OTLP/HTTP, from OTEL_EXPORTER_OTLP_* variables)"
        p = urlsplit(self.endpoint)
        return f"OpenTelemetry {p.scheme}://{p.netloc.rpartition('@')[2]}"

    def open(self, run: Any) -> None:
        self._provider(run)

    def update(self, run: Any, update: Any) -> None:
        """Keep the run's latest gauges for the next export."""
        if update.waiting:
            return
        samples = gauges(run.id or run.name, run.data, run.report)
        provider = self._provider(run)
        with self._lock:
            self._runs[id(run)] = (provider, samples)

    def close(self, timeout: float = 10.0) -> int:
        """Export once more and stop; returns how many runs' last export failed."""
        with self._lock:
            providers = [p for p, _ in self._runs.values()]
        failed = 0
        for provider, exporter in providers:
            try:
                provider.force_flush(timeout_millis=int(timeout * 1000))
                provider.shutdown(timeout_millis=int(timeout * 1000))
            except Exception as exc:
                exporter.failed = f"{type(exc).__name__}: {exc}"
            if exporter.failed:
                failed += 1
                self.failures.append(("OpenTelemetry export", str(exporter.failed)))
                log.warning(
                    "OpenTelemetry export to %s failed: %s", self.describe(), exporter.failed
                )
        with self._lock:
            self._runs.clear()
        return failed

    def undelivered(self) -> list[tuple[str, str]]:
        return list(self.failures)

    # -- one MeterProvider a run ---------------------------------------------------------

    def _provider(self, run: Any) -> Any:
        with self._lock:
            got = self._runs.get(id(run))
            if got is not None:
                return got[0]
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource

        from .. import __version__

        data = run.data
        resource = Resource.create(
            {
                "service.name": "rlvitals",
                "service.version": __version__,
                "rlvitals.run.name": str(run.name),
                "rlvitals.run.id": str(run.id or run.name),
                "rlvitals.run.source": str(run.source),
                "rlvitals.run.format": str(getattr(data, "format", "") or ""),
            }
        )
        exporter = _exporter_class()(endpoint=self.endpoint, timeout=self.timeout)
        reader = PeriodicExportingMetricReader(
            exporter,
            export_interval_millis=None if self.interval is None else self.interval * 1000,
            export_timeout_millis=self.timeout * 1000,
        )
        provider = (MeterProvider(resource=resource, metric_readers=[reader]), exporter)
        meter = provider[0].get_meter("rlvitals", __version__)
        key = id(run)
        for family, help_text in FAMILIES.items():
            meter.create_observable_gauge(
                family, callbacks=[self._observe(key, family)], description=help_text
            )
        with self._lock:
            kept = self._runs.setdefault(key, (provider, []))[0]
        if kept is not provider:  # another thread made the run's provider first
            provider[0].shutdown()
        return kept

    def _observe(self, key: int, family: str) -> Any:
        from opentelemetry.metrics import Observation

        def callback(options: Any) -> Iterable[Any]:
            with self._lock:
                got = self._runs.get(key)
            samples = got[1] if got is not None else []
            return [
                Observation(value, {k: "" if v is None else str(v) for k, v in labels.items()})
                for fam, labels, value in samples
                if fam == family and math.isfinite(value)  # (the SDK drops NaN and inf)
            ]

        return callback
