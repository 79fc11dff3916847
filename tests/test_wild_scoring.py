"""The wild corpus's scoring rule (issue 27, benchmarks/_wild.py): a label found, missed, found
at info on a healthy run, a false alarm, a refused file, onsets in records; rl-doctor's findings
in the same verdicts; expected values read back from what rlvitals read."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import _wild  # noqa: E402
from _wild import Hit, judge  # noqa: E402


def lab(label: str, onset: int | None = None, kind: str | None = None) -> dict:
    d: dict = {"label": label, "onset_step": onset}
    if kind:
        d["kind"] = kind
    return d


def H(verdict: str, sev: str, step: int | None = None) -> Hit:
    return Hit(frozenset({verdict}), _wild.RANK[sev], step)


def test_found_at_warn_with_a_verdict_of_the_label_and_its_delay() -> None:
    out = judge([lab("plateau", 101)], [H("plateau", "warn", 121)], frozenset({"plateau"}))
    assert out["labels"]["plateau"] == {"found": True, "first_step": 121, "delay": 20}
    assert out["right"] and out["false_alarms"] == 0
    # mastered / too_hard / not_learning find a plateau too
    for v in ("mastered", "too_hard", "not_learning"):
        assert judge([lab("plateau", 1)], [H(v, "fail", 5)], frozenset({v}))["labels"]["plateau"][
            "found"
        ]


def test_missed_at_info_or_with_another_verdict() -> None:
    info = judge([lab("plateau", 1)], [H("plateau", "info", 3)], frozenset({"too_early"}))
    assert not info["labels"]["plateau"]["found"] and not info["right"]
    # gradient spikes are 'unstable', not 'drift' (what the policy check said at e65ebdb)
    drift = judge([lab("grad_spikes", 58)], [H("drift", "warn", 50)], frozenset({"drift"}))
    assert not drift["labels"]["grad_spikes"]["found"] and not drift["right"]
    # the two length kinds are told apart
    trunc = judge([lab("length", 5, "truncation")], [H("collapse", "warn", 5)], frozenset())
    assert not trunc["labels"]["length/truncation"]["found"]
    coll = judge([lab("length", 6, "collapse")], [H("collapse", "warn", 9)], frozenset())
    assert coll["labels"]["length/collapse"] == {"found": True, "first_step": 9, "delay": 3}


def test_a_run_with_two_labels_is_right_with_either_verdict() -> None:
    labels = [lab("kl_drift", 5), lab("grad_spikes", 58)]
    hits = [H("ref_drift", "warn", 8), H("unstable", "warn", 58)]
    out = judge(labels, hits, frozenset({"unstable"}))
    assert out["right"]
    assert out["labels"]["kl_drift"]["delay"] == 3 and out["labels"]["grad_spikes"]["delay"] == 0


def test_healthy_run_false_alarm_and_its_info_exception() -> None:
    labels = [lab("healthy"), lab("grad_spikes", 84)]
    # an info finding finds the spikes on a healthy run; the run is healthy and right
    ok = judge(labels, [H("unstable", "info", 84), H("learning", "ok")], frozenset({"learning"}))
    assert ok["labels"] == {
        "healthy": {"found": True, "first_step": None, "delay": None},
        "grad_spikes": {"found": True, "first_step": 84, "delay": 0},
    }
    assert ok["right"] and ok["false_alarms"] == 0
    # a warn there is a false alarm: healthy missed, verdict wrong
    bad = judge(labels, [H("unstable", "warn", 84)], frozenset({"learning"}))
    assert bad["labels"]["grad_spikes"]["found"]
    assert not bad["labels"]["healthy"]["found"] and not bad["right"]
    assert bad["false_alarms"] == 1
    # a healthy run judged too early is no false alarm but not found either
    early = judge([lab("healthy")], [H("too_early", "info")], frozenset({"too_early"}))
    assert early["false_alarms"] == 0 and not early["labels"]["healthy"]["found"]


def test_refused_file_finds_nothing_and_format_only_only_needs_reading() -> None:
    refused = judge([lab("format-only")], [], None, refused=True)
    assert refused["labels"]["format-only"]["found"] is False and refused["right"] is False
    read = judge([lab("format-only")], [H("crashed", "fail", 46)], frozenset({"crashed"}))
    assert read["labels"]["format-only"]["found"] and read["right"]
    gone = judge([lab("plateau", 1)], [], None, refused=True)
    assert gone["refused"] and not gone["labels"]["plateau"]["found"]


def test_onset_in_records_for_console_logs() -> None:
    index = {10: 1, 20: 2, 30: 3}  # steps as a reader numbered them -> record
    out = judge(
        [lab("kl_drift", 2)],
        [H("drift", "warn", 30)],
        frozenset({"drift"}),
        onset_to_record=index.get,
    )
    assert out["labels"]["kl_drift"] == {"found": True, "first_step": 3, "delay": 1}


@pytest.mark.parametrize(
    ("finding", "want"),
    [
        (
            {
                "detector": "gradient_pathology",
                "summary": "3 large gradient spikes across the run.",
            },
            {"unstable"},
        ),
        (
            {"detector": "gradient_pathology", "summary": "1 isolated gradient spike(s)."},
            {"unstable"},
        ),
        (
            {
                "detector": "gradient_pathology",
                "summary": "32% of optimiser steps produced exactly zero gradient.",
            },
            {"no_signal"},
        ),
        (
            {"detector": "gradient_pathology", "summary": "2 non-finite gradient norms"},
            {"non_finite"},
        ),
        ({"detector": "plateau", "summary": "Training reward stopped improving"}, {"plateau"}),
        (
            {"detector": "length_pathology", "summary": "84% of rollouts are truncated"},
            {"out_of_room"},
        ),
        ({"detector": "kl_drift", "summary": "KL is 2.5 and high."}, {"drift"}),
        ({"detector": "entropy_collapse", "summary": "Entropy has fallen"}, {"collapse"}),
        ({"detector": "advantage_collapse", "metrics": {"regime": "too_hard"}}, {"too_hard"}),
    ],
)
def test_rldoctor_findings_in_our_verdicts(finding: dict, want: set) -> None:
    assert _wild.their_verdicts(finding) == want


def test_rldoctor_run_verdict_is_its_worst_warning() -> None:
    hits = _wild.their_hits(
        {
            "findings": [
                {"detector": "plateau", "severity": "WARNING"},
                {"detector": "length_pathology", "severity": "CRITICAL", "summary": "truncated"},
                {"detector": "kl_drift", "severity": "INFO"},
            ]
        }
    )
    assert [h.rank for h in hits] == [2, 3, 1]
    assert _wild._their_run_verdicts(hits) == {"out_of_room"}
    assert _wild._their_run_verdicts(hits[2:]) == {"learning"}


def test_expected_values_read_back_by_step_and_by_record(tmp_path: Path) -> None:
    from rlvitals.readers import read

    p = tmp_path / "metrics.jsonl"
    p.write_text("".join(json.dumps({"step": s, "reward": s / 10}) + "\n" for s in (5, 10, 15)))
    data = read(p)
    entry = {
        "expected": [
            {"step": 10, "key": "reward", "value": 1.0},
            {"step": None, "record": 3, "key": "reward", "value": 1.5},
            {"step": 15, "key": "reward", "value": 9.9},
            {"step": 5, "key": "nothing_like_it", "value": 0.5},
        ]
    }
    got = _wild.read_back(entry, data)
    assert [g["ok"] for g in got] == [True, True, False, False]
    assert got[2]["got"] == 1.5 and got[3]["got"] is None


WILD = _wild.WILD


@pytest.mark.wild
@pytest.mark.skipif(not (WILD / "manifest.json").is_file(), reason="no wild corpus beside repo")
def test_manifest_labels_are_all_known_and_reference_reader_reads_every_file() -> None:
    for entry in _wild.load(WILD):
        for label in entry["labels"]:
            assert _wild.label_name(label) in _wild.LABEL_VERDICTS, entry["path"]
        rows = _wild.reference_rows(entry, WILD)
        assert len(rows) == entry["steps"]["records"], entry["path"]


def test_public_repos_logs_have_provenance() -> None:
    entries = _wild.load(_wild.PUBLIC)
    assert len(entries) >= 2
    for e in entries:
        path = _wild.PUBLIC / e["path"]
        assert path.is_file() and path.stat().st_size < 1 << 20, e["path"]
        prov = e["provenance"]
        assert prov["repo"].count("/") == 1 and len(prov["commit"]) == 40 and prov["path"]
        assert e["steps"]["records"] > 0 and e["labels"], e["path"]


# The public logs live in this repository; the reference reader that reads them back
# (scripts/wildlib.py) lives with the wild corpus beside the checkout.
@pytest.mark.wild
@pytest.mark.skipif(
    not (WILD / "scripts" / "wildlib.py").is_file(),
    reason=f"no wild corpus reference reader at {WILD / 'scripts' / 'wildlib.py'}",
)
def test_public_repos_logs_labels_are_measured_by_the_rules() -> None:
    for e in _wild.load(_wild.PUBLIC):
        rows = _wild.reference_rows(e, _wild.PUBLIC)
        assert len(rows) == e["steps"]["records"]
        want = [  # format-only: no rule fires
            {k: v for k, v in lab.items() if k in ("label", "kind", "onset_step")}
            for lab in e["labels"]
            if lab["label"] != "format-only"
        ]
        assert _wild.measure_labels(rows) == want, e["path"]
        for x in e["expected"]:
            row = (
                rows[x["record"] - 1]
                if x["step"] is None
                else next(r for r in rows if r["step"] == x["step"])
            )
            assert row[x["key"]] == x["value"], (e["path"], x)


def test_measure_labels_rules_fire_and_stay_quiet() -> None:
    rows = [
        {"step": 1, "completions/clipped_ratio": 0.1, "frac_reward_zero_std": 0.2, "entropy": 1.0},
        {"step": 2, "completions/clipped_ratio": 0.5, "frac_reward_zero_std": 0.4, "entropy": 0.2},
        {"step": 3, "completions/clipped_ratio": 0.2, "frac_reward_zero_std": 0.6, "entropy": 0.09},
    ]
    assert _wild.measure_labels(rows) == [
        {"label": "length", "kind": "truncation", "onset_step": 2},
        {"label": "zero_std_groups", "onset_step": 3},
        {"label": "entropy_collapse", "onset_step": 3},
    ]
    quiet = [{"step": s, "completions/clipped_ratio": 0.1, "entropy": 1.0} for s in (1, 2)]
    assert _wild.measure_labels(quiet) == []


def test_every_test_module_that_reads_beside_the_checkout_is_marked_wild() -> None:
    """A fresh clone has no ../shared beside it: a test that reads it must skip there, and
    .ci/run runs the tests marked wild in place (with it) and the rest from a fresh clone
    (newcomer 2026-12-07 problem 1: one such test had no skip and failed every clone)."""
    here = Path(__file__).parent
    unmarked = []
    for path in sorted(here.glob("test_*.py")):
        text = path.read_text()
        reads = '"shared"' in text or "_wild.WILD" in text or "wildlib" in text
        if reads and "pytest.mark.wild" not in text:
            unmarked.append(path.name)
    assert unmarked == []
