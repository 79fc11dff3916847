"""Garbage, truncation, binary junk and absurdly long lines: warnings, never a traceback, and
every good record before and after still read."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvitals.readers import open_reader, read

# format -> (file name, good record text for (step, value), metric, checked by step?)
GOOD: dict[str, tuple[str, Callable[[int, float], str], str, bool]] = {
    "miles": (
        "x.log",
        lambda s, v: f"step {s}: {{'train/loss': {v}, 'train/z': 1}}",
        "train/loss",
        True,
    ),
    "slime": (
        "x.log",
        lambda s, v: f"perf {s}: {{'perf/rollout_time': {v}}}",
        "perf/sampling_seconds",
        True,
    ),
    "verl": ("x.log", lambda s, v: f"step:{s} - actor/loss:{v} - timing_s/x:1", "train/loss", True),
    "openrlhf": (
        "x.log",
        lambda s, v: f"Global step {s}: {{'policy_loss': {v}}}",
        "train/loss",
        True,
    ),
    "trl-console": ("x.log", lambda s, v: f"{{'loss': {v}, 'epoch': 0.1}}", "train/loss", False),
    "prime-rl-console": (
        "x.log",
        lambda s, v: f"Step {s} | Loss {v} | Entropy 0.5",
        "train/loss",
        True,
    ),
    "skyrl": (
        "x.log",
        lambda s, v: f"Step {s}:\n{{'policy/policy_loss': '{v}'}}",
        "train/loss",
        True,
    ),
    "areal": (
        "x.log",
        lambda s, v: f"Train step {s + 1}/99 done.\n│ ppo_actor/update/grad_norm │ {v} │",
        "train/grad_norm",
        True,
    ),
    "jsonl": ("x.jsonl", lambda s, v: json.dumps({"step": s, "train/loss": v}), "train/loss", True),
    "tinker": ("x.jsonl", lambda s, v: json.dumps({"step": s, "optim/lr": v}), "train/lr", True),
    "prime-rl": (
        "x.jsonl",
        lambda s, v: json.dumps({"step": s, "loss/mean": v}),
        "train/loss",
        True,
    ),
    "verl-jsonl": (
        "x.jsonl",
        lambda s, v: json.dumps({"step": s, "data": {"actor/loss": v}}),
        "train/loss",
        True,
    ),
}


def _check(run, metric: str, by_step: bool, expected: dict[int, float]) -> None:
    s = run.series(metric)
    assert s is not None, (run.format, run.names(), run.warnings)
    if by_step:
        for step, v in expected.items():
            assert s.at(step) == v, (run.format, step, s, run.warnings)
    else:
        assert set(expected.values()) <= set(s.values.tolist())


@pytest.mark.parametrize("fmt", sorted(GOOD))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(junk=st.binary(max_size=200))
def test_garbage_between_good_records_is_survived(tmp_path: Path, fmt: str, junk: bytes) -> None:
    name, good, metric, by_step = GOOD[fmt]
    p = tmp_path / name
    body = good(1, 0.25).encode() + b"\n" + junk + b"\n" + good(2, 0.5).encode() + b"\n"
    p.write_bytes(body)
    run = read(p, fmt)
    _check(run, metric, by_step, {1: 0.25, 2: 0.5})


@pytest.mark.parametrize("fmt", sorted(GOOD))
def test_truncated_last_record_waits_then_reads(tmp_path: Path, fmt: str) -> None:
    name, good, metric, by_step = GOOD[fmt]
    p = tmp_path / name
    second = good(2, 0.5).encode() + b"\n"
    p.write_bytes(good(1, 0.25).encode() + b"\n" + second[:-3])
    reader = open_reader(p, fmt)
    reader.poll()
    _check(reader.run, metric, by_step, {1: 0.25})
    with open(p, "ab") as f:
        f.write(second[-3:])
    reader.poll()
    _check(reader.run, metric, by_step, {1: 0.25, 2: 0.5})


@pytest.mark.parametrize("fmt", ["miles", "verl", "trl-console", "jsonl"])
def test_absurdly_long_line_is_one_warning(tmp_path: Path, fmt: str) -> None:
    name, good, metric, by_step = GOOD[fmt]
    p = tmp_path / name
    p.write_bytes(
        good(1, 0.25).encode() + b"\n" + b"x" * 5000 + b"\n" + good(2, 0.5).encode() + b"\n"
    )
    reader = open_reader(p, fmt)
    reader.max_line = 1000  # every line reader has this limit (readers/base.py)
    reader.poll()
    run = reader.run
    _check(run, metric, by_step, {1: 0.25, 2: 0.5})
    too_long = [w for w in run.warnings if "too long" in w]
    assert len(too_long) == 1 and too_long[0].startswith(f"{p}:2: line too long"), too_long


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(junk=st.binary(max_size=2000))
def test_any_bytes_sniff_or_refuse_cleanly(tmp_path: Path, junk: bytes) -> None:
    from rlvitals.errors import UnknownFormatError

    p = tmp_path / "junk.log"
    p.write_bytes(junk)
    try:
        run = read(p)
    except UnknownFormatError as exc:
        assert str(p) in str(exc)  # refused with one clear line naming the file
        return
    assert all(str(p) in w for w in run.warnings)


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(junk=st.binary(max_size=2000))
def test_native_rollouts_survive_junk(tmp_path: Path, junk: bytes) -> None:
    d = tmp_path / "run"
    d.mkdir(exist_ok=True)
    (d / "steps.jsonl").write_text('{"step": 0}\n')
    good = json.dumps({"step": 0, "group_id": "g", "task_id": "t", "reward": 1.0})
    (d / "rollouts.jsonl").write_bytes(
        good.encode() + b"\n" + junk.replace(b"\n", b" ") + b"\n" + good.encode() + b"\n"
    )
    run = read(d)
    assert run.attempts is not None
    assert run.attempts.step.tolist().count(0) >= 2


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300))
def test_printed_value_parsers_never_raise(text: str) -> None:
    from rlvitals.readers.primerl import parse_summary
    from rlvitals.readers.printed import brace_balance, parse_number, parse_pairs
    from rlvitals.readers.textlog import clean_line

    assert parse_number(text) is None or isinstance(parse_number(text), float)
    assert isinstance(parse_pairs(text), dict)
    assert isinstance(parse_pairs(text, complete=False), dict)
    assert isinstance(parse_summary(text), dict)
    assert isinstance(clean_line(text), str)
    brace_balance(text)


@pytest.mark.parametrize(
    "token, value",
    [
        ("np.float64(0.25)", 0.25),
        ("'0.1234'", 0.1234),
        ("tensor(0.5, device='cuda:0')", 0.5),
        ("nan", float("nan")),
        ("-inf", float("-inf")),
        ("5.4%", 0.054),
        ("True", 1.0),
        ("numpy.int64(7)", 7.0),
    ],
)
def test_printed_numbers(token: str, value: float) -> None:
    import math

    from rlvitals.readers.printed import parse_number

    got = parse_number(token)
    assert got is not None
    assert (math.isnan(got) and math.isnan(value)) or math.isclose(got, value)
