"""Hostile input, round 4 (../shared/research/adversarial-2026-12-07.md): each finding as the
user met it, through the command or the reader the report used."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from rlvitals.cli import main
from rlvitals.readers import read
from synth import synth_run

DATA = Path(__file__).parent / "data"
PRIME = DATA / "samples" / "prime-rl-stream" / "output"
SEALED = Path("monitors/file/traces/stream/00000.jsonl.zst")
OLD = 1_700_000_000  # an mtime long past: the run finished


def _prime(tmp_path: Path, name: str = "output") -> Path:
    out = tmp_path / name
    shutil.copytree(PRIME, out)
    for p in out.rglob("*"):
        os.utime(p, (OLD, OLD))
    return out


def _subprocess(code: str, *args: str, mem_mib: int = 0, timeout: float = 120):
    """Run ``code`` in a fresh interpreter with this checkout on its path, its address space
    capped at ``mem_mib`` MiB when given (the child stops itself: MemoryError, not the host)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    cap = ""
    if mem_mib:
        cap = (
            "import resource\n"
            f"resource.setrlimit(resource.RLIMIT_AS, ({mem_mib << 20}, {mem_mib << 20}))\n"
        )
    return subprocess.run(
        [sys.executable, "-c", cap + textwrap.dedent(code), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _watch(run: str, *more: str, timeout: float = 60) -> tuple[list[dict], str]:
    """``watch RUN --json`` until its first liveness event (prime-rl records no end state, so
    the follow would go on): the events, and what it wrote to stderr."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.Popen(
        [sys.executable, "-m", "rlvitals", "watch", run, "--json", *more],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    events = []
    try:
        assert p.stdout is not None
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        for line in p.stdout:
            events.append(json.loads(line))
            if events[-1]["event"] == "liveness":
                break
        timer.cancel()
    finally:
        p.kill()
        _out, err = p.communicate(timeout=30)
    return events, err


# -- R4-01: a damaged sealed prime-rl chunk ---------------------------------------------------


def _damage(out: Path, how: str) -> None:
    p = out / SEALED
    if how == "flip":  # damaged bytes, the seek table intact
        b = bytearray(p.read_bytes())
        for i in range(100, len(b) - 100, 97):
            b[i] ^= 0xFF
        p.write_bytes(bytes(b))
    else:  # not zstd at all
        p.write_bytes(os.urandom(4096))
    os.utime(p, (OLD, OLD))


@pytest.mark.parametrize("how", ["flip", "junk"])
def test_a_damaged_sealed_chunk_is_a_warning_and_the_run_is_read(tmp_path, how):
    pytest.importorskip("pyzstd")
    out = _prime(tmp_path)
    _damage(out, how)
    run = read(out)
    said = [w for w in run.warnings if "00000.jsonl.zst" in w]
    assert said and "cannot read" in said[0] and "skipped" in said[0], run.warnings
    # The live chunk is still read: step 2's last episodes and step 3.
    assert run.attempts is not None and {2, 3} <= set(run.attempts.step.tolist())
    assert run.last_step == 3


def test_every_command_judges_a_folder_with_a_damaged_chunk(tmp_path, capsys):
    pytest.importorskip("pyzstd")
    fl = tmp_path / "fl"
    fl.mkdir()
    _damage(_prime(fl, "flip"), "flip")
    synth_run(fl, "good", steps=8)
    for jobs in ("1", "2"):
        main(["check", str(fl), "--jobs", jobs])
        cap = capsys.readouterr()
        assert "Traceback" not in cap.err and str(fl / "good") in cap.out, cap.err
        assert str(fl / "flip") in cap.out, cap.out
    flip = str(fl / "flip")
    assert main(["check", flip]) in (0, 1)
    cap = capsys.readouterr()
    assert "00000.jsonl.zst: cannot read" in cap.out + cap.err
    assert main(["metrics", flip]) == 0
    assert main(["transcripts", flip]) == 0
    assert main(["report", flip, "-o", str(tmp_path / "r.html")]) == 0
    events, err = _watch(flip)
    assert any(e["event"] == "step" and e["step"] == 3 for e in events), err
    assert "Traceback" not in err
    pytest.importorskip("pyarrow")
    assert main(["export", str(fl), "-o", str(tmp_path / "ex")]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_serve_starts_on_a_folder_with_a_damaged_chunk(tmp_path):
    pytest.importorskip("pyzstd")
    pytest.importorskip("starlette")
    from rlvitals.follow.hub import serve_in_background

    fl = tmp_path / "fl"
    fl.mkdir()
    _damage(_prime(fl, "flip"), "junk")
    synth_run(fl, "good", steps=8)
    url, stop = serve_in_background([fl], poll_interval=0.05)
    try:
        assert _steps_served(url, {"flip": 3, "good": 7}) == {"flip": 3, "good": 7}
    finally:
        stop()


def _steps_served(url: str, want: dict[str, int], timeout: float = 30) -> dict:
    """The runs' last steps on /api/runs once they are ``want`` (or at ``timeout``): the
    first passes of a loaded machine may not have read every run yet."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        runs = _api_runs(url)
        got = {k: runs.get(k, {}).get("last_step") for k in want}
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


# -- R4-02: a zstd bomb in a sealed chunk -----------------------------------------------------


def _bomb(out: Path, gib: float, fill: bytes = b"\0") -> Path:
    """Make the live chunk chunk 2 and put a sealed chunk 1 of ``gib`` GiB of ``fill`` in its
    place (a few tens of KB on disk)."""
    import pyzstd

    s = out / SEALED.parent
    (s / "00001.jsonl").rename(s / "00002.jsonl")
    with pyzstd.ZstdFile(s / "00001.jsonl.zst", "wb", level_or_option=19) as f:
        blk = fill * (1 << 20)
        for _ in range(int(gib * 1024)):
            f.write(blk)
    for p in s.iterdir():
        os.utime(p, (OLD, OLD))
    return s / "00001.jsonl.zst"


@pytest.mark.parametrize("fill", [b"\0", b"\n"])
def test_a_zstd_bomb_is_read_within_a_bound_in_bounded_memory(tmp_path, fill):
    """R4-02: 1 GiB inside 32 KB: the old reader held it whole (2.2 GB; 128 KB of it was a
    MemoryError and the run lost); read now in blocks, at most so many times its size."""
    pytest.importorskip("pyzstd")
    out = _prime(tmp_path)
    bomb = _bomb(out, 1, fill)
    assert bomb.stat().st_size < 64 << 10
    r = _subprocess(
        """
        import sys
        from rlvitals.readers import read
        run = read(sys.argv[1])
        print(sorted(set(run.attempts.step.tolist())))
        print([w for w in run.warnings if "00001.jsonl.zst" in w])
        """,
        str(out),
        mem_mib=1536,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    steps, said = r.stdout.splitlines()[-2:]
    assert steps == "[1, 2, 3]"  # the chunks before and after the bomb are read
    assert "times its size" in said and "read the first" in said


def test_a_sealed_chunk_is_read_in_blocks_not_whole(tmp_path, monkeypatch):
    """A real sealed chunk (prime-rl's default is 5 GiB) is never asked for in one read."""
    pytest.importorskip("pyzstd")
    import pyzstd

    sizes: list[int] = []
    real = pyzstd.SeekableZstdFile.read

    def read_(self, size=-1):
        sizes.append(size)
        return real(self, size)

    monkeypatch.setattr(pyzstd.SeekableZstdFile, "read", read_)
    run = read(_prime(tmp_path))
    assert run.attempts is not None and len(run.attempts) == 11
    assert sizes and all(0 < s <= 1 << 20 for s in sizes), sizes


def test_blank_runs_and_blocks_give_the_same_lines_as_one_at_a_time(tmp_path):
    """The line reader's two modes agree: collapsed blank runs keep every other line's number
    and end offset, and the last end offset (where the next pass resumes)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from rlvitals.jsonio import read_complete_lines

    piece = st.sampled_from(
        [b"\n", b" ", b" " * 20, b"\t\n", b"x", b'{"a": 1}', b"\r\n", b"y" * 40]
    )

    @settings(max_examples=200, deadline=None)
    @given(st.lists(piece, max_size=60), st.integers(0, 3))
    def check(parts, offset):
        p = tmp_path / "f"
        data = b"".join(parts)
        p.write_bytes(data)
        offset = min(offset, len(data))
        plain = list(read_complete_lines(p, offset, max_line=30))
        runs = list(read_complete_lines(p, offset, max_line=30, blank_runs=True))
        starts = [offset] + [end for _n, end, _l in plain]
        text = [x for x, at in zip(plain, starts) if data[at : x[1]].strip()]
        assert [x for x in runs if x[2] is None or x[2].strip()] == text
        assert (runs[-1][:2] if runs else None) == (plain[-1][:2] if plain else None)

    check()


# -- R4-03 / R4-04: NeMo-RL dumps named oddly -------------------------------------------------

NEMO = DATA / "samples" / "nemo-rl" / "logs" / "train_data_step1.jsonl"
HUGE = "99999999999999999999"


def _nemo(d: Path, steps=range(1, 4)) -> Path:
    d.mkdir(parents=True)
    for i in steps:
        shutil.copy(NEMO, d / f"train_data_step{i}.jsonl")
    for p in d.iterdir():
        os.utime(p, (OLD, OLD))
    return d


def _api_runs(url: str) -> dict[str, dict]:
    import urllib.request

    with urllib.request.urlopen(url.rstrip("/") + "/api/runs", timeout=10) as r:
        return {x["name"]: x for x in json.loads(r.read())["runs"]}


def test_a_dump_named_past_int64_is_skipped_with_a_warning(tmp_path):
    t = _nemo(tmp_path / "t")
    shutil.copy(NEMO, t / f"train_data_step{HUGE}.jsonl")
    run = read(t)
    assert sorted(set(run.attempts.step.tolist())) == [1, 2, 3]
    said = [w for w in run.warnings if HUGE in w]
    assert len(said) == 1 and "out of range (0..2**63-1); skipped" in said[0], run.warnings


def test_a_dump_named_past_int64_loses_no_other_run(tmp_path, capsys):
    fl = tmp_path / "fl"
    t = _nemo(fl / "nemo")
    shutil.copy(NEMO, t / f"train_data_step{HUGE}.jsonl")
    synth_run(fl, "good", steps=8)
    main(["check", str(fl)])
    cap = capsys.readouterr()
    assert str(fl / "good") in cap.out and str(fl / "nemo") in cap.out, cap.err
    assert main(["transcripts", str(t)]) == 0
    assert main(["report", str(t), "-o", str(tmp_path / "r.html")]) == 0
    assert "Traceback" not in capsys.readouterr().err
    pytest.importorskip("pyarrow")
    assert main(["export", str(fl), "-o", str(tmp_path / "ex")]) == 0


def test_serve_reads_a_run_past_a_dump_named_past_int64(tmp_path, capsys):
    pytest.importorskip("starlette")
    import time

    from rlvitals.follow.hub import serve_in_background

    fl = tmp_path / "fl"
    t = _nemo(fl / "nemo")
    shutil.copy(NEMO, t / f"train_data_step{HUGE}.jsonl")
    os.utime(t / f"train_data_step{HUGE}.jsonl", (OLD, OLD))
    synth_run(fl, "good", steps=8)
    url, stop = serve_in_background([fl], poll_interval=0.05)

    def nemo_step(want: int) -> int | None:
        deadline = time.monotonic() + 20
        while (got := _api_runs(url).get("nemo", {})).get("last_step") != want:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        return got.get("last_step")

    try:
        assert nemo_step(3) == 3
        assert _steps_served(url, {"good": 7}) == {"good": 7}
        shutil.copy(NEMO, t / "train_data_step4.jsonl")  # the run goes on: not stale
        os.utime(t / "train_data_step4.jsonl", (OLD, OLD))
        assert nemo_step(4) == 4
    finally:
        stop()
    assert "poll failed" not in capsys.readouterr().err  # no pass of the fleet was lost


def _deny_open(monkeypatch, path: Path) -> None:
    """Make the file ``path`` unreadable: chmod 000 for a normal user; root reads through
    modes, so there opening it raises PermissionError as it would (``builtins.open`` and
    ``os.open`` for that one path)."""
    if os.geteuid() != 0:
        os.chmod(path, 0)
        return
    import builtins

    target = os.path.abspath(path)

    def guard(fn):
        def inner(p, *a, **k):
            if isinstance(p, (str, os.PathLike)) and os.path.abspath(p) == target:
                raise PermissionError(13, "Permission denied", os.fspath(p))
            return fn(p, *a, **k)

        return inner

    monkeypatch.setattr(builtins, "open", guard(builtins.open))
    monkeypatch.setattr(os, "open", guard(os.open))


def test_a_self_looping_link_named_like_a_dump_is_one_warning(tmp_path, capsys):
    t = _nemo(tmp_path / "t", range(1, 8))
    (t / "train_data_step10.jsonl").symlink_to("train_data_step10.jsonl")
    run = read(t)
    assert sorted(set(run.attempts.step.tolist())) == list(range(1, 8))
    said = [w for w in run.warnings if "train_data_step10.jsonl" in w]
    assert len(said) == 1 and "cannot read" in said[0], run.warnings
    assert main(["check", str(t)]) in (0, 1)


def test_one_unreadable_dump_loses_only_itself(tmp_path, monkeypatch):
    t = _nemo(tmp_path / "t", range(1, 8))
    _deny_open(monkeypatch, t / "train_data_step7.jsonl")
    run = read(t)
    assert sorted(set(run.attempts.step.tolist())) == list(range(1, 7))
    said = [w for w in run.warnings if "train_data_step7.jsonl" in w]
    assert len(said) == 1 and "cannot read (Permission denied)" in said[0], run.warnings


def test_a_link_back_to_its_folder_is_not_followed(tmp_path, capsys):
    from rlvitals.source import find_runs

    t = _nemo(tmp_path / "t", range(1, 8))
    (t / "loop").symlink_to(".")
    assert find_runs(t).runs == [str(t)]
    assert main(["check", str(t)]) in (0, 1)
    assert capsys.readouterr().out.startswith(f"run {t}  samples  7 steps")


def test_every_odd_entry_at_once_leaves_the_run_judged(tmp_path, monkeypatch, capsys):
    t = _nemo(tmp_path / "odd", range(1, 8))
    (t / "loop").symlink_to(".")
    (t / "train_data_step10.jsonl").symlink_to("train_data_step10.jsonl")
    (t / "train_data_step8.jsonl").mkdir()
    if hasattr(os, "mkfifo"):
        os.mkfifo(t / "train_data_step9.jsonl")
    (t / "train_data_step11.jsonl").symlink_to("/dev/zero")
    (t / "train_data_step12.jsonl").symlink_to("nowhere")
    _deny_open(monkeypatch, t / "train_data_step7.jsonl")
    assert main(["check", str(t)]) in (0, 1)
    cap = capsys.readouterr()
    assert cap.out.startswith(f"run {t}  samples  6 steps"), cap.out + cap.err


# -- R4-05: check DIR on a run folder the user cannot enter ------------------------------------


def _no_entry(monkeypatch, denied: Path) -> None:
    """Make the folder ``denied`` one the user cannot enter: chmod 000 for a normal user. Root
    enters any folder, so there every call that would list, open or stat something inside it
    raises PermissionError as it would (``os.stat`` of the folder itself still answers, as it
    does for a normal user: that needs only its parent)."""
    if os.geteuid() != 0:
        os.chmod(denied, 0)
        return
    import builtins

    inside = os.path.abspath(denied)

    def guard(fn, *, itself=True):
        def inner(p=".", *a, **k):
            at = os.path.abspath(os.fspath(p)) if isinstance(p, (str, os.PathLike)) else ""
            if at.startswith(inside + os.sep) or (itself and at == inside):
                raise PermissionError(13, "Permission denied", os.fspath(p))
            return fn(p, *a, **k)

        return inner

    monkeypatch.setattr(os, "scandir", guard(os.scandir))
    monkeypatch.setattr(os, "listdir", guard(os.listdir))
    monkeypatch.setattr(os, "open", guard(os.open))
    monkeypatch.setattr(builtins, "open", guard(builtins.open))
    monkeypatch.setattr(os, "stat", guard(os.stat, itself=False))


def test_a_run_folder_that_cannot_be_entered_is_one_error_line(tmp_path, monkeypatch, capsys):
    """R4-05: with the default --jobs (1), a second core counts a run's transcripts ahead:
    that look inside the denied folder raised before the run's own error handling."""
    runs = tmp_path / "runs"
    for name in ("a", "b", "c"):
        synth_run(runs, name, steps=6)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    _no_entry(monkeypatch, runs / "b")
    for jobs in ([], ["--jobs", "2"]):
        assert main(["check", str(runs), *jobs]) == 2
        cap = capsys.readouterr()
        lines = {x.split()[1]: x for x in cap.out.splitlines()[:3]}
        assert sorted(lines) == [str(runs / n) for n in "abc"], cap.out + cap.err
        assert lines[str(runs / "b")].startswith("ERROR") and "Permission denied" in cap.out
        assert "TOO EARLY" in lines[str(runs / "a")] and "TOO EARLY" in lines[str(runs / "c")]


# -- R4-06: terminal controls in reader warnings and the tracker run chooser ------------------

EVIL = "\x1b]0;PWNED\x07\u009b2J\u202erun"
RAW = ("\x1b", "\x07", "\u009b", "\u202e")


def _no_raw(text: str) -> None:
    for raw in RAW:
        assert raw not in text, (repr(raw), text[:400])


def test_reader_warnings_never_print_a_paths_terminal_controls(tmp_path, capsys):
    """R4-06 (a): a warning names the file by its path; the run line was escaped, the warning
    printed raw (in tmux the pane's title became PWNED)."""
    tt = tmp_path / "tt"
    d = synth_run(tt, EVIL, steps=6)
    synth_run(tt, "plain", steps=6)
    with open(d / "steps.jsonl", "a") as f:
        f.write('{"step": 12, "time": 1e9, "metrics": {"k": {"x": 1}}}\n')  # draws a warning
        f.write("not json\n")
    for args in (
        [str(d)],
        [str(d), "--details"],
        [str(d), "--format", "markdown"],
        [str(d), str(tt / "plain")],  # one line each, and the count of warnings
    ):
        main(["check", *args])
        cap = capsys.readouterr()
        assert "warning" in cap.err and "PWNED" in cap.err, (args, cap.err)
        _no_raw(cap.out + cap.err)


def test_the_run_chooser_never_prints_a_run_names_terminal_controls(tmp_path, capsys):
    """R4-06 (b): a shared trackio store, a run another person named: "choose one with --run"
    listed the names raw."""
    import sqlite3

    db = tmp_path / "h.db"
    shutil.copy(DATA / "trackio" / "grpo.db", db)
    c = sqlite3.connect(db)
    rows = c.execute("select run_id, timestamp, run_name, step, metrics from metrics").fetchall()
    c.executemany(
        "insert into metrics (run_id, timestamp, run_name, step, metrics) values (?,?,?,?,?)",
        [("r2", ts, "evil\x1b[2J\x1b]0;T\x07", st, m) for _rid, ts, _rn, st, m in rows],
    )
    c.commit()
    c.close()
    for args in ([str(db)], [str(db), str(tmp_path / "h.db")], [str(db), "--json"]):
        assert main(["check", *args]) == 2
        cap = capsys.readouterr()
        assert "choose one with --run" in cap.out + cap.err
        _no_raw(cap.out + cap.err)


# -- R4-07: one bad output plugin -------------------------------------------------------------

BADOUT = '''"""badout: three outputs another package might ship, each broken its own way."""
import threading

from rlvitals.outputs import Output

RELEASE = threading.Event()  # the test lets a hung update go at its end


class Raiser(Output):
    def update(self, run, up):
        raise RuntimeError("plugin boom \\x1b]0;PLUGIN-TITLE\\x07")


class DescRaise(Output):
    def update(self, run, up):
        raise RuntimeError("boom")

    def describe(self):
        raise ValueError("describe boom")


class Slow(Output):
    def update(self, run, up):
        RELEASE.wait(3600)
'''


def _badout(site: Path) -> Path:
    """The package installed in ``site`` as ``pip install`` would leave it (a module and a
    dist-info with its entry points)."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "badout.py").write_text(BADOUT)
    info = site / "badout-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: badout\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[rlvitals.outputs]\nraiser = badout:Raiser\ndescraise = badout:DescRaise\n"
        "slow = badout:Slow\n"
    )
    return site


def test_an_output_whose_describe_raises_never_stops_watch(tmp_path, monkeypatch, capsys, caplog):
    from dashboard_runs import make_run

    monkeypatch.syspath_prepend(str(_badout(tmp_path / "site")))
    d = make_run(tmp_path / "runs", "r", 8, status="finished")
    for to in ("descraise", "raiser"):
        assert main(["watch", str(d), "--json", "--to", to]) in (0, 1)
        cap = capsys.readouterr()
        events = [json.loads(x)["event"] for x in cap.out.splitlines()]
        assert "step" in events and "finished" in events, (to, cap.out, cap.err)
        said = cap.err + caplog.text
        assert "failed" in said and "Traceback" not in said
        _no_raw(cap.out + said)
    assert "PLUGIN-TITLE" in said  # the plugin's own words, escaped


def test_an_output_whose_describe_raises_never_stops_serve(tmp_path):
    from dashboard_runs import make_run

    site = _badout(tmp_path / "site")
    d = make_run(tmp_path / "runs", "r", 8, status="finished")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), *sys.path]))
    p = subprocess.Popen(
        [sys.executable, "-m", "rlvitals", "serve", str(d), "--port", "0", "--to", "descraise"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        said = []
        while not said or "Ctrl-C" not in said[-1]:  # the banner, then it listens
            said.append(p.stdout.readline())
            assert said[-1], "".join(said) + p.stderr.read()
        url = said[0].split(" at ")[1].split()[0]
        assert _steps_served(url, {"r": 7}) == {"r": 7}
    finally:
        p.kill()
        _out, err = p.communicate(timeout=30)
    assert "Traceback" not in err and "DescRaise (describe() failed" in "".join(said)


def test_an_output_that_blocks_never_freezes_metrics_and_healthz_names_it(tmp_path, monkeypatch):
    pytest.importorskip("starlette")
    import time
    import urllib.request
    from dataclasses import replace

    from dashboard_runs import append_steps, make_run, step_record
    from rlvitals.follow.hub import Hub
    from rlvitals.outputs import load_output
    from rlvitals.views.server import make_server

    monkeypatch.syspath_prepend(str(_badout(tmp_path / "site")))
    d = make_run(tmp_path, "live", 5, status="running")
    hub = Hub([d], outputs=[load_output("slow")], throttle=replace(Hub.THROTTLE, poll_s=0.05))
    server = make_server(hub, "127.0.0.1", 0, stuck_after=1.0)
    threads = [
        threading.Thread(target=hub.run_forever, daemon=True),
        threading.Thread(target=server.run, daemon=True),
    ]
    for t in threads:
        t.start()

    def get(path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(server.url.rstrip("/") + path, timeout=3) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except OSError:  # no answer within 3 s
            return 0, b""

    try:
        time.sleep(0.5)
        for step in range(5, 9):  # the run goes on while the output hangs in its first update
            append_steps(d, [step_record(step, time.time())])
            time.sleep(0.3)
            status, body = get("/metrics")  # an answer within 3 s each time
            assert status == 200 and b"rlvitals_last_step" in body
        deadline = time.monotonic() + 10
        while b"} 8.0\n" not in body and time.monotonic() < deadline:
            time.sleep(0.2)
            body = get("/metrics")[1]
        last = [x for x in body.splitlines() if x.startswith(b"rlvitals_last_step{")]
        assert len(last) == 1 and last[0].endswith(b"} 8.0"), body
        status, body = get("/healthz")
        assert status == 503 and b"output stuck: Slow" in body, body
    finally:
        sys.modules["badout"].RELEASE.set()
        hub.stop()
        server.stop()
        for t in threads:
            t.join(5)


# -- R4-08: a console log whose first line is longer than the sniffers' head -----------------


@pytest.mark.parametrize("first", [300_000, 2_000_000])
def test_a_console_log_with_a_long_first_line_is_read(tmp_path, capsys, first):
    """R4-08: a resolved config or a tokenizer dump printed on one line before training."""
    p = tmp_path / "long.log"
    steps = "".join(f"Step {i}/10: loss=0.{i} reward=0.{i}\n" for i in range(10))
    p.write_text("config: " + "x" * first + "\n" + steps)
    run = read(p)
    assert run.last_step == 9 and run.series("reward/mean") is not None
    assert main(["check", str(p)]) in (0, 1)


def test_text_without_steps_past_its_first_64_kib_is_not_called_one_line(tmp_path, capsys):
    p = tmp_path / "long.log"
    p.write_text("config: " + "x" * 300_000 + "\n" + "nothing to see here\n" * 10)
    assert main(["check", str(p)]) == 2
    err = capsys.readouterr().err
    assert "in its first 64 KiB" in err and "its one line" not in err, err


# -- R4-09: every bad line of a shard journal counted ------------------------------------------


def test_every_bad_journal_line_is_counted_per_shard(tmp_path):
    """R4-09: only the first bad line of a shard was ever warned; a worker that corrupts every
    tenth attempt for a week showed one warning at the start."""
    import warnings

    import rlvitals
    from rlvitals import Run

    ok = {"step": 0, "attempt_id": "x", "group_id": "g0", "task_id": "t", "reward": 1.0}
    hostile = [
        {"policy_version": "abc"},
        {"policy_version": [1]},
        {"policy_version": 1.5},
        {"reward": "high"},
        {"group_id": {"a": 1}},
        {"metadata": "m"},
        {"response_tokens": -3},
        {"truncated": "yes"},
        {"sampler_logprobs": "x"},
        {"duration": "long"},
        {"retries": -1},
        {"transcript": "t"},
        {"error": {"x": 1}},
    ]

    def journal(run_dir: Path, name: str, bad: list[dict], good: str) -> None:
        with open(run_dir / "shards" / name, "a") as f:
            for i, x in enumerate(bad):
                f.write(json.dumps({**ok, "attempt_id": f"{good}-bad{i}", **x}) + "\n")
            f.write(json.dumps({**ok, "attempt_id": good, "policy_version": 0}) + "\n")

    cfg = {"output": {"output_dir": str(tmp_path), "name": "r"}}
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with Run(cfg) as run:
            (run.dir / "shards").mkdir(exist_ok=True)
            with rlvitals.attach(run.dir, shard="v") as v:
                v.log_attempt(0, "g", "t", 0.0, policy_version=0)
            journal(run.dir, "w.attempts.jsonl", hostile, "ok1")
            run.log_step(0)
            said = [str(x.message) for x in got if "w.attempts.jsonl" in str(x.message)]
            journal(run.dir, "w.attempts.jsonl", hostile[:3], "ok2")
            journal(run.dir, "u.attempts.jsonl", hostile[:2], "ok3")
            run.log_step(1)
    ids = [
        json.loads(x)["attempt_id"]
        for x in (run.dir / "rollouts.jsonl").read_text().split("\n")
        if x
    ]
    rejected = [i for i in range(len(hostile)) if f"ok1-bad{i}" not in ids]
    assert len(rejected) >= 12
    said2 = [str(x.message) for x in got if "attempts.jsonl" in str(x.message)][len(said) :]
    assert len(said) == 2 and "not an attempt" in said[0], said
    assert f"{len(rejected) - 1} more bad lines skipped" in said[1], said
    assert f"{len(rejected)} in all" in said[1]
    w = [m for m in said2 if "w.attempts.jsonl" in m]
    u = [m for m in said2 if "u.attempts.jsonl" in m]
    assert len(w) == 1 and "3 more bad lines skipped" in w[0] and "in all" in w[0], said2
    assert len(u) == 2 and "not an attempt" in u[0] and "1 more bad line skipped" in u[1], said2
    assert {"ok1", "ok2", "ok3"} <= set(ids)


# -- N10: a small Parquet file that expands to millions of values ----------------------------


def _pq_bomb(d: Path, rows: int = 200_000, cols: int = 99) -> Path:
    """The attack's rlprobe steps.parquet: 200,000 rows of 99 constant columns, 571 KB."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    import numpy as np

    d.mkdir()
    (d / "manifest.json").write_text('{"schema_version": 1, "run_id": "x"}')
    table = {"step": np.arange(rows, dtype=np.int64)}
    table.update({f"m/k{j}": np.full(rows, 0.5) for j in range(cols)})
    pq.write_table(pa.table(table), d / "steps.parquet", row_group_size=rows, compression="zstd")
    return d / "steps.parquet"


def test_a_small_parquet_file_is_read_within_a_bound_tied_to_its_size(tmp_path):
    """N10: the bound was 20 M values whatever the file: 571 KB cost 1.5 GB and 29 s. Values
    read are now bounded by the file's size (100 times its bytes at a Python value's 32
    bytes, at least 2 M values), in row batches, the first rows kept."""
    p = _pq_bomb(tmp_path / "pq2")
    size = p.stat().st_size
    assert size < 1 << 20
    r = _subprocess(
        """
        import resource, sys
        from rlvitals.readers import read
        run = read(sys.argv[1])
        steps = run.series("m/k0").steps
        print(len(steps), int(steps[0]), int(steps[-1]))
        try:  # this process's own peak (ru_maxrss keeps the forking parent's across exec)
            hwm = [x for x in open("/proc/self/status") if x.startswith("VmHWM:")]
            print(int(hwm[0].split()[1]) >> 10)
        except OSError:
            print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10)
        print([w for w in run.warnings if "steps.parquet" in w])
        """,
        str(p.parent),
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    counts, rss_mib, said = r.stdout.splitlines()[-3:]
    n, first, last = map(int, counts.split())
    assert (first, last) == (0, n - 1)  # the first rows, in order
    assert 10_000 <= n * 100 <= max(2 << 20, 100 * size // 32), n
    assert "more than a reader expands" in said and f"read the first {n} rows only" in said
    assert int(rss_mib) < 600, rss_mib  # the old reader: 1,470 MiB


def test_rlprobe_rows_read_by_column_keep_nulls_ranks_and_order(tmp_path):
    """The columns are read whole (no Python value per cell); what the rows said is kept:
    other ranks' rows, rows at or before a step already read, and a null after values (a NaN
    the sink dropped) as NaN, noted."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    import math

    d = tmp_path / "r"
    (d / "steps").mkdir(parents=True)
    (d / "manifest.json").write_text('{"schema_version": 1, "run_id": "x"}')
    pq.write_table(
        pa.table(
            {
                "step": [0, 1, 1, 2, None, 3, 2, 4],
                "rank": [0, 0, 1, None, 0, 0, 0, 0],
                "timestamp": [10.0, 11.0, 11.5, 12.0, 12.5, 13.0, 13.5, 14.0],
                "reward_mean": [None, 0.1, 9.0, 0.2, 9.0, None, 9.0, 0.4],
                "tag": ["a", "b", "c", "d", "e", "f", "g", "h"],
                "flag": [True] * 8,
                "loss": pa.array([1, 2, 3, 4, 5, 6, 7, 8], type=pa.int32()),
            }
        ),
        d / "steps" / "part-00000.parquet",
    )
    run = read(d)
    r = run.series("reward/mean")
    assert r.steps.tolist() == [1, 2, 3, 4]
    got = r.values.tolist()
    assert got[0:2] == [0.1, 0.2] and math.isnan(got[2]) and got[3] == 0.4
    assert run.nulls.get("reward_mean") == 3
    assert run.series("time").steps.tolist() == [0, 1, 2, 3, 4]
    assert run.series("time").values.tolist() == [10.0, 11.0, 12.0, 13.0, 14.0]
    assert run.series("train/loss").values.tolist() == [1.0, 2.0, 4.0, 6.0, 8.0]
    assert run.series("tag") is None and run.series("flag") is None


# -- F26: temporaries a killed writer left ----------------------------------------------------


def test_temporaries_a_killed_writer_left_are_ignored_and_said_once(tmp_path, capsys):
    """F26: SIGKILL between writing and renaming leaves ``NAME.PID.tmp``; every reader passes
    them over, and reading the run says so once (naming them: they are safe to delete). One a
    live writer is about to rename (fresh) is not mentioned."""
    from rlvitals import Run

    out = tmp_path / "runs"
    with Run({"output": {"output_dir": str(out), "name": "a", "trace": "full"}}) as run:
        for s in range(6):
            for k in range(4):
                run.log_attempt(
                    s,
                    f"g{s}",
                    "t",
                    float(k % 2),
                    policy_version=s,
                    transcript=[{"prompt": "p", "completion": str(k)}],
                )
            run.log_step(s)
    d = out / "a"
    t = d / "transcripts"
    (t / "step-000003.json.4242.tmp").write_bytes((t / "step-000003.json").read_bytes())
    (t / "step-000006.json.4243.tmp").write_bytes(b'{"attempts": [')
    (d / "run.json.4244.tmp").write_bytes((d / "run.json").read_bytes())
    for p in [*t.glob("*.tmp"), *d.glob("*.tmp")]:
        os.utime(p, (OLD, OLD))
    (t / "step-000007.json.4245.tmp").write_bytes(b"{")  # being written now
    run_data = read(d)
    said = [w for w in run_data.warnings if ".tmp" in w]
    assert len(said) == 1 and "3 temporary files" in said[0], run_data.warnings
    assert "step-000006.json.4243.tmp" in said[0] and "4245" not in said[0]
    from rlvitals.transcripts.store import TranscriptStore

    assert run_data.last_step == 5 and TranscriptStore(d).steps() == list(range(6))
    assert main(["check", str(d)]) in (0, 1)
    err = capsys.readouterr().err
    assert err.count(".tmp") >= 1 and err.count("temporary files") == 1, err
    assert main(["transcripts", str(d), "--step", "3"]) == 0
    assert "4242" not in capsys.readouterr().out


# -- benchmarks/hostile_rerun.py: a test that did not run is not a pass ------------------------

_PROJECT = {
    "tests/test_a.py": """
import pytest

def test_ok():
    pass

def test_skip():
    pytest.skip("wants something this machine lacks")

def test_fail():
    assert False

@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    assert x
""",
    "tests/test_b.py": """
import pytest

pytest.importorskip("no_such_module_for_the_rerun")

def test_never():
    pass
""",
    "tests/test_c.py": """
import no_such_module_breaks_collection

def test_broken():
    pass
""",
}


def _rerun(tmp_path: Path, monkeypatch, findings: dict) -> tuple[int, dict, str]:
    """benchmarks/hostile_rerun.py's main (as `--json`) over a small project of its own."""
    import contextlib
    import importlib.util
    import io

    root = tmp_path / "proj"
    for rel, text in _PROJECT.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "hostile_rerun.py"
    spec = importlib.util.spec_from_file_location("hostile_rerun_under_test", script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "ROOT", root)
    monkeypatch.setattr(mod, "FINDINGS", findings)
    monkeypatch.setattr(sys, "argv", ["hostile_rerun.py", "--json"])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = mod.main()
    rows = {r["finding"]: r for r in json.loads(out.getvalue())["rows"]}
    return code, rows, err.getvalue()


def test_the_rerun_script_fails_loudly_when_a_named_test_does_not_run(tmp_path, monkeypatch):
    """The script called every finding whose tests pytest never ran 'holding' (three node ids
    in modules skipped without torch or MLflow: pytest collected nothing), and a skipped test
    'fixed'. A finding is fixed only when all its tests ran and passed."""
    a = "tests/test_a.py::"
    findings = {
        "OK": ("x", "passes", [a + "test_ok", a + "test_param"]),
        "SKIP": ("x", "one test skipped", [a + "test_ok", a + "test_skip"]),
        "GONE": ("x", "no such test", [a + "test_renamed_since"]),
        "MOD": ("x", "its module skipped", ["tests/test_b.py::test_never"]),
        "FAIL": ("x", "fails", [a + "test_fail"]),
        "BROKEN": ("x", "its module breaks collection", ["tests/test_c.py::test_broken"]),
    }
    code, rows, err = _rerun(tmp_path, monkeypatch, findings)
    assert code == 2, err
    got = {k: (r["verdict"], r["results"]) for k, r in rows.items()}
    assert got["OK"] == ("fixed", ["passed", "passed"])
    assert got["SKIP"] == ("not run", ["passed", "skipped"])
    assert got["GONE"] == ("not run", ["not collected"])
    assert got["MOD"][0] == "not run" and "no_such_module_for_the_rerun" in got["MOD"][1][0]
    assert got["FAIL"] == ("holds", ["failed"])  # a broken module beside it stops nothing
    assert got["BROKEN"][0] == "not run" and "no_such_module_breaks" in got["BROKEN"][1][0]
    assert "did not run" in err and "test_skip" in err and "test_renamed_since" in err
    code, rows, err = _rerun(tmp_path, monkeypatch, {"FAIL": findings["FAIL"]})
    assert code == 1 and rows["FAIL"]["verdict"] == "holds" and not err
    code, rows, err = _rerun(tmp_path, monkeypatch, {"OK": findings["OK"]})
    assert code == 0 and rows["OK"]["verdict"] == "fixed" and not err
