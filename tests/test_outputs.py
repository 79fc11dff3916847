"""Outputs: one interface, the same alerts from every front end, outputs from other packages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dashboard_runs import make_run
from output_plugin import install, recorded, serve_once
from rlvitals.checks.base import Finding
from rlvitals.cli import main
from rlvitals.follow.watch import Watcher
from rlvitals.outputs import Output, available_outputs, load_output
from rlvitals.outputs.webhook import alert_for, body_for_url
from test_alerts import Receiver

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _failing_run(root: Path) -> Path:
    """A finished run whose gradient norm is NaN at every step: nonfinite fails."""
    return make_run(root, "nan-grad", 30, status="finished", **{"train/grad_norm": "NaN"})


def test_a_packages_output_gets_the_same_alerts_from_watch_and_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(install(tmp_path / "site")))
    assert "recorder" in available_outputs()
    d = _failing_run(tmp_path / "runs")
    by_watch, by_serve = tmp_path / "watch.jsonl", tmp_path / "serve.jsonl"
    assert main(["watch", str(d), "--json", "--to", f"recorder={by_watch}"]) == 1
    serve_once([d], [load_output(f"recorder={by_serve}")])
    got = recorded(by_watch)
    assert [(a["run"], a["check"], a["severity"], a["metric"]) for a in got] == [
        ("nan-grad", "nonfinite", "fail", "train/grad_norm")
    ]
    assert recorded(by_serve) == got


def test_serve_posts_each_new_finding_to_its_webhook(tmp_path: Path) -> None:
    # `serve` sent no alert at all (only `watch` had --webhook): the same run, the same post.
    d = _failing_run(tmp_path)
    r = Receiver([])
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "rlvitals", "serve", str(d), "--port", "0"]
    proc = subprocess.Popen(
        [*cmd, "--webhook", r.url],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not r.bodies and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        r.close()
    assert r.bodies, f"no alert posted; exit {proc.returncode}: {err[-500:]}"
    (body,) = r.bodies
    assert body["rlvitals"]["check"] == "nonfinite" and body["rlvitals"]["severity"] == "fail"
    assert body["rlvitals"]["run"] == "nan-grad" and "train/grad_norm" in body["text"]
    assert "new findings to: http://127.0.0.1:" in out and "SECRET" not in out + err


def test_each_target_gets_its_own_body() -> None:
    f = Finding(
        "reward",
        "warn",
        "exploit_suspected",
        "reply says <!channel> **@everyone** [x](http://evil)",
        metric="reward/mean",
        first_step=3,
    )
    slack = alert_for(f, run="r", body="slack").body
    assert "&lt;!channel&gt;" in slack["text"] and slack["rlvitals"]["check"] == "reward"
    discord = alert_for(f, run="r", body="discord").body
    assert discord["allowed_mentions"] == {"parse": []} and "rlvitals" not in discord
    assert "\\*\\*\\@everyone\\*\\*" in discord["content"]
    assert "\\[x\\]\\(http\\:" in discord["content"]
    generic = alert_for(f, run="r", body="generic").body
    assert generic["rlvitals"]["verdict"] == "exploit_suspected"
    assert "<!channel>" in generic["text"]  # plain text: a generic receiver escapes itself
    assert body_for_url("https://discord.com/api/webhooks/1/abc") == "discord"
    assert body_for_url("https://discord.com/api/webhooks/1/abc/slack") == "slack"
    assert body_for_url("https://hooks.slack.com/services/T/B/X") == "slack"


def test_an_unknown_output_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _failing_run(tmp_path)
    assert main(["watch", str(d), "--to", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'nope'" in err and "webhook" in err
    assert main(["serve", str(d), "--to", "discord"]) == 2  # discord=URL expected
    assert "discord=URL" in capsys.readouterr().err


def test_an_output_that_fails_never_ends_the_follow(tmp_path: Path) -> None:
    class Broken(Output):
        calls = 0

        def update(self, run: Any, update: Any) -> None:
            Broken.calls += 1
            raise RuntimeError("boom")

    d = _failing_run(tmp_path)
    w = Watcher(d, outputs=[Broken()], throttle=replace(Watcher.THROTTLE, every_s=0))
    kinds = [e.kind for e in w.tick()] + [e.kind for e in w.tick(force=True)]
    assert "finding" in kinds and Broken.calls >= 2  # told every update, failing each time
    assert w.report is not None and w.report.worst == "fail"


def test_the_webhook_line_in_serves_json_is_not_the_secret(tmp_path: Path) -> None:
    out = load_output("slack=https://user:pw@hooks.slack.com/services/T/B/SECRET")
    try:
        assert out.describe() == "https://hooks.slack.com"
        assert json.dumps(out.status_line()).find("SECRET") == -1
    finally:
        out.close(0)


def test_the_trainers_live_view_and_its_quiet_mode_tell_the_same_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `rlvitals demo/train --to NAME`: the run being trained is judged live either way.
    import io

    from rich.console import Console

    from rlvitals.follow.train import TrainFollow, shown_by
    from rlvitals.outputs.console import LiveView

    monkeypatch.syspath_prepend(str(install(tmp_path / "site")))
    d = _failing_run(tmp_path / "runs")
    shown, quiet = tmp_path / "shown.jsonl", tmp_path / "quiet.jsonl"
    console = Console(file=io.StringIO(), width=120, color_system=None)
    every = replace(TrainFollow.THROTTLE, every_s=0)
    view = LiveView(40, console=console)
    beside = TrainFollow(None, [view, load_output(f"recorder={shown}")], every)
    with view:
        on_event = shown_by(view, beside)
        on_event("run", {"run_dir": str(d)})
        on_event("step", {"step": 0, "reward/mean": 0.3})
    follow = TrainFollow(None, [load_output(f"recorder={quiet}")], every)
    follow.event("run", {"run_dir": str(d)})
    follow.event("step", {"step": 0, "reward/mean": 0.3})
    assert follow.close() == 0 and beside.close() == 0
    got = recorded(shown)
    assert [(a["check"], a["severity"]) for a in got] == [("nonfinite", "fail")]
    assert recorded(quiet) == got


def test_one_finding_of_one_run_has_one_alert_id_however_the_run_was_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``watch ./runs/x`` and ``serve runs`` name one run by different paths: the alert's
    ``Idempotency-Key`` is the same, so a receiver drops the second copy."""
    run = tmp_path / "runs" / "x"
    run.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    f = Finding("nonfinite", "fail", "non_finite", "NaN", metric="train/grad_norm")
    ids = {
        alert_for(f, run="x", source=source).id
        for source in ("runs/x", "./runs/x", str(run), "link/x", str(tmp_path / "runs/x/"))
    }
    assert len(ids) == 1
    assert alert_for(f, run="x", source="s3://bucket/x").id != ids.pop()
