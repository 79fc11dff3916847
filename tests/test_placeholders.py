"""Placeholders between periodic evaluations (``readers.tables.placeholders``, applied by
``readers._settle`` once a run is read whole): an evaluation written on every record, a
constant between evaluations that fall at a regular cadence, reads the constant as no value.
Drawn files: a healthy run's held-out written that way is not an exploit; a held-out that
really falls to 0 at its evaluations still is; irregular zeros and constant series are left as
they are."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvitals import read
from rlvitals.checks import run_checks
from rlvitals.readers.tables import placeholders


def _write(path: Path, n: int, k: int, phase: int, c: float, held: list[float], key: str) -> Path:
    rng = np.random.default_rng(n * 31 + k)
    with open(path, "w") as f:
        j = 0
        for i in range(1, n + 1):
            on = i >= phase and (i - phase) % k == 0
            ev = held[j] if on and j < len(held) else c
            j += int(on)
            rec = {"step": i, "reward_mean": 0.2 + 0.5 * i / n + 0.03 * rng.standard_normal()}
            rec["kl"] = 0.01 + 0.02 * i / n
            rec[key] = ev
            f.write(json.dumps(rec) + "\n")
    return path


cadences = st.tuples(
    st.integers(60, 240),  # records
    st.integers(2, 20),  # every k records
    st.integers(1, 19),  # the first evaluation's step
    st.sampled_from([0.0, 0.0, -1.0]),  # the placeholder
    st.sampled_from(["val/acc", "eval_accuracy", "heldout/score", "val_mean_reward"]),
)


@settings(max_examples=25, deadline=None)
@given(cadences)
def test_a_healthy_runs_placeholder_evaluations_are_no_value(tmp_path_factory, drawn):
    n, k, phase, c, key = drawn
    evals = len(range(phase, n + 1, k))
    rng = np.random.default_rng(n + k)
    held = [
        float(np.clip(0.3 + 0.4 * j / evals + 0.02 * rng.standard_normal(), 0.01, 1))
        for j in range(evals)
    ]
    path = _write(tmp_path_factory.mktemp("ph") / "run.jsonl", n, k, phase, c, held, key)
    data = read(path)
    name = next(x for x in data.names() if x.startswith("eval/"))
    s = data.series(name)
    assert s.steps.tolist() == list(range(phase, n + 1, k)), (key, k, phase)
    assert "placeholder" in data.info["placeholders"][name]
    rep = run_checks(data)
    assert rep.verdict != "exploit_suspected", [f.title for f in rep.findings]
    assert not [
        f for f in rep.findings if f.verdict == "exploit_suspected" and f.severity != "info"
    ]


@settings(max_examples=15, deadline=None)
@given(cadences)
def test_a_heldout_that_really_falls_to_zero_at_its_evaluations_is_found(tmp_path_factory, drawn):
    n, k, phase, _c, key = drawn
    evals = len(range(phase, n + 1, k))
    if evals < 8:
        return  # too few evaluations to see a fall (heldout_min_evals and a trend)
    # Held-out from 0.5 to 0.4, then exactly 0 at every evaluation after the first third,
    # while the train reward climbs: the zeros on the cadence are scores, not placeholders.
    third = max(3, evals // 3)
    held = np.linspace(0.5, 0.4, third).tolist() + [0.0] * (evals - third)
    path = _write(tmp_path_factory.mktemp("ph") / "run.jsonl", n, k, phase, 0.0, held, key)
    data = read(path)
    s = data.series(next(x for x in data.names() if x.startswith("eval/")))
    assert s.steps.tolist() == list(range(phase, n + 1, k))  # every evaluation kept
    assert float(s.values[-1]) == 0.0
    rep = run_checks(data)
    assert rep.verdict == "exploit_suspected", [f.title for f in rep.findings]


@settings(max_examples=100, deadline=None)
@given(st.integers(12, 200), st.integers(0, 2**32 - 1))
def test_irregular_zeros_are_values(n, seed):
    rng = np.random.default_rng(seed)
    v = np.where(rng.random(n) < 0.5, 0.0, rng.uniform(0.1, 0.9, n))
    gaps = np.diff(np.flatnonzero(v != 0.0))

    def regular(g: np.ndarray) -> bool:
        return bool(len(g)) and g.min() > 0 and bool(np.all(g % g.min() == 0))

    if regular(gaps) or regular(gaps[:-1]):
        return  # drawn regular by chance (a final evaluation may fall off the cadence)
    assert placeholders(np.arange(n), v) is None


def test_a_constant_or_short_series_is_left_alone():
    assert placeholders(np.arange(50), np.zeros(50)) is None
    assert placeholders(np.arange(50), np.full(50, 0.7)) is None
    v = np.zeros(5)
    v[::2] = [0.4, 0.5, 0.6]
    assert placeholders(np.arange(5), v) is None  # too few records to tell a cadence
    # every record a value of its own (no repeated constant): nothing to drop
    assert placeholders(np.arange(40), np.linspace(0.1, 0.9, 40)) is None


def test_the_cadence_is_in_steps_and_a_final_evaluation_may_fall_off_it():
    steps = np.arange(1, 83)
    v = np.zeros(82)
    v[9::10] = np.linspace(0.3, 0.6, 8)  # steps 10, 20, ..., 80
    v[-1] = 0.65  # a final evaluation at step 82
    got = placeholders(steps, v)
    assert got is not None and got.every == 10 and got.first == 10
    assert not got.mask[-1] and not got.mask[9] and got.mask[0] and got.count == 82 - 9


def test_a_followed_run_is_judged_as_check_reads_it(tmp_path: Path) -> None:
    """watch and serve judge what check judges: placeholder evaluations and a percent clip
    share are read the same way live (the follower's own series keep the values as they came,
    so records still to come are appended in the same units)."""
    from rlvitals.follow import Follower
    from rlvitals.judge import Judge

    n, k = 120, 10
    rng = np.random.default_rng(7)
    held = [float(0.3 + 0.4 * j / 12 + 0.02 * rng.standard_normal()) for j in range(12)]
    path = _write(tmp_path / "run.jsonl", n, k, 10, 0.0, held, "val_mean_reward")
    lines = path.read_text().splitlines()
    with open(path, "w") as f:  # a clip share logged as a percent (0-100)
        for i, line in enumerate(lines):
            rec = json.loads(line)
            rec["clip_ratio"] = 12.5 + 2.0 * np.sin(i)
            f.write(json.dumps(rec) + "\n")
    whole = read(path)
    assert whole.info.get("placeholders") and whole.info.get("units")
    judge = Judge()
    expected = judge(whole, whole.series("time").values[-1] if whole.series("time") else None)
    follower = Follower(str(path), judge=judge)
    follower.read()
    follower.judge()
    assert follower.report is not None
    assert follower.report.verdict == expected.verdict == "learning", [
        f.title for f in follower.report.findings
    ]
    got = {(f.check, f.verdict, f.severity) for f in follower.report.findings}
    assert got == {(f.check, f.verdict, f.severity) for f in expected.findings}
    # The follower's own run keeps the values as read: only the judged copy is settled.
    assert "placeholders" not in follower.data.info
    raw = follower.data.series(next(x for x in follower.data.names() if x.startswith("eval/")))
    assert len(raw) == n
