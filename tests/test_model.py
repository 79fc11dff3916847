"""The canonical model: series builders and the attempts table builder."""

from __future__ import annotations

import numpy as np

from rlvitals.model import ATTEMPT_COLUMNS, AttemptTableBuilder, RunData, SeriesBuilder


def _block(steps: list[int], start: int = 0) -> dict[str, np.ndarray]:
    n = len(steps)
    block = {name: np.zeros(n, dtype=dt) for name, dt in ATTEMPT_COLUMNS.items()}
    block["step"] = np.array(steps, dtype=np.int64)
    block["offset"] = np.arange(start, start + n, dtype=np.int64)
    return block


def test_attempt_rows_stay_sorted_by_step_when_a_shard_catches_up() -> None:
    b = AttemptTableBuilder()
    b.append(_block([0, 0, 1, 2], start=0))
    b.append(_block([1, 1, 3], start=100))  # another shard, behind the first
    t = b.table()
    assert t.step.tolist() == [0, 0, 1, 1, 1, 2, 3]
    # Held rows come first among equal steps, then the new block in its own order.
    assert t.offset.tolist() == [0, 1, 2, 100, 101, 3, 102]


def test_attempt_block_out_of_order_is_sorted_stably() -> None:
    b = AttemptTableBuilder()
    b.append(_block([2, 0, 2, 1]))
    assert b.table().step.tolist() == [0, 1, 2, 2]
    assert b.table().offset.tolist() == [1, 3, 0, 2]


def test_attempt_builder_grows_past_its_capacity() -> None:
    b = AttemptTableBuilder()
    for i in range(5):
        b.append(_block(list(range(i * 1000, i * 1000 + 1000))))
    t = b.table()
    assert len(t) == 5000 and np.all(np.diff(t.step) == 1)


def test_codes_are_stable_across_blocks() -> None:
    b = AttemptTableBuilder()
    first = b.groups.encode(["g1", "g2", "g1"])
    second = b.groups.encode(["g2", "g3", None])
    assert first.tolist() == [0, 1, 0]
    assert second.tolist() == [1, 2, -1]
    assert b.groups.names == ["g1", "g2", "g3"]


def test_series_replace_and_discard() -> None:
    sb = SeriesBuilder()
    sb.add(1, "x", 1.0)
    sb.replace("x", np.array([3, 1]), np.array([30.0, 10.0]))
    s = sb.get("x")
    assert s.steps.tolist() == [1, 3] and s.values.tolist() == [10.0, 30.0]
    sb.discard("x")
    assert sb.get("x") is None


def test_source_key_that_looks_canonical_is_told_apart() -> None:
    run = RunData(source="x", format="miles")
    run.metrics.add(0, "rollout/truncated", 0.5)
    run.metrics.add(0, "response/truncated_rate", 0.5)
    run.source_keys.add("rollout/truncated")
    run.original["response/truncated_rate"] = "rollout/truncated"
    assert run.is_canonical("response/truncated_rate")
    assert not run.is_canonical("rollout/truncated")
    assert run.canonical_names() == ["response/truncated_rate"]
    native = RunData(source="y", format="rlvitals")
    native.metrics.add(0, "rollout/turns", 3.0)
    assert native.is_canonical("rollout/turns")


def test_until_shows_the_run_as_it_stood_at_a_step(tmp_path):
    from rlvitals import read
    from synth import synth_run

    run = read(synth_run(tmp_path, "r", steps=12, evals_every=4))
    cut = run.until(6)
    assert cut.info["status"] == "running"
    assert cut.series("reward/mean").steps.tolist() == list(range(7))
    assert [e["step"] for e in cut.evals] == [3]
    assert cut.attempts is not None and cut.attempts.step.max() == 6
    assert len(cut.attempts) == int((run.attempts.step <= 6).sum())
    assert run.series("reward/mean").steps.tolist() == list(range(12))  # the original is kept
