"""The mismatch's cause: each named on a run made to have it, the others not, and a healthy
run of each kind quiet (checks/mismatch_cause.py, checks/ratio_findings.py).

Fixtures are written as each framework writes its files (``tests/data/causes/make_fixtures.py``
names the framework's file and line for each); the reference trainer's own runs break it in
each way with a fault of ``grpo/faults.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlvitals.checks import run_checks
from rlvitals.checks.context import Thresholds
from rlvitals.checks.mismatch_cause import CAUSES
from rlvitals.readers import read

CAUSES_DIR = Path(__file__).parent / "data" / "causes"
NOW = 1_798_761_600.0


def _judge(path: Path, **th: int):
    return run_checks(read(path), now=NOW, thresholds=Thresholds(**th))


def _causes(report) -> dict[str, str]:
    """cause -> severity of the worst finding naming it."""
    out: dict[str, str] = {}
    for f in report.findings:
        c = f.evidence.get("cause")
        if c is not None:
            assert c in CAUSES
            if out.get(c) not in ("warn", "fail"):
                out[c] = f.severity
    return out


def _agreement_alarms(report) -> list[str]:
    return [
        f.title
        for f in report.findings
        if f.check == "agreement" and f.severity in ("warn", "fail")
    ]


@pytest.mark.parametrize(
    ("run", "cause", "severity"),
    [
        ("trl_top_p", "truncated_sampling", "warn"),
        ("verl_top_p", "truncated_sampling", "warn"),
        ("nemo_precision", "precision_tail", "warn"),
        ("primerl_stale", "stale_weights", "warn"),
        ("trl_sequence_mask", "aggregation", "warn"),
        ("trl_token_truncate_cap2", "post_clip_logging", "info"),
        ("trl_liger_0272", "dropped_correction", "warn"),
        ("nemo_drift", "drift", "warn"),
    ],
)
def test_each_cause_is_named_and_no_other(run: str, cause: str, severity: str) -> None:
    report = _judge(CAUSES_DIR / run)
    assert _causes(report) == {cause: severity}, [f.title for f in report.findings]


@pytest.mark.parametrize(
    "run",
    [
        "trl_top_p_control",
        "verl_top_p_control",
        "nemo_same_precision",
        "primerl_async",
        "trl_token_truncate",
        "trl_liger_0290",
        "verl_first_update_control",
        "verl_bitwise",
    ],
)
def test_a_healthy_run_of_each_kind_stays_quiet(run: str) -> None:
    report = _judge(CAUSES_DIR / run)
    assert _causes(report) == {} and _agreement_alarms(report) == []
    assert report.verdict == "learning"


def test_the_cause_carries_its_numbers_and_what_to_do() -> None:
    f = next(f for f in _judge(CAUSES_DIR / "trl_top_p").findings if f.evidence.get("cause"))
    ev = f.evidence["cause_evidence"]
    assert ev["top_p"] == 0.8 and 0.88 < ev["ratio_mean"] < 0.91  # trl PR #7269: 0.896
    assert "top_p" in ev["setting_source"] and "training_args.bin" in ev["setting_source"]
    assert "top_p 1" in f.action and "truncated sampling (top_p 0.8)" in f.title
    agg = next(
        f
        for f in _judge(CAUSES_DIR / "trl_sequence_mask").findings
        if f.evidence.get("cause") == "aggregation"
    )
    e = agg.evidence["cause_evidence"]
    assert e["length_times_abs_diff"] > 1.0 and e["weight_min_zero_share"] == 1.0
    assert e["token_abs_diff"] < 0.02  # the tokens agree: the product over ~300 does not


def test_precision_without_a_median_is_named_with_its_qualification() -> None:
    f = next(f for f in _judge(CAUSES_DIR / "nemo_precision").findings if f.evidence.get("cause"))
    assert f.evidence["cause_evidence"]["dtype_pair"] == "float32/bfloat16"
    assert f.evidence["cause_qualified"] == "no median or per-sequence numbers logged"


def test_first_update_signature() -> None:
    report = _judge(CAUSES_DIR / "verl_first_update")
    f = next(f for f in report.findings if f.title.startswith("first update off-policy"))
    assert f.severity == "warn" and f.first_step == 1
    assert f.evidence["values_at_step"]["ppo_ratio_mean"] == 0.99996
    assert f.evidence["values_at_step"]["clip_frac_high"] == 0.0


def test_strict_agreement_flags_any_mismatch_and_only_when_asked() -> None:
    strict = _judge(CAUSES_DIR / "verl_bitwise_off", strict_agreement=1)
    f = next(f for f in strict.findings if f.title.startswith("strict agreement"))
    assert f.first_step == 12 and f.severity == "warn"
    assert not [
        f for f in _judge(CAUSES_DIR / "verl_bitwise_off").findings if f.title.startswith("strict")
    ]
    assert not _agreement_alarms(_judge(CAUSES_DIR / "verl_bitwise", strict_agreement=1))


# -- the reference trainer, made to show each cause ---------------------------------------------

torch = pytest.importorskip("torch")


def _train(tmp_path: Path, name: str, fault: str | None = None, **sections: dict) -> Path:
    from rlvitals.grpo.loop import train

    cfg: dict = {
        "output": {"output_dir": str(tmp_path), "name": name},
        "optim": {"steps": 16},
        "task": {"tasks_per_step": 64},
    }
    for sec, values in sections.items():
        cfg.setdefault(sec, {}).update(values)
    return train(cfg, fault=fault, cache=tmp_path / "cache")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "cause"),
    [
        ("truncated_sampling", "truncated_sampling"),
        ("dtype_pair", "precision_tail"),
        ("sum_aggregation", "aggregation"),
        ("post_clip_logging", "post_clip_logging"),
        ("stale_replica", "stale_weights"),
        ("bad_replica", "drift"),  # one hot replica: none of the named causes
    ],
)
def test_reference_trainer_fault_names_its_cause(tmp_path: Path, fault: str, cause: str) -> None:
    report = run_checks(read(_train(tmp_path, fault, fault)), now=NOW)
    assert set(_causes(report)) == {cause}, [f.title for f in report.findings]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "sections"),
    [
        ("sync", {}),
        (
            "async_sequence_mean",
            {
                "training": {"mode": "async"},
                "correction": {"mode": "sequence_mask", "log": "corrected"},
            },
        ),
        (
            "async_token_raw",
            {"training": {"mode": "async"}, "correction": {"mode": "token_mask", "clip_min": 0.5}},
        ),
    ],
)
def test_reference_trainer_healthy_kinds_stay_quiet(tmp_path: Path, name: str, sections) -> None:
    report = run_checks(read(_train(tmp_path, name, **sections)), now=NOW)
    assert _causes(report) == {} and _agreement_alarms(report) == []
