"""MLflow stores made by the real mlflow (SQLite and file store), read back whole and live."""

from __future__ import annotations

import json
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

pytest.importorskip("mlflow")

# SkyRL's and verl's MLflow loggers call mlflow.log_metrics(data, step=step) with their keys.
WRITER = r"""
import sys, mlflow
steps = int(sys.argv[1])
for uri in sys.argv[2:]:
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("grpo")
    for name, n in (("first", 2), ("second", steps)):
        with mlflow.start_run(run_name=name):
            mlflow.log_params({"lr": 1e-6, "n": 8})
            for i in range(n):
                mlflow.log_metrics({
                    "critic/score/mean": 0.01 * i, "actor/entropy": 0.5 - 0.001 * i,
                    "actor/pg_loss": float("nan") if i % 5 == 2 else -0.1,
                    "critic/score/max": float("inf") if i == 3 else 1.0,
                    "critic/score/min": float("-inf") if i == 4 else 0.0}, step=i + 1)
"""


def _expected(i: int) -> dict[str, float]:
    return {
        "critic/score/mean": 0.01 * i,
        "actor/entropy": 0.5 - 0.001 * i,
        "actor/pg_loss": math.nan if i % 5 == 2 else -0.1,
        "critic/score/max": math.inf if i == 3 else 1.0,
        "critic/score/min": -math.inf if i == 4 else 0.0,
    }


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("mlflow")
    script = tmp / "train.py"
    script.write_text(WRITER)
    env = dict(os.environ, MLFLOW_ALLOW_FILE_STORE="true")
    subprocess.run(
        [
            sys.executable,
            str(script),
            "40",
            f"sqlite:///{tmp}/mlflow.db",
            f"file://{tmp}/mlruns",
        ],
        env=env,
        cwd=tmp,
        check=True,
        timeout=180,
        capture_output=True,
    )
    return tmp


def _check_whole(run) -> None:
    assert run.format == "mlflow" and run.warnings == []
    for key in _expected(0):
        s = run.series(key)
        assert s is not None and s.steps.tolist() == list(range(1, 41)), key
        for i, v in enumerate(s.values.tolist()):
            want = _expected(i)[key]
            assert (math.isnan(v) and math.isnan(want)) or v == want, (key, i, v)
    assert run.info["framework"] == "verl"
    assert run.series("reward/mean").values.tolist() == [0.01 * i for i in range(40)]
    assert run.info["status"] == "finished" and run.info["name"] == "second"
    assert run.info["config"] == {"lr": "1e-06", "n": "8"}
    assert len(run.series("time")) == 40


def test_sqlite_store_read_back_whole_nan_and_inf_kept(stores: Path) -> None:
    db = stores / "mlflow.db"
    for form in (db, f"sqlite:///{db}"):
        assert sniff(form) == "mlflow", form
    _check_whole(read(f"sqlite:///{db}", run="second"))


def test_file_store_read_back_whole(stores: Path) -> None:
    root = stores / "mlruns"
    assert sniff(root) == "mlflow"
    run = read(root, run="second")
    _check_whole(run)
    run_dir = next(p for p in root.glob("*/*") if (p / "meta.yaml").is_file())
    assert sniff(run_dir) == "mlflow"


def test_several_runs_none_chosen_is_one_line(
    stores: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ReadError, match="2 MLflow runs in this store; choose one with --run"):
        read(stores / "mlflow.db")
    assert main(["check", str(stores / "mlflow.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "first" in err[0] and "second" in err[0]
    assert main(["check", str(stores / "mlruns"), "--run", "first", "--json"]) in (0, 1)
    with pytest.raises(ReadError, match="holds one run"):
        read(Path(__file__).parent / "data" / "generic", run="x")


def test_points_logged_later_are_read_by_the_next_poll(stores: Path, tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    db.write_bytes((stores / "mlflow.db").read_bytes())
    reader = open_reader(db, run="first")
    assert reader.poll() and not reader.poll()
    run_id = reader.run.info["run_id"]
    with sqlite3.connect(db) as conn:  # rows as MLflow's SQL store writes them
        conn.execute(
            "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
            "VALUES ('critic/score/mean', 0, 1, ?, 3, 1), "
            "('critic/score/mean', 0.9, 2, ?, 4, 0)",
            (run_id, run_id),
        )
        conn.execute("UPDATE runs SET status = 'FAILED' WHERE run_uuid = ?", (run_id,))
    assert reader.poll()
    s = reader.run.series("reward/mean")
    assert s.steps.tolist()[-2:] == [3, 4]
    assert math.isnan(s.values[-2]) and s.values[-1] == 0.9
    assert reader.run.info["status"] == "crashed"
    # the file store: a metric file grows by a line
    root = stores / "mlruns"
    reader = open_reader(root, run="first")
    reader.poll()
    f = reader.run_dir / "metrics" / "critic" / "score" / "mean"
    before = f.read_bytes()
    try:
        with open(f, "ab") as out:
            out.write(b"1796000000000 nan 3\nbroken line\n1796000000001 0.5 9")
        assert reader.poll()
        s = reader.run.series("critic/score/mean")
        assert s.steps.tolist()[-1] == 3 and math.isnan(s.values[-1])
        assert len(reader.run.warnings) == 1 and ":4: expected" in reader.run.warnings[0]
        assert s.at(9) is None  # a last line without its newline may still be written
        reader.finish()  # read() takes the files as complete: that line is read too
        assert reader.run.series("critic/score/mean").at(9) == 0.5
    finally:
        f.write_bytes(before)


def test_check_takes_the_tracking_uri_as_mlflow_users_write_it(
    stores: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Newcomer 2026-12-03: ``rlvitals check sqlite:///mlflow.db`` (docs/formats.md's form,
    relative, and the absolute ``sqlite:////...``) failed with 'sqlite:/mlflow.db: no such
    file or directory'."""
    from rlvitals.cli import main

    monkeypatch.chdir(stores)
    for uri in ("sqlite:///mlflow.db", f"sqlite:///{stores / 'mlflow.db'}"):
        assert main(["check", uri, "--run", "second", "--json"]) == 0, uri
        assert json.loads(capsys.readouterr().out)["runs"][0]["info"]["format"] == "mlflow"
