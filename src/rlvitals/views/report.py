"""The HTML report: one self-contained file (``rlvitals report RUN... -o report.html``).

Everything is inline: the stylesheet, the plotting library, the app and the runs' data as
escaped JSON. It opens offline and its Content-Security-Policy forbids any network access.
Several runs are overlaid on the same plots for comparison.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..checks.base import Report
from ..model import RunData
from .dashboard import (
    flagged_ids,
    load_transcripts,
    page_html,
    run_payload,
    transcript_steps,
)

# Points per series in a report: long runs are thinned to each bucket's extremes (spikes and
# non-finite values kept), so a report of 20 runs of 10,000 steps stays a few megabytes.
REPORT_MAX_POINTS = 4000

__all__ = ["render_report", "report_payload", "write_report"]


def report_payload(
    runs: Sequence[tuple[RunData, Report | None]],
    *,
    baseline: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The data the report embeds: each run with its findings and flagged transcripts."""
    payload_runs = []
    for i, (data, report) in enumerate(runs):
        flagged = flagged_ids(report)
        transcripts = {}
        offered = []
        for t in transcript_steps(data, report):
            got = load_transcripts(data, t["step"], flagged=flagged)
            if got is not None:
                transcripts[t["step"]] = got
                offered.append(t)
        payload_runs.append(
            run_payload(
                f"r{i}",
                data,
                report,
                transcripts=transcripts,
                transcript_steps=offered,
                max_points=REPORT_MAX_POINTS,
            )
        )
    _tell_apart(payload_runs)
    return {
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": payload_runs,
        "baseline": baseline or {},
    }


def _tell_apart(runs: list[dict[str, Any]]) -> None:
    """Runs that share a name (two ``metrics.jsonl`` files) get the folders that tell their
    paths apart: ``metrics.jsonl (generic)``, ``metrics.jsonl (tinker)``."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_name.setdefault(str(r.get("name")), []).append(r)
    for name, same in by_name.items():
        if len(same) < 2:
            continue
        parts = [Path(str(r.get("source") or "")).parts for r in same]
        for depth in range(2, max(map(len, parts)) + 1):
            tails = ["/".join(p[-depth:-1]) for p in parts]
            if len(set(tails)) == len(tails):
                for r, tail in zip(same, tails):
                    r["name"] = f"{name} ({tail})"
                break


def render_report(
    runs: Sequence[tuple[RunData, Report | None]],
    *,
    baseline: dict[str, Any] | None = None,
    title: str | None = None,
) -> str:
    """The report's HTML text."""
    if title is None:
        names = [str(d.info.get("name") or Path(d.source).name) for d, _ in runs]
        title = "rlvitals: " + ", ".join(names[:3]) + (" …" if len(names) > 3 else "")
    return page_html(report_payload(runs, baseline=baseline), live=False, title=title)


def write_report(path: str | os.PathLike[str], html: str) -> None:
    """Write the report atomically (a reader never sees half a file)."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, p)
