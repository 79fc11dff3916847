"""Sample dumps that are live, torn, odd or wrong: read step by step, never a traceback."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import time
from pathlib import Path

from rlvitals.cli import main
from rlvitals.model import RunData
from rlvitals.readers import open_reader, read
from rlvitals.readers.samples import attach, open_samples

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location(
    "make_fixtures", HERE / "data/samples/make_fixtures.py"
)
assert _spec is not None and _spec.loader is not None
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)


def _age(p: Path, seconds: float = 60.0) -> None:
    t = time.time() - seconds
    os.utime(p, (t, t))


def _verl_step(d: Path, logger, step: int, scores: list[float]) -> None:
    n = len(scores)
    inputs = ["<|user|>What is 2+2?<|assistant|>"] * (n // 2)
    inputs += ["<|user|>What is 3+3?<|assistant|>"] * (n - n // 2)
    fx.verl_write_generations(
        inputs, [f"out {i}" for i in range(n)], ["4"] * n, scores, {}, str(d / "rollout"), step
    )
    logger.log({"critic/score/mean": sum(scores) / n}, step)


def test_verl_zero_code_watch_reads_steps_as_they_settle(tmp_path):
    """trainer.logger='["console","file"]' + trainer.rollout_data_dir=DIR, then
    `rlvitals watch $VERL_FILE_LOGGER_PATH --samples DIR`: the same reader, polled."""
    log = tmp_path / "exp.jsonl"
    logger = fx.VerlFileLogger(log)
    _verl_step(tmp_path, logger, 1, [1.0, 0.0, 1.0, 1.0])
    reader = attach(open_reader(log), tmp_path / "rollout")
    reader.poll()
    # step 1 is the newest file and was just written: it may still be growing
    assert reader.run.attempts is None
    _verl_step(tmp_path, logger, 2, [0.0, 0.0, 1.0, 0.0])
    reader.poll()
    assert reader.run.attempts is not None
    assert reader.run.attempts.step.tolist() == [1] * 4  # step 2 waits its turn
    _age(tmp_path / "rollout" / "2.jsonl")
    reader.poll()
    a = reader.run.attempts
    assert a.step.tolist() == [1] * 4 + [2] * 4
    # step 1: groups {1, 0} and {1, 1}; step 2: {0, 0} and {1, 0}
    assert reader.run.series("reward/group_std_mean").values.tolist() == [0.5, 0.5]
    assert reader.run.series("reward/mean").values.tolist() == [0.75, 0.25]  # the log's own
    logger.finish()


def test_watch_command_takes_samples(tmp_path, capsys):
    log = tmp_path / "exp.jsonl"
    log.write_text('{"step":1,"data":{"critic/score/mean":0.5}}\n')
    code = main(["watch", str(log), "--samples", str(tmp_path / "missing")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--samples" in err[0]


def test_check_command_with_samples_json(tmp_path, capsys):
    data = HERE / "data" / "samples" / "verl"
    code = main(
        ["check", str(data / "metrics.jsonl"), "--samples", str(data / "rollout"), "--json"]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out  # one report, judged with the attempts
    code = main(
        ["metrics", str(data / "metrics.jsonl"), "--samples", str(data / "rollout"), "--json"]
    )
    assert code == 0
    assert "reward/group_std_mean" in capsys.readouterr().out


def test_samples_for_several_runs_is_a_usage_error(capsys):
    data = HERE / "data" / "samples" / "verl"
    code = main(
        [
            "check",
            str(data / "metrics.jsonl"),
            str(HERE / "data" / "samples" / "tinker" / "log" / "metrics.jsonl"),
            "--samples",
            str(data / "rollout"),
        ]
    )
    assert code == 2
    assert "one RUN" in capsys.readouterr().err


def test_bad_lines_nan_and_missing_keys(tmp_path):
    d = tmp_path / "rollout"
    d.mkdir()
    good = {"input": "q", "output": "a", "gts": "1", "step": 1}
    lines = [
        json.dumps({**good, "score": 1.0}),
        "this is not json",
        json.dumps({**good, "score": float("nan")}),  # json.dumps writes a bare NaN
        json.dumps({**good}),  # no score: not graded
        json.dumps({**good, "score": 0.0}),
        "x" * 10,  # a torn last line, no newline
    ]
    (d / "1.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1])
    run = RunData(source=str(d), format="none")
    open_samples(d, run).poll(final=True)
    a = run.attempts
    assert len(a) == 4
    assert a.reward_missing.tolist() == [False, False, True, False]
    assert math.isnan(a.reward[1]) and a.reward[0] == 1.0
    text = "\n".join(run.warnings)
    assert f"{d / '1.jsonl'}:2" in text  # the bad line, by number
    assert "cut short" in text


def test_unreadable_parquet_and_pt_are_one_warning_each(tmp_path):
    c = tmp_path / "completions"
    c.mkdir()
    (c / "completions_00001.parquet").write_bytes(b"PAR1 not really")
    run = read_trl_dir(tmp_path)
    assert run.attempts is None
    assert any("not a readable parquet file" in w for w in run.warnings)
    m = tmp_path / "rollout_data"
    m.mkdir()
    (m / "0.pt").write_bytes(b"garbage")
    run = RunData(source=str(m), format="none")
    open_samples(m, run).poll(final=True)
    assert any("not a readable rollout data file" in w for w in run.warnings)


def read_trl_dir(d: Path) -> RunData:
    run = RunData(source=str(d), format="none")
    open_samples(d, run).poll(final=True)
    return run


def test_a_log_without_a_dump_reads_as_before():
    run = read(HERE / "data" / "verl" / "file_logger.jsonl")
    assert run.attempts is None and run.transcripts is None


def test_transcript_checks_read_the_dump(tmp_path):
    from rlvitals.checks import run_checks

    data = HERE / "data" / "samples" / "verl"
    run = read(data / "metrics.jsonl", samples=data / "rollout")
    report = run_checks(run)
    assert "transcripts/flagged_rate" in report.series  # the dump's text was scanned
    assert report.verdict


def test_integrations_doc_has_a_section_per_framework_and_its_commands_parse():
    from rlvitals.cli import build_parser

    doc = (HERE.parent / "docs" / "integrations.md").read_text()
    for name in (
        "TRL",
        "verl",
        "Miles and slime",
        "prime-rl",
        "NeMo-RL",
        "OpenRLHF",
        "SkyRL",
        "tinker-cookbook",
        "W&B",
        "trackio",
    ):
        assert f"\n## {name}\n" in doc, name
    parser = build_parser()
    fenced = False
    for line in doc.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced and line.startswith("rlvitals "):
            argv = line.split("#")[0].split()[1:]
            parser.parse_args(argv)  # every documented command line is one the CLI takes
    assert "rlvitals.integrations.miles.log_rollout" in doc
    from rlvitals.integrations import miles

    assert callable(miles.log_rollout)


def test_a_dump_alone_is_a_run(tmp_path):
    data = HERE / "data" / "samples"
    run = read(data / "nemo-rl" / "logs")  # no TensorBoard beside it
    assert run.format == "samples" and len(run.attempts) == 4
    assert run.series("train/mismatch_kl") is not None
    # a verl rollout_data_dir is sniffed as nothing (any folder of 1.jsonl could be), but
    # reads with --from samples
    run = read(data / "verl" / "rollout", "samples")
    assert len(run.attempts) == 12
    # the dump folder inside a run is not a second run
    from rlvitals.errors import UnknownFormatError
    from rlvitals.readers import sniff

    assert sniff(data / "trl" / "output_dir") == "trl"
    try:
        got = sniff(data / "trl" / "output_dir" / "completions")
    except UnknownFormatError:
        got = None
    assert got != "samples"
