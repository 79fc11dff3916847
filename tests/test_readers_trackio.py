"""trackio project databases made by the real trackio, read back whole, by run, and live."""

from __future__ import annotations

import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rlvitals.cli import main
from rlvitals.errors import ReadError
from rlvitals.readers import open_reader, read, sniff

pytest.importorskip("trackio")

# verl's trackio logger logs verl's keys with step=global_step (verl/utils/tracking.py).
WRITER = r"""
import sys
import trackio
steps, runs = int(sys.argv[1]), sys.argv[2].split(",")
for name in runs:
    trackio.init(project="grpo", name=name, config={"lr": 1e-6, "n": 8})
    for i in range(steps):
        trackio.log({"critic/score/mean": 0.01 * i, "actor/entropy": 0.5 - 0.001 * i,
                     "actor/pg_loss": float("nan") if i % 5 == 2 else -0.1,
                     "critic/score/max": float("inf") if i == 3 else 1.0,
                     "critic/score/min": float("-inf") if i == 4 else 0.0,
                     "note": "text", "nested": {"a": i}}, step=i + 1)
    trackio.finish()
"""


def _make(tmp: Path, steps: int, runs: str) -> Path:
    script = tmp / "train.py"
    script.write_text(WRITER)
    env = dict(os.environ, TRACKIO_DIR=str(tmp / "trackio"), HF_HUB_OFFLINE="1")
    subprocess.run(
        [sys.executable, str(script), str(steps), runs],
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
    )
    return tmp / "trackio" / "grpo.db"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make(tmp_path_factory.mktemp("tio"), 300, "first,second")


def _expected(i: int) -> dict[str, float]:
    return {
        "critic/score/mean": 0.01 * i,
        "actor/entropy": 0.5 - 0.001 * i,
        "actor/pg_loss": math.nan if i % 5 == 2 else -0.1,
        "critic/score/max": math.inf if i == 3 else 1.0,
        "critic/score/min": -math.inf if i == 4 else 0.0,
        "nested/a": float(i),
    }


def test_run_read_back_whole_nan_kept(project: Path) -> None:
    assert sniff(project) == "trackio" and sniff(project.parent) == "trackio"
    run = read(project, run="second")
    assert run.format == "trackio" and run.warnings == []
    for key in _expected(0):
        s = run.series(key)
        assert s is not None and s.steps.tolist() == list(range(1, 301)), key
        for i, v in enumerate(s.values.tolist()):
            want = _expected(i)[key]
            assert (math.isnan(v) and math.isnan(want)) or v == want, (key, i, v)
    assert run.series("note") is None
    assert run.info["framework"] == "verl"
    assert run.series("reward/mean").values.tolist() == [0.01 * i for i in range(300)]
    assert run.original["reward/mean"] == "critic/score/mean"
    assert run.info["name"] == "second" and run.info["project"] == "grpo"
    assert run.info["config"]["lr"] == 1e-6
    # by id as well as by name
    assert read(project, run=run.info["run_id"]).info["name"] == "second"


def test_several_runs_and_none_chosen_is_one_line(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ReadError, match="2 trackio runs in this store; choose one with --run"):
        read(project)
    assert main(["check", str(project)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "first" in err[0] and "second" in err[0] and "--run" in err[0]
    assert main(["metrics", str(project), "--run", "first", "-m", "reward/mean", "--json"]) == 0
    assert '"reward/mean"' in capsys.readouterr().out
    assert main(["check", str(project), "--run", "third"]) == 2
    assert "no run 'third' here" in capsys.readouterr().err


def test_rows_logged_later_are_read_by_the_next_poll(tmp_path: Path) -> None:
    db = _make(tmp_path, 5, "live")
    reader = open_reader(db)
    assert reader.poll()
    assert len(reader.run.series("reward/mean")) == 5
    assert not reader.poll()  # nothing new
    # Another process appends rows the way trackio does (its own storage class).
    code = (
        "import sys; from trackio.sqlite_storage import SQLiteStorage as S; "
        "S.bulk_log(project='grpo', run='live', metrics_list=[{'critic/score/mean': 0.5}, "
        "{'critic/score/mean': 'NaN'}], steps=[6, 7], run_id=sys.argv[1])"
    )
    env = dict(os.environ, TRACKIO_DIR=str(tmp_path / "trackio"), HF_HUB_OFFLINE="1")
    rid = reader.run.info["run_id"]
    subprocess.run([sys.executable, "-c", code, rid], env=env, check=True, timeout=60)
    assert reader.poll()
    s = reader.run.series("reward/mean")
    assert s.steps.tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert s.values[5] == 0.5 and math.isnan(s.values[6])


def test_bad_rows_are_warnings_not_the_run(tmp_path: Path) -> None:
    db = _make(tmp_path, 3, "r")
    with sqlite3.connect(db) as conn:
        run_id = conn.execute("SELECT run_id FROM metrics LIMIT 1").fetchone()[0]
        conn.execute(
            "INSERT INTO metrics (run_id, timestamp, run_name, step, metrics) "
            "VALUES (?, 'x', 'r', 9, '{not json')",
            (run_id,),
        )
    run = read(db)
    assert len(run.series("reward/mean")) == 3
    assert len(run.warnings) == 1 and "not JSON" in run.warnings[0] and str(db) in run.warnings[0]
    other = tmp_path / "plain.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(ReadError, match="not a trackio project"):
        read(other, "trackio")
