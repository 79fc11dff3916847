"""``rlvitals metrics RUN [--metric NAME ...] [--json]`` on runs the writer wrote."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rlvitals import Run
from rlvitals.cli import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    with Run({"output": {"output_dir": str(root), "name": "demo"}}) as run:
        for step in range(3):
            for r in (1.0, 0.0, float(step % 2)):
                run.log_attempt(step, f"{step}-g", "t", r, policy_version=step)
            metrics = {"train/loss": [0.5, float("nan"), 0.25][step]}
            if step != 1:
                metrics["train/grad_norm"] = float(step + 1)
            if step == 2:
                metrics["custom/[bold]odd[/bold]"] = 1.0
            run.log_step(step, metrics=metrics)
    return run.dir


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_has_steps_and_one_column_per_metric_with_null_where_not_measured(run_dir, capsys):
    code, out, err = cli(
        capsys, "metrics", str(run_dir), "--json", "-m", "train/loss", "-m", "train/grad_norm"
    )
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc == {
        "steps": [0, 1, 2],
        "metrics": {"train/loss": [0.5, "NaN", 0.25], "train/grad_norm": [1.0, None, 3.0]},
    }


def test_json_without_metric_lists_every_canonical_metric(run_dir, capsys):
    code, out, _ = cli(capsys, "metrics", str(run_dir), "--json")
    doc = json.loads(out)
    assert code == 0
    assert {"reward/mean", "groups/signal_fraction", "train/loss"} <= set(doc["metrics"])
    assert "custom/[bold]odd[/bold]" not in doc["metrics"]  # not canonical
    assert all(len(col) == 3 for col in doc["metrics"].values())
    assert doc["metrics"]["reward/mean"] == pytest.approx(
        [1 / 3, 2 / 3, 1 / 3]
    )  # 1 0 0, 1 0 1, 1 0 0


def test_all_adds_the_runs_other_keys(run_dir, capsys):
    _, out, _ = cli(capsys, "metrics", str(run_dir), "--json", "--all")
    metrics = json.loads(out)["metrics"]
    assert metrics["custom/[bold]odd[/bold]"] == [None, None, 1.0]
    assert metrics["policy_version"] == [1, 2, 3]


def test_a_trailing_slash_selects_a_family(run_dir, capsys):
    _, out, _ = cli(capsys, "metrics", str(run_dir), "--json", "-m", "groups/")
    assert set(json.loads(out)["metrics"]) == {
        "groups/trained",
        "groups/rejected",
        "groups/all_solved",
        "groups/none_solved",
        "groups/signal_fraction",
    }


def test_text_table_for_chosen_metrics(run_dir, capsys):
    code, out, _ = cli(capsys, "metrics", str(run_dir), "-m", "train/loss", "-m", "train/grad_norm")
    assert code == 0
    rows = [line.split() for line in out.strip().splitlines()]
    assert rows[0] == ["step", "train/loss", "train/grad_norm"]
    assert rows[1:] == [["0", "0.5", "1"], ["1", "NaN", "-"], ["2", "0.25", "3"]]


def test_text_summary_shows_untrusted_names_literally(run_dir, capsys):
    code, out, _ = cli(capsys, "metrics", str(run_dir), "--all")
    assert code == 0
    assert "custom/[bold]odd[/bold]" in out
    assert "reward/mean" in out


def test_an_unknown_metric_is_one_line_and_exit_2(run_dir, capsys):
    code, out, err = cli(capsys, "metrics", str(run_dir), "-m", "reward/maen")
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert "reward/maen" in err and "did you mean reward/mean" in err


def test_a_missing_run_is_one_line_and_exit_2(tmp_path, capsys):
    code, _, err = cli(capsys, "metrics", str(tmp_path / "nope"))
    assert code == 2 and err.count("\n") == 1 and "no such file" in err


def test_the_installed_entry_point_runs(run_dir):
    proc = subprocess.run(
        [sys.executable, "-m", "rlvitals", "metrics", str(run_dir), "--json", "-m", "train/loss"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["metrics"]["train/loss"] == [0.5, "NaN", 0.25]
