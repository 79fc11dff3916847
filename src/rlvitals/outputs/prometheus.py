"""``/metrics``: every run's latest canonical values and its verdict in Prometheus text format.

``Prometheus`` is the output ``rlvitals serve`` answers ``/metrics`` from: it keeps the
exposition of the runs it is handed, written again after an update changed one (no registry of
its own: prometheus_client keeps one global registry of a process's own metrics; these are
per-run labels). ``prometheus_text`` writes it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..checks.base import SEVERITIES, Report
from ..model import RunData
from ..safe import fs_text
from ..schema import is_canonical
from . import Output, Update

__all__ = ["FAMILIES", "Prometheus", "gauges", "prometheus_text"]


def _label(v: Any) -> str:
    s = "" if v is None else fs_text(str(v))
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _pvalue(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


# The gauges, by family: what each means. /metrics and the OpenTelemetry output
# (outputs/otel.py) send the same families with the same labels.
FAMILIES: dict[str, str] = {
    "rlvitals_metric": "Latest value of a canonical rlvitals metric of the run.",
    "rlvitals_last_step": "Last update (optimizer step) recorded.",
    "rlvitals_last_step_timestamp_seconds": "Unix time of the last step record.",
    "rlvitals_heartbeat_timestamp_seconds": "Unix time of the last progress heartbeat.",
    "rlvitals_running": "1 while the run's status is running, else 0.",
    "rlvitals_status": "The run's status (the one that holds is 1).",
    "rlvitals_verdict": "The run's verdict from the checks (the one that holds is 1).",
    "rlvitals_worst_severity": "Worst finding: 0 ok, 1 info, 2 warn, 3 fail.",
    "rlvitals_findings": "Findings of the run by severity.",
}

Sample = tuple[str, dict[str, Any], float]  # (family, labels, value)


def gauges(run_id: str, data: RunData, report: Report | None) -> list[Sample]:
    """One run's gauges: its latest canonical metric values, step, times, status and verdict,
    each ``(family, labels, value)``; every sample is labelled with the run's name and id."""
    out: list[Sample] = []
    base = {"run": data.info.get("name") or Path(data.source).name, "run_id": run_id}
    for name in data.names():
        if not is_canonical(name):
            continue
        s = data.series(name)
        if s is not None and len(s):
            out.append(("rlvitals_metric", {**base, "metric": name}, float(s.values[-1])))
    if data.last_step is not None:
        out.append(("rlvitals_last_step", base, float(data.last_step)))
    t = data.series("time")
    if t is not None and len(t):
        out.append(("rlvitals_last_step_timestamp_seconds", base, float(t.values[-1])))
    if data.heartbeats:
        hb = data.heartbeats[-1].get("time")
        if isinstance(hb, (int, float)):
            out.append(("rlvitals_heartbeat_timestamp_seconds", base, float(hb)))
    status = data.info.get("status")
    if status is not None:
        out.append(("rlvitals_running", base, 1.0 if status == "running" else 0.0))
        out.append(("rlvitals_status", {**base, "status": status}, 1.0))
    if report is not None:
        out.append(("rlvitals_verdict", {**base, "verdict": report.verdict}, 1.0))
        out.append(("rlvitals_worst_severity", base, float(SEVERITIES.index(report.worst))))
        counts = dict.fromkeys(SEVERITIES, 0)
        for f in report.findings:
            counts[f.severity] += 1
        for sev, n in counts.items():
            out.append(("rlvitals_findings", {**base, "severity": sev}, float(n)))
    return out


def prometheus_text(runs: Iterable[tuple[str, RunData, Report | None]]) -> str:
    """Every run's latest canonical metric values and its verdict, in Prometheus text format
    (exposition format 0.0.4). Metric names are a label, so any canonical name fits."""
    fams: dict[str, list[str]] = {fam: [] for fam in FAMILIES}
    for run_id, data, report in runs:
        for fam, labels, value in gauges(run_id, data, report):
            lab = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
            fams[fam].append(f"{fam}{{{lab}}} {_pvalue(value)}")
    lines = []
    for fam, samples in fams.items():
        lines.append(f"# HELP {fam} {FAMILIES[fam]}")
        lines.append(f"# TYPE {fam} gauge")
        lines.extend(samples)
    return "\n".join(lines) + "\n"


class Prometheus(Output):
    """The runs' exposition for ``/metrics``, an ``Output``: ``text()`` is written from the
    runs (id -> ``Follower``, the hub's) again only after an update; called with the hub's
    lock held.

    Args:
        runs: the hub's runs, read for the exposition.
    """

    def __init__(self, runs: dict[str, Any]) -> None:
        self.runs = runs
        self._text: str | None = None

    def update(self, run: Any, update: Update) -> None:
        self._text = None  # what a run holds or says changed: written again at the next scrape

    def text(self) -> str:
        """Every run's exposition, as of the last update."""
        if self._text is None:
            self._text = prometheus_text((r.id, r.data, r.report) for r in self.runs.values())
        return self._text
