"""Hostile input to one run (report, transcripts, watch, readers): the findings of the
2026-12-03 attack report (../shared/research/adversarial-2026-12-03.md), each as the user met
it."""

from __future__ import annotations

import json
import os

import pytest

from rlvitals.cli import main
from test_hostile_fleet import _deny
from transcripts_synth import transcript_run


def test_unreadable_transcripts_folder_is_a_warning_not_a_traceback(tmp_path, monkeypatch, capsys):
    """N15: ``report`` on a run whose transcripts/ cannot be listed writes the page with a
    warning; ``transcripts`` says the folder cannot be read, not "set trace = full"."""
    run = transcript_run(tmp_path, "r", steps=6)
    _deny(monkeypatch, run / "transcripts")
    out = tmp_path / "r.html"
    assert main(["report", str(run), "-o", str(out)]) == 0
    assert out.is_file()
    capsys.readouterr()
    main(["transcripts", str(run)])
    text = " ".join(capsys.readouterr().out.split())
    assert "cannot read the folder (Permission denied)" in text
    assert "Set [output]" not in text


DEEP = "[" * 100000 + "]" * 100000


def test_a_deep_transcript_file_is_read_and_judged(tmp_path, capsys):
    """F03: ``[``x100000 in one step's transcript file: check, report and transcripts answer,
    and ``watch`` gives a verdict (old: RecursionError, 'not judged', exit 0)."""
    run = transcript_run(tmp_path, "deept", steps=6)
    (run / "transcripts" / "step-000002.json").write_text(DEEP)
    assert main(["check", str(run), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["runs"][0]
    assert out.get("verdict") and "error" not in out
    assert main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 0
    assert main(["transcripts", str(run), "--step", "2"]) in (0, 2)
    capsys.readouterr()
    assert main(["watch", str(run), "--json"]) in (0, 1)
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert last["event"] == "finished" and last["verdict"] is not None


def test_watch_that_could_not_judge_exits_2_with_the_reason(tmp_path, monkeypatch, capsys):
    """F03: a run the checks fail on is never a passing gate (old: exit 0 'not judged')."""
    from rlvitals.follow import Follower

    run = transcript_run(tmp_path, "r", steps=4)

    def broken(self, now):
        raise RuntimeError("a check broke")

    monkeypatch.setattr(Follower, "_run_checks", broken)
    assert main(["watch", str(run)]) == 2
    assert "a check broke" in capsys.readouterr().out


def test_deep_json_on_a_console_line_is_read_not_a_traceback(tmp_path, capsys):
    """N12: one console line holding deeply nested JSON (model output) costs nothing."""
    d = '{"a":' * 100000 + "1" + "}" * 100000
    log = tmp_path / "c.log"
    log.write_text(
        "".join(f"Step {i}/10: loss=0.{i} reward=0.{i}\n" for i in range(10))
        + "sample output: "
        + d
        + "\n"
    )
    assert main(["metrics", str(log), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["steps"]) == 10
    assert main(["formats", "--explain", str(log)]) == 0


def test_deep_values_in_wandb_and_trackio_are_read_not_a_traceback(tmp_path, capsys):
    """N12: a W&B value or table file and a trackio metrics blob nested 100000 deep."""
    import shutil
    import sqlite3
    from pathlib import Path

    from rlvitals.readers.samples.wandb import table_columns
    from rlvitals.readers.wandb import _value

    v = _value('{"x":' * 100000 + "1" + "}" * 100000)
    assert isinstance(v, dict)
    table = tmp_path / "t.table.json"
    table.write_text('{"columns": ["prompt", "completion"], "data": [[' + DEEP + ', "a"]]}')
    table.write_text(table.read_text().replace('{"columns"', ' {"columns"', 1))
    assert table_columns(table) == ["prompt", "completion"]
    db = tmp_path / "grpo.db"
    shutil.copy(Path(__file__).parent / "data" / "trackio" / "grpo.db", db)
    con = sqlite3.connect(db)
    run_id, name = con.execute("select run_id, run_name from metrics limit 1").fetchone()
    step = con.execute("select max(step) from metrics").fetchone()[0] + 1
    con.execute(
        "insert into metrics (run_id, timestamp, run_name, step, metrics) values (?,?,?,?,?)",
        (run_id, "2026-12-03T00:00:00", name, step, '{"train/loss": 0.5, "x": ' + DEEP + "}"),
    )
    con.commit()
    con.close()
    assert main(["metrics", str(db), "--run", name, "--json"]) == 0
    assert step in json.loads(capsys.readouterr().out)["steps"]


def _trackio_copy(tmp_path, name="g.db"):
    import shutil
    from pathlib import Path

    db = tmp_path / name
    shutil.copy(Path(__file__).parent / "data" / "trackio" / "grpo.db", db)
    return db


def test_a_torn_or_locked_sqlite_store_is_reported_never_read_as_a_console_log(tmp_path, capsys):
    """N07: trackio's database cut to half its size, or held by ``BEGIN EXCLUSIVE``: one error
    saying so, exit 2 (old: a console run of made-up numbers, FAIL NaN loss, exit 0; 30 s)."""
    import sqlite3
    import time

    db = _trackio_copy(tmp_path)
    os.truncate(db, db.stat().st_size // 2)
    assert main(["check", str(db)]) == 2
    cap = capsys.readouterr()
    assert "SQLite database that cannot be read" in cap.err and "console" not in cap.out
    locked = _trackio_copy(tmp_path, "locked.db")
    holder = sqlite3.connect(locked, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        assert main(["check", str(locked)]) == 2
        took = time.monotonic() - t0
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    err = capsys.readouterr().err
    assert "locked" in err and took < 10, (err, took)


def test_reading_a_wal_store_leaves_no_files_beside_it(tmp_path, capsys):
    """N07: a reader never writes in the user's folder: no -wal or -shm after check."""
    import sqlite3

    db = _trackio_copy(tmp_path)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    con.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    main(["check", str(db), "--json"])
    out = json.loads(capsys.readouterr().out)["runs"][0]
    assert out["info"]["format"] == "trackio" and out["verdict"], out
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def _skewed_run(tmp_path, behind):
    """A live run whose writer's clock is ``behind`` seconds behind this machine's: a step
    every 0.5 s, the last one just written."""
    import time as _time

    from rlvitals.jsonio import encode_line, write_json_atomic

    d = tmp_path / f"skew{behind}"
    d.mkdir()
    now = _time.time() - behind
    write_json_atomic(
        d / "run.json",
        {"format": "rlvitals-run/1", "name": "s", "status": "running", "config": {}},
    )
    with open(d / "steps.jsonl", "wb") as f:
        for i in range(20):
            f.write(encode_line({"step": i, "time": now - (19 - i) * 0.5, "reward/mean": 0.5}))
    return d


def test_a_writer_clock_an_hour_behind_is_not_a_stall(tmp_path):
    """N13: steps arrive every 0.5 s from a writer whose clock is 1 h behind the reader's
    (old: FAIL 'stalled: no step record for 3600 s', with a webhook alert)."""
    import time as _time

    from rlvitals.checks import run_checks
    from rlvitals.readers import read

    d = _skewed_run(tmp_path, 3600)
    rep = run_checks(read(d))
    live = [f for f in rep.findings if f.check == "liveness"]
    assert not [f for f in live if f.verdict == "stalled"], live
    assert any("clock is about 3600 s behind" in f.title for f in live)
    # the same records with the file last written an hour ago: a stall after all
    old = _time.time() - 3600
    os.utime(d / "steps.jsonl", (old, old))
    rep = run_checks(read(d))
    assert rep.verdict == "stalled"


def test_a_parquet_bomb_is_read_within_a_bound(tmp_path, monkeypatch):
    """N10: an rlprobe steps.parquet of millions of rows (the attack's: 30 M rows of one
    constant in 1.7 MB) is read up to the bound with one warning, not expanded whole (old:
    3.7 GB, MemoryError)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    import numpy as np

    from rlvitals.readers import _parquet, read

    monkeypatch.setattr(_parquet, "MAX_CELLS", 2_000_000)  # the same rule, a tenth the size
    (tmp_path / "manifest.json").write_text('{"schema_version": 1, "run_id": "x"}')
    n = 1_000_000
    chunk = pa.table({"step": np.arange(n, dtype=np.int64), "loss": np.full(n, 0.5)})
    with pq.ParquetWriter(tmp_path / "steps.parquet", chunk.schema) as w:
        for _ in range(6):
            w.write_table(chunk, row_group_size=n)
    run = read(tmp_path)
    assert len(run.steps()) == n
    assert any("more than a reader expands" in w for w in run.warnings)


def test_a_gzip_bomb_event_file_is_decompressed_within_a_bound_and_once(tmp_path):
    """N11: a gzip'd TensorBoard event file that expands 1000-fold is decompressed up to 100
    times its size, with one warning, and not again while it is unchanged (old: whole, on
    every pass of serve)."""
    import gzip
    import time

    from rlvitals.readers import open_reader
    from rlvitals.readers import tensorboard as tb

    d = tmp_path / "tb"
    d.mkdir()
    zeros = bytes(1 << 20)
    with gzip.open(d / "events.out.tfevents.1.host.gz", "wb") as f:
        for _ in range(256):  # 256 MiB of zeros, about 250 KB on disk
            f.write(zeros)
    r = open_reader(d, "tensorboard")
    t0 = time.monotonic()
    r.poll()
    first = time.monotonic() - t0
    assert any("decompression bomb" in w for w in r.run.warnings)
    assert tb.GZIP_MIN_BYTES < 256 << 20
    t0 = time.monotonic()
    r.poll()
    assert time.monotonic() - t0 < max(0.05, first / 5)


def test_formats_explain_never_prints_a_run_paths_terminal_controls(tmp_path, capsys):
    """N14: a run dir named with an OSC title sequence and a C1 CSI: shown escaped, text and
    JSON (old: the pane title was set, the screen cleared)."""
    from synth import synth_run

    name = "\x1b]0;PWNED-BY-DIRNAME\x07\u009b2J\u202erun"
    d = synth_run(tmp_path, name, steps=4)
    for extra in ([], ["--json"]):
        assert main(["formats", "--explain", str(d), *extra]) == 0
        out = capsys.readouterr().out
        for raw in ("\x1b", "\x07", "\u009b", "\u202e"):
            assert raw not in out, (extra, repr(raw))
    assert "PWNED-BY-DIRNAME" in out


_DATA = __import__("pathlib").Path(__file__).parent / "data"
_CONSOLE_LOGS = sorted(str(p.relative_to(_DATA)) for p in _DATA.glob("*/*.log"))


@pytest.mark.parametrize("rel", _CONSOLE_LOGS)
def test_cr_only_line_endings_read_every_record(tmp_path, rel):
    """N18: ``tr '\\n' '\\r'`` of a console log reads the same steps and values (old: 0 or 1
    of 12 steps, TOO EARLY TO TELL, no warning)."""
    from rlvitals.readers import read, sniff

    src = _DATA / rel
    raw = src.read_bytes().replace(b"\r\n", b"\n")
    lf = tmp_path / ("lf-" + src.name)
    lf.write_bytes(raw)
    cr = tmp_path / ("cr-" + src.name)
    cr.write_bytes(raw.replace(b"\n", b"\r"))
    fmt = sniff(lf)
    assert sniff(cr) == fmt
    a, b = read(lf, fmt), read(cr, fmt)
    assert b.steps().tolist() == a.steps().tolist() and len(a.steps())
    for name in a.names():
        sa, sb = a.series(name), b.series(name)
        assert sb is not None and sb.values.tolist() == pytest.approx(
            sa.values.tolist(), nan_ok=True
        ), name


def test_a_zeroed_stretch_inside_a_wandb_log_is_warned(tmp_path, capsys):
    """N17: zero bytes over records in the middle of a .wandb log (a crash on some file
    systems): the records lost are warned, never dropped silently."""
    pytest.importorskip("wandb")
    import shutil

    from rlvitals.readers import read

    src = _DATA / "wandb" / "offline-run"
    d = tmp_path / "offline-run"
    shutil.copytree(src, d)
    log = next(d.glob("*.wandb"))
    whole = read(d)
    data = bytearray(log.read_bytes())
    import struct

    pos = 7  # the file header, then records: crc (4), length (2), kind (1), body
    while pos < 4000:
        pos += 7 + struct.unpack_from("<H", data, pos + 4)[0]
    data[pos:8000] = bytes(8000 - pos)  # zeros from a record's start, as a crash leaves
    log.write_bytes(bytes(data))
    run = read(d)
    assert len(run.steps()) < len(whole.steps())
    assert any("zero bytes where a record belongs" in w for w in run.warnings), run.warnings


def test_an_empty_steps_file_beside_rewarded_attempts_is_judged_from_them(tmp_path, capsys):
    """F21: steps.jsonl empty while rollouts.jsonl holds every attempt: one warning, and the
    reward per update computed from the attempts (old: 'no reward metric', TOO EARLY TO
    TELL, exit 0, silently)."""
    from synth import synth_run

    d = synth_run(tmp_path, "lost", lr=0.08, seed=1, steps=60, evals_every=20)
    assert (d / "evals.jsonl").read_text().strip()  # as in the report: 3 evals beside
    full = json.loads(_check(capsys, d))
    (d / "steps.jsonl").write_text("")
    got = json.loads(_check(capsys, d))
    assert got["verdict"] == full["verdict"] != "too_early", (got["verdict"], full["verdict"])
    assert any(
        "reward per update is computed" in w for w in json.loads(_metrics(capsys, d))["warnings"]
    )


def test_a_damaged_step_record_keeps_its_updates_reward_from_its_attempts(tmp_path):
    """An update whose step record is a damaged line (here the first, a NUL where its '{'
    was) while its attempts are intact: its reward is computed from them, warned once, the
    same value the record held (old: reward/mean_with_unusable lost at step 0). The updates
    past the last step record are left to their own records (still being written)."""
    from rlvitals.readers import read
    from synth import synth_run

    d = synth_run(tmp_path, "nul", steps=6, groups=3, group_size=4)
    whole = read(d)
    lines = (d / "steps.jsonl").read_bytes().splitlines(keepends=True)
    (d / "steps.jsonl").write_bytes(b"\x00" + lines[0][1:] + b"".join(lines[1:-1]))
    run = read(d)
    for name in ("reward/mean_with_unusable", "reward/mean"):
        got, want = run.series(name), whole.series(name)
        assert got.steps.tolist() == want.steps.tolist()[:-1]  # the last record cut: not made up
        assert got.values.tolist() == pytest.approx(want.values.tolist()[:-1])
    (lost,) = [w for w in run.warnings if "no step record for" in w]
    assert "1 update(s)" in lost and "(step 0)" in lost


def _check(capsys, d):
    main(["check", str(d), "--json"])
    return json.dumps(json.loads(capsys.readouterr().out)["runs"][0])


def _metrics(capsys, d):
    from rlvitals.readers import read

    return json.dumps({"warnings": read(d).warnings})


def test_a_status_that_is_not_a_word_is_unknown_not_a_stall(tmp_path, capsys):
    """F21: run.json's ``status: {"x": 1}`` is warned and read as unknown (old: printed as
    {'x': 1} and judged FAIL stalled)."""
    from synth import synth_run

    d = synth_run(tmp_path, "odd", steps=12)
    info = json.loads((d / "run.json").read_text())
    info["status"] = {"x": 1}
    (d / "run.json").write_text(json.dumps(info))
    main(["check", str(d)])
    cap = capsys.readouterr()
    assert "{'x': 1}" not in cap.out and "FAIL liveness" not in cap.out
    assert "read as unknown" in cap.err


def test_report_tells_runs_of_one_file_name_apart_and_says_steps_without_times(tmp_path):
    """N19: two metrics.jsonl runs are titled by the folders that tell them apart; a run with
    steps but no times is not "no step records"; long unbroken text wraps in its card."""
    from rlvitals.checks import run_checks
    from rlvitals.readers import read
    from rlvitals.views.report import report_payload

    runs = [read(_DATA / "generic" / "metrics.jsonl"), read(_DATA / "tinker" / "metrics.jsonl")]
    payload = report_payload([(d, run_checks(d)) for d in runs])
    names = [r["name"] for r in payload["runs"]]
    assert names == ["metrics.jsonl (generic)", "metrics.jsonl (tinker)"]
    assert all(r["last_step"] is not None and r["last_time"] is None for r in payload["runs"])
    from rlvitals.views import dashboard

    js = __import__("pathlib").Path(dashboard.__file__).parent / "assets" / "dashboard.js"
    assert "this run records no times" in js.read_text()
    css = "".join(p.read_text() for p in js.parent.glob("*.css"))
    assert css.count("overflow-wrap: anywhere") >= 2


def test_report_next_steps_name_the_real_run_and_flagged_cards_name_their_flags(tmp_path):
    """First hour (newcomer 2026-12-03): the report's next steps said `rlvitals transcripts
    RUN ...` literally, and a flagged attempt's card said only "flagged"."""
    import re

    from rlvitals.checks import run_checks
    from rlvitals.readers import read
    from rlvitals.views.report import report_payload

    d = transcript_run(tmp_path, "tw", steps=24, groups=8, hack="test_edit", hack_from=12)
    data = read(d)
    payload = report_payload([(data, run_checks(data))])
    run = payload["runs"][0]
    actions = [f.get("action") or "" for f in run["report"]["findings"]]
    assert any("rlvitals transcripts" in a for a in actions)
    assert not [a for a in actions if re.search(r"\bRUN\b", a)], actions
    assert any(str(d) in a for a in actions)
    flagged = [e for got in run["transcripts"].values() for e in got if e.get("flagged")]
    assert flagged and all(e.get("flags") for e in flagged), flagged[:1]


def test_an_exploited_runs_mastered_finding_never_says_the_checkpoint_learned(tmp_path):
    """First hour: in an exploited run the "mastered" card advised "Stop here (the checkpoint
    from this step on has learned these tasks)"; a guard-stopped one said "Nothing went
    wrong"."""
    from rlvitals.checks import run_checks
    from rlvitals.readers import read

    d = transcript_run(tmp_path, "a", hack="test_edit", hack_from=8, steps=40, hack_ramp=0.2)
    rep = run_checks(read(d))
    assert rep.verdict == "exploit_suspected"
    mastered = [f for f in rep.findings if f.verdict == "mastered"]
    assert mastered
    for f in mastered:
        assert "has learned" not in f.action and "Nothing went wrong" not in f.action
        assert "doubt" in f.action
    # a guard stop read as mastered, in an exploited run
    info = json.loads((d / "run.json").read_text())
    info.update(status="stopped", stop_reason="max_consecutive_unusable_groups")
    (d / "run.json").write_text(json.dumps(info))
    rep = run_checks(read(d))
    assert not [f for f in rep.findings if "Nothing went wrong" in (f.action or "")]


def test_the_stall_demo_outlasts_the_stall_line_on_a_busy_machine():
    """First hour: `demo --fault stall` on a busy machine (6.5 s per update) hung 20 s, less
    than the checks' stall line (10 typical steps), and ended TOO EARLY TO TELL, exit 0."""
    pytest.importorskip("torch")
    from rlvitals.checks.context import Thresholds
    from rlvitals.grpo.loop import stall_wait

    idle = [i * 0.35 for i in range(6)]
    assert stall_wait(20.0, idle) == 20.0
    busy = [i * 6.5 for i in range(6)]
    line = Thresholds().stall_intervals * 6.5
    assert stall_wait(20.0, busy) > line
