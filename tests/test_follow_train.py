"""``rlvitals train``/``demo``: the run being trained is judged live with the command's own
judging options (``--set``, ``--baseline``, ``--rules``), so what ``--to``/``--webhook`` are
told is what ``rlvitals check`` with the same options says. The trainer here is a stand-in that
writes a run and says so in its events; the follow stage and the outputs are the real ones."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dashboard_runs import make_run
from output_plugin import install, recorded
from rlvitals.cli import main
from transcripts_synth import transcript_run

pytest.importorskip("torch")  # `train` loads the trainer's modules (the train extra)


def _stand_in(write: Callable[[Path], Path]) -> Callable[..., Path]:
    """A trainer that writes its run with ``write`` (under the config's output folder), then
    names it and reports one update, as the reference trainer's events do."""

    def train(config: Any, *, fault: Any, stall_seconds: float, on_event: Any) -> Path:
        run = write(Path(config.section("output").output_dir))
        on_event("run", {"run_dir": str(run)})
        on_event("step", {"step": 0, "reward/mean": 0.3})
        return run

    return train


def _alerts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: Any, *options: str) -> set:
    """The (check, severity) of each alert ``rlvitals train --to recorder=FILE`` sent."""
    from rlvitals.cli import _trainer

    monkeypatch.setattr(_trainer, "load_trainer", lambda: _stand_in(write))
    n = len(list(tmp_path.glob("alerts-*")))  # each call its own run and its own alerts
    out = tmp_path / f"alerts-{n}.jsonl"
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'[output]\noutput_dir = "{tmp_path / f"runs-{n}"}"\nname = "r"\n')
    assert main(["train", str(cfg), "--to", f"recorder={out}", "--no-check", *options]) == 0
    return {(a["check"], a["severity"]) for a in recorded(out)}


@pytest.fixture(autouse=True)
def _recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(install(tmp_path / "site")))


@pytest.mark.parametrize("quiet", [["--quiet"], []], ids=["quiet", "live view"])
def test_train_set_changes_the_live_alerts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quiet: list[str]
) -> None:
    def write(root: Path) -> Path:
        return make_run(root, "r", 40, status="running")

    plain = _alerts(tmp_path, monkeypatch, write, *quiet)
    tuned = _alerts(tmp_path, monkeypatch, write, *quiet, "--set", "rejected_warn=0.1")
    assert ("groups", "warn") in tuned and ("groups", "warn") not in plain


def test_train_baseline_changes_the_live_alerts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeds = [
        make_run(tmp_path / "seeds", f"s{i}", 40, status="finished", **{"reward/mean": level})
        for i, level in enumerate((0.94, 0.96))
    ]
    base = tmp_path / "baseline.json"
    assert main(["baseline", *map(str, seeds), "-o", str(base)]) == 0
    assert json.loads(base.read_text())["metrics"]["reward/mean"]

    def write(root: Path) -> Path:
        return make_run(root, "r", 40, status="running")

    plain = _alerts(tmp_path, monkeypatch, write, "--quiet")
    held = _alerts(tmp_path, monkeypatch, write, "--quiet", "--baseline", str(base))
    assert ("baseline", "warn") in held and not [a for a in plain if a[0] == "baseline"]


def test_train_rules_change_the_live_alerts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[[flags.custom]]\nname = "double_checks"\npattern = "So the sum"\n'
        'title = "says so the sum"\n'
    )

    def write(root: Path) -> Path:
        return transcript_run(root, "r", steps=36, groups=12, seed=7, lr=0.01)

    plain = _alerts(tmp_path, monkeypatch, write, "--quiet")
    ruled = _alerts(tmp_path, monkeypatch, write, "--quiet", "--rules", str(rules))
    assert ("transcripts", "fail") in ruled and ("transcripts", "fail") not in plain
