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


def _cli(*args, cwd, timeout=90):
    import subprocess

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    try:
        return subprocess.run(
            [sys.executable, "-m", "rlvitals", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"rlvitals {' '.join(args)} hung on a FIFO (killed at {timeout} s)")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_never_hangs_check_export_or_query(tmp_path):
    """N03: a FIFO named like a log, in a runs folder and inside a run, is never opened."""
    runs = tmp_path / "runs"
    synth_run(runs, "good", steps=6)
    synth_run(runs, "good2", steps=6)
    os.mkfifo(runs / "x.jsonl")
    os.mkfifo(runs / "good" / "extra.jsonl")
    os.mkfifo(runs / "good2" / "progress.log")
    r = _cli("check", "runs", "--jobs", "2", cwd=tmp_path)
    assert r.returncode == 0 and "runs/good2" in r.stdout, r.stderr
    r = _cli("check", "runs/good", cwd=tmp_path)
    assert r.returncode == 0 and "run runs/good" in r.stdout
    r = _cli("export", "runs", "-o", "t", cwd=tmp_path)
    assert r.returncode == 0 and "wrote 2 runs" in r.stdout, r.stderr
    r = _cli("query", "runs", "select count(*) as n from runs", "--json", cwd=tmp_path)
    assert json.loads(r.stdout)["rows"] == [{"n": 2}]
    r = _cli("check", "runs/x.jsonl", cwd=tmp_path)
    assert r.returncode == 2 and "not a regular file" in r.stderr


def _deny(monkeypatch, denied):
    """Make ``denied`` unreadable: chmod 000 for a normal user; root reads through modes, so
    there the calls that list or open it raise PermissionError as they would."""
    if os.geteuid() != 0:
        os.chmod(denied, 0)
        return
    import builtins

    target = os.fspath(denied)

    def guard(fn):
        def inner(p=".", *a, **k):
            if os.fspath(p).startswith(target):
                raise PermissionError(13, "Permission denied", os.fspath(p))
            return fn(p, *a, **k)

        return inner

    monkeypatch.setattr(os, "scandir", guard(os.scandir))
    monkeypatch.setattr(os, "listdir", guard(os.listdir))
    monkeypatch.setattr(os, "open", guard(os.open))
    monkeypatch.setattr(builtins, "open", guard(builtins.open))


def test_an_unreadable_run_is_an_error_line_not_passed_over(tmp_path, monkeypatch, capsys):
    """N16: an unreadable run dir or log in a folder is one ERROR line and exit 2, never
    counted among the files no reader recognises."""
    runs = tmp_path / "runs"
    synth_run(runs, "a", steps=6)
    synth_run(runs, "b", steps=6)
    log = runs / "tinker.log"
    log.write_text("step:1 - critic/score/mean:0.1\n")
    _deny(monkeypatch, runs / "b")
    assert main(["check", str(runs)]) == 2
    cap = capsys.readouterr()
    assert "cannot read" in cap.out + cap.err and str(runs / "b") in cap.out + cap.err
    assert "no reader recognises" not in cap.out + cap.err


def test_watch_on_an_unreadable_run_dir_is_an_error_not_a_wait(tmp_path, monkeypatch):
    """N16: ``watch`` on a folder it cannot list says so at once instead of waiting for ever."""
    from rlvitals.errors import RlvitalsError
    from rlvitals.follow import Follower

    d = tmp_path / "b"
    d.mkdir()
    _deny(monkeypatch, d)
    with pytest.raises(RlvitalsError, match="cannot read"):
        Follower(d, wait=True)
