"""steps.jsonl read in bulk gives exactly what a value-by-value read gives."""

from __future__ import annotations

import json
import math
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvitals.readers import read

VALUE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**40), 2**40),
    st.none(),
    st.booleans(),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "abc", "7"]),
)


def _expected(recs):
    """What the format says each value is: numbers, bools and our non-finite spellings."""
    out: dict[str, dict[int, float]] = {}
    for r in recs:
        for k, v in r.items():
            if k == "step" or v is None:
                continue
            if isinstance(v, str):
                if v not in ("NaN", "Infinity", "-Infinity"):
                    continue
                v = float(v.replace("Infinity", "inf"))
            out.setdefault(k, {})[r["step"]] = float(v)
    return out


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), VALUE), min_size=1, max_size=30))
def test_any_mix_of_values_reads_as_the_format_says(tmp_path_factory, rows):
    d = tmp_path_factory.mktemp("steps")
    recs = [{"step": i, **r} for i, r in enumerate(rows)]
    with open(d / "steps.jsonl", "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    run = read(d)
    want = _expected(recs)
    assert set(run.names()) == set(want)
    for name, by_step in want.items():
        s = run.series(name)
        assert s.steps.tolist() == sorted(by_step)
        assert all(_same(v, by_step[k]) for k, v in zip(s.steps.tolist(), s.values.tolist()))
    bad = sum(1 for r in recs for k, v in r.items() if v in ("abc", "7"))
    assert len(run.warnings) == bad


def test_bulk_read_of_a_long_homogeneous_run(tmp_path):
    rng = random.Random(0)
    with open(tmp_path / "steps.jsonl", "w") as f:
        for i in range(20_000):
            rec = {"step": i, "time": 1.0 + i, "reward/mean": rng.random(), "x": i % 7}
            if i % 1000 == 999:
                rec["reward/mean"] = None
            f.write(json.dumps(rec) + "\n")
    run = read(tmp_path)
    s = run.series("reward/mean")
    assert len(s) == 20_000 - 20
    assert 999 not in set(s.steps.tolist())
    assert np.array_equal(run.series("x").values, np.arange(20_000) % 7)


def test_a_json_list_of_a_loops_records_reads_like_its_jsonl(tmp_path) -> None:
    # json.dump(history) of a hand-written loop: an iter key, nested metrics, a field it
    # declares and never fills, a text tag; under a name that says nothing of its content.
    rows = [
        {"iter": i, "metrics": {"rew": 0.1 * i, "kl_ref": 0.01 * i}, "judge": None, "tag": "t"}
        for i in range(1, 6)
    ]
    p = tmp_path / "run_output.json"
    p.write_text(json.dumps(rows, indent=2))
    run = read(p)
    assert run.format == "json"
    assert [int(s) for s in run.steps()] == [1, 2, 3, 4, 5]
    assert math.isclose(run.series("reward/mean").at(3), 0.3)
    assert run.original["train/ref_kl"] == "metrics/kl_ref"
    assert "judge" not in run.metrics and run.info["never_measured"] == ["judge"]
    assert run.info["labels"] == {"tag": "t"}
