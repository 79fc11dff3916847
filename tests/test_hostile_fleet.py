"""Hostile input to the fleet commands (check/export/query over folders): the findings of the
2026-12-03 attack report (../shared/research/adversarial-2026-12-03.md) N02-N06, N14, N20,
each as the user met it."""

from __future__ import annotations

import json
import os
import sys

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

from rlvitals.cli import main
from synth import synth_run


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_export_never_deletes_a_training_runs_folder_named_like_a_table(tmp_path, capsys):
    """N04: ``export -o .`` into a folder that holds the writer's ``runs/`` refuses and keeps
    the runs; the earlier export stays whole."""
    synth_run(tmp_path, "other", steps=6)
    proj = tmp_path / "proj"
    proj.mkdir()
    assert main(["export", str(tmp_path / "other"), "-o", str(proj)]) == 0
    before = sorted(p.name for p in (proj / "runs").iterdir())
    synth_run(proj / "runs", "mytraining", steps=6)
    capsys.readouterr()
    assert main(["export", str(proj / "runs"), "-o", str(proj)]) == 2
    err = capsys.readouterr().err
    assert "did not write" in err and "mytraining" in err
    assert (proj / "runs" / "mytraining" / "steps.jsonl").is_file()
    assert sorted(p.name for p in (proj / "runs").iterdir()) == sorted([*before, "mytraining"])
    # a second export of plain runs into an export folder replaces it, leaving no staging
    (proj / "runs" / "mytraining").rename(tmp_path / "mytraining")
    (proj / "runs").joinpath(before[0]).unlink()
    assert main(["export", str(tmp_path / "mytraining"), "-o", str(proj)]) == 0
    assert [p.name for p in proj.iterdir() if p.name.startswith(".")] == []
    assert len(list((proj / "runs").iterdir())) == 1


def test_export_does_not_write_through_a_symlinked_table_folder(tmp_path, capsys):
    synth_run(tmp_path, "r", steps=6)
    out = tmp_path / "out"
    assert main(["export", str(tmp_path / "r"), "-o", str(out)]) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep")
    import shutil

    shutil.rmtree(out / "steps")
    (out / "steps").symlink_to(elsewhere)
    assert main(["export", str(tmp_path / "r"), "-o", str(out)]) == 2
    assert (elsewhere / "keep.txt").read_text() == "keep"
    assert list(elsewhere.iterdir()) == [elsewhere / "keep.txt"]


def test_query_keeps_keys_that_differ_only_in_case_apart(tmp_path, capsys):
    """N05: DuckDB matches names without regard to case; ``"reward/mean"`` must answer with
    reward/mean, never with a run's ``Reward/Mean``."""
    fl = tmp_path / "fl"
    fl.mkdir()
    _jsonl(fl / "a.jsonl", [{"step": i, "reward/mean": 0.1 * (i + 1)} for i in range(2)])
    _jsonl(
        fl / "b.jsonl",
        [{"step": i, "reward/mean": 0.1 * (i + 1), "Reward/Mean": 99} for i in range(2)],
    )
    sql = 'select run, max("reward/mean") as m from steps group by run order by run'
    assert main(["query", str(fl), sql, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [round(r["m"], 6) for r in rows] == [0.2, 0.2]
    assert main(["query", str(fl), 'select max("Reward/Mean#2") as m from steps', "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == [{"m": 99.0}]


def test_query_reads_a_folder_whose_name_holds_glob_characters(tmp_path, capsys):
    """N06: ``t[12]`` is a folder name, not a pattern matching t1/ and t2/."""
    for name, n in (("t1", 1), ("t2", 2), ("t[12]", 1)):
        runs = tmp_path / f"src-{n}-{name}"
        for i in range(n):
            synth_run(runs, f"r{i}", steps=4)
        assert (
            main(["export", *[str(p) for p in sorted(runs.iterdir())], "-o", str(tmp_path / name)])
            == 0
        )
    capsys.readouterr()
    assert main(["query", str(tmp_path / "t[12]"), "select run from runs", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["rows"]) == 1


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses names that are not UTF-8")
def test_names_that_are_not_utf8_are_shown_escaped_in_export_query_and_report(tmp_path, capsys):
    """N02: one file name that is not UTF-8 in a folder: every command answers, the name shown
    with ``\\xff``, never a traceback."""
    srv = tmp_path / "srv"
    synth_run(srv, "a", steps=6)
    bad = os.path.join(os.fsencode(srv), b"c\xff.csv")
    with open(bad, "wb") as f:
        f.write(b"step,reward/mean\n0,0.1\n1,0.2\n")
    assert main(["export", str(srv), "-o", str(tmp_path / "t")]) == 0
    out = capsys.readouterr().out
    assert "wrote 2 runs" in out
    assert main(["query", str(srv), "select run from runs order by run", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert any(r["run"].endswith("c\\xff.csv") for r in rows), rows
    assert main(["check", str(srv)]) == 0
    assert "c\\xff.csv" in capsys.readouterr().out
    report = tmp_path / "r.html"
    assert main(["report", str(srv / "a"), os.fsdecode(bad), "-o", str(report)]) == 0
    assert "c\\xff.csv" in report.read_text()
    capsys.readouterr()


def test_query_json_escapes_c1_and_bidi_characters(tmp_path, capsys):
    """N14: ``query --json`` goes through the sanitiser: no raw U+009B or U+202E."""
    synth_run(tmp_path, "x\u009b2J\u202ey", steps=4)
    assert main(["query", str(tmp_path), "select run, name from runs", "--json"]) == 0
    out = capsys.readouterr().out
    assert "\u009b" not in out and "\u202e" not in out
    assert json.loads(out)["rows"][0]["name"] == "x\u009b2J\u202ey"


def test_query_says_what_sql_can_do_and_keeps_extensions_off(tmp_path, capsys):
    """N20: the help says the SQL can read and write files; extensions load only when asked."""
    with pytest.raises(SystemExit):
        main(["query", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "COPY" in text and "read any file" in text and "--extensions" in text
    from rlvitals.fleet.sql import connect

    con = connect(tmp_path)
    got = dict(
        con.execute(
            "select name, value from duckdb_settings() where name like 'auto%known_extensions'"
        ).fetchall()
    )
    assert got == {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
    con = connect(tmp_path, extensions=True)
    assert con.execute(
        "select value from duckdb_settings() where name = 'autoload_known_extensions'"
    ).fetchone() == ("true",)
