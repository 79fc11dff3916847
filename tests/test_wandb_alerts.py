"""W&B alerts from real W&B runs in offline mode: ``wandb.alert`` (wandb 0.31) writes each alert
into the run's ``.wandb`` log as an ``alert`` record (what ``wandb sync`` uploads), so the
alerts are read back from the offline run's own files, not from a mock.

- ``rlvitals watch`` of a W&B run that a separate process is still writing (every update is
  judged while it runs): one alert per warn-or-fail finding, on the same run id, each once.
- The TRL callback beside TRL's own W&B logging (``report_to="wandb"``): the finding goes on
  TRL's run, once, though the run is judged after every step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

wandb = pytest.importorskip("wandb")

from rlvitals.checks.base import Finding  # noqa: E402
from rlvitals.outputs import load_output  # noqa: E402
from rlvitals.outputs.wandb_alerts import TITLE_MAX, WandbAlerts, alert_fields  # noqa: E402
from rlvitals.readers.wandb import WandbReader  # noqa: E402

WRITER = """
import os, random, sys, time, wandb
d, steps, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
r = wandb.init(project="rl", dir=d, mode="offline", settings=wandb.Settings(console="off"))
rng = random.Random(0)
# wandb-core writes an offline run's log in whole 32 KiB blocks: 300 more keys a step fill
# one every few steps, so the watcher reads (and judges) the run while it is written.
extra = {f"extra/k{i}": float(i) for i in range(300)}
for s in range(steps):
    # a reward that is always 0: no group has anything to learn from
    r.log({"train/reward": 0.0, "train/reward_std": 0.0, "train/frac_reward_zero_std": 1.0,
           "train/loss": rng.gauss(0, 0.01), "train/entropy": 0.6 + rng.gauss(0, 0.01),
           **extra}, step=s)
    time.sleep(pause)
r.finish()
"""


def alerts_in(folder: Path) -> list[dict[str, Any]]:
    """Every ``alert`` record in the ``.wandb`` logs under ``folder``, with its run's id."""
    out = []
    for log in sorted(folder.rglob("*.wandb")):
        reader = WandbReader(log)
        found = _Alerts(reader)
        reader._record = found  # type: ignore[method-assign]
        reader.poll()
        for a in found.records:
            row = {"run_id": reader.run.info.get("run_id"), "title": a.title, "text": a.text}
            out.append({**row, "level": a.level, "wait_ms": a.wait_duration})
    return out


class _Alerts:
    """A reader's record handler that keeps the ``alert`` records and reads on as before."""

    def __init__(self, reader: Any) -> None:
        self.reader, self.keep, self.records = reader, reader._record, []

    def __call__(self, raw: bytes, at: int) -> None:
        rec = self.reader.pb.Record()
        rec.ParseFromString(raw)
        if rec.WhichOneof("record_type") == "alert":
            self.records.append(rec.alert)
        self.keep(raw, at)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-home"))
    return tmp_path


def test_watch_posts_each_finding_once_on_the_watched_w_and_b_run(
    offline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlvitals.cli import main
    from rlvitals.fleet import judge

    watched = offline / "project"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(watched), "40", "0.1"],
        env={**os.environ, "WANDB_DIR": str(watched)},
    )
    try:
        latest = watched / "wandb" / "latest-run"
        deadline = time.monotonic() + 60  # the run directory appears once wandb has started
        while not (latest.exists() and any(latest.glob("*.wandb"))):
            assert time.monotonic() < deadline and writer.poll() is None
            time.sleep(0.05)
        joined = offline / "joined"
        code = main(
            ["watch", str(latest), "--json", "--interval", "0.2",
             "--to", f"wandb=wait=600,dir={joined}", "--fail-on", "never"]
        )  # fmt: skip
    finally:
        writer.wait(60)
    assert code == 0 and writer.returncode == 0
    (report,) = judge([str(latest)])
    assert report.report is not None
    alarms = [f for f in report.report["findings"] if f["severity"] in ("warn", "fail")]
    assert len(alarms) >= 1
    posted = alerts_in(joined)
    run_id = WandbReader(latest).run.info.get("run_id") or next(latest.glob("*.wandb")).stem[4:]
    assert {a["run_id"] for a in posted} == {run_id}  # the watched run, joined by its id
    assert sorted(a["title"] for a in posted) == sorted(
        alert_fields(Finding(**f), "x")["title"] for f in alarms
    )  # one per finding: every judgement of the live run after the first repeated them
    assert {a["level"] for a in posted} <= {"ERROR", "WARN"}
    assert all(a["wait_ms"] == 600_000 for a in posted)
    fail = next(a for a in posted if a["level"] == "ERROR")
    assert "Next: " in fail["text"] and "share:" in fail["text"]  # its evidence and action
    assert not alerts_in(watched)  # the watched folder is only read
    # the run was read and judged while it was written, the finding told at its first
    # judgement and repeated by every later one: the alerts above are one per finding.
    events = [json.loads(e) for e in capsys.readouterr().out.splitlines()]
    kinds = [e["event"] for e in events]
    steps = [e["step"] for e in events if e["event"] == "step"]
    assert len(steps) >= 3 and steps[0] < steps[-1] == 39
    assert kinds.index("finding") < len(kinds) - 1 - kinds[::-1].index("step")


