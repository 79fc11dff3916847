"""What the writer's fast paths must keep: the bytes it writes, every attempt flushed by
log_step and close, pending counts, re-deciding, the readers' code books and integer columns."""

from __future__ import annotations

import hashlib
import itertools
import random
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from rlvitals import Run, read
from rlvitals.errors import UsageError
from rlvitals.model import _Codes
from rlvitals.readers._columns import _int_or
from rlvitals.writer import attempts as attempts_module

# sha256 of rollouts.jsonl and steps.jsonl that ``_scenario`` writes, as the writer wrote them
# before its fast paths (per-attempt _queue, needs_fixup, two-pass step metrics): the fast
# paths must not change one byte. Updated on 3 December for the mismatch distribution (commit
# 52a8134: each attempt's mismatch record gains ``tme``, the step ``train/mismatch_tme`` and
# ``train/mismatch_seq_*``): decoded, those keys are the only difference from the bytes of the
# writer at e65ebdb on this scenario.
GOLDEN = {
    "rollouts.jsonl": "03177c722665cbb52692fdf5f168c114eef9e1ffdc06468e05682c87df6f9350",
    # Measured again when the step record gained the raw token ratio's mean, median and
    # extremes and the median |Δ| (train/is_ratio_*, train/logprob_abs_diff_p50).
    "steps.jsonl": "2b69272d111cf61506a55adbbf8303d030e4da2ddd6154489d5cc3a51d21e913",
}


# log_attempt's defaults, for the columns of a batch whose rows leave an argument out.
DEFAULTS = {"response_tokens": 0, "truncated": False, "retries": 0, "failed_in": "rollout"}


def _columns(items: list[dict]) -> dict[str, list]:
    names = dict.fromkeys(k for item in items for k in item)
    return {k: [item.get(k, DEFAULTS.get(k)) for item in items] for k in names}


