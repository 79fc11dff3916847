"""Lines the checks drew as module constants are Thresholds fields now, so ``--set`` reaches
them (issue 29): the KL to the reference, the system slowdown."""

from __future__ import annotations

import json
from pathlib import Path

from rlvitals import read
from rlvitals.checks import run_checks
from rlvitals.checks.context import Thresholds
from rlvitals.cli import main


def _steps(d: Path, rows: list[dict[str, float]]) -> Path:
    d.mkdir(parents=True)
    with open(d / "steps.jsonl", "w") as f:
        for i, row in enumerate(rows):
            f.write(json.dumps({"step": i, "time": 1000.0 + 10 * i, **row}) + "\n")
    return d


def _of(rep, check):
    return [f for f in rep.findings if f.check == check]


def test_the_reference_kl_lines_are_settable(tmp_path, capsys):
    d = _steps(tmp_path / "kl", [{"train/ref_kl": 0.05 if i < 10 else 0.7} for i in range(20)])
    (f,) = _of(run_checks(read(d)), "reference")
    assert f.first_step == 10 and f.evidence["line"] == 0.5 and "over 0.5" in f.title
    assert f.severity == "info"  # settled past 0.5, not climbing
    # Past a lower far line it is a warning; under higher lines there is nothing to say.
    th = Thresholds().with_overrides({"ref_kl_fail": "0.6"})
    (g,) = _of(run_checks(read(d), thresholds=th), "reference")
    assert g.severity == "warn" and g.evidence["line"] == 0.6 and "over 0.6" in g.title
    th = Thresholds().with_overrides({"ref_kl_warn": "1", "ref_kl_fail": "4"})
    assert _of(run_checks(read(d), thresholds=th), "reference") == []
    # The command line's --set reaches it.
    main(["check", str(d), "--set", "ref_kl_warn=1", "--set", "ref_kl_fail=4", "--json"])
    out = json.loads(capsys.readouterr().out)["runs"][0]["findings"]
    assert not [x for x in out if x["check"] == "reference"]


def test_the_system_slowdown_lines_are_settable(tmp_path):
    # 40 updates: past the 30 a slowdown's baseline takes (system_baseline_updates).
    rows = [{"perf/step_seconds": 1.0 + (0.0 if i < 10 else 0.13 * (i - 9))} for i in range(40)]
    d = _steps(tmp_path / "slow", rows)
    (f,) = _of(run_checks(read(d)), "system")
    assert f.severity == "warn" and f.evidence["line"] == 2.0
    th = Thresholds().with_overrides({"system_baseline_updates": "40"})
    (b,) = _of(run_checks(read(d), thresholds=th), "system")
    assert b.severity == "info"
    th = Thresholds().with_overrides({"system_slower_warn": "5"})
    (g,) = _of(run_checks(read(d), thresholds=th), "system")
    assert g.severity == "info" and g.evidence["line"] == 5.0
    th = Thresholds().with_overrides({"system_slower_info": "5", "system_slower_warn": "6"})
    assert _of(run_checks(read(d), thresholds=th), "system") == []
