"""One source, one judge (issue 29): the commands find the same runs under a folder, offer the
transcripts the checks read, and judging never writes into the run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rlvitals.checks import run_checks
from rlvitals.cli import main
from rlvitals.readers import read

DATA = Path(__file__).parent / "data"


def _fixed(data, now=None):  # type: ignore[no-untyped-def]
    return run_checks(data, now=1_798_761_600.0)


def test_check_and_serve_see_the_same_two_runs_in_a_folder_of_two_verl_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review 1.4.2: ``check DIR`` judged 2 runs, ``serve DIR`` showed one run merged from both
    files (the folder sniffed as one verl run)."""
    from rlvitals.follow.hub import Hub

    log = DATA / "verl" / "issue2060_console.log"
    shutil.copy(log, tmp_path / "train.out")
    shutil.copy(log, tmp_path / "train2.log")
    want = sorted([str(tmp_path / "train.out"), str(tmp_path / "train2.log")])

    assert main(["check", str(tmp_path), "--json"]) == 0
    checked = sorted(r["path"] for r in json.loads(capsys.readouterr().out)["runs"])
    hub = Hub([tmp_path], judge=_fixed)
    served = sorted(str(r.path) for r in hub.runs.values())
    assert checked == want
    assert served == want
    assert main(["report", str(tmp_path), "--json"]) == 0
    reported = [r["source"] for r in json.loads(capsys.readouterr().out)["runs"]]
    assert sorted(reported) == want
    assert main(["watch", str(tmp_path), "--json"]) == 2  # one run at a time: it names both
    err = capsys.readouterr().err
    assert "a folder of 2 runs" in err and "train2.log" in err and "rlvitals serve" in err


@pytest.mark.parametrize(
    "path",
    [
        DATA / "samples" / "prime-rl" / "output",
        DATA / "samples" / "tinker" / "log" / "metrics.jsonl",
    ],
    ids=["prime-rl", "tinker"],
)
def test_the_viewer_offers_the_transcripts_the_checks_read(path: Path) -> None:
    """Review 1.4.3: the checks scanned a framework's sample dump while the report and the
    live page's viewer looked only in ``<run>/transcripts/`` and offered none."""
    from rlvitals.views.dashboard import load_transcripts, transcript_steps
    from rlvitals.views.report import report_payload

    data = read(path)
    report = _fixed(data)
    store = data.transcripts  # the sample dump's transcripts, which the checks scan
    assert store is not None and store.steps()
    offered = [t["step"] for t in transcript_steps(data, report)]
    assert offered and set(offered) <= set(store.steps())
    shown = load_transcripts(data, offered[0])
    assert shown and all("attempt_id" in a for a in shown)
    (run,) = report_payload([(data, report)])["runs"]
    assert run["transcript_steps"] and run["transcripts"]  # the report embeds them


def _torn_run(tmp_path: Path) -> Path:
    run = tmp_path / "grpo-async"
    shutil.copytree(DATA / "runs" / "grpo-async", run)
    (run / "transcripts").mkdir()
    whole = json.dumps(
        [{"attempt_id": "a-1", "reward": 1.0, "generations": [{"completion": "x" * 200}]}]
    )
    (run / "transcripts" / "step-000001.json").write_text(whole[:83])  # cut inside a string
    return run


def test_judging_never_writes_into_the_run(tmp_path: Path) -> None:
    """Review 1.4.1: each run_checks on a run with a torn transcript file appended its warning
    to ``data.warnings`` again (1, 2, 3 copies); docs/checks.md says the run is never written
    to. The warning is the report's, once, the same every time."""
    data = read(_torn_run(tmp_path))
    before = list(data.warnings)
    reports = [run_checks(data, now=1_798_761_600.0) for _ in range(3)]
    assert data.warnings == before
    dicts = [r.to_dict() for r in reports]
    assert dicts[0] == dicts[1] == dicts[2]
    assert reports[0].warnings == reports[1].warnings == reports[2].warnings
    torn = [w for w in reports[0].warnings if "step-000001.json" in w]
    assert len(torn) == 1


def test_serve_re_judging_an_idle_run_does_not_grow_its_warnings(tmp_path: Path) -> None:
    """Review 1.4.1: the Hub re-judges an idle run every 5 s; each pass added the torn file's
    warning once more, and the pages were sent the longer list."""
    from rlvitals.follow.hub import Hub

    hub = Hub([_torn_run(tmp_path)])
    (run,) = hub.runs.values()
    shown = []
    for _ in range(3):
        run.judge()  # hub.runs holds the Followers themselves
        page = hub.snapshot(run.id)
        assert page is not None
        shown.append((page["n_warnings"], page["warnings"]))
    assert shown[0] == shown[1] == shown[2]
    assert sum("step-000001.json" in w for w in shown[0][1]) == 1


