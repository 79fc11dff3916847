"""The transcripts check: each signal fires on the run it is for, cites attempts with escaped
excerpts, and stays quiet on healthy runs. Runs are synthetic with full transcripts
(tests/transcripts_synth.py); tests/test_transcripts_trainer.py uses the reference trainer."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pytest

from rlvitals.checks import run_checks
from rlvitals.checks.context import Context
from rlvitals.checks.transcripts import RULES_ENV, _cusum, _flag_alarm, spearman
from rlvitals.errors import ConfigError
from rlvitals.readers import read
from rlvitals.transcripts import Rules, TranscriptStore
from rlvitals.transcripts.scan import RunScan
from rlvitals.views.check import render_text
from transcripts_synth import transcript_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("tr")
    cases = {
        "healthy": dict(evals_every=5, heldout_rises=True, lr=0.03),
        "healthy_b": dict(seed=7, lr=0.01),
        "tamper": dict(hack="test_edit", hack_from=15),
        "ansi": dict(hack="ansi", hack_from=15),
        "hedge": dict(hack="hedge", hack_from=15, hack_ramp=0.03),
        "hedge_level": dict(hack="hedge", hack_from=15, hack_ramp=0.1, hack_cap=0.1),
        "collapse": dict(collapse_from=15),
        "length": dict(length_from=15, evals_every=5),
        "length_ok": dict(length_from=15, evals_every=5, heldout_rises=True),
        "jump": dict(jump_at=20),
        "samples": dict(hack="test_edit", hack_from=15, trace="samples"),
    }
    return {k: transcript_run(out, k, steps=36, groups=12, **kw) for k, kw in cases.items()}


def check(path, **kw):
    return run_checks(read(str(path)), **kw)


def ours(rep, at_least="info"):
    order = ["ok", "info", "warn", "fail"]
    return [
        f
        for f in rep.findings
        if f.check == "transcripts" and order.index(f.severity) >= order.index(at_least)
    ]


@pytest.mark.parametrize("name", ["healthy", "healthy_b"])
def test_healthy_runs_raise_nothing_from_transcripts(runs, name):
    rep = check(runs[name])
    assert not [f for f in rep.findings if f.check in ("transcripts", "heldout") and
                f.severity in ("warn", "fail")]  # fmt: skip
    assert not ours(rep, "info")


def test_rates_are_returned_with_the_report_not_written_into_the_run(runs):
    data = read(str(runs["healthy"]))
    names_before = data.names()
    rep = run_checks(data)
    for name in ("transcripts/test_edit_rate", "transcripts/repetition_rate",
                 "transcripts/flagged_rate", "transcripts/reward_length_spearman"):  # fmt: skip
        s = rep.series.get(name)
        assert s is not None and len(s) >= 30, name
        assert data.series(name) is None, name
    assert data.names() == names_before
    assert float(np.nanmax(rep.series["transcripts/flagged_rate"].values)) < 0.1


def test_test_file_edits_are_an_exploit_with_attempts_cited(runs):
    rep = check(runs["tamper"])
    assert rep.verdict == "exploit_suspected"
    (f,) = [f for f in ours(rep) if f.verdict == "exploit_suspected" and "flags" in f.evidence]
    assert f.severity == "fail" and 15 <= f.first_step <= 17
    assert "test_edit" in f.evidence["flags"]
    ids = f.evidence["attempt_ids"]
    assert ids and len(ids) <= 3
    store = TranscriptStore(runs["tamper"])
    for e in f.evidence["examples"]:
        a = store.find(e["attempt_id"], e["step"])
        assert a is not None and a.reward == e["reward"]
    assert any("tests/test_sum.py" in e["excerpt"] for e in f.evidence["examples"])
    assert "e.g. attempt" in f.title


def test_evidence_and_terminal_show_escaped_text(runs):
    rep = check(runs["ansi"])
    (f,) = [
        f for f in ours(rep, "warn") if f.verdict == "exploit_suspected" and "flags" in f.evidence
    ]
    assert "early_exit" in f.evidence["flags"]
    blob = json.dumps(f.to_dict(), ensure_ascii=False)
    assert "\x1b" not in blob and "\u202e" not in blob
    assert "\\x1b" in blob or "\\\\x1b" in blob
    buf = io.StringIO()
    render_text([rep], buf, width=120, color=False)
    assert "\x1b" not in buf.getvalue() and "\u202e" not in buf.getvalue()


def test_parser_pleasing_answers_are_an_exploit(runs):
    rep = check(runs["hedge"])
    (f,) = [
        f for f in ours(rep, "warn") if f.verdict == "exploit_suspected" and "flags" in f.evidence
    ]
    assert "multiple_answers" in f.evidence["flags"]
    assert f.evidence["flags"]["multiple_answers"]["relative"] is True
    assert f.first_step >= 15


def test_a_relative_flag_no_number_confirms_is_a_hypothesis_not_an_alarm(runs):
    # The same hedged answers at a level that holds (a tenth of the attempts from step 15, as a
    # task with several right answers gives): held-out not falling, no component, replies
    # not collapsing, the share not climbing. Info, with the flags; the climbing share above
    # warns (issue 27: healthy TRL runs read EXPLOIT SUSPECTED from such flags).
    rep = check(runs["hedge_level"])
    (f,) = [f for f in ours(rep) if f.verdict == "exploit_suspected" and "flags" in f.evidence]
    assert f.severity == "info" and f.evidence["corroborated_by"] == []
    assert "multiple_answers" in f.evidence["flags"] and "hypothesis" in f.title
    assert not rep.at_least("warn"), [x.title for x in rep.at_least("warn")]
    climbing = [f for f in ours(check(runs["hedge"]), "warn") if f.evidence.get("corroborated_by")]
    assert "climbs step after step" in climbing[0].evidence["corroborated_by"][0]


def test_repetitive_replies_with_entropy_falling_are_a_collapse(runs):
    rep = check(runs["collapse"])
    (f,) = [f for f in ours(rep, "warn") if f.verdict == "collapse" and "flags" in f.evidence]
    assert 15 <= f.first_step <= 18
    assert f.evidence["entropy"]["falling"] is True
    assert {"repetitive", "repeated_reply"} & set(f.evidence["flags"])
    assert any("repetitive" in e["flags"] for e in f.evidence["examples"])
    assert "I think the answer" in f.evidence["examples"][0]["excerpt"]


def test_reward_tracking_length_with_flat_heldout_is_suspected(runs):
    rep = check(runs["length"])
    fs = [f for f in ours(rep, "warn") if f.metric == "transcripts/reward_length_spearman"]
    assert len(fs) == 1 and fs[0].evidence["late_rho"] > 0.3
    assert fs[0].first_step >= 15


def test_reward_tracking_length_with_heldout_rising_is_not(runs):
    rep = check(runs["length_ok"])
    assert not [f for f in ours(rep) if f.metric == "transcripts/reward_length_spearman"]


def test_reward_jump_points_at_the_step_to_read(runs):
    rep = check(runs["jump"])
    fs = [f for f in ours(rep) if (f.metric or "").startswith("reward/")]
    assert len(fs) == 1 and fs[0].severity == "info" and 18 <= fs[0].first_step <= 21
    assert "--step" in fs[0].action


def test_samples_trace_runs_no_text_flags(runs):
    data = read(str(runs["samples"]))
    rep = run_checks(data)
    assert not [f for f in ours(rep) if "flags" in f.evidence]
    assert "transcripts/test_edit_rate" not in rep.series


def test_rules_file_in_the_run_directory_is_used(runs, tmp_path):
    run = runs["healthy_b"]
    (run / "transcript-rules.toml").write_text(
        '[[flags.custom]]\nname = "double_checks"\npattern = "So the sum"\n'
        'title = "says so the sum"\n'
    )
    try:
        rep = check(run)
        (f,) = [f for f in ours(rep, "warn") if "double_checks" in f.evidence.get("flags", {})]
        assert f.severity == "fail" and f.evidence["rules"].endswith("transcript-rules.toml")
    finally:
        (run / "transcript-rules.toml").unlink()


def test_bad_rules_are_a_one_line_error(runs, tmp_path, monkeypatch):
    bad = tmp_path / "bad.toml"
    bad.write_text("[limits]\nonset_rat = 0.1\n")
    monkeypatch.setenv(RULES_ENV, str(bad))
    with pytest.raises(ConfigError, match="onset_rat"):
        check(runs["healthy_b"])
    proc = subprocess.run(
        [sys.executable, "-m", "rlvitals", "check", str(runs["healthy_b"])],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, RULES_ENV: str(bad)},
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "onset_rat" in proc.stderr


def test_transcript_findings_come_before_heldout(runs):
    rep = check(runs["length"])
    checks = [f.check for f in rep.findings]
    assert checks.index("transcripts") < checks.index("heldout")


# -- the statistics ----------------------------------------------------------------------------


def scan_of(counts, n):
    k = len(counts)
    return RunScan(
        np.arange(k),
        np.full(k, n),
        np.full(k, n),
        {"early_exit": np.asarray(counts), "answer_only": np.asarray(counts)},
        ["early_exit", "answer_only"],
    )


def test_three_of_five_steps_over_the_onset_line_alarm():
    counts = [0] * 10 + [10, 0, 10, 10, 0] + [0] * 5
    a = _flag_alarm(scan_of(counts, 100), "early_exit", Rules())
    assert a is not None and a["onset"] == 10 and a["line"] == 0.02
    # Two steps of five over the line, 2% of the five steps' episodes: no alarm.
    assert _flag_alarm(scan_of([0] * 10 + [5, 0, 0, 5, 0] + [0] * 5, 100), "early_exit",
                       Rules()) is None  # fmt: skip


def test_cusum_finds_a_steady_small_rate_the_three_of_five_rule_misses():
    # Eight attempts a step, one flagged every other step (6%): never 3 of 5 steps... except
    # that 3 of 5 needs three flagged steps; with a flag every third step, CUSUM still adds up.
    counts = [0] * 10 + [1, 0, 0] * 10
    a = _flag_alarm(scan_of(counts, 8), "early_exit", Rules())
    assert a is not None and 10 <= a["onset"] <= 13
    assert _flag_alarm(scan_of([0] * 40, 8), "early_exit", Rules()) is None


def test_relative_flags_are_held_against_the_early_rate():
    steady = [50] * 30  # half the replies answer-only from the start: normal for this task
    assert _flag_alarm(scan_of(steady, 100), "answer_only", Rules()) is None
    rising = [50] * 15 + [80] * 15
    a = _flag_alarm(scan_of(rising, 100), "answer_only", Rules())
    assert a is not None and a["onset"] == 15 and a["early_rate"] == 0.5


def test_cusum_onset_is_where_the_statistic_left_zero():
    x = np.array([0, 0, 0, 0, 3, 3, 3, 3, 3], dtype=float)
    n = np.full(len(x), 20.0)
    start, cross, s = _cusum(x, n, 0.01, 0.05)
    assert start == 4 and cross >= 4 and s > 5
    assert _cusum(np.zeros(9), n, 0.01, 0.05) is None


def test_one_burst_is_not_a_trend():
    counts = [0] * 10 + [10] + [0] * 20
    assert _flag_alarm(scan_of(counts, 96), "early_exit", Rules()) is None


def test_spearman_with_ties():
    assert spearman(np.array([0, 0, 1, 1.0]), np.array([1, 2, 3, 4.0])) == pytest.approx(
        0.894, 1e-3
    )
    assert np.isnan(spearman(np.ones(5), np.arange(5.0)))


def test_context_scan_is_cached_and_warns_once_per_broken_file(runs, tmp_path):
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(runs["healthy_b"], run)
    p = run / "transcripts" / "step-000003.json"
    p.write_bytes(p.read_bytes()[:-100])
    data = read(str(run))
    ctx = Context(data)
    from rlvitals.checks.transcripts import scan

    sc = scan(ctx)
    assert scan(ctx) is sc
    # Said once, as the judging's warning (Report.warnings), never written into the run.
    warned = [w for w in ctx.judging_warnings() if "step-000003.json" in w]
    assert len(warned) == 1
    assert not [w for w in data.warnings if "step-000003.json" in w]
    assert sc.attempts[3] > 0  # the attempts before the cut are still counted


def test_a_rise_at_its_early_rate_is_no_jump(tmp_path):
    # Two five-update means of a steady rise differ by the rate times the distance between the
    # windows' centres (five updates, not half the nine updates they span): a line rising at
    # its own early rate never "climbs faster than the task allows".
    p = tmp_path / "ramp.jsonl"
    p.write_text("".join(json.dumps({"step": i, "reward": i / 30}) + "\n" for i in range(30)))
    rep = run_checks(read(str(p)), now=0.0)
    assert not [f for f in rep.findings if f.verdict == "exploit_suspected"]
    (reward,) = [f for f in rep.findings if f.check == "reward"]
    assert reward.verdict == "learning" and reward.evidence["noise_per_step"] == 0.0
    # ... and a step up of a fifth of the range in one update on that rise still is one
    rng = np.random.default_rng(0)
    rows = [
        {"step": i, "reward": i / 100 + (0.2 if i >= 20 else 0.0) + float(rng.normal(0, 0.01))}
        for i in range(40)
    ]
    p = tmp_path / "step.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    jumps = [f for f in run_checks(read(str(p)), now=0.0).findings if "jump" in f.evidence]
    assert len(jumps) == 1 and 18 <= jumps[0].first_step <= 21, jumps