def _scenario(root: Path, batched: bool = False, columns: bool = False) -> Path:
    """A run with the odd values the fast paths branch on: NaN and infinite rewards and
    durations, numpy scalars, given ids and reasons, failures, missing versions, metadata with
    NaN, nested tables and None, attempts for a later update, attempts pending at close.
    ``batched``: each group's attempts in one ``log_attempts`` call; ``columns``: as columns."""
    rng = random.Random(5)
    cfg = {
        "output": {"output_dir": str(root), "name": "golden", "trace": "full"},
        "training": {"max_consecutive_unusable_groups": None},
        "rollout": {"max_consecutive_rollout_failures": None},
    }
    labels = ["done", "max_turns", "tool_error"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Run(cfg) as run:
            for step in range(6):
                logged = {}
                for g in range(12):
                    p = rng.random()
                    items: list[dict] = []
                    for k in range(4):
                        kw: dict = {
                            "reward": 1.0 if rng.random() < p else 0.0,
                            "policy_version": step - (1 if rng.random() < 0.1 else 0),
                            "response_tokens": rng.randrange(1, 300),
                            "truncated": rng.random() < 0.1,
                            "duration": rng.uniform(0.1, 9.0),
                            "metadata": {
                                "termination_reason": labels[rng.randrange(3)],
                                "turns": rng.randrange(1, 9),
                                "score": rng.random(),
                                "used_tool": rng.random() < 0.5,
                            },
                        }
                        j = rng.randrange(24)
                        if j == 0:
                            kw["reward"] = float("nan")
                        elif j == 1:
                            kw["duration"] = float("inf")
                        elif j == 2:
                            kw["reward"] = np.float32(0.5)
                        elif j == 3:
                            kw["metadata"] = {**kw["metadata"], "x": float("nan")}
                        elif j == 4:
                            kw["metadata"] = {"nested": {"a": 1, "b": "lbl"}, "turns": np.int64(3)}
                        elif j == 5:
                            kw["policy_version"] = None
                        elif j == 6:
                            kw["retries"] = 2
                        elif j == 7:
                            kw["discard_reason"] = "mine"
                        elif j == 8:
                            kw["attempt_id"] = f"given-{step}-{g}-{k}"
                        elif j == 9:
                            kw["metadata"] = None
                        elif j == 10:
                            kw["response_tokens"] = np.int32(7)
                        elif j == 11:
                            kw["truncated"] = np.bool_(True)
                        elif j == 12:
                            kw["error"] = TimeoutError("slow")
                            kw["reward"] = None
                        elif j == 13:
                            kw["error"] = "Boom"
                            kw["failed_in"] = "grading"
                        elif j == 14:
                            kw["sampler_logprobs"] = [-0.5, -0.25, -1.0]
                        elif j == 15:
                            kw["transcript"] = [{"prompt": "1+1=", "completion": "2"}]
                        attempt_step = step + 1 if j == 16 else step
                        if batched or columns:
                            kw.update(step=attempt_step, group_id=f"{attempt_step}-g{g}")
                            items.append({**kw, "task_id": f"t{g}"})
                            continue
                        aid = run.log_attempt(attempt_step, f"{attempt_step}-g{g}", f"t{g}", **kw)
                        if j == 14:
                            logged[aid] = [-0.5, -0.2, -1.1]
                    got = run.log_attempts(_columns(items) if columns else items) if items else []
                    for item, aid in zip(items, got):
                        if "sampler_logprobs" in item:
                            logged[aid] = [-0.5, -0.2, -1.1]
                run.log_step(step, trainer_logprobs=logged, metrics={"train/loss": 0.5})
            for k in range(5):  # pending at close: written as unfinished
                run.log_attempt(6, "6-g0", "t0", float(k % 2), policy_version=6)
    return run.dir


def _digests(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    clock = itertools.count(1_790_000_000_000)

    def now() -> float:
        return next(clock) / 1000.0

    monkeypatch.setattr(time, "time", now)
    if hasattr(attempts_module, "_now"):
        monkeypatch.setattr(attempts_module, "_now", now)
    d = _scenario(root)
    return {name: hashlib.sha256((d / name).read_bytes()).hexdigest() for name in GOLDEN}


def test_written_bytes_are_those_of_the_writer_before_its_fast_paths(tmp_path, monkeypatch):
    assert _digests(tmp_path, monkeypatch) == GOLDEN


def test_log_attempts_writes_the_bytes_of_one_log_attempt_per_item(tmp_path, monkeypatch):
    # One batch per group, plain and odd items mixed: the same records, ids and step metrics
    # as one call each (a fixed clock: a batch's attempts share one arrival time).
    monkeypatch.setattr(time, "time", lambda: 1_790_000_000.0)
    monkeypatch.setattr(attempts_module, "_now", lambda: 1_790_000_000.0)
    one = _scenario(tmp_path / "one")
    many = _scenario(tmp_path / "many", batched=True)
    for name in GOLDEN:
        assert (many / name).read_bytes() == (one / name).read_bytes(), name
    assert (many / "rollouts.jsonl").read_text().count("\n") == 6 * 12 * 4 + 5


def test_log_attempts_of_columns_writes_the_bytes_of_one_log_attempt_per_row(tmp_path, monkeypatch):
    # Columns (lists and numpy arrays), plain batches and odd ones (NaN, numpy scalars,
    # errors, transcripts: row by row): the same records, ids and step metrics.
    monkeypatch.setattr(time, "time", lambda: 1_790_000_000.0)
    monkeypatch.setattr(attempts_module, "_now", lambda: 1_790_000_000.0)
    one = _scenario(tmp_path / "one")
    cols = _scenario(tmp_path / "cols", columns=True)
    for name in GOLDEN:
        assert (cols / name).read_bytes() == (one / name).read_bytes(), name
    cfg = {"output": {"output_dir": str(tmp_path), "name": "plain"}}
    plain = {
        "step": np.zeros(6, dtype=np.int64),
        "group_id": ["0-g0"] * 3 + ["0-g1"] * 3,
        "task_id": ["a"] * 3 + ["b"] * 3,
        "reward": np.array([1.0, 0.0, 1.0, 0.0, 0.0, 0.0]),
        "response_tokens": np.arange(6),
        "truncated": np.array([False, True] * 3),
        "metadata": [{"turns": i} for i in range(6)],
        "policy_version": [0] * 6,
    }
    with Run(cfg) as a:
        ids = a.log_attempts(plain)
        sa = a.log_step(0)
    with Run({**cfg, "output": {**cfg["output"], "name": "rows"}}) as b:
        ids_b = [
            b.log_attempt(
                0, g, t, r, policy_version=0, response_tokens=int(n), truncated=bool(tr),
                metadata=m,
            )
            for g, t, r, n, tr, m in zip(
                plain["group_id"], plain["task_id"], plain["reward"].tolist(),
                plain["response_tokens"], plain["truncated"], plain["metadata"],
            )
        ]  # fmt: skip
        sb = b.log_step(0)
    drop = ("time", "perf/")
    assert ids == ids_b == [f"0-{i}" for i in range(1, 7)]
    assert {k: v for k, v in sa.items() if not k.startswith(drop)} == {
        k: v for k, v in sb.items() if not k.startswith(drop)
    }
    assert sa["reward/mean"] == pytest.approx(2 / 3) and sa["groups/signal_fraction"] == 0.5


def test_log_attempts_of_columns_names_the_bad_column(tmp_path):
    cfg = {"output": {"output_dir": str(tmp_path), "name": "bad"}}
    ok = {"step": [0, 0], "group_id": ["g", "g"], "task_id": ["t", "t"], "reward": [1.0, 0.0]}
    with Run(cfg) as run:
        with pytest.raises(UsageError, match="unknown column 'rewrad'"):
            run.log_attempts({**ok, "rewrad": [1.0, 1.0]})
        with pytest.raises(UsageError, match="no 'task_id' column"):
            run.log_attempts({k: v for k, v in ok.items() if k != "task_id"})
        with pytest.raises(UsageError, match="column 'reward' has 1 values, 'step' has 2"):
            run.log_attempts({**ok, "reward": [1.0]})
        with pytest.raises(UsageError, match=r"log_attempts: item 1: .*step"):
            run.log_attempts({**ok, "step": [0, "x"]})
        assert run.log_attempts({**ok, "step": [0, 1]}) == ["0-2", "1-3"]  # item 0 kept
        assert run.log_attempts({k: [] for k in ok}) == []
        run.log_step(0)
        with pytest.raises(UsageError, match=r"item 0: .*already written"):
            run.log_attempts(ok)
        assert run.pending == 1


def test_log_attempts_errors_name_the_item_and_keep_the_ones_before(tmp_path):
    from rlvitals.errors import UsageError

    cfg = {"output": {"output_dir": str(tmp_path), "name": "r"}}
    ok = {"step": 0, "group_id": "g", "task_id": "t", "reward": 1.0, "policy_version": 0}
    with Run(cfg) as run:
        with pytest.raises(UsageError, match=r"log_attempts: item 1: .*'rewrad'"):
            run.log_attempts([ok, {**ok, "rewrad": 1.0}, ok])
        assert run.pending == 1
        with pytest.raises(UsageError, match=r"item 2: .*must be a mapping"):
            run.log_attempts([ok, ok, ["not", "a", "mapping"]])
        with pytest.raises(UsageError, match=r"item 0: .*missing .*task_id"):
            run.log_attempts([{"step": 0, "group_id": "g"}])
        with pytest.raises(UsageError, match="item 0: log_attempt: step must be an integer"):
            run.log_attempts([{**ok, "step": "x"}])
        assert run.pending == 3
        assert run.log_attempts([]) == []
        assert len(run.decide(0).trained) == 0  # one group, every reward 1.0: no variance
        late = run.log_attempts([{**ok, "reward": 0.0}])  # joins the decided update
        record = run.log_step(0)
        assert record["groups/trained"] == 1.0 and record["reward/mean"] == 0.75
        with pytest.raises(UsageError, match=r"item 0: .*update 0 is already written"):
            run.log_attempts([ok])
        assert run.log_attempts([{**ok, "step": 1}]) == ["1-5"]
    assert late == ["0-4"]
    with pytest.raises(UsageError, match="log_attempts: the run is"):
        run.log_attempts([ok])


def test_log_attempts_stops_the_run_on_failures_in_a_row_across_batches(tmp_path):
    from rlvitals.errors import RunStopped

    cfg = {
        "output": {"output_dir": str(tmp_path), "name": "r"},
        "rollout": {"max_consecutive_rollout_failures": 3},
    }
    fail = {"step": 0, "group_id": "g", "task_id": "t", "error": TimeoutError("slow")}
    ok = {"step": 0, "group_id": "g", "task_id": "t", "reward": 1.0, "policy_version": 0}
    run = Run(cfg)
    run.log_attempts([fail, fail, ok, fail])  # a plain attempt between: not in a row
    with pytest.raises(RunStopped):
        run.log_attempts([fail, fail])
    assert run.status == "stopped"


def test_every_attempt_is_written_by_its_update_or_at_close(tmp_path):
    cfg = {"output": {"output_dir": str(tmp_path), "name": "r"}}
    ids: dict[int, list[str]] = {0: [], 1: [], 2: []}
    with pytest.raises(RuntimeError), Run(cfg) as run:
        for step in range(2):
            for g in range(3):
                for k in range(4):
                    ids[step].append(run.log_attempt(step, f"{step}-{g}", "t", float(k % 2)))
                ids[step + 1].append(run.log_attempt(step + 1, f"{step + 1}-x", "t", 1.0))
            assert run.pending == len(ids[step]) + len(ids[step + 1])
            run.log_step(step)
            written = (run.dir / "rollouts.jsonl").read_text().splitlines()
            assert run.pending == len(ids[step + 1])
            assert len(written) == sum(len(ids[s]) for s in range(step + 1))
        raise RuntimeError("the loop crashed")
    recs = read(run.dir).attempts
    assert recs is not None and len(recs) == sum(map(len, ids.values()))
    text = (run.dir / "rollouts.jsonl").read_text()
    for aid in itertools.chain.from_iterable(ids.values()):
        assert f'"attempt_id":"{aid}"' in text
    assert text.count('"discard_reason":"unfinished"') == len(ids[2])


def test_an_attempt_logged_after_decide_joins_the_update(tmp_path):
    cfg = {"output": {"output_dir": str(tmp_path), "name": "r"}}
    with Run(cfg) as run:
        for k in range(4):
            run.log_attempt(0, "g", "t", float(k % 2), policy_version=0)
        assert len(run.decide(0).trained) == 4
        late = run.log_attempt(0, "g", "t", 1.0, policy_version=0)
        record = run.log_step(0)
        assert record["groups/trained"] == 1.0
    text = (run.dir / "rollouts.jsonl").read_text()
    assert text.count('"trained":true') == 5 and late in text


def test_bad_values_are_one_clear_error_naming_the_argument(tmp_path):
    cfg = {"output": {"output_dir": str(tmp_path), "name": "r"}}
    from rlvitals.errors import UsageError

    with Run(cfg) as run:
        with pytest.raises(UsageError, match="log_attempt: step must be an integer"):
            run.log_attempt("x", "g", "t", 1.0)
        with pytest.raises(UsageError, match="log_attempt: response_tokens must be an integer"):
            run.log_attempt(0, "g", "t", 1.0, response_tokens=1.5)
        with pytest.raises(UsageError, match="step must be >= 0"):
            run.log_attempt(-1, "g", "t", 1.0)
        run.log_attempt(0, "g", "t", 1.0, attempt_id="a")
        with pytest.raises(UsageError, match="'a' was already logged"):
            run.log_attempt(0, "g", "t", 1.0, attempt_id="a")
        run.log_step(0)
        with pytest.raises(UsageError, match="update 0 is already written"):
            run.log_attempt(0, "g", "t", 1.0)
        assert run.pending == 0


def test_code_books_number_names_in_order_of_first_appearance():
    codes = _Codes()
    assert codes.encode(["b", None, "a", "b"]).tolist() == [0, -1, 1, 0]
    assert codes.encode(["c", "a", None]).tolist() == [2, 1, -1]
    assert codes.names == ["b", "a", "c"]
    assert codes.encode([]).dtype == np.int32 and not len(codes.encode([]))
    assert codes.index.get("zzz") is None and "zzz" not in codes.names  # get() adds nothing


def test_integer_columns_keep_the_float_routes_values():
    assert _int_or([3, None, 5], -1).tolist() == [3, -1, 5]
    assert _int_or([3, 4], -1).dtype == np.int64
    big = [2**53 + 1, 1]  # beyond float64's exact integers: the float route, as before
    assert _int_or(big, -1).tolist() == np.array(big, dtype=np.float64).astype(np.int64).tolist()


@pytest.mark.parametrize("bad", [-1, 2**63])
def test_a_step_out_of_range_is_skipped_with_a_warning(tmp_path, bad):
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_text('{"format": "rlvitals-run/1", "name": "run"}')
    (d / "steps.jsonl").write_text('{"step": 0, "time": 1.0}\n')
    good = '{"step": 0, "attempt_id": "a%d", "group_id": "g", "task_id": "t", "reward": 1.0}\n'
    (d / "rollouts.jsonl").write_text(
        good % 1 + good.replace('"step": 0', f'"step": {bad}') % 2 + good % 3
    )
    run = read(d)
    assert run.attempts is not None and len(run.attempts) == 2
    assert any("expected a 'step'" in w for w in run.warnings)
