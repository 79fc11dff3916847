"""``rlvitals watch``: new bytes only, slow phase vs stall, alerts once, the exit code."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from dashboard_runs import append_steps, make_run, step_record, write_run_json
from rlvitals.checks.base import Finding, Report
from rlvitals.cli import main
from rlvitals.follow import Throttle
from rlvitals.follow.watch import Watcher, watch
from rlvitals.judge import Judge
from rlvitals.outputs import Output
from rlvitals.outputs.webhook import Alert, alert_for


def _every_poll() -> Throttle:
    """``watch``'s own pace, judging at every tick."""
    from dataclasses import replace

    return replace(Watcher.THROTTLE, every_s=0)


class Collect(Output):
    """An output that keeps the alerts it was handed."""

    def __init__(self) -> None:
        self.sent: list[Alert] = []

    def update(self, run: Any, update: Any) -> None:
        for f, before in update.new_findings:
            self.sent.append(alert_for(f, run=run.name, source=run.source, previous=before))

    def status_line(self) -> str:
        return f"alerts to http://test/…: {len(self.sent)} delivered, 0 pending"


def test_each_tick_reads_only_the_new_bytes(tmp_path: Path) -> None:
    d = make_run(tmp_path, "r", 30, status="running")
    w = Watcher(d)
    w.tick()
    before = w.data.series("reward/mean")
    # Spoil every byte already read (same size, same line ends): a re-read would trip on them.
    # (All but the first 256, by which the follower knows the file is the same one and not a
    # rerun's new file.)
    steps = d / "steps.jsonl"
    old = steps.read_bytes()
    with open(steps, "r+b") as f:
        f.write(old[:256] + bytes(c if c == 10 else 35 for c in old[256:]))
    append_steps(d, [step_record(30, time.time())])
    w.tick()
    after = w.data.series("reward/mean")
    assert w.data.last_step == 30 and w.data.warnings == []
    assert after.values[:30].tolist() == before.values.tolist()


def _heartbeats(d: Path, records: list[dict[str, Any]]) -> None:
    with open(d / "progress.jsonl", "a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def test_slow_phase_with_heartbeats_is_not_a_stall_and_each_stall_alerts_once(
    tmp_path: Path,
) -> None:
    t0 = 1_000_000.0
    d = make_run(tmp_path, "r", 20, status="running", t0=t0)
    last = t0 + 38  # step 19
    clock = [last + 1]
    n = Collect()
    at = Throttle(every_s=0, idle_s=0, clock=lambda: clock[0], timer=lambda: clock[0])
    w = Watcher(d, Judge(stall_after=20), [n], at)
    w.tick()
    assert w.terminal.liveness()[0] == "progress"

    # 30 s without a step record, but heartbeats show attempts being done: slow, not stalled.
    _heartbeats(
        d,
        [
            {
                "time": last + 10 + i * 6,
                "step": 20,
                "phase": "sampling",
                "attempts_done": 8 * i,
                "attempts_needed": 64,
            }
            for i in range(4)
        ],
    )
    clock[0] = last + 30
    w.tick()
    state, words = w.terminal.liveness()
    assert state == "slow" and "sampling on step 20, 24/64 attempts" in words
    assert not n.sent

    # Heartbeats stop too: stalled, alerted once however long it lasts.
    for dt in (60, 70, 80):
        clock[0] = last + dt
        w.tick()
    assert w.terminal.liveness()[0] == "stalled"
    assert [a.body["rlvitals"]["verdict"] for a in n.sent] == ["stalled"]

    # It moves on, then stalls again: that is news again.
    append_steps(d, [step_record(20, last + 81)])
    clock[0] = last + 82
    w.tick()
    assert w.terminal.liveness()[0] == "progress"
    clock[0] = last + 140
    w.tick()
    assert [a.body["rlvitals"]["verdict"] for a in n.sent] == ["stalled", "stalled"]


def test_live_view_at_fixed_width_shows_step_numbers_verdict_and_text_as_text(
    tmp_path: Path,
) -> None:
    d = make_run(tmp_path, "r", 40, status="running")
    findings = [
        Finding("reward", "warn", "no_signal", "[bold red]not markup[/] \x1b[2J", first_step=5)
    ]

    def judge(data: Any, now: float) -> Report:
        return Report(data.source, "no_signal", findings)

    w = Watcher(d, judge, [Collect()])
    w.tick()
    buf = io.StringIO()
    Console(file=buf, width=100, force_terminal=False, color_system=None).print(w.terminal.panel())
    out = buf.getvalue()
    assert "step 39" in out and "running" in out
    assert "reward" in out and "5-step mean" in out
    assert "verdict: no learning signal (warn)" in out
    assert "[bold red]not markup[/]" in out and "\x1b" not in out
    assert "alerts to http://test/…" in out


