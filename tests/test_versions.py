"""A key a framework renamed between versions is a version change, not a metric gone missing;
one that stops with nothing in its place is still reported."""

from __future__ import annotations

import json
import math
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


# -- structurally zero ----------------------------------------------------------------------


def _trl_state(tmp_path: Path, clip: float = 0.0, kl: float = 0.0) -> Path:
    """A TRL trainer_state.json (log_history as the HF Trainer writes it), num_iterations=1
    and beta=0: the clip ratios and the KL are exactly 0 at every step."""
    hist = []
    for s in range(1, 31):
        hist.append(
            {
                "step": s,
                "loss": 0.01,
                "grad_norm": 0.5,
                "learning_rate": 1e-6,
                "reward": 0.3 + 0.01 * s + 0.02 * math.sin(3 * s),
                "reward_std": 0.4,
                "frac_reward_zero_std": 0.2,
                "kl": kl,
                "entropy": 0.9,
                "clip_ratio/low_mean": clip,
                "clip_ratio/high_mean": clip,
                "clip_ratio/region_mean": clip,
            }
        )
    d = tmp_path / "out" / "checkpoint-30"
    d.mkdir(parents=True)
    (d / "trainer_state.json").write_text(json.dumps({"global_step": 30, "log_history": hist}))
    return tmp_path / "out"


def test_clip_and_kl_exactly_zero_are_said_as_by_design_never_warned(tmp_path):
    rep = run_checks(read(_trl_state(tmp_path)))
    assert rep.at_least("warn") == [] and rep.verdict == "learning"
    said = {f.metric: f for f in rep.findings if f.check == "structural"}
    assert (
        said["train/ref_kl"].severity == "info" and "penalty is off" in said["train/ref_kl"].title
    )
    clip = next(f for f in said.values() if "clip share" in f.title)
    assert "train/clip_frac" in clip.evidence["metrics"] and clip.severity == "info"


def test_a_clip_share_that_moves_is_not_structural(tmp_path):
    rep = run_checks(read(_trl_state(tmp_path, clip=0.01, kl=0.002)))
    assert not [f for f in rep.findings if f.check == "structural"]


def test_several_passes_in_the_config_make_a_zero_clip_not_by_design(tmp_path):
    p = tmp_path / "run.jsonl"
    with open(p, "w") as f:
        f.write(json.dumps({"config": {"num_iterations": 4}}) + "\n")
        for s in range(20):
            f.write(json.dumps({"step": s, "reward/mean": 0.3, "train/clip_frac": 0.0}) + "\n")
    rep = run_checks(read(p))
    assert not [f for f in rep.findings if f.check == "structural"]


def test_a_rename_is_said(tmp_path):
    rep = run_checks(read(_prime(tmp_path, rename_at=6)))
    (f,) = [f for f in rep.findings if f.check == "structural"]
    assert f.severity == "info" and f.first_step == 6 and "version change" in f.title
