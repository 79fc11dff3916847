"""Liveness reads the step times a run gives: an elapsed time (seconds since the run began,
as prime-rl's ``time``) tells intervals but no silence; a single step record has no typical
step time and says so, never "nan s"."""

from __future__ import annotations

import json
from pathlib import Path

from rlvitals.checks import run_checks
from rlvitals.readers import read

NOW = 1_798_761_600.0  # 2027-01-01


def _run(path: Path, times: list[float]) -> Path:
    rows = [{"step": i + 1, "time": t, "reward": 0.1 * i} for i, t in enumerate(times)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _liveness(path: Path) -> list[str]:
    rep = run_checks(read(str(path)), now=NOW)
    return [f.title for f in rep.findings if f.check == "liveness"]


def test_elapsed_step_times_are_no_silence(tmp_path: Path) -> None:
    # Read as dates these say the last step came 57 years ago: "stalled or ended" was said.
    assert _liveness(_run(tmp_path / "m.jsonl", [1104.3, 1232.5, 1360.1])) == []


def test_dated_step_times_long_ago_still_read_as_stalled_or_ended(tmp_path: Path) -> None:
    titles = _liveness(_run(tmp_path / "m.jsonl", [1.7e9, 1.7e9 + 60, 1.7e9 + 120]))
    assert titles and titles[0].startswith("stalled or ended")
    assert "a typical step takes 60.00 s" in titles[0]


def test_one_step_record_says_it_has_no_typical_step_time(tmp_path: Path) -> None:
    titles = _liveness(_run(tmp_path / "m.jsonl", [1.7e9]))
    assert titles and "one step record, so no typical step time" in titles[0]
    assert "nan" not in titles[0]
