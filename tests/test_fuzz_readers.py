"""Damaged copies of real runs of every format: never a traceback, every intact record read.
Also the stores added since (rlwatch, rlprobe, trackio), hostile file names, special files
(FIFO, socket, /dev/zero, a folder named like a log, a symlink loop) and compressed inputs.

Each example takes a run file under ``tests/data/`` (and a native run directory written by the
real writer), damages one file (cut short, a flipped bit, inserted bytes, a Latin-1 byte, a
BOM, re-encoded as UTF-16) and reads it, with its format named and sniffed. Only rlvitals' own
typed errors may come out. For the line formats, every record in the intact part before the
damage must still be read: each metric at each step the intact prefix alone gives (its last
step aside, a record the damage may cut) is there in the damaged file's reading (for the
catch-all console reading, which numbers step-less records, as many values of each metric).
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from contextlib import redirect_stderr, redirect_stdout, suppress
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rlvitals.errors import RlvitalsError, UnknownFormatError
from rlvitals.readers import FORMATS, formats, read
from rlvitals.readers.registry import CATCH_ALL

DATA = Path(__file__).parent / "data"
KINDS = ("truncate", "flip", "insert", "latin1", "bom", "utf16")


def _target(root: Path) -> Path:
    """The file of a run to damage: the run file itself, or the biggest file of a folder."""
    if root.is_file():
        return root
    files = [p for p in root.rglob("*") if p.is_file()]
    return max(files, key=lambda p: (p.stat().st_size, str(p)))


def _cases() -> list[tuple[str, str]]:
    out = []
    for spec in sorted(DATA.glob("*/*.expect.json")):
        meta = json.loads(spec.read_text())
        out.append((str(spec.parent / meta["path"]), meta["format"]))
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def native_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from synth import synth_run

    return synth_run(tmp_path_factory.mktemp("native"), "r", steps=6, groups=3, group_size=4)


def _damage(data: bytes, kind: str, where: float, bit: int, junk: bytes) -> tuple[bytes, int]:
    """The damaged bytes, and the offset before which the file is intact."""
    k = min(len(data), int(where * len(data)))
    if kind == "truncate":
        return data[:k], k
    if kind == "flip":
        if not data:
            return data, 0
        k = min(k, len(data) - 1)
        return data[:k] + bytes([data[k] ^ (1 << bit)]) + data[k + 1 :], k
    if kind == "insert":
        return data[:k] + junk + data[k:], k
    if kind == "latin1":
        return data[:k] + b"\xe9" + data[k:], k
    if kind == "bom":
        return b"\xef\xbb\xbf" + data, len(data)  # nothing lost: the whole file is intact
    return data.decode("utf-8", errors="replace").encode("utf-16"), 0


def _points(run) -> dict[str, set[int]]:
    return {n: set(run.series(n).steps.tolist()) for n in run.metrics.names() if run.series(n)}


def _read(path: Path, fmt: str | None):
    try:
        return read(path, fmt)
    except RlvitalsError:
        return None  # a typed error (one line in the CLI) is allowed; anything else is a bug


def _line_format(fmt: str) -> bool:
    return FORMATS[fmt].scored or fmt == "rlvitals"


def _check(root: Path, fmt: str, target_rel: Path, kind: str, where, bit, junk) -> None:
    original = (root / target_rel if root.is_dir() else root).read_bytes()
    bad, intact = _damage(original, kind, where, bit, junk)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "damaged" / root.name
        prefix = Path(tmp) / "prefix" / root.name
        for dest in (copy, prefix):
            dest.parent.mkdir()
            if root.is_dir():
                shutil.copytree(root, dest)
        t_copy = copy / target_rel if root.is_dir() else copy
        t_prefix = prefix / target_rel if root.is_dir() else prefix
        t_copy.write_bytes(bad)
        got = _read(copy, fmt)
        _read(copy, None)  # sniffed: the same promise
        if kind == "utf16" or not _line_format(fmt):
            return
        cut = original.rfind(b"\n", 0, intact) + 1
        t_prefix.write_bytes(original[:cut])
        want = _read(prefix, fmt)
        if want is None:
            return
        assert got is not None, f"{kind} at {intact}: the damaged file was refused"
        have = _points(got)
        steps = want.steps()
        last = int(steps[-1]) if len(steps) else None
        # The catch-all console reading numbers step-less records by the step marker that
        # follows them, so there only the number of values is held to.
        by_step = FORMATS[fmt].priority < CATCH_ALL
        # With no step record left in the prefix, its reward is computed from the attempts
        # (one warning says so). The damaged reading computes it too for every update whose
        # own record is lost: only where it holds a record of that update (whose values,
        # damaged or not, stand) is the prefix's computed reward not looked for.
        derived = any("reward per update is computed" in w for w in want.warnings)
        rewards = ("reward/mean", "reward/mean_with_unusable")
        recorded = set().union(
            *(at for n, at in have.items() if n not in rewards and not n.startswith("eval/"))
        )
        for name, at in _points(want).items():
            if derived and name in rewards:
                at = at - recorded
            kept = {s for s in at if s != last}
            if by_step:
                missing = kept - have.get(name, set())
                assert not missing, f"{kind} at {intact}: {name} lost at {sorted(missing)[:5]}"
            else:
                assert len(have.get(name, ())) >= len(kept), f"{kind} at {intact}: {name} lost"
        if want.attempts is not None:
            assert got.attempts is not None
            for s in set(want.attempts.step.tolist()) - {int(want.attempts.step.max())}:
                assert (got.attempts.step == s).sum() >= (want.attempts.step == s).sum()


damage = st.tuples(
    st.sampled_from(KINDS),
    st.floats(0, 1),
    st.integers(0, 7),
    st.binary(min_size=1, max_size=40),
)


@settings(
    max_examples=160,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=st.sampled_from(CASES), d=damage)
def test_damaged_framework_logs_never_traceback_and_keep_intact_records(
    case: tuple[str, str], d: tuple[str, float, int, bytes]
) -> None:
    path, fmt = case
    root = Path(path)
    target = _target(root)
    rel = target.relative_to(root) if root.is_dir() else Path(target.name)
    _check(root, fmt, rel, *d)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(name=st.sampled_from(["steps.jsonl", "rollouts.jsonl", "run.json"]), d=damage)
@example(name="steps.jsonl", d=("flip", 0.0, 0, b"\x00"))  # step 0's record lost, not its reward
def test_damaged_native_runs_never_traceback_and_keep_intact_records(
    native_run: Path, name: str, d: tuple[str, float, int, bytes]
) -> None:
    _check(native_run, "rlvitals", Path(name), *d)


def test_every_line_format_has_a_fuzzed_fixture() -> None:
    fuzzed = {fmt for _, fmt in CASES}
    missing = {f.name for f in formats() if f.scored} - fuzzed
    assert not missing, f"formats with no fixture under tests/data/ to fuzz: {sorted(missing)}"


# -- the CLI on damaged files: one error line, never a traceback ---------------------------------


def _cli(argv: list[str]) -> tuple[int, str]:
    from rlvitals.cli import main

    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        rc = main(argv)
    return rc, err.getvalue()


@pytest.mark.parametrize(
    "name, body",
    [
        ("binary.log", bytes(range(256)) * 8),
        ("utf16.log", "hello\n".encode("utf-16")),
        ("deep.json", b"[" * 100000 + b"]" * 100000),
        ("empty.jsonl", b""),
    ],
)
@pytest.mark.parametrize("command", ["check", "metrics"])
def test_cli_on_an_unreadable_file_prints_one_error_line(
    tmp_path: Path, command: str, name: str, body: bytes
) -> None:
    p = tmp_path / name
    p.write_bytes(body)
    rc, err = _cli([command, str(p)])
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rlvitals {command}: error: {p}: "), err
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["check", "metrics"])
def test_cli_on_damaged_logs_reads_the_rest(tmp_path: Path, command: str) -> None:
    log = (DATA / "verl" / "issue2060_console.log").read_bytes()
    p = tmp_path / "verl.log"
    p.write_bytes(b"\xef\xbb\xbf" + b"\0" * 100 + log[: len(log) // 2] + b"\xe9\xff" + log)
    rc, err = _cli([command, str(p)])
    assert rc in (0, 1) and "Traceback" not in err and "error:" not in err
    big = tmp_path / "big.jsonl"
    big.write_text(
        '{"step": 99999999999999999999, "reward/mean": 0.1}\n{"step": 1, "reward/mean": 0.2}\n'
    )
    rc, err = _cli([command, str(big)])
    assert rc in (0, 1) and f"warning: {big}:1: step 99999999999999999999 out of range" in err


def test_utf16_log_is_read(tmp_path: Path) -> None:
    p = tmp_path / "u16.log"
    p.write_bytes(
        "step:0 - critic/score/mean:0.1\nstep:1 - critic/score/mean:0.2\n".encode("utf-16")
    )
    run = read(p)
    assert run.format == "verl" and run.warnings == []
    assert run.series("reward/mean").values.tolist() == [0.1, 0.2]


def test_unreadable_is_only_for_files_with_no_record(tmp_path: Path) -> None:
    p = tmp_path / "x.log"
    p.write_bytes(b"\0" * 10 + b"garbage\n" + b"step:3 - critic/score/mean:0.5\n")
    assert read(p).series("reward/mean").at(3) == 0.5
    p.write_bytes(b"garbage only\n")
    with pytest.raises(UnknownFormatError):
        read(p)


# -- the readers added since (2026-12-03 attack): rlwatch and rlprobe stores, damaged --------

PEERS = Path(__file__).resolve().parents[1] / "benchmarks" / "corpus" / "peers"
STORES = [
    (str(PEERS / "rlwatch" / "example-s0" / "metrics.db"), "rlwatch"),
    (str(PEERS / "rlprobe" / "healthy-s5"), "rlprobe"),
    (str(DATA / "trackio" / "grpo.db"), "trackio"),
]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=st.sampled_from(STORES), d=damage)
# A flipped bit in the schema's text: SQLite hands back bytes that are not UTF-8 (Python's
# UnicodeDecodeError, not a sqlite3.Error, escaped as a traceback; found by this test).
@example(case=STORES[2], d=("flip", 0.6484375, 7, b"\x00"))
def test_damaged_tracker_and_peer_stores_never_traceback(
    case: tuple[str, str], d: tuple[str, float, int, bytes]
) -> None:
    path, fmt = case
    if fmt == "rlprobe":
        pytest.importorskip("pyarrow")
    root = Path(path)
    target = root / "steps.parquet" if root.is_dir() else root
    rel = target.relative_to(root) if root.is_dir() else Path(target.name)
    _check(root, fmt, rel, *d)


# -- hostile file names, special files and compressed inputs ----------------------------------

_NAMES = [
    b"c\xff\xfe.log",  # not UTF-8
    b"\x1b]0;PWNED\x07run.log",  # a terminal title sequence
    "x\u202etxt.log".encode(),  # a bidi override
    b"t[12]*?.log",  # glob characters
    b"-rf.log",  # a leading dash
    b"with space\ttab.log",
    b"a" * 200 + b".log",  # long
]


@pytest.mark.parametrize("raw", _NAMES, ids=[repr(n)[:30] for n in _NAMES])
def test_hostile_file_names_are_read_and_shown_escaped(tmp_path: Path, raw: bytes) -> None:
    import os

    log = (DATA / "verl" / "issue2060_console.log").read_bytes()
    try:
        p = os.path.join(os.fsencode(tmp_path), raw)
        with open(p, "wb") as f:
            f.write(log)
    except OSError:
        pytest.skip("this file system refuses the name")
    name = os.fsdecode(p)
    for argv in (["check", name], ["metrics", name], ["check", str(tmp_path)]):
        out = io.StringIO()
        err = io.StringIO()
        from rlvitals.cli import main

        with redirect_stdout(out), redirect_stderr(err):
            rc = main(argv)
        text = out.getvalue() + err.getvalue()
        assert rc in (0, 1), (argv, err.getvalue())
        for ch in ("\x1b", "\x07", "\u202e", "\udcff"):
            assert ch not in text, (argv, repr(ch))


def test_special_files_in_a_folder_never_hang_a_command(tmp_path: Path) -> None:
    """A FIFO, a socket, a link to /dev/zero, a folder named like a log and a symlink loop
    among runs: each command ends, judges the real run and reads none of them."""
    import os
    import socket
    import subprocess
    import sys

    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "verl.log").write_bytes((DATA / "verl" / "issue2060_console.log").read_bytes())
    if hasattr(os, "mkfifo"):
        os.mkfifo(runs / "fifo.jsonl")
    os.symlink("/dev/zero", runs / "zero.log")
    os.symlink(runs / "loop.log", runs / "loop.log")
    (runs / "folder.jsonl").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    with suppress(OSError):
        sock.bind(str(runs / "sock.log"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    try:
        for argv in (["check", "runs", "--jobs", "2"], ["metrics", "runs/verl.log"]):
            r = subprocess.run(
                [sys.executable, "-m", "rlvitals", *argv],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert r.returncode in (0, 1), (argv, r.stderr)
            assert "Traceback" not in r.stderr
        for special in ("fifo.jsonl", "zero.log", "sock.log"):
            if (runs / special).exists() or (runs / special).is_symlink():
                r = subprocess.run(
                    [sys.executable, "-m", "rlvitals", "check", f"runs/{special}"],
                    cwd=tmp_path,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                assert r.returncode == 2 and "Traceback" not in r.stderr, (special, r.stderr)
    finally:
        sock.close()


@pytest.mark.parametrize("kind", ["gzip", "bz2", "zip", "gzip-bomb"])
def test_compressed_logs_are_one_error_line_in_bounded_time(tmp_path: Path, kind: str) -> None:
    """A log compressed whole (gzip, bzip2, zip; a gzip bomb of 64 MiB of zeros): one line
    saying what it is, exit 2, never decompressed whole."""
    import bz2
    import gzip
    import time
    import zipfile

    log = (DATA / "verl" / "issue2060_console.log").read_bytes()
    p = tmp_path / "train.log"
    if kind == "gzip":
        p.write_bytes(gzip.compress(log))
    elif kind == "bz2":
        p.write_bytes(bz2.compress(log))
    elif kind == "zip":
        with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("train.log", log)
    else:
        p.write_bytes(gzip.compress(bytes(64 << 20), compresslevel=1))
    t0 = time.monotonic()
    rc, err = _cli(["check", str(p)])
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert time.monotonic() - t0 < 30
