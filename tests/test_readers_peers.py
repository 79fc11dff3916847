"""The peers' own recordings (rlprobe's run directory, rlwatch's SQLite store), read from the
files the tools wrote (benchmarks/corpus/peers/), and bad input as one clear error."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from rlvitals import read
from rlvitals.errors import ReadError
from rlvitals.readers import sniff

PEERS = Path(__file__).resolve().parents[1] / "benchmarks" / "corpus" / "peers"

pytestmark = pytest.mark.skipif(not PEERS.is_dir(), reason="benchmarks/corpus/ not here")


def test_an_rlprobe_recording_reads_with_its_components_and_times():
    p = PEERS / "rlprobe" / "format_gaming-s5"
    assert sniff(p) == "rlprobe"
    run = read(p)
    assert len(run.steps()) == 200 and run.info["status"] == "finished"
    fmt = run.series("reward/component/format/mean")
    assert fmt is not None and fmt.values[-1] == pytest.approx(1.0)
    assert run.original["train/ref_kl"] == "kl_mean"
    sig = run.series("groups/signal_fraction")
    zero = run.series("zero_variance_group_frac")
    assert sig.values[0] == pytest.approx(1 - zero.values[0])
    assert run.series("time") is not None and "nan_count" in run.names()


def test_a_live_rlprobe_run_reads_its_part_files_each_row_once(tmp_path):
    import pyarrow.parquet as pq

    src = PEERS / "rlprobe" / "healthy-s5"
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(src / "manifest.json", d)
    table = pq.read_table(src / "steps.parquet")
    (d / "steps").mkdir()
    pq.write_table(table.slice(0, 50), d / "steps" / "part-00000.parquet")
    from rlvitals.readers import open_reader

    r = open_reader(d)
    r.poll()
    assert len(r.run.steps()) == 50 and "status" not in r.run.info
    pq.write_table(table.slice(50, 50), d / "steps" / "part-00001.parquet")
    r.poll()
    assert len(r.run.steps()) == 100
    shutil.rmtree(d / "steps")  # close() compacts the parts into steps.parquet
    pq.write_table(table, d / "steps.parquet")
    r.poll()
    assert len(r.run.steps()) == 200 and r.run.info["status"] == "finished"
    s = r.run.series("reward/mean")
    assert len(s) == 200 and (s.steps[1:] > s.steps[:-1]).all()


def test_an_rlwatch_store_reads_its_columns_and_alerts():
    for p in (PEERS / "rlwatch" / "example-s0", PEERS / "rlwatch" / "example-s0" / "metrics.db"):
        assert sniff(p) == "rlwatch"
    run = read(PEERS / "rlwatch" / "example-s0" / "metrics.db")
    assert len(run.steps()) == 500
    assert run.original["train/ref_kl"] == "kl_divergence"
    assert run.series("train/entropy").values[0] > 2.5
    assert run.info["alerts"] and run.info["run_id"] == "grpo_v3_exp12_s0"


def altered_store(tmp_path, sql: str) -> Path:
    """A copy of rlwatch's healthy store with ``sql`` applied to it."""
    db = tmp_path / "metrics.db"
    shutil.copy(PEERS / "rlwatch" / "healthy-phase-s0" / "metrics.db", db)
    con = sqlite3.connect(db)
    con.execute(sql)
    con.commit()
    con.close()
    return db


def test_an_rlwatch_null_after_values_is_marked_missing(tmp_path):
    run = read(altered_store(tmp_path, "UPDATE metrics SET loss = NULL WHERE step >= 200"))
    assert run.nulls.get("loss") == 200


def test_bad_peer_input_is_one_error_line(tmp_path):
    (tmp_path / "manifest.json").write_text('{"schema_version": 1, "run_id": "x"}')
    (tmp_path / "steps.parquet").write_bytes(b"not parquet")
    run = read(tmp_path)  # a torn table is a warning naming the file, not a traceback
    assert any("steps.parquet" in w for w in run.warnings) and not len(run.steps())
    from rlvitals.readers.rlwatch import RlwatchReader

    with pytest.raises(ReadError, match="not an rlwatch store"):
        RlwatchReader(tmp_path)


def test_a_folder_of_rlprobe_recordings_is_found_run_by_run():
    from rlvitals.fleet import find_runs

    found = find_runs(PEERS / "rlprobe")
    assert len(found.runs) == 10 and all(Path(r).parent.name == "rlprobe" for r in found.runs)
    assert not found.skipped


def test_an_older_rlwatch_store_without_some_columns_reads(tmp_path):
    run = read(altered_store(tmp_path, "ALTER TABLE metrics DROP COLUMN grad_norm"))
    assert len(run.steps()) == 280 and "train/entropy" in run.names()
