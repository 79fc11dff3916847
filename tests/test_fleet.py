"""Fleets of runs: finding every run under a folder, judging them in parallel, Parquet tables
(pyarrow) and SQL over them (DuckDB), as a user runs them."""

from __future__ import annotations

import json
import math

import pytest

from rlvitals.cli import main
from rlvitals.errors import UnknownFormatError
from rlvitals.fleet import find_runs
from synth import synth_run


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A runs folder as users have them: runs, a nested team folder, and stray files."""
    root = tmp_path_factory.mktemp("fleet") / "runs"
    root.mkdir()
    synth_run(root, "healthy", lr=0.04, seed=1, steps=24)
    synth_run(root, "nan", nan_loss_from=12, lr=0.04, steps=24)
    team = root / "team-b"
    team.mkdir()
    synth_run(team, "too_easy", start_pass=(0.97, 1.0), steps=12)
    (root / "summary.csv").write_text("a,b\n1,2\n")  # no step column: not a run
    (root / "launcher.log").write_text("starting 8 workers\n")  # no record
    log = root / "verl-train.log"
    log.write_text(
        "".join(
            f"step:{i} - critic/score/mean:{0.2 + 0.01 * i:.3f} - actor/pg_loss:0.1\n"
            for i in range(1, 9)
        )
    )
    return root


def test_find_runs_lists_run_dirs_and_logs_not_stray_files(fleet):
    found = find_runs(fleet)
    assert sorted(found.runs) == sorted(
        str(p)
        for p in (
            fleet / "healthy",
            fleet / "nan",
            fleet / "team-b" / "too_easy",
            fleet / "verl-train.log",
        )
    )
    assert sorted(found.skipped) == [str(fleet / "launcher.log"), str(fleet / "summary.csv")]


def test_find_runs_takes_a_run_dir_as_one_run_and_skips_sample_dumps(fleet, tmp_path):
    assert find_runs(fleet / "healthy").runs == [str(fleet / "healthy")]
    dumps = tmp_path / "rollout_data"
    dumps.mkdir()
    for step in (1, 2):
        (dumps / f"{step}.jsonl").write_text(json.dumps({"step": step, "score": 1.0}) + "\n")
    (tmp_path / "train.log").write_text((fleet / "verl-train.log").read_text())
    assert find_runs(tmp_path).runs == [str(tmp_path / "train.log")]


def test_find_runs_names_the_folder_when_it_holds_no_run(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(UnknownFormatError, match="no run found"):
        find_runs(tmp_path)
    with pytest.raises(UnknownFormatError, match="no such file"):
        find_runs(tmp_path / "nope")


def test_check_folder_prints_a_line_per_run_and_a_summary_by_severity(fleet, capsys):
    code = main(["check", str(fleet), "--fail-on", "fail"])
    out, err = capsys.readouterr()
    assert code == 1  # the NaN run fails
    lines = out.splitlines()
    assert sum(1 for ln in lines if ln.startswith(("ok ", "info ", "WARN ", "FAIL "))) >= 4
    summary = out[out.index("summary:") :]
    assert "summary: 4 runs" in summary
    # the worst first: the failing run's row before any other
    rows = summary.splitlines()[1:]
    assert rows[0].startswith("FAIL") and "non-finite values" in rows[0]
    assert "passed over 2 files" in err


def test_unreadable_run_is_one_line_and_the_others_are_judged(fleet, capsys):
    code = main(["check", str(fleet / "healthy"), str(fleet / "missing-run"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 2
    assert [("error" in r) for r in out["runs"]] == [True, False]
    bad = out["runs"][0]
    assert bad["path"] == str(fleet / "missing-run") and "no such file" in bad["error"]
    assert out["runs"][1]["verdict"]


def test_json_has_one_shape_for_one_run_or_many(fleet, capsys):
    main(["check", str(fleet / "nan"), "--json"])
    one = json.loads(capsys.readouterr().out)
    main(["check", str(fleet), "--json"])
    many = json.loads(capsys.readouterr().out)
    assert list(one) == list(many) == ["runs"]
    assert len(one["runs"]) == 1 and len(many["runs"]) == 4
    assert {"path", "verdict", "findings"} <= set(one["runs"][0])


def test_jobs_2_judges_exactly_as_jobs_1(fleet, capsys, monkeypatch):
    from rlvitals.fleet import judging

    main(["check", str(fleet), "--json", "--jobs", "1"])
    serial = json.loads(capsys.readouterr().out)
    monkeypatch.setattr(judging, "SERIAL_SECONDS", 0.0)  # workers even for this small fleet
    pools = []
    real = judging.ProcessPoolExecutor
    monkeypatch.setattr(judging, "ProcessPoolExecutor", lambda **kw: pools.append(1) or real(**kw))
    main(["check", str(fleet), "--json", "--jobs", "2"])
    parallel = json.loads(capsys.readouterr().out)
    assert pools and serial == parallel


def test_jobs_2_stays_in_one_process_when_the_fleet_is_small(fleet, capsys, monkeypatch):
    # Starting workers costs more than it saves on a few seconds' work: --jobs 2 over small
    # runs judges them here, never slower than --jobs 1.
    from rlvitals.fleet import judging

    def no_pool(**kw):
        raise AssertionError("a pool for a small fleet")

    monkeypatch.setattr(judging, "ProcessPoolExecutor", no_pool)
    assert main(["check", str(fleet), "--json", "--jobs", "2"]) in (0, 1)
    assert len(json.loads(capsys.readouterr().out)["runs"]) == 4


def _square(x: int) -> int:
    return x * x


def test_work_is_planned_by_size_and_comes_back_in_order(monkeypatch):
    # Big items go to the workers first, small ones in batches; the results keep the order.
    from rlvitals.fleet import judging

    sizes = [10**6 * (i % 7) for i in range(40)]
    assert sum(judging.estimate(sizes)) > judging.SERIAL_SECONDS
    got = list(judging.ordered_map(_square, list(range(40)), jobs=2, sizes=sizes))
    assert got == [i * i for i in range(40)]
    assert list(judging.ordered_map(_square, [3, 4], jobs=2, sizes=[1, 1])) == [9, 16]


@pytest.fixture(scope="module")
def exported(fleet, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "tables"
    assert main(["export", str(fleet), "-o", str(out), "--jobs", "2"]) == 0
    return out


def test_export_writes_parquet_tables_with_every_row_carrying_its_run(fleet, exported):
    import pyarrow.parquet as pq

    import rlvitals
    from rlvitals.checks import run_checks

    steps = pq.read_table(exported / "steps").to_pylist()  # one dataset, schemas merged
    healthy = str(fleet / "healthy")
    data = rlvitals.read(healthy)
    mine = [r for r in steps if r["run"] == healthy]
    assert [r["step"] for r in mine] == [int(s) for s in data.steps()]
    s = data.series("reward/mean")
    assert [r["reward/mean"] for r in mine] == pytest.approx(list(s.values))
    attempts = pq.read_table(exported / "attempts", columns=["run", "reward", "group_id"])
    rows = [r for r in attempts.to_pylist() if r["run"] == healthy]
    assert len(rows) == len(data.attempts)
    findings = [r for r in pq.read_table(exported / "findings").to_pylist() if r["run"] == healthy]
    report = run_checks(data)
    assert [f["title"] for f in findings] == [f.title for f in report.findings]
    runs = {r["run"]: r for r in pq.read_table(exported / "runs").to_pylist()}
    assert runs[str(fleet / "nan")]["verdict"] == "non_finite"
    assert set(runs) == set(find_runs(fleet).runs)


def test_export_keeps_nan_apart_from_not_measured(fleet, exported):
    import pyarrow.parquet as pq

    rows = [
        r for r in pq.read_table(exported / "steps").to_pylist() if r["run"] == str(fleet / "nan")
    ]
    loss = [r["train/loss"] for r in rows]
    assert all(math.isnan(v) for v in loss[12:]) and all(math.isfinite(v) for v in loss[:12])
    # a metric the verl log never measured is null in its rows, not NaN
    verl = [r for r in pq.read_table(exported / "steps").to_pylist() if r["run"].endswith(".log")]
    assert len(verl) == 8 and all(r["reward/group_std_mean"] is None for r in verl)
    assert all(r["reward/group_std_mean"] is not None for r in rows)


def test_export_refuses_a_folder_of_other_files(fleet, tmp_path, capsys):
    (tmp_path / "mine.txt").write_text("keep me\n")
    assert main(["export", str(fleet / "nan"), "-o", str(tmp_path)]) == 2
    assert "holds other files" in capsys.readouterr().err
    assert (tmp_path / "mine.txt").read_text() == "keep me\n"


def test_query_runs_sql_over_the_tables(fleet, exported, capsys):
    sql = (
        'select run, count(*) as n, max("reward/mean") as best from steps group by run order by run'
    )
    assert main(["query", str(exported), sql, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["columns"] == ["run", "n", "best"]
    by_run = {r["run"]: r for r in got["rows"]}
    assert by_run[str(fleet / "healthy")]["n"] == 24
    # the same query straight from the runs (exported to a temporary folder first)
    assert main(["query", str(fleet), sql, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == got
    assert main(["query", str(exported), "select verdict, count(*) as n from runs group by 1"]) == 0
    assert "non_finite" in capsys.readouterr().out


def test_query_joins_findings_and_attempts(exported, capsys):
    sql = (
        "select f.run, f.first_step, avg(a.reward) as reward from findings f "
        "join attempts a on a.run = f.run and a.step = f.first_step "
        "where f.verdict = 'non_finite' group by 1, 2"
    )
    assert main(["query", str(exported), sql, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 1 and rows[0]["first_step"] == 12


def test_query_error_is_one_line(exported, capsys):
    assert main(["query", str(exported), "select * from nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err and "Traceback" not in err
    assert main(["query", str(exported)]) == 2
    assert "SQL" in capsys.readouterr().err


def test_a_big_runs_transcripts_are_counted_in_a_second_process(tmp_path, monkeypatch):
    # Judging one run alone, its transcripts are counted by a forked worker while the run's
    # other files are read here; the report is the same as when this process counts them.
    import os

    from rlvitals.fleet import judge, judging
    from rlvitals.transcripts import scan as scan_mod
    from transcripts_synth import transcript_run

    run = str(transcript_run(tmp_path, "big", steps=12, hack="test_edit", hack_from=6))
    scan_mod._CACHE.clear()
    alone = judge([run], jobs=1)[0].to_dict()
    assert any(f["check"] == "transcripts" for f in alone["findings"])
    scan_mod._CACHE.clear()
    monkeypatch.setattr(judging, "PRESCAN_BYTES", 0)  # this run counts as big
    parent, real = os.getpid(), scan_mod.count_step

    def in_the_worker(*args, **kw):
        assert os.getpid() != parent, "a step file counted here, not by the worker"
        return real(*args, **kw)

    monkeypatch.setattr(scan_mod, "count_step", in_the_worker)
    assert judge([run], jobs=1)[0].to_dict() == alone
