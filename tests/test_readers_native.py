"""rlvitals run directories: steps, rollouts and shards into RunData, incrementally."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rlvitals import Run
from rlvitals.errors import UsageError
from rlvitals.readers import find_attempt, load_attempt_record, open_reader, read


def _attempt(step: int, i: int, **kw: object) -> dict:
    rec = {
        "step": step,
        "attempt_id": f"a{step}-{i}",
        "group_id": f"g{step}-{i // 2}",
        "task_id": f"t{i // 2}",
        "policy_version": step,
        "reward": float(i % 2),
        "trained": True,
        "discard_reason": None,
        "response_tokens": 10 + i,
        "truncated": False,
        "lag": 0,
        "time": 1000.0 + step,
        "duration": 1.5,
        "metadata": {"turns": i, "notes": "x" * i},
    }
    rec.update(kw)
    return rec


def _lines(recs: list[dict]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in recs)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"format": "rlvitals-run/1", "name": "run"}))
    (d / "steps.jsonl").write_text(
        "".join(
            json.dumps({"step": s, "time": 1.0 + s, "reward/mean": 0.5}) + "\n" for s in range(3)
        )
    )
    return d


def test_run_written_by_the_writer_reads_back(tmp_path: Path) -> None:
    with Run({"output": {"output_dir": str(tmp_path), "name": "w"}}) as run:
        for s in range(2):
            for k in range(4):
                run.log_attempt(s, f"{s}-g", "t0", reward=float(k % 2), metadata={"turns": k})
            run.log_step(s)
    data = read(tmp_path / "w")
    t = data.attempts
    assert t is not None and len(t) == 8
    assert t.step.tolist() == [0] * 4 + [1] * 4
    assert t.reward.tolist() == [0.0, 1.0] * 4
    assert data.warnings == []
    rec = load_attempt_record(data, 5)
    assert rec["metadata"] == {"turns": 1} and rec["step"] == 1


def test_attempt_columns_codes_and_nulls(run_dir: Path) -> None:
    recs = [
        _attempt(0, 0),
        _attempt(
            0,
            1,
            reward=None,
            policy_version=None,
            lag=None,
            trained=False,
            discard_reason="rollout_failed/TimeoutError",
        ),
        _attempt(1, 2, reward="NaN", discard_reason="no_variance", trained=False),
    ]
    (run_dir / "rollouts.jsonl").write_bytes(_lines(recs))
    t = read(run_dir).attempts
    assert t is not None
    assert t.reward_missing.tolist() == [False, True, False]
    assert math.isnan(t.reward[1]) and math.isnan(t.reward[2])  # null vs measured NaN
    assert t.policy_version.tolist() == [0, -1, 1]
    assert t.lag.tolist() == [0, -1, 0]
    assert [t.discard_reasons[c] if c >= 0 else None for c in t.discard_code] == [
        None,
        "rollout_failed/TimeoutError",
        "no_variance",
    ]
    assert [t.group_ids[c] for c in t.group_code] == ["g0-0", "g0-0", "g1-1"]
    assert t.trained.tolist() == [True, False, False]


def test_shards_merge_by_step(run_dir: Path) -> None:
    (run_dir / "rollouts.w0.jsonl").write_bytes(_lines([_attempt(0, 0), _attempt(2, 1)]))
    (run_dir / "rollouts.w1.jsonl").write_bytes(_lines([_attempt(1, 2), _attempt(2, 3)]))
    (run_dir / "steps.w1.jsonl").write_text(json.dumps({"step": 3, "reward/mean": 0.9}) + "\n")
    data = read(run_dir)
    t = data.attempts
    assert t is not None
    assert t.step.tolist() == [0, 1, 2, 2]
    assert [load_attempt_record(data, i)["attempt_id"] for i in range(4)] == [
        "a0-0",
        "a1-2",
        "a2-1",
        "a2-3",
    ]
    assert data.series("reward/mean").steps.tolist() == [0, 1, 2, 3]
    assert t.rows_at(2) == slice(2, 4)


def test_find_attempt_by_id(run_dir: Path) -> None:
    (run_dir / "rollouts.jsonl").write_bytes(_lines([_attempt(0, i) for i in range(5)]))
    data = read(run_dir)
    assert find_attempt(data, "a0-3") == 3
    assert find_attempt(data, "nope") is None
    with pytest.raises(UsageError):
        load_attempt_record(data, 99)


def test_live_reader_reads_only_new_lines_and_waits_for_a_partial_one(run_dir: Path) -> None:
    path = run_dir / "rollouts.jsonl"
    first = _lines([_attempt(0, 0), _attempt(0, 1)])
    partial = json.dumps(_attempt(1, 2)).encode()
    path.write_bytes(first + partial[:30])
    reader = open_reader(run_dir)
    reader.poll()
    assert len(reader.run.attempts) == 2
    with open(path, "ab") as f:
        f.write(partial[30:] + b"\n")
    assert reader.poll()
    assert reader.run.attempts.step.tolist() == [0, 0, 1]
    assert reader.run.warnings == []
    assert load_attempt_record(reader.run, 2)["attempt_id"] == "a1-2"


def test_bad_rollout_line_is_one_warning_and_neighbours_are_read(run_dir: Path) -> None:
    good = _lines([_attempt(0, 0)])
    body = (
        good
        + b'{"step": 0, "reward": \n'
        + b"\x00\xff\xfe junk\n"
        + b"\n"
        + _lines([_attempt(0, 1), _attempt(1, 2, reward=None)])
    )
    body += b'{"step": "x"}\n' + b'{"step": 2, "reward": NaN, "trained": true}\n'
    (run_dir / "rollouts.jsonl").write_bytes(body)
    data = read(run_dir)
    t = data.attempts
    assert t is not None and t.step.tolist() == [0, 0, 1, 2]
    assert math.isnan(t.reward[3]) and not t.reward_missing[3]  # bare NaN token accepted
    lines = [w.split(": ", 1)[0] for w in data.warnings]
    assert lines == [f"{run_dir / 'rollouts.jsonl'}:{n}" for n in (2, 3, 7)]
    assert load_attempt_record(data, 2)["attempt_id"] == "a1-2"


def test_absurdly_long_rollout_line_is_skipped(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlvitals.readers import native

    monkeypatch.setattr(native, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(native, "CHUNK", 256)
    monkeypatch.setattr(native, "ROLLOUT_CHUNK", 256)
    long = json.dumps(_attempt(0, 1, metadata={"x": "y" * 5000})).encode() + b"\n"
    (run_dir / "rollouts.jsonl").write_bytes(
        _lines([_attempt(0, 0)]) + long + _lines([_attempt(1, 2)])
    )
    data = read(run_dir)
    assert data.attempts.step.tolist() == [0, 1]
    assert len(data.warnings) == 1 and ":2: line too long" in data.warnings[0]
    assert load_attempt_record(data, 1)["attempt_id"] == "a1-2"


def test_chunk_boundaries_do_not_change_the_table(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlvitals.readers import native

    recs = [_attempt(s, i) for s in range(5) for i in range(7)]
    (run_dir / "rollouts.jsonl").write_bytes(_lines(recs))
    whole = read(run_dir).attempts
    monkeypatch.setattr(native, "CHUNK", 97)
    monkeypatch.setattr(native, "ROLLOUT_CHUNK", 97)
    small = read(run_dir).attempts
    assert np.array_equal(whole.offset, small.offset)
    assert np.array_equal(whole.group_code, small.group_code)
    assert whole.group_ids == small.group_ids


def test_steps_and_evals(run_dir: Path) -> None:
    (run_dir / "evals.jsonl").write_text(
        json.dumps({"step": 2, "suite": "held", "score": 0.25, "n": 8}) + "\n"
    )
    data = read(run_dir)
    assert data.series("eval/held/score").at(2) == 0.25
    assert data.info["name"] == "run"
    assert data.attempts is None
