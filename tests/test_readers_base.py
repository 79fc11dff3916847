"""readers/base.py and readers/registry.py: one incremental-file state, one line reader, one
ordered registry found automatically, sniffing by score, folders of runs."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from dashboard_runs import make_run, write_run_json
from rlvitals.errors import ReadError, RunFolderError, UnknownFormatError
from rlvitals.readers import FORMATS, detect, formats, open_reader, read, sniff
from rlvitals.readers import registry as registry_mod
from rlvitals.readers.base import FileState, decode_json, read_lines
from rlvitals.source import find_runs

DATA = Path(__file__).parent / "data"


def _lines(st: FileState, final: bool = False) -> list[tuple[int, bytes]]:
    warnings: list[str] = []
    out = list(read_lines(st, warn=warnings.append, final=final))
    assert warnings == []
    return out


# -- the line reader --------------------------------------------------------------------------


def test_last_line_without_newline_waits_live_and_is_read_when_finished(tmp_path: Path) -> None:
    p = tmp_path / "x.log"
    p.write_bytes(b"a\r\nb\nc")
    st = FileState(p)
    assert _lines(st) == [(1, b"a"), (2, b"b")]
    assert _lines(st) == []  # still waiting for the rest of "c"
    assert _lines(st, final=True) == [(3, b"c")]
    assert st.offset == p.stat().st_size


def test_bom_is_skipped_and_offsets_stay_exact(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + b'{"step": 0}\n{"step": 1}\n')
    st = FileState(p)
    assert [line for _, line in _lines(st)] == [b'{"step": 0}', b'{"step": 1}']
    assert st.offset == p.stat().st_size


def test_huge_line_is_one_warning_naming_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "x.log"
    p.write_bytes(b"a\n" + b"x" * 5000 + b"\nb\n")
    warnings: list[str] = []
    got = list(read_lines(FileState(p), warn=warnings.append, max_line=100))
    assert got == [(1, b"a"), (3, b"b")]
    assert len(warnings) == 1 and warnings[0].startswith(f"{p}:2: line too long")


def test_huge_line_across_chunks_is_skipped_without_holding_it(tmp_path: Path) -> None:
    from rlvitals.readers.base import read_chunks

    p = tmp_path / "x.log"
    p.write_bytes(b"a\n" + b"x" * 5000 + b"\nb\n")
    warnings: list[str] = []
    st = FileState(p)
    got = b"".join(c for _, _, c in read_chunks(st, warn=warnings.append, chunk=64, max_line=100))
    assert got == b"a\nb\n" and st.line == 4 and st.offset == p.stat().st_size
    assert len(warnings) == 1 and ":2: line too long" in warnings[0]


def test_json_decoding_is_lenient_but_not_blind() -> None:
    assert decode_json(b'{"k": "caf\xe9"}') == ({"k": "caf\ufffd"}, None)  # one char replaced
    assert decode_json(b'{"k": "a\x00b"}')[0] == {"k": "ab"}
    assert decode_json(b'{"v": NaN}')[0]["v"] != decode_json(b'{"v": NaN}')[0]["v"]
    deep, note = decode_json(b'{"step": 1, "m": ' + b"[" * 5000 + b"]" * 5000 + b"}")
    assert deep["step"] == 1 and note and "nested deeper" in note
    with pytest.raises(ValueError):
        decode_json(b"{not json")


# -- formats: the last line, encodings, NUL -----------------------------------------------------


CASES = {
    # format -> (file name, a file body of two records, the metric, values)
    "jsonl": ("x.jsonl", b'{"step": 0, "reward/mean": 0.1}\n{"step": 1, "reward/mean": 0.2}'),
    "csv": ("x.csv", b"step,reward/mean\n0,0.1\n1,0.2"),
    "verl": ("x.log", b"step:0 - critic/score/mean:0.1\nstep:1 - critic/score/mean:0.2"),
    "verl-jsonl": (
        "x.jsonl",
        b'{"step": 0, "data": {"critic/score/mean": 0.1}}\n'
        b'{"step": 1, "data": {"critic/score/mean": 0.2}}',
    ),
    "tinker": (
        "x.jsonl",
        b'{"step": 0, "env/all/reward/total": 0.1}\n{"step": 1, "env/all/reward/total": 0.2}',
    ),
    "openrlhf": (
        "x.log",
        b"Global step 0: {'rollout/reward_mean': 0.1}\nGlobal step 1: {'rollout/reward_mean': 0.2}",
    ),
    # prime-rl's orchestrator summary (its trainer prints Loss on lines of its own)
    "prime-rl-console": (
        "x.log",
        b"Step 0 | 1m 2s | Reward 0.1 | Truncation 0.0%\nStep 1 | 1m 4s | Reward 0.2 | Truncation 0.0%",
    ),
}


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_complete_last_line_without_newline_is_read(tmp_path: Path, fmt: str) -> None:
    name, body = CASES[fmt]
    p = tmp_path / name
    p.write_bytes(body)
    assert sniff(p) == fmt
    run = read(p)
    assert run.series("reward/mean").steps.tolist() == [0, 1], run.warnings
    live = open_reader(p)
    live.poll()
    assert live.run.series("reward/mean").steps.tolist() == [0]  # live: waits for the newline


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_bom_latin1_and_nul_cost_nothing(tmp_path: Path, fmt: str) -> None:
    name, body = CASES[fmt]
    p = tmp_path / name
    # A BOM, a NUL line and a Latin-1 byte in an extra key of the first record.
    lines = body.split(b"\n")
    first = lines[0].replace(b"0.1", b"0.1, 'caf\xe9': 3" if b"{'" in lines[0] else b"0.1")
    p.write_bytes(b"\xef\xbb\xbf" + first + b"\n\x00\x00\n" + b"\n".join(lines[1:]) + b"\n")
    assert sniff(p) == fmt
    run = read(p)
    assert run.series("reward/mean").values.tolist() == [0.1, 0.2], run.warnings


def test_latin1_byte_in_a_json_record_costs_one_character(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_bytes(
        b'{"step": 0, "reward/m\xe9an": 1, "reward/mean": 0.1}\n{"step": 1, "reward/mean": 0.2}\n'
    )
    run = read(p)
    assert run.series("reward/mean").values.tolist() == [0.1, 0.2]
    assert run.series("reward/m\ufffdan").at(0) == 1.0


def test_nul_bytes_before_a_log_do_not_hide_it(tmp_path: Path) -> None:
    # logrotate copytruncate and crashed jobs leave runs of NULs at the start.
    p = tmp_path / "ct.log"
    p.write_bytes(
        b"\0" * 4096 + b"".join(b"step:%d - critic/score/mean:0.%d\n" % (i, i) for i in range(10))
    )
    assert sniff(p) == "verl"
    assert read(p).series("reward/mean").steps.tolist() == list(range(10))


def test_native_rollouts_with_latin1_and_deep_metadata_keep_every_attempt(tmp_path: Path) -> None:
    d = make_run(tmp_path, "r", 3)
    good = json.dumps({"step": 0, "group_id": "g", "task_id": "t", "reward": 1.0}).encode()
    latin = b'{"step": 0, "group_id": "g", "task_id": "caf\xe9", "reward": 0.0}'
    deep = (
        b'{"step": 1, "group_id": "g", "task_id": "t", "reward": 1.0, "metadata": '
        + b"[" * 5000
        + b"]" * 5000
        + b"}"
    )
    (d / "rollouts.jsonl").write_bytes(b"\n".join([good, latin, deep, good]) + b"\n")
    run = read(d)
    assert run.attempts.step.tolist() == [0, 0, 0, 1]
    assert "caf\ufffd" in run.attempts.task_ids
    assert [w for w in run.warnings if "nested deeper" in w] == [
        f"{d / 'rollouts.jsonl'}:3: values nested deeper than 64 levels replaced by null"
    ]


def test_torn_last_step_record_of_a_finished_run_is_a_warning(tmp_path: Path) -> None:
    d = make_run(tmp_path, "r", 5)
    with open(d / "steps.jsonl", "ab") as f:
        f.write(b'{"step": 5, "reward/me')
    run = read(d)
    assert run.series("reward/mean").steps.tolist() == [0, 1, 2, 3, 4]
    assert any(w.startswith(f"{d / 'steps.jsonl'}:6: not JSON") for w in run.warnings)
    write_run_json(d, status="running")  # a live run: that line is being written, no warning
    assert not any("not JSON" in w for w in read(d).warnings)


# -- files that shrink or are replaced ------------------------------------------------------------


def _verl_rows(steps: range, loss: float) -> str:
    return "".join(json.dumps({"step": s, "data": {"actor/loss": loss}}) + "\n" for s in steps)


def test_file_truncated_on_resume_is_read_again_from_its_start(tmp_path: Path) -> None:
    # verl's file logger opens its file with mode "w": a resumed run truncates it.
    p = tmp_path / "verl.jsonl"
    p.write_text(_verl_rows(range(10), 1.0))
    r = open_reader(p)
    r.poll()
    p.write_text(_verl_rows(range(5, 8), 2.0))  # shorter than what was read
    r.poll()
    s = r.run.series("train/loss")
    assert s.steps.tolist() == [5, 6, 7] and set(s.values.tolist()) == {2.0}
    assert r.run.warnings == [
        f"{p}: the file shrank (truncated or rewritten); read again from the start"
    ]


def test_file_rewritten_past_the_old_offset_is_read_again(tmp_path: Path) -> None:
    p = tmp_path / "verl.jsonl"
    p.write_text(_verl_rows(range(10), 1.0))
    r = open_reader(p)
    r.poll()
    with open(p, "w") as f:  # truncated, and more than the old size written before the next poll
        f.write(_verl_rows(range(5, 30), 2.0))
    r.poll()
    s = r.run.series("train/loss")
    assert s.steps.tolist() == list(range(5, 30)) and set(s.values.tolist()) == {2.0}
    assert len(r.run.warnings) == 1 and "read again from the start" in r.run.warnings[0]


def test_replaced_file_is_read_again(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"step": 0, "reward/mean": 0.1}\n')
    r = open_reader(p)
    r.poll()
    q = tmp_path / "new.jsonl"
    q.write_text('{"step": 7, "reward/mean": 0.9}\n{"step": 8, "reward/mean": 0.9}\n')
    q.replace(p)
    r.poll()
    assert r.run.series("reward/mean").steps.tolist() == [7, 8]


def test_run_deleted_and_recreated_under_its_name_never_mixes(tmp_path: Path) -> None:
    d = make_run(tmp_path, "r", 10, status="running")
    r = open_reader(d)
    r.poll()
    data = r.run
    shutil.rmtree(d)
    d2 = make_run(tmp_path, "r", 30, status="running", t0=2e9)
    write_run_json(d2, status="running", run_id="r-second")
    r.poll()
    assert r.run is data  # views keep the same object
    assert len(r.run.series("time")) == 30
    assert r.run.series("time").values.min() >= 2e9  # nothing of the first run left
    assert any("read" in w and "from the start" in w for w in r.run.warnings)


# -- tracebacks become one line -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, body",
    [
        ("x.jsonl", '{"step": 99999999999999999999, "reward/mean": 0.5}\n'),
        ("x.csv", "step,reward/mean\n99999999999999999999,0.5\n"),
        ("x.log", "step:99999999999999999999 - critic/score/mean:0.5\n"),
        ("x.jsonl", '{"step": 99999999999999999999, "data": {"critic/score/mean": 0.5}}\n'),
    ],
)
def test_step_beyond_int64_is_one_warning_and_the_rest_is_read(
    tmp_path: Path, name: str, body: str
) -> None:
    p = tmp_path / name
    good = CASES["csv" if name.endswith(".csv") else "verl" if name.endswith(".log") else "jsonl"]
    if '"data"' in body:
        good = CASES["verl-jsonl"]
    rest = good[1].split(b"\n", 1)[1] if name.endswith(".csv") else good[1]
    p.write_bytes(body.encode() + rest + b"\n")
    run = read(p)
    assert run.series("reward/mean").steps.tolist() == [0, 1]
    assert len([w for w in run.warnings if "99999999999999999999" in w]) == 1


def test_native_step_beyond_int64_in_every_file(tmp_path: Path) -> None:
    d = make_run(tmp_path, "r", 3)
    big = 99999999999999999999
    with open(d / "steps.jsonl", "a") as f:
        f.write(json.dumps({"step": big, "reward/mean": 0.5}) + "\n")
    ok = {"group_id": "g", "task_id": "t", "reward": 1.0}
    (d / "rollouts.jsonl").write_text(
        "".join(json.dumps({"step": s, **ok}) + "\n" for s in (0, big, -5, 1))
    )
    (d / "evals.jsonl").write_text(
        json.dumps({"step": big, "suite": "h", "score": 0.5})
        + "\n"
        + json.dumps({"step": 2, "suite": "h", "score": 0.7})
        + "\n"
    )
    run = read(d)
    assert run.series("reward/mean").steps.tolist() == [0, 1, 2]
    assert run.attempts.step.tolist() == [0, 1]
    assert run.series("eval/h/score").steps.tolist() == [2]
    assert len(run.warnings) == 4, run.warnings  # steps, two rollouts, evals: each by line


def test_deep_run_json_is_a_warning(tmp_path: Path) -> None:
    d = make_run(tmp_path, "r", 3)
    (d / "run.json").write_text("[" * 100000 + "]" * 100000)
    run = read(d)
    assert len(run.series("reward/mean")) == 3
    assert any("run.json" in w for w in run.warnings)


def test_unreadable_progress_and_evals_are_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlvitals.readers import base

    d = make_run(tmp_path, "r", 3)
    (d / "progress.jsonl").write_text(json.dumps({"time": 1.0, "phase": "x"}) + "\n")
    (d / "evals.jsonl").write_text(json.dumps({"step": 1, "suite": "h", "score": 0.5}) + "\n")
    real = base.open_binary
    shut = {d / "progress.jsonl", d / "evals.jsonl"}

    def deny(path):  # tests run as root, where mode 000 does not stop a read
        if Path(path) in shut:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(base, "open_binary", deny)
    run = read(d)
    assert len(run.series("reward/mean")) == 3
    denied = [w for w in run.warnings if "Permission denied" in w]
    assert sorted(denied) == sorted(f"{p}: cannot read (Permission denied); skipped" for p in shut)


def test_unreadable_file_given_is_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins

    p = tmp_path / "x.log"
    p.write_text("step:0 - critic/score/mean:0.1\n")
    real = builtins.open

    def deny(path, *a, **k):
        if Path(str(path)) == p:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(builtins, "open", deny)
    with pytest.raises(ReadError, match=r"x\.log: cannot read \(Permission denied\)"):
        sniff(p)


def test_trl_truncated_newest_checkpoint_falls_back(tmp_path: Path) -> None:
    od = tmp_path / "od"
    shutil.copytree(DATA / "trl" / "output_dir", od)
    newest = od / "checkpoint-2" / "trainer_state.json"
    newest.write_bytes(newest.read_bytes()[:200])
    run = read(od)
    assert run.series("reward/mean").at(1) == 9.9  # checkpoint-1's value
    assert run.warnings[0].startswith(f"{newest}: not valid JSON")
    assert (
        run.warnings[-1]
        == f"{od / 'checkpoint-1' / 'trainer_state.json'}: read instead (an older checkpoint)"
    )


# -- the registry ---------------------------------------------------------------------------------


def test_registry_is_ordered_and_found_without_a_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f.name for f in formats()]
    assert names[0] == "rlvitals" and names.index("verl") < names.index("jsonl")
    prios = [f.priority for f in formats()]
    assert prios == sorted(prios)
    # A new reader module dropped into the package registers itself: no list to edit.
    pkg = tmp_path / "more"
    pkg.mkdir()
    (pkg / "zzformat.py").write_text(
        "from rlvitals.readers import Format, register\n"
        "from rlvitals.readers.generic import JsonlMetricsReader\n"
        "class Z(JsonlMetricsReader):\n    name = 'zz'\n"
        "register(Format('zz', 'a test format', lambda p: False, Z, priority=55))\n"
    )
    import rlvitals.readers as readers

    monkeypatch.setattr(readers, "__path__", [*readers.__path__, str(pkg)])
    monkeypatch.setattr(registry_mod, "_loaded", False)
    monkeypatch.setitem(sys.modules, "rlvitals.readers.zzformat", None)
    sys.modules.pop("rlvitals.readers.zzformat")
    try:
        assert "zz" in [f.name for f in formats()]
    finally:
        registry_mod.FORMATS.pop("zz", None)
        sys.modules.pop("rlvitals.readers.zzformat", None)


def test_a_reader_module_of_ours_that_cannot_import_is_an_error_not_a_missing_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reader whose optional dependency is missing is left out (LOAD_ERRORS); one that
    # imports a name of ours that is gone is a bug: the samples format once vanished silently
    # that way, and every command read on without it.
    pkg = tmp_path / "more"
    pkg.mkdir()
    (pkg / "zzbroken.py").write_text("from rlvitals.readers.samples import NO_SUCH_NAME\n")
    (pkg / "zzoptional.py").write_text("import no_such_optional_dependency\n")
    import rlvitals.readers as readers

    monkeypatch.setattr(readers, "__path__", [*readers.__path__, str(pkg)])
    monkeypatch.setattr(registry_mod, "_loaded", False)
    monkeypatch.setattr(registry_mod, "LOAD_ERRORS", {})
    with pytest.raises(ImportError, match="NO_SUCH_NAME"):
        formats()
    (pkg / "zzbroken.py").unlink()
    sys.modules.pop("rlvitals.readers.zzbroken", None)
    monkeypatch.setattr(registry_mod, "_loaded", False)
    assert "samples" in [f.name for f in formats()]
    assert "no_such_optional_dependency" in registry_mod.LOAD_ERRORS["zzoptional"]


def test_the_reading_with_more_canonical_values_wins(tmp_path: Path) -> None:
    # verl's file-logger sniffer accepts this file (its first row), but only the generic
    # reading gets the rest: the better reading wins over the more specific format.
    p = tmp_path / "x.jsonl"
    rows = [{"step": 0, "data": {"x": 1}}] + [{"step": s, "reward/mean": 0.1} for s in range(1, 9)]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert FORMATS["verl-jsonl"].accepts(p)
    assert detect(p) == ("jsonl", None)
    assert read(p).series("reward/mean").steps.tolist() == list(range(1, 9))


def test_near_tie_goes_to_the_more_specific_format_with_a_note(tmp_path: Path) -> None:
    # Both verl's and OpenRLHF's lines, for the same steps: the two readings tie.
    p = tmp_path / "x.log"
    p.write_text(
        "".join(
            f"step:{s} - critic/score/mean:0.5\nGlobal step {s}: {{'rollout/reward_mean': 0.5}}\n"
            for s in range(3)
        )
    )
    fmt, note = detect(p)
    assert fmt == "verl"
    assert note is not None and "--from openrlhf" in note and str(p) in note
    run = read(p)
    assert run.notes == [note] and run.warnings == []


def test_a_tie_with_a_catch_all_reading_needs_no_note(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text(
        "".join(json.dumps({"step": s, "progress/done_frac": 0.1}) + "\n" for s in range(3))
    )
    assert detect(p) == ("tinker", None)  # generic JSONL reads it as well, and says less


def test_unreadable_names_file_what_it_looked_like_and_what_was_tried(tmp_path: Path) -> None:
    p = tmp_path / "notes.txt"
    p.write_text("hello\nworld\n")
    with pytest.raises(UnknownFormatError) as exc:
        read(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}: not a run this version can read: text with no step record")
    assert "tried" in msg and "verl" in msg and "--from FORMAT" in msg
    (tmp_path / "u16.txt").write_bytes("hello\n".encode("utf-16"))
    with pytest.raises(UnknownFormatError, match="UTF-16"):
        read(tmp_path / "u16.txt")
    (tmp_path / "empty.log").write_bytes(b"")
    with pytest.raises(UnknownFormatError, match="an empty file"):
        read(tmp_path / "empty.log")


@pytest.mark.parametrize(
    "stray, body",
    [
        ("summary.csv", "step,score\n0,1\n1,2\n"),
        ("launcher.log", "step:1 - critic/score/mean:0.5\n"),
        ("results.jsonl", '{"step":0,"acc":1}\n'),
    ],
)
def test_folder_of_runs_with_a_stray_file_is_a_folder_of_runs(
    tmp_path: Path, stray: str, body: str
) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    a, b = make_run(root, "run-A", 5), make_run(root, "run-B", 5)
    (root / stray).write_text(body)
    with pytest.raises(RunFolderError) as exc:
        read(root)
    assert exc.value.runs == [str(a), str(b)]
    assert "run-A, run-B" in str(exc.value) and "runs/*" in str(exc.value)
    # The one discovery (check, serve) finds both runs whatever the stray file is; a stray file
    # a reader recognises is a run of its own there.
    assert {str(a), str(b)} <= set(find_runs(root).runs)
    assert find_runs(a).runs == [str(a)]
    assert {str(a), str(b)} <= set(find_runs(tmp_path).runs)  # two levels down


def test_one_run_split_over_sub_folders_stays_one_run() -> None:
    outputs = DATA / "prime-rl" / "outputs"  # trainer/ and orchestrator/ of one run
    assert find_runs(outputs).runs == [str(outputs)] and sniff(outputs) == "prime-rl"
    od = DATA / "trl" / "output_dir"  # checkpoint-N/ of one run
    assert find_runs(od).runs == [str(od)] and sniff(od) == "trl"
