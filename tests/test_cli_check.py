"""`rlvitals check` and `rlvitals baseline` as a user runs them: output, exit codes, errors."""

from __future__ import annotations

import json

import pytest

from rlvitals.cli import main
from synth import synth_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli")
    return {
        "healthy": synth_run(out, "healthy", lr=0.04, seed=1),
        "healthy2": synth_run(out, "healthy2", lr=0.04, seed=2),
        "healthy3": synth_run(out, "healthy3", lr=0.04, seed=3),
        "too_easy": synth_run(out, "too_easy", start_pass=(0.97, 1.0)),
        "nan": synth_run(out, "nan", nan_loss_from=30, lr=0.04),
    }


def test_json_output_has_verdict_and_findings(runs, capsys):
    assert main(["check", str(runs["too_easy"]), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["runs"][0]
    assert out["verdict"] == "too_easy"
    f = next(f for f in out["findings"] if f["check"] == "groups")
    assert set(f) >= {"check", "severity", "verdict", "title", "metric", "first_step", "evidence"}
    assert f["first_step"] == 0


def test_fail_on_warn_exits_1_when_a_warning_exists(runs, capsys):
    assert main(["check", str(runs["too_easy"]), "--fail-on", "warn"]) == 1
    assert main(["check", str(runs["too_easy"]), "--fail-on", "fail"]) == 0
    assert main(["check", str(runs["nan"]), "--fail-on", "fail"]) == 1
    assert main(["check", str(runs["healthy"]), "--fail-on", "warn"]) == 0
    capsys.readouterr()


def test_text_output_names_verdict_and_next_action(runs, capsys):
    main(["check", str(runs["nan"])])
    out = capsys.readouterr().out
    assert "verdict: NON-FINITE VALUES" in out
    assert "train/loss is NaN from step 30" in out
    assert "next:" in out


def test_markdown_output(runs, capsys):
    main(["check", str(runs["too_easy"]), "--format", "markdown"])
    out = capsys.readouterr().out
    assert out.startswith("## ") and "| severity | check | step |" in out


def test_several_runs_give_a_list_and_the_worst_exit_code(runs, capsys):
    code = main(["check", str(runs["healthy"]), str(runs["nan"]), "--json", "--fail-on", "warn"])
    out = json.loads(capsys.readouterr().out)["runs"]
    assert code == 1
    assert [r["verdict"] for r in out] == ["learning", "non_finite"]
    assert [r["path"] for r in out] == [str(runs["healthy"]), str(runs["nan"])]


def test_missing_path_is_one_line_and_exit_2(tmp_path, capsys):
    code = main(["check", str(tmp_path / "nope")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "nope" in err and "Traceback" not in err


def test_bad_threshold_override_is_exit_2(runs, capsys):
    assert main(["check", str(runs["healthy"]), "--set", "rejected_warn=abc"]) == 2
    assert "expected a number" in capsys.readouterr().err


def test_baseline_from_healthy_seeds_flags_a_different_run(runs, tmp_path, capsys):
    b = tmp_path / "ranges.json"
    seeds = [str(runs[k]) for k in ("healthy", "healthy2", "healthy3")]
    assert main(["baseline", *seeds, "-o", str(b)]) == 0
    base = json.loads(b.read_text())
    assert base["format"] == "rlvitals-baseline/1"
    rm = base["metrics"]["reward/mean"]
    assert rm["early_min"] <= min(rm["early_means"]) <= max(rm["early_means"]) <= rm["early_max"]
    assert len(rm["slopes"]) == 3
    capsys.readouterr()
    main(["check", str(runs["too_easy"]), "--baseline", str(b), "--json"])
    out = json.loads(capsys.readouterr().out)["runs"][0]
    found = [f for f in out["findings"] if f["check"] == "baseline"]
    flagged = {f["metric"] for f in found} | {
        m for f in found for m in f["evidence"].get("metrics", {})
    }
    assert "reward/mean" in flagged
    main(["check", seeds[0], "--baseline", str(b), "--json"])
    out = json.loads(capsys.readouterr().out)["runs"][0]
    assert not [f for f in out["findings"] if f["check"] == "baseline" and f["severity"] != "info"]


def test_a_baseline_from_one_run_is_refused_and_many_ranges_are_one_card(runs, tmp_path, capsys):
    """Newcomer 2026-12-03: a baseline from one run was accepted without a word ("your seeds
    1 to 1"), and a run outside it got one WARN card per metric, each with the same advice."""
    assert main(["baseline", str(runs["healthy"]), "-o", str(tmp_path / "one.json")]) == 2
    assert "two or more healthy runs" in capsys.readouterr().err
    assert not (tmp_path / "one.json").exists()
    b = tmp_path / "ranges.json"
    seeds = [str(runs[k]) for k in ("healthy", "healthy2", "healthy3")]
    assert main(["baseline", *seeds, "-o", str(b)]) == 0
    capsys.readouterr()
    main(["check", str(runs["too_easy"]), "--baseline", str(b), "--json"])
    found = json.loads(capsys.readouterr().out)["runs"][0]["findings"]
    early = [f for f in found if f["check"] == "baseline" and "healthy range" in f["title"]]
    assert len(early) == 1 and len(early[0]["evidence"]["metrics"]) > 2, early


def test_bad_baseline_file_is_one_clear_line(runs, tmp_path, capsys):
    bad = tmp_path / "b.json"
    bad.write_text('{"hello": 1}')
    assert main(["check", str(runs["healthy"]), "--baseline", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not a baseline file" in err and str(bad) in err


def test_every_threshold_is_documented_with_its_default():
    from pathlib import Path

    from rlvitals.checks import Thresholds

    doc = (Path(__file__).parent.parent / "docs" / "checks.md").read_text()
    for _check, f in Thresholds.fields():
        default = f.default
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        assert f"| `{f.name}` | {shown} |" in doc, f.name