def test_check_and_report_show_the_torn_file_warning_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _torn_run(tmp_path)
    main(["check", str(run)])
    assert capsys.readouterr().err.count("step-000001.json") == 1
    main(["report", str(run), "-o", str(tmp_path / "r.html")])
    assert capsys.readouterr().err.count("step-000001.json") == 1


def test_transcripts_command_honours_the_rules_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review 1.4: the checks honoured $RLVITALS_TRANSCRIPT_RULES, ``rlvitals transcripts``
    did not: a bad rules file named there is an error for both."""
    run = tmp_path / "grpo-async"
    shutil.copytree(DATA / "runs" / "grpo-async", run)
    bad = tmp_path / "bad.toml"
    bad.write_text("[flags\n")
    monkeypatch.setenv("RLVITALS_TRANSCRIPT_RULES", str(bad))
    assert main(["transcripts", str(run)]) == 2
    assert "bad.toml" in capsys.readouterr().err


def test_report_takes_the_judging_options_of_check(tmp_path: Path) -> None:
    """``report`` gains --set, --rules, --stall-after and --only: the same report as check's."""
    from rlvitals.cli import build_parser
    from rlvitals.cli._options import judge_of

    run = str(DATA / "runs" / "grpo-async")
    args = build_parser().parse_args(
        ["report", run, "--set", "rejected_warn=0.1", "--only", "groups", "--stall-after", "5"]
    )
    judge = judge_of(args)
    assert judge.thresholds is not None and judge.thresholds.rejected_warn == 0.1
    assert judge.only == ["groups"] and judge.stall_after == 5.0
    report = judge(read(run))
    assert {f.check for f in report.findings} <= {"groups"}
    with pytest.raises(SystemExit):
        main(["report", run, "--only", "nope", "-o", str(tmp_path / "r.html")])


def test_the_package_face_reads_and_judges() -> None:
    import rlvitals

    report = rlvitals.check(DATA / "runs" / "grpo-async", only=["liveness"])
    assert isinstance(report, rlvitals.Report)
    assert all(isinstance(f, rlvitals.Finding) for f in report.findings)
    src = rlvitals.Source(str(DATA / "runs" / "grpo-async"))
    again = rlvitals.Judge(only=["liveness"])(src.read())
    assert again.verdict == report.verdict


def test_judging_a_sample_dump_never_writes_into_the_run(tmp_path: Path) -> None:
    """The checks read a framework's sample dump (prime-rl rollouts/) lazily: a step file gone
    since the read is the report's warning, once a report, never the run's."""
    run = tmp_path / "output"
    shutil.copytree(DATA / "samples" / "prime-rl" / "output", run)
    data = read(run)
    before = list(data.warnings)
    for p in (run / "rollouts").rglob("traces.jsonl"):
        p.unlink()
    reports = [_fixed(data) for _ in range(3)]
    assert data.warnings == before
    assert reports[0].to_dict() == reports[1].to_dict() == reports[2].to_dict()
    said = [w for w in reports[0].warnings if "traces.jsonl" in w]
    assert len(said) == 1 and reports[1].warnings == reports[0].warnings


def test_a_nemo_rl_log_folder_of_step_dumps_is_one_samples_run(tmp_path: Path) -> None:
    """NeMo-RL writes ``train_data_step{N}.jsonl`` per step in its log dir: the folder is one
    run read as samples (each file was a run of its own, read as a console log, before), and
    with a TensorBoard log below it that log is the run, its samples beside it."""
    from rlvitals.source import find_runs

    logs = tmp_path / "nemo" / "logs"
    logs.mkdir(parents=True)
    dump = DATA / "samples" / "nemo-rl" / "logs" / "train_data_step1.jsonl"
    for step in (1, 2):
        shutil.copy(dump, logs / f"train_data_step{step}.jsonl")
    assert find_runs(tmp_path).runs == [str(logs)]
    data = read(str(logs))
    assert data.format == "samples"
    assert data.attempts is not None and len(data.attempts) == 8

    tb = logs / "tensorboard"
    shutil.copytree(DATA / "tensorboard" / "nemo_rl_run", tb)
    assert find_runs(tmp_path).runs == [str(tb)]