def test_watch_ends_when_the_run_does_with_the_checks_exit_code(tmp_path: Path) -> None:
    d = make_run(tmp_path, "r", 20, status="running")
    out = io.StringIO()
    ticks = [0]

    def sleep(_: float) -> None:  # the trainer, between two polls
        ticks[0] += 1
        if ticks[0] == 1:
            append_steps(d, [step_record(20, time.time(), **{"train/loss": "NaN"})])
        elif ticks[0] == 2:
            write_run_json(d, "finished")

    w = Watcher(d, throttle=_every_poll())
    console = Console(file=io.StringIO(), force_terminal=False)
    code = watch(w, console=console, fail_on="fail", json_lines=True, out=out, sleep=sleep)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    kinds = [e["event"] for e in events]
    assert code == 1
    assert kinds[0] == "step" and kinds[-1] == "finished"
    assert events[-1]["exit_code"] == 1 and events[-1]["status"] == "finished"
    nonfinite = [e for e in events if e["event"] == "finding" and e["check"] == "nonfinite"]
    assert len(nonfinite) == 1 and nonfinite[0]["first_step"] == 20


def test_watch_exit_code_is_zero_for_a_healthy_finished_run(tmp_path: Path) -> None:
    d = make_run(tmp_path, "r", 30, status="finished")
    buf = io.StringIO()
    w = Watcher(d)
    code = watch(w, console=Console(file=buf, force_terminal=False, width=200), fail_on="fail")
    assert code == 0
    assert "run finished" in buf.getvalue() and "exit 0" in buf.getvalue()


def test_line_mode_writes_no_control_characters(tmp_path: Path) -> None:
    d = make_run(tmp_path, "r", 5, status="finished")

    def judge(data: Any, now: float) -> Report:
        f = Finding("reward", "fail", "no_signal", "bad\x1b]0;pwned\x07title\nnext", first_step=1)
        return Report(data.source, "no_signal", [f])

    buf = io.StringIO()
    w = Watcher(d, judge)
    assert watch(w, console=Console(file=buf, force_terminal=False), fail_on="warn") == 1
    text = buf.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "bad\\x1b]0;pwned\\x07title next" in text  # shown, visibly, not acted on


def test_watch_waits_for_a_run_that_does_not_exist_yet(tmp_path: Path) -> None:
    d = tmp_path / "later"
    out = io.StringIO()
    ticks = [0]

    def sleep(_: float) -> None:  # the trainer starts after watch does, then finishes
        ticks[0] += 1
        if ticks[0] == 3:
            make_run(tmp_path, "later", 10, status="running")
        elif ticks[0] == 5:
            write_run_json(d, "finished")

    w = Watcher(d, throttle=_every_poll(), wait=True)
    console = Console(file=io.StringIO(), force_terminal=False)
    code = watch(w, console=console, fail_on="fail", json_lines=True, out=out, sleep=sleep)
    kinds = [json.loads(line)["event"] for line in out.getvalue().splitlines()]
    assert code == 0
    assert kinds[0] == "waiting" and kinds.count("waiting") == 1
    assert kinds[1] == "appeared" and "step" in kinds and kinds[-1] == "finished"


def test_watch_line_mode_says_it_is_waiting(tmp_path: Path) -> None:
    w = Watcher(tmp_path / "nope", wait=True)
    (ev,) = w.tick()
    assert w.terminal.line(ev) == f"waiting for {tmp_path / 'nope'} to appear (Ctrl-C to stop)"
    assert w.tick() == []  # said once