def test_the_trl_callback_posts_on_trls_own_w_and_b_run(offline: Path) -> None:
    pytest.importorskip("trl")
    pytest.importorskip("torch")
    sys.path.insert(0, str(Path(__file__).parent))
    from test_integrations_trl import nothing, train

    got = train(offline, [nothing], steps=4, lr=1e-3, eos_bias=2.5, outputs=("wandb",),
                report_to="wandb")  # fmt: skip
    run = wandb.run
    assert run is not None
    run_id, folder = run.id, Path(run.dir).parent  # (wandb keeps its first WANDB_DIR)
    wandb.finish()
    posted = alerts_in(folder)
    # a reward that is always 0: the groups check fails from the first judgement, and the run
    # is judged after each of its 4 steps: one alert
    assert [(a["run_id"], a["level"]) for a in posted] == [(run_id, "ERROR")], got["printed"]
    assert posted[0]["title"].startswith("FAIL groups:")
    assert "FAIL groups:" in got["printed"]


def test_without_a_w_and_b_run_nothing_is_posted_and_each_finding_is_listed(
    offline: Path,
) -> None:
    out = load_output("wandb")
    assert isinstance(out, WandbAlerts)

    class Run:
        name, source, data = "r", "runs/r", None

    class Up:
        def __init__(self) -> None:
            self.new_findings = [(Finding("groups", "fail", "too_hard", "all rejected"), None)]

    assert wandb.run is None
    out.update(Run(), Up())
    assert out.close(10) == 1
    ((title, why),) = out.undelivered()
    assert title.startswith("FAIL groups") and "no W&B run" in why


def test_titles_fit_wandb_and_name_the_finding() -> None:
    long = Finding(
        "transcripts", "warn", "exploit_suspected", "x", metric="transcripts/" + "a" * 80
    )
    other = Finding(
        "transcripts", "warn", "exploit_suspected", "x", metric="transcripts/" + "b" * 80
    )
    a, b = alert_fields(long, "run"), alert_fields(other, "run")
    assert len(a["title"]) <= TITLE_MAX and a["title"] != b["title"]
    up = alert_fields(
        Finding("transcripts", "fail", "exploit_suspected", "x"), "run", previous="warn"
    )
    assert up["title"].startswith("FAIL") and "(was warn)" in up["text"] and up["level"] == "ERROR"
    ping = alert_fields(Finding("groups", "warn", "too_hard", "<!channel> \x1b[2J"), "run")
    assert "<!channel>" not in ping["text"] and "\x1b" not in ping["text"]


def test_a_w_and_b_run_that_cannot_be_joined_is_said_once_per_finding(
    offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def refuse(*args: Any, **kwargs: Any) -> None:
        calls.append(kwargs.get("id"))
        raise RuntimeError("not logged in")

    monkeypatch.setattr(wandb, "init", refuse)
    out = WandbAlerts(directory=offline / "joined")

    class Data:
        format, info = "wandb", {"run_id": "abc123", "project": "p", "run_dir": "run-x-abc123"}

    class Run:
        name, source, data = "r", "wandb/latest-run", Data()

    class Up:
        def __init__(self, check: str) -> None:
            self.new_findings = [(Finding(check, "warn", "too_hard", "x"), None)]

    out.update(Run(), Up("groups"))
    out.update(Run(), Up("reward"))
    assert out.close(10) == 2
    assert calls == ["abc123"]  # tried once, not once per alert
    assert all("not logged in" in why for _t, why in out.undelivered())
