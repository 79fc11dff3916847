"""A key a framework renamed between versions is a version change, not a metric gone missing;
one that stops with nothing in its place is still reported."""

from __future__ import annotations

import json
from pathlib import Path

from rlvitals import read
from rlvitals.checks import run_checks


def _prime(tmp_path: Path, rename_at: int | None) -> Path:
    """prime-rl's monitors/file/metrics.jsonl (FileMonitor.log_metrics' rows) across a version
    change: filters/ became detections/ (PR #2734)."""
    d = tmp_path / "run" / "monitors" / "file"
    d.mkdir(parents=True)
    with open(d / "metrics.jsonl", "w") as f:
        for s in range(12):
            row = {"step": s, "time": 1000.0 + 10 * s, "entropy/all/mean": 0.4}
            row["train/agg/effective/e/reward/mean"] = 0.3 + 0.02 * s
            if rename_at is None and s >= 6:
                pass  # the rate stops, nothing in its place
            else:
                k = "detections" if rename_at is not None and s >= rename_at else "filters"
                row[f"train/agg/all/{k}/gibberish/mean"] = 0.0
            row["producer"] = "orchestrator"
            f.write(json.dumps(row) + "\n")
    return tmp_path / "run"


def test_a_renamed_key_is_not_missing(tmp_path):
    run = read(_prime(tmp_path, rename_at=6))
    assert run.missing == {}
    assert run.renamed_keys({"train/agg/all/filters/gibberish/mean": 6}) == {
        "train/agg/all/filters/gibberish/mean": (6, "train/agg/all/detections/gibberish/mean"),
        "text/gibberish_rate": (6, "train/agg/all/detections/gibberish/mean"),
    }
    rep = run_checks(run)
    assert not [f for f in rep.findings if f.check == "nonfinite"], [f.title for f in rep.findings]


def test_a_key_that_stops_is_still_missing(tmp_path):
    run = read(_prime(tmp_path, rename_at=None))
    assert run.missing.get("text/gibberish_rate") == 6
    assert [f for f in run_checks(run).findings if f.check == "nonfinite"]


def test_pipelinerl_lag_renamed_reads_as_one_series(tmp_path):
    # PipelineRL PR #152: stats/lag (the max) became stats/lag_{min,mean,max}.
    p = tmp_path / "metrics.jsonl"
    with open(p, "w") as f:
        for s in range(12):
            row = {"step": s, "reward/mean": 0.3}
            if s < 6:
                row["stats/lag"] = 2.0
            else:
                row.update({"stats/lag_min": 0.0, "stats/lag_mean": 1.0, "stats/lag_max": 2.0})
            f.write(json.dumps(row) + "\n")
    run = read(p)
    lag = run.series("freshness/lag_max")
    assert lag is not None and len(lag.finite()) == 12
    assert run.series("freshness/lag_mean").at(6) == 1.0
    assert "stats/lag" not in run.missing and "freshness/lag_max" not in run.missing
