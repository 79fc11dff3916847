"""Keys by meaning on names nobody here chose (issue 27, item 3).

``tests/data/handwritten/names.toml`` lists metric names real hand-written RL loops log,
collected from public code outside our corpus, each with where it was seen, what the code
computes and the canonical name it must be read as, or ``unmapped`` where the name alone cannot
say which metric it is. Every name is read the way a user's file is: one JSONL record per step
through ``read``. A wrong mapping (a value loss read as the policy loss, a batch std as the
group std, a sum of returns as the mean reward) fails as surely as a miss.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from rlvitals.readers import read
from rlvitals.readers.keys import unmapped_numeric

NAMES = Path(__file__).parent / "data" / "handwritten" / "names.toml"
TABLE = tomllib.loads(NAMES.read_text())["names"]


def _read_one(tmp_path: Path, key: str):
    p = tmp_path / "loop.jsonl"
    p.write_text("".join(json.dumps({"step": s, key: 0.25 + s / 100}) + "\n" for s in range(4)))
    return read(p)


def test_the_table_is_what_it_says() -> None:
    keys = [n["key"] for n in TABLE]
    assert len(keys) == len(set(keys)) >= 100
    for n in TABLE:
        assert n["seen"] and n["means"], n["key"]
    mapped = [n for n in TABLE if n["expect"] != "unmapped"]
    assert len(mapped) >= 60 and len(TABLE) - len(mapped) >= 40


@pytest.mark.parametrize("entry", TABLE, ids=[n["key"] for n in TABLE])
def test_each_real_name_reads_as_what_its_code_computes(tmp_path: Path, entry: dict) -> None:
    key, expect = entry["key"], entry["expect"]
    run = _read_one(tmp_path, key)
    if expect == "unmapped":
        assert key not in run.resolved, (key, run.resolved.get(key), entry["means"])
        assert run.unmapped.get(key)  # a reason for formats --explain
        return
    assert key in run.resolved, (key, run.unmapped.get(key))
    assert run.resolved[key][0] == expect, (key, run.resolved[key], entry["means"])
    s = run.series(expect)
    assert s is not None and len(s) == 4
    # none of these is a percent or milliseconds; a share without signal is read as 1 - x
    assert s.at(3) == pytest.approx(0.72 if entry.get("transform") == "1 - x" else 0.28)


def test_names_left_unmapped_are_listed_with_their_mapping_line(tmp_path: Path) -> None:
    # Not held-out keys or table leave-outs: the loop's own training-side numbers.
    for key in (
        "returns",
        "train/value_loss",
        "train/reward_model",
        "duration",
        "train/reward_length",
    ):
        run = _read_one(tmp_path, key)
        listed = {u["key"]: u["mapping"] for u in unmapped_numeric(run)}
        assert key in listed, (key, run.unmapped.get(key))
        assert listed[key].endswith(json.dumps(key))


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("train/value_loss", "value (critic) loss"),
        ("train/ent_coef", "coefficient"),
        ("returns", "sums rewards"),
        ("train/advantage_mean", "advantage"),
        ("train/ep_len_mean", "episode's length"),
        ("train/reward_model", "reward_<what>"),
        ("update_policy_duration", "which part"),
        ("kl", "which KL"),
    ],
)
def test_formats_explain_says_why_an_ambiguous_name_stays_unmapped(
    tmp_path: Path, key: str, why: str
) -> None:
    run = _read_one(tmp_path, key)
    assert why in run.unmapped[key]


@pytest.mark.parametrize(
    ("key", "target", "value"),
    [
        ("acc %", "reward/mean", 0.0028),  # a percent accuracy read as a right/wrong reward
        ("step_time_ms", "perf/step_seconds", 0.00028),  # milliseconds
        ("gen_time_s", "perf/sampling_seconds", 0.28),
        ("truncated%", "response/truncated_rate", 0.0028),
        ("eval acc %", "eval/eval/score", 0.0028),
    ],
)
def test_units_are_told_apart(tmp_path: Path, key: str, target: str, value: float) -> None:
    run = _read_one(tmp_path, key)
    assert run.resolved[key][0] == target
    assert run.series(target).at(3) == pytest.approx(value)


@pytest.mark.parametrize(
    ("key", "target"),
    [
        ("success_rate/eval", "eval/eval/score"),  # a held-out split named last
        ("reward/test", "eval/test/score"),
        ("reward_eval", "eval/eval/score"),
        ("acc/val", "eval/val/score"),
        ("dev_acc", "eval/dev/score"),
        ("eval_gsm8k_acc", "eval/gsm8k/score"),  # a benchmark's score: its suite
        ("val/math500_accuracy", "eval/math500/score"),
    ],
)
def test_held_out_splits_named_last_never_read_as_training(
    tmp_path: Path, key: str, target: str
) -> None:
    run = _read_one(tmp_path, key)
    assert run.resolved[key][0] == target
    assert not run.has("reward/mean")


def test_a_held_out_part_of_the_reward_is_not_the_score(tmp_path: Path) -> None:
    for key in ("eval/format_acc", "eval/gsm8k_acc_std", "eval/reward_metrics/format_reward"):
        run = _read_one(tmp_path, key)
        assert key not in run.resolved and "held-out" in run.unmapped[key]
