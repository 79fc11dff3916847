"""Optional parts never cost the verdict (issue 36, item 6): a sample dump whose extra is not
installed, a broken file in it, a broken transcript file. The run is judged from what can be
read, and one line says what was not (and which extra reads it)."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from rlvitals import read
from rlvitals.checks import run_checks

DATA = Path(__file__).parent / "data"
TRL_OUT = DATA / "samples" / "trl" / "output_dir"


def _cli(argv: list[str]) -> tuple[int, str, str]:
    from rlvitals.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


# pyarrow hidden from the import system, as on a machine without the extra (not uninstalled).
HIDDEN = """
import sys
for name in ("pyarrow", "pyarrow.parquet", "pyarrow.types"):
    sys.modules[name] = None
from rlvitals.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", ["check", "metrics"])
def test_a_trl_folder_whose_completions_need_a_missing_extra_is_still_judged(
    tmp_path: Path, command: str
) -> None:
    out = tmp_path / "out"
    shutil.copytree(TRL_OUT, out)
    proc = subprocess.run(
        [sys.executable, "-c", HIDDEN, command, str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr and "error:" not in proc.stderr
    said = [line for line in proc.stderr.splitlines() if "not read" in line]
    assert len(said) == 1, proc.stderr
    assert "completions" in said[0] and "'trl' extra" in said[0]
    if command == "check":
        assert "verdict:" in proc.stdout
    # With the extra there, the same folder reads its completions (the test means something).
    run = read(out)
    assert run.attempts is not None and len(run.attempts) > 0


def test_a_broken_parquet_among_the_completions_is_one_warning(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    out = tmp_path / "out"
    shutil.copytree(TRL_OUT, out)
    bad = sorted((out / "completions").glob("*.parquet"))[-1]
    bad.write_bytes(b"PAR1 this is not a parquet file")
    run = read(out)
    assert any(str(bad) in w for w in run.warnings)
    assert run_checks(run).verdict


def test_a_dump_that_needs_a_missing_extra_is_not_read_again_each_poll(tmp_path: Path) -> None:
    from rlvitals.errors import MissingExtraError
    from rlvitals.model import RunData
    from rlvitals.readers.samples import SampleSource
    from rlvitals.readers.samples.trl import TrlCompletions

    class NoArrow(TrlCompletions):
        def _load(self, p, warn):
            raise MissingExtraError("trl", "reading TRL completions parquet")

    run = RunData(source="x", format="trl")
    src = SampleSource(TRL_OUT / "completions", NoArrow(), run)
    assert src.poll(final=True) is False and src.poll(final=True) is False
    assert len([w for w in run.warnings if "not read" in w]) == 1
    assert run.info["samples"]["unread"] and not src.transcripts.steps()


def test_broken_transcript_files_cost_a_warning_each_not_the_verdict(tmp_path: Path) -> None:
    from transcripts_synth import transcript_run

    run_dir = transcript_run(tmp_path, "r", steps=12, groups=4)
    files = sorted((run_dir / "transcripts").glob("step-*.json"))
    files[2].write_bytes(b"\x00\xff garbage {{{ not json\n")
    files[4].unlink()
    files[4].mkdir()  # a folder where a transcript file should be
    rc, out, err = _cli(["check", str(run_dir)])
    assert rc in (0, 1) and "verdict:" in out
    assert str(files[2]) in err and str(files[4]) in err
    assert "Traceback" not in err