def test_watch_command_with_a_bad_set_or_rules_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = make_run(tmp_path, "r", 5, status="finished")
    assert main(["watch", str(d), "--set", "no_such_threshold=1"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["watch", str(d), "--rules", str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml" in capsys.readouterr().err


def test_watch_command_rejects_a_non_http_webhook(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = make_run(tmp_path, "r", 5, status="finished")
    assert main(["watch", str(d), "--webhook", "ftp://x"]) == 2
    assert "http" in capsys.readouterr().err


def test_a_run_recreated_while_watched_restarts_cleanly(tmp_path: Path) -> None:
    import shutil

    d = make_run(tmp_path, "r", 10, status="running", **{"train/loss": 1.0})
    w = Watcher(d, throttle=_every_poll())
    w.tick()
    shutil.rmtree(d)
    w.tick()  # gone for now: the old run's data is not mixed with what comes next
    make_run(tmp_path, "r", 30, status="running", **{"train/loss": 2.0})
    kinds = [e.kind for e in w.tick()]
    assert "reset" in kinds or "appeared" in kinds
    assert set(w.data.series("train/loss").values.tolist()) == {2.0}
    assert w.data.last_step == 29 and w.data.warnings == []


def test_watch_set_overrides_reach_the_checks(tmp_path: Path) -> None:
    from rlvitals.cli.check import _overrides

    d = make_run(tmp_path, "r", 40)
    plain = Watcher(d)
    tuned = Watcher(d, Judge(thresholds=_overrides(["rejected_warn=0.1"])))
    for w in (plain, tuned):
        w.tick(force=True)
    assert [f.check for f in plain.report.findings] == ["reward"]
    assert "groups" in [f.check for f in tuned.report.findings]


def test_watch_waits_in_an_empty_run_directory_but_not_on_a_file_that_is_no_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    w = Watcher(tmp_path / "empty", wait=True)
    assert [e.kind for e in w.tick()] == ["waiting"]
    (tmp_path / "notes.txt").write_text("hello\n")
    assert main(["watch", str(tmp_path / "notes.txt")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_follower_api_for_hooks(tmp_path: Path) -> None:
    from rlvitals.follow import Follower
    from rlvitals.readers import open_reader

    d = make_run(tmp_path, "r", 10, status="running")
    told: list[list[str]] = []

    class Told(Output):
        def update(self, run: Any, update: Any) -> None:
            if update.new_findings:
                told.append([x.check for x, _ in update.new_findings])

    f = Follower(
        open_reader(d),
        lambda data, now: Report(
            data.source, "no_signal", [Finding("reward", "warn", "no_signal", "flat")]
        ),
        [Told()],
        Throttle(every_s=0),
    )
    up = f.poll()
    assert up.new_data and up.new_step == 9 and up.judged and up.report_changed
    assert up.new_points["reward/mean"] == (0, 10)  # the new points, for an exporter
    assert [x.check for x, _ in up.new_findings] == ["reward"] and told == [["reward"]]
    up = f.poll(force=True)
    assert (
        not up.new_data and up.new_step is None and up.new_findings == [] and told == [["reward"]]
    )
    append_steps(d, [step_record(10, time.time())])
    up = f.poll()
    assert up.new_step == 10 and up.new_points["reward/mean"] == (10, 11)
    steps, _values = f.data.metrics.columns("reward/mean")  # type: ignore[misc]
    assert list(steps[10:11]) == [10]


def test_the_demo_screen_ends_on_the_checks_verdict_with_one_held_out_pair(
    tmp_path: Path,
) -> None:
    """Newcomer 2026-12-07 problem 9: the demo's first screen showed three held-out pairs (the
    summary's first and last single evals, the live verdict judged before the last evals, the
    check's windows). The follow stage judges the ended run once more (``end``, which the
    trainer's command calls when training returns), and the summary leaves the change to the
    check: one pair, the check's."""
    import re
    import shutil
    from dataclasses import replace

    from rlvitals.checks import run_checks
    from rlvitals.follow.train import TrainFollow, shown_by
    from rlvitals.outputs.console import LiveView
    from rlvitals.readers import read
    from rlvitals.views.check import render_text
    from rlvitals.views.live import summary
    from synth import synth_run

    src = synth_run(tmp_path / "src", "r", lr=0.04, seed=1, evals_every=5)
    live = tmp_path / "live" / "r"
    live.mkdir(parents=True)
    shutil.copy(src / "rollouts.jsonl", live / "rollouts.jsonl")
    meta = json.loads((src / "run.json").read_text())
    (live / "run.json").write_text(json.dumps({**meta, "status": "running"}))
    steps = (src / "steps.jsonl").read_text().splitlines(keepends=True)
    evals = [json.loads(x) for x in (src / "evals.jsonl").read_text().splitlines()]
    out = io.StringIO()
    console = Console(file=out, width=160, color_system=None)
    # Judged once as it starts, then not again while it trains (a slow judge on a busy CPU).
    view = LiveView(len(steps), console=console)
    follow = TrainFollow(None, [view], replace(TrainFollow.THROTTLE, every_s=1e9))
    event = shown_by(view, follow)
    with view:
        event("run", {"run_dir": str(live)})
        for line in steps:
            rec = json.loads(line)
            with open(live / "steps.jsonl", "a") as f:
                f.write(line)
            event("step", rec)
            for e in [e for e in evals if e["step"] == rec["step"]]:
                with open(live / "evals.jsonl", "a") as f:
                    f.write(json.dumps(e) + "\n")
                event("eval", e)
        (live / "run.json").write_text(json.dumps({**meta, "status": "finished"}))
        follow.end()  # as run_trainer does once training returns
    follow.close()
    final = run_checks(read(live))
    assert view.report is not None and view.report.verdict == final.verdict == "learning"
    left = [f.title for f in view.report.findings if f.check == "heldout"]
    assert left and left == [f.title for f in final.findings if f.check == "heldout"]
    console.print(summary(view.tally, str(live)))
    render_text([final], out)
    pairs = {
        m.group(0)
        for line in out.getvalue().splitlines()
        if "held-out" in line or "heldout" in line
        for m in re.finditer(r"\d\.\d+ -> \d\.\d+", line)
    }
    assert len(pairs) == 1, pairs
