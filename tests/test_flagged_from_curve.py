"""Issue 28 item 5: the samples a degenerate-text flag cites are one click from the curve.

A finding's mark on a plot opens the transcripts of its step with the cited samples first
(``plot.js`` ``onMark``, ``dashboard.js`` ``openMark``). Browser-free: the report's embedded
data and the live page's transcript API carry those samples for a framework's sample dump
(a NeMo-RL ``train_data_step*.jsonl`` dump), where before the page had none to show (only
runs with a ``transcripts/`` folder of ours had any)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from rlvitals.checks import run_checks
from rlvitals.model import RunData
from rlvitals.readers.samples import open_samples
from rlvitals.views.report import render_report, report_payload, write_report
from test_browser import _wait, browser  # noqa: F401  (the headless Chromium fixture)


def _looping_dump(d: Path, steps: int = 10, loop_from: int = 4) -> Path:
    """NeMo-RL train_data dumps (as tests/test_degenerate.py writes them): from ``loop_from``
    the second sample of each step repeats one 4-gram."""
    d.mkdir(parents=True)
    ok = list(range(10, 50))
    loop = [7, 8, 9, 10] * 10
    for step in range(1, steps + 1):
        with open(d / f"train_data_step{step}.jsonl", "w") as f:
            for i in range(4):
                reply = loop if (step >= loop_from and i == 1) else ok
                rec = {
                    "content": [["question", f"answer {step}-{i}"]],
                    "rewards": [float(i % 2)],
                    "input_lengths": [43],
                    "token_ids": [[1, 2, 3, *reply]],
                    "token_loss_mask": [[0, 0, 0] + [1] * 40],
                    "sample_loss_mask": [1],
                    "generation_logprobs": [[0.0] * 3 + [-0.7] * 40],
                    "prev_logprobs": [[0.0] * 3 + [-0.7] * 40],
                    "idx": i,
                }
                f.write(json.dumps(rec) + "\n")
    return d


def _run(d: Path) -> RunData:
    run = RunData(source=str(d), format="samples")
    open_samples(d, run).poll(final=True)
    return run


def test_the_report_carries_the_flagged_samples_at_the_marks_step(tmp_path):
    run = _run(_looping_dump(tmp_path / "logs"))
    report = run_checks(run)
    (f,) = [f for f in report.findings if f.check == "text"]
    cited = f.evidence["attempt_ids"]
    assert f.first_step == 4 and cited[0] == "4-1"
    r = report_payload([(run, report)])["runs"][0]
    # The mark sits at the finding's first step; the page opens the nearest offered step.
    offered = sorted(t["step"] for t in r["transcript_steps"])
    tstep = next(s for s in offered if s >= f.first_step)
    assert tstep == 4
    shown = r["transcripts"]["4"]
    assert shown[0]["attempt_id"] == "4-1" and shown[0]["flagged"] is True
    assert shown[0]["flags"] == ["text"]
    assert [e["attempt_id"] for e in shown if e["flagged"]] == ["4-1"]
    html = render_report([(run, report)])
    assert "answer 4-1" in html  # the flagged sample's text is in the page itself
    assert "onMark: openMark" in html and "o.onMark(mk)" in html  # the mark is the link


def _looping_primerl(out: Path, steps: int = 10, loop_from: int = 4) -> Path:
    """A prime-rl run (the trace stream, tests/data/samples/make_primerl_stream.py's copy of
    prime-rl's FileMonitor): from ``loop_from`` the second episode of each step loops."""
    sys.path.insert(0, str(Path(__file__).parent / "data" / "samples"))
    import make_primerl_stream as m

    orch = m.FileMonitor(out, "orchestrator", 5 << 30, compress=True)
    for step in range(1, steps + 1):
        recs = []
        for i in range(4):
            rec = m._episode(
                f"e{step}-{i}", f"g{step}", step, step - 1, float(i % 2), [-0.7] * 40, "stop"
            )
            if step >= loop_from and i == 1:
                rec["traces"][0]["nodes"][1]["token_ids"] = [7, 8, 9, 10] * 10
            recs.append(rec)
        orch.log_episodes(recs, "all")
        orch.log_metrics({"reward/all/mean": 0.5}, step, m.T0 + step)
    orch.still_running()
    for p in out.rglob("*"):
        os.utime(p, (1_700_000_000, 1_700_000_000))  # finished: every step settled
    return out


def test_the_live_page_serves_them(tmp_path):
    from rlvitals.follow.hub import Hub

    hub = Hub([_looping_primerl(tmp_path / "output")])
    hub.poll()
    (rid,) = hub.runs
    snap = hub.snapshot(rid)
    assert snap is not None
    (f,) = [f for f in snap["report"]["findings"] if f["check"] == "text"]
    assert f["first_step"] == 4 and f["evidence"]["attempt_ids"][0] == "4-1"
    assert 4 in [t["step"] for t in snap["transcript_steps"]]
    got = hub.transcripts(rid, 4)
    assert got is not None and got[0]["attempt_id"] == "4-1" and got[0]["flagged"] is True


@pytest.mark.slow
def test_a_click_on_the_mark_opens_the_flagged_sample(browser, tmp_path):  # noqa: F811
    """In headless Chromium: a click on the text finding's mark on its curve shows step 4's
    transcripts, the looping sample first and flagged."""
    run = _run(_looping_dump(tmp_path / "logs"))
    out = tmp_path / "report.html"
    write_report(out, render_report([(run, run_checks(run))]))
    browser.get(out.as_uri())
    js = browser.execute_script
    assert _wait(lambda: js("return document.querySelectorAll('g.mark').length"))
    # The viewer on another step first (its chip), so only the mark's click can bring 4 back.
    js(
        "Array.from(document.querySelectorAll('.tr-picker .chip'))"
        ".find(b => b.textContent === 'step 10').click();"
    )
    on = "return document.querySelector('.tr-picker .chip.on').textContent"
    assert _wait(lambda: js(on) == "step 10")
    # A click on the plot at the mark's line (the hover layer above it takes the click).
    js(
        "var m = Array.from(document.querySelectorAll('g.mark')).find(g => g.dataset.step === '4');"
        "var r = m.getBoundingClientRect();"
        "var hover = m.ownerSVGElement.querySelector('rect.hover');"
        "hover.dispatchEvent(new MouseEvent('click', {bubbles: true,"
        " clientX: r.left + r.width / 2 - 3, clientY: r.top + r.height / 2}));"
    )
    first = _wait(
        lambda: js(
            "var a = document.querySelector('.tr-body details.attempt');"
            "return a && a.textContent.indexOf('answer 4-1') >= 0 ? a.className : null;"
        )
    )
    assert first is not None and "flagged" in first
    assert js(on) == "step 4"


def test_a_mismatch_tail_flag_cites_the_far_off_samples_in_the_report(tmp_path):
    from rlvitals.readers import read
    from test_primerl_traces import _tail_run

    run = read(_tail_run(tmp_path / "output"))
    report = run_checks(run)
    (f,) = [f for f in report.findings if f.check == "agreement"]
    assert f.first_step == 5 and f.evidence["attempt_ids"][0] == "5-3"
    r = report_payload([(run, report)])["runs"][0]
    shown = r["transcripts"]["5"]  # the mark's step: 5 is offered, the far-off sample first
    assert shown[0]["attempt_id"] == "5-3" and shown[0]["flagged"] is True
    assert shown[0]["flags"] == ["agreement"]
