"""The HTML report: self-contained, escaped, the plots' data and findings in order."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from dashboard_runs import (
    HOSTILE,
    make_run,
    report_with,
    sample_findings,
    step_record,
    write_transcript,
)
from rlvitals import baseline as baseline_mod
from rlvitals.checks.base import Finding
from rlvitals.cli import main
from rlvitals.errors import ReadError
from rlvitals.readers import read
from rlvitals.schema import METRICS
from rlvitals.views.dashboard import (
    PLOTS,
    baseline_ranges,
    load_transcripts,
    plot_metrics,
    safe_json,
    transcript_steps,
)
from rlvitals.views.report import render_report, report_payload


def _data_block(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="rlv-data">(.*?)</script>', html, re.S)
    assert m, "no data block"
    return json.loads(m.group(1))


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run(tmp_path, "run-a", 60, transcripts=(30, 36, 59))


def test_report_opens_offline_with_nothing_to_fetch(run_dir: Path) -> None:
    data = read(run_dir)
    html = render_report([(data, report_with(sample_findings(), str(run_dir)))])
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html, re.I)
    assert "<link" not in html and "@import" not in html
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    assert "default-src 'none'" in csp and "connect-src 'none'" in csp
    # Only the page's own inline scripts may run: their hashes are the policy's.
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert len(scripts) == 2
    for s in scripts:
        digest = base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp


def test_run_text_cannot_leave_the_data_block(tmp_path: Path) -> None:
    d = make_run(tmp_path, "evil", 40, transcripts=(30,))
    data = read(d)
    data.info["name"] = HOSTILE
    html = render_report([(data, report_with(sample_findings(), str(d)))])
    assert html.count("</script>") == 3  # the data block and the two scripts, nothing else
    assert html.count("<script") == 3
    assert "<!--" not in html
    assert "\u2028" not in html and "\u2029" not in html
    block = _data_block(html)
    run = block["runs"][0]
    shown = HOSTILE.replace("\u2028", "\\u2028")  # the separator arrives as visible text
    assert run["name"] == shown
    assert run["report"]["findings"][1]["title"].endswith(shown)
    texts = [g["completion"] for e in run["transcripts"]["30"] for g in e["generations"]]
    assert shown in texts


BIDI = "safe\u202etxt.exe\u202c \u2066isolate\u2069 \u200fmark\u200e \x85c1 \x9b31m"


def test_bidi_controls_in_run_text_arrive_in_the_report_as_visible_text(tmp_path: Path) -> None:
    d = make_run(tmp_path, "bidi", 40, transcripts=(30,))
    data = read(d)
    data.info["name"] = BIDI
    html = render_report([(data, report_with(sample_findings(), str(d)))])
    for ch in "\u202e\u202c\u2066\u2069\u200f\u200e\x85\x9b":
        assert ch not in html, repr(ch)
    run = _data_block(html)["runs"][0]
    assert run["name"] == (
        "safe\\u202etxt.exe\\u202c \\u2066isolate\\u2069 \\u200fmark\\u200e \\u0085c1 \\u009b31m"
    )


def test_safe_json_escapes_what_could_end_a_script_element() -> None:
    out = safe_json({"t": "</script><!-- & \u2028 \u2029 >"})
    assert "<" not in out and ">" not in out and "&" not in out
    assert "\u2028" not in out and "\u2029" not in out
    assert json.loads(out) == {"t": "</script><!-- & \\u2028 \\u2029 >"}


def test_findings_keep_the_order_the_checks_gave(run_dir: Path) -> None:
    findings = sample_findings()
    findings.reverse()
    payload = report_payload([(read(run_dir), report_with(findings, str(run_dir)))])
    got = [f["check"] for f in payload["runs"][0]["report"]["findings"]]
    assert got == [f.check for f in findings]


def test_every_canonical_metric_has_a_plot() -> None:
    names = [*METRICS, "discard/groups/no_variance", "discard/rollouts/rollout_failed/E"]
    names += ["rollout/turns", "eval/heldout/score", "perf/mfu", "transcripts/empty_answer_rate"]
    placed = plot_metrics(names)
    for name in names:
        assert any(name in v for v in placed.values()), f"{name} is on no plot"
    assert 10 <= len(PLOTS) <= 24


def test_non_finite_values_travel_as_their_strings(tmp_path: Path) -> None:
    d = tmp_path / "nf"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"name": "nf", "status": "finished"}))
    recs = [step_record(0, 1.0), step_record(1, 2.0, **{"train/loss": "NaN"})]
    recs.append(step_record(2, 3.0, **{"train/loss": "Infinity"}))
    (d / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    payload = report_payload([(read(d), None)])
    assert payload["runs"][0]["series"]["train/loss"]["v"] == [0.1, "NaN", "Infinity"]


def test_baseline_from_healthy_seeds_is_shaded(tmp_path: Path) -> None:
    seeds = [read(make_run(tmp_path, f"seed{i}", 30)) for i in range(3)]
    built = baseline_mod.build(seeds, first=10)
    path = tmp_path / "base.json"
    baseline_mod.save(built, path)
    ranges = baseline_ranges(baseline_mod.load(path))
    r = ranges["reward/mean"]
    assert r["lo"] <= r["hi"] and r["until"] == 9
    html = render_report([(seeds[0], None)], baseline=ranges)
    assert _data_block(html)["baseline"]["reward/mean"]["lo"] == r["lo"]


def test_baseline_shading_tolerates_close_shapes() -> None:
    got = baseline_ranges({"a": {"min": 2, "max": 1}, "b": {"lo": 0}, "c": "x"})
    assert got == {"a": {"lo": 1.0, "hi": 2.0, "mean_lo": None, "mean_hi": None, "until": None}}
    with pytest.raises(ReadError):
        baseline_ranges([1, 2])


def test_transcripts_of_the_steps_findings_point_at(tmp_path: Path) -> None:
    d = make_run(tmp_path, "t", 60, transcripts=(31, 50, 59))
    data = read(d)
    report = report_with([Finding("reward", "warn", "no_signal", "x", first_step=30)], str(d))
    offered = transcript_steps(data, report)
    # step 30 has no file: the nearest one after it; then the latest ones.
    assert [t["step"] for t in offered] == [31, 50, 59]
    assert offered[0]["why"] == "warn: x" and offered[2]["why"].startswith("latest")


def test_flagged_attempts_first_then_highest_reward_and_long_text_cut(tmp_path: Path) -> None:
    d = make_run(tmp_path, "t", 10)
    write_transcript(d, 3, completion="y" * 30_000)
    data = read(d)
    got = load_transcripts(data, 3, flagged={"3-a2"})
    assert [e["attempt_id"] for e in got][:2] == ["3-a2", "3-a1"]
    assert got[0]["flagged"] and not got[1]["flagged"]
    long = got[1]["generations"][0]["completion"]
    assert len(long) < 21_000 and long.endswith("more characters not shown]")
    assert load_transcripts(data, 4) is None


def test_report_command_writes_one_file_and_json(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(run_dir), str(run_dir), "-o", str(out)]) == 0
    html = out.read_text()
    assert html.startswith("<!doctype html>") and len(_data_block(html)["runs"]) == 2
    assert "wrote" in capsys.readouterr().out
    assert main(["report", str(run_dir), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["runs"][0]["report"]["verdict"]


def test_report_command_names_a_bad_baseline(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "b.json"
    bad.write_text("{nope")
    assert main(["report", str(run_dir), "--baseline", str(bad), "-o", str(tmp_path / "x")]) == 2
    assert str(bad) in capsys.readouterr().err


def test_the_docs_list_every_plot_with_its_metrics() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "dashboard.md").read_text()
    for p in PLOTS:
        metrics = ", ".join(f"`{m}`" for m in p.metrics)
        assert f"| {p.title} | {metrics} |" in doc, p.title
    assert "(report.png)" in doc and "(live.png)" in doc


def test_long_series_are_thinned_to_their_extremes_in_a_report():
    import numpy as np

    from rlvitals.views.dashboard import thin

    steps = np.arange(100_000)
    values = np.sin(steps / 500.0)
    values[31_337] = 7.0  # a spike
    values[50_000] = np.nan  # a measured NaN
    st, va = thin(steps, values, 4000)
    assert len(st) <= 4004
    assert 31_337 in st.tolist() and 50_000 in st.tolist()
    assert st[0] == 0 and st[-1] == 99_999
    assert np.nanmax(va) == 7.0
    short = np.arange(10)
    assert thin(short, short * 1.0, 4000)[0] is short


def test_counts_rates_retries_and_correlation_get_plots_of_their_own() -> None:
    # The newcomer's screenshots: "Episodes" drew a count of 640 next to rates of 0-3,
    # "Failed attempts" showed only retries, and the reward-length correlation (-1 to 1)
    # shared the axis of 19 flag rates. Each now sits on a plot of its kind.
    names = [
        "rollout/termination_reason/answer",  # a count this update
        "rollout/turns",  # a mean
        "rollouts/retries",
        "discard/rollouts/grading_failed/ConnectionError",
        "transcripts/reward_length_spearman",
        "transcripts/empty_answer_rate",
    ]
    placed = {n: pid for pid, ns in plot_metrics(names).items() for n in ns}
    assert len(set(placed.values())) == len(names), placed
    assert placed["rollouts/retries"] != "failures"
    assert placed["discard/rollouts/grading_failed/ConnectionError"] == "failures"
    assert placed["rollout/turns"] == "episodes" != placed["rollout/termination_reason/answer"]
    assert placed["transcripts/empty_answer_rate"] == "transcripts"


def test_transcript_flags_never_raised_are_not_drawn(run_dir: Path) -> None:
    import numpy as np

    from rlvitals.checks.base import Report
    from rlvitals.model import Series
    from rlvitals.views.dashboard import dashboard_metrics

    steps = np.arange(4)
    zero, some = Series(steps, np.zeros(4)), Series(steps, np.array([0.0, 0.0, 0.25, 0.5]))
    series = {f"transcripts/quiet{i}_rate": zero for i in range(16)}
    series |= {
        "transcripts/empty_answer_rate": some,
        "transcripts/named_rate": zero,  # a finding names it: drawn
        "transcripts/flagged_rate": zero,
        "transcripts/reward_length_spearman": some,
    }
    rep = Report(
        str(run_dir),
        "learning",
        [Finding("transcripts", "info", "learning", "x", metric="transcripts/named_rate")],
        series=series,
    )
    flags = [n for n in dashboard_metrics(read(run_dir), rep) if n.startswith("transcripts/")]
    assert sorted(flags) == [
        "transcripts/empty_answer_rate",
        "transcripts/flagged_rate",
        "transcripts/named_rate",
        "transcripts/reward_length_spearman",
    ]


@pytest.mark.skipif(shutil.which("node") is None, reason="no node here to run plot.js")
def test_axis_tick_labels_read_distinct(tmp_path: Path) -> None:
    """Newcomer 2026-12-07: the ESS plot repeated its tick labels (0.9999 twice, 0.9998 twice:
    ticks 0.00005 apart written to four digits). plot.js's labels, run under node (the browser
    test draws the plot itself: tests/test_browser.py)."""
    import subprocess

    plot = Path(__file__).parent.parent / "src/rlvitals/views/assets/plot.js"
    script = tmp_path / "ticks.js"
    script.write_text(
        "global.window = {};\n"
        "eval(require('fs').readFileSync(process.argv[2], 'utf8'));\n"
        "var P = window.RLVPlot;\n"
        "var spans = JSON.parse(process.argv[3]);\n"
        "console.log(JSON.stringify(spans.map(function (s) {\n"
        "  var t = s[2] ? P.logTicks(s[0], s[1]) : P.linearTicks(s[0], s[1], 5);\n"
        "  return [t.map(P.fmt), P.tickLabels(t)];\n"
        "})));\n"
    )
    spans = [[0.99965, 0.99999, 0], [0.4999, 0.5001, 0], [0, 1, 0], [1e-6, 3e-6, 0],
             [123456, 123470, 0], [0.001, 100, 1]]  # fmt: skip
    out = subprocess.run(
        ["node", str(script), str(plot), json.dumps(spans)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    got = json.loads(out.stdout)
    assert len(set(got[0][0])) < len(got[0][0])  # what fmt alone wrote: repeats
    for (short, labels), span in zip(got, spans):
        assert len(set(labels)) == len(labels) >= 2, (span, labels)
        assert labels == short or len(set(short)) < len(short), (
            span,
            labels,
        )  # more digits only when needed
