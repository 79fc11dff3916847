"""The runs users bring (issue 27): 16 real GPU logs read by content, every expected value back.

The corpus lives beside the checkout (``../shared/corpus/wild``: its authors' files, never
copied into this repository); ``manifest.json`` lists each file's expected values ``{step, key,
value}`` as printed (TRL console logs count records: ``record``, step null) and its step count.
Each class of issue 27 has a test on a real file of it; the percent and short-name cases also
have the hand-written loops of ``tests/data/handwritten`` (run by test_readers_frameworks.py).
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

import pytest

from rlvitals.checks import run_checks
from rlvitals.cli import main
from rlvitals.model import RunData
from rlvitals.readers import read
from rlvitals.readers.keys import require_metrics

WILD = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "wild"
pytestmark = [
    pytest.mark.wild,
    pytest.mark.skipif(
        not (WILD / "manifest.json").is_file(),
        reason=f"the wild corpus is not beside the checkout ({WILD}); see shared/corpus/wild/README.md",
    ),
]

# The reader each kind of file must be read by, by its folder (and, in trl/, its suffix).
READER = {
    "verl": "verl",
    "trl:.json": "trl",
    "trl:.log": "trl-console",
    "trl-reward-jsonl": "jsonl",
    "tinyzero": "verl",
    "logic-rl": "verl",
    "minimind": "console",
}


def _manifest() -> list[dict[str, Any]]:
    if not (WILD / "manifest.json").is_file():
        return []
    files: list[dict[str, Any]] = json.loads((WILD / "manifest.json").read_text())["files"]
    return files


ENTRIES = {e["path"]: e for e in _manifest()}


@functools.cache
def _read(path: str) -> RunData:
    return read(WILD / path)


def _reader(path: str) -> str:
    folder = path.split("/", 1)[0]
    return READER.get(f"{folder}:{Path(path).suffix}") or READER[folder]


def _tolerance(value: float) -> float:
    """Half a unit of the last decimal printed (``0.941`` -> 0.0005)."""
    text = repr(float(value))
    if "e" in text or "." not in text:
        return 1e-12 + abs(value) * 1e-9
    return 0.5 * 10 ** -len(text.split(".")[1]) + abs(value) * 1e-12


def _at(run: RunData, key: str, step: int) -> float | None:
    s = run.metrics.get(key)
    if s is None:
        s = run.metrics.get(f"{run.format}:{key}")  # a source key that spells a canonical name
    return None if s is None else s.at(step)


@pytest.mark.parametrize("path", sorted(ENTRIES))
def test_each_wild_file_is_read_by_content_with_every_expected_value(path: str) -> None:
    entry = ENTRIES[path]
    run = _read(path)
    assert run.format == _reader(path), run.info.get("sniffed")
    require_metrics(run, path)  # no file refused
    # The step count: steps of training records as the file numbers them (a resumed run
    # keeps 101...; a validation-only step 0 is not a training step).
    reward = run.series("reward/mean")
    assert reward is not None
    steps = entry["steps"]
    assert (len(reward), int(reward.steps[0]), int(reward.steps[-1])) == (
        steps["records"],
        steps["first"],
        steps["last"],
    )
    extra = set(map(int, run.steps())) - set(map(int, reward.steps))
    for step in extra:  # only held-out evaluations there
        names = [n for n in run.names() if n != "time" and run.metrics.get(n).at(step) is not None]
        assert all(n.startswith(("eval/", "val/", "val-core/")) for n in names), (step, names)
    for e in entry["expected"]:
        step = e["step"] if e["step"] is not None else e["record"]
        got = _at(run, e["key"], step)
        assert got is not None, f"{e['key']} at step {step} not read"
        assert math.isclose(got, e["value"], rel_tol=0, abs_tol=_tolerance(e["value"])), e


def test_a_trainer_state_is_read_by_content_whatever_its_name(tmp_path: Path) -> None:
    # A log_history object saved as training_logs.json, the bare list as training_log.json,
    # and a checkpoint's trainer_state.json copied under a name of the user's choosing.
    assert _read("trl/chaos-economy_training_logs.json").format == "trl"
    legaloom = _read("trl/legaloom-env_training_log.json")
    assert legaloom.format == "trl" and len(legaloom.steps()) == 40
    assert legaloom.info["labels"]["phase_task_id"] == "task_hard"  # text kept as a label
    assert legaloom.series("phase") is not None  # the loop's own numeric field kept
    other = tmp_path / "progress-notes.txt"
    other.write_bytes((WILD / "trl/unslothgrpo_checkpoint-250_trainer_state.json").read_bytes())
    run = read(other)
    assert run.format == "trl" and len(run.steps()) == 250  # was a console log: 125 steps
    assert run.series("train/grad_norm").at(84) == pytest.approx(4.860539436340332)
    # Early-2025 TRL's rewards/<fn> (no /mean) are reward components.
    assert run.series("reward/component/correctness_reward_func/mean").at(250) == 1.0


def test_steps_inside_a_markdown_code_block_keep_their_numbers() -> None:
    run = _read("tinyzero/tinyzero-reproduction_part-of-logs.md")
    assert [int(s) for s in run.steps()] == list(range(383, 400))  # not renumbered from 1
    assert run.series("train/entropy").at(383) == pytest.approx(0.005)
    # verl 0.1's in-reward KL (critic/kl) is the KL to the reference.
    assert run.series("train/ref_kl").at(383) == pytest.approx(0.759)
    assert run.original["train/ref_kl"] == "critic/kl"


def test_numbered_shapes_among_sample_printouts() -> None:
    minimind = _read("minimind/minimind-from-scratch_grpo_first10000lines.log")
    assert len(minimind.steps()) == 2522  # Epoch:[1/1](N/9751): was 890
    assert minimind.series("Reward").at(1) == -2.3041  # was -2.05 (another line's value)
    assert minimind.info["stray_records"] > 0  # reward= lines of sample printouts passed over
    assert minimind.series("reward") is None
    logic = _read("logic-rl/logic-rl-formula_wandb_run-m950nfkl_output.log")
    assert [int(s) for s in logic.steps()] == list(range(10))  # was 1587 "steps"
    for letter in "ABCDEFGH":  # the ground truth {'A': 'true', ...} of sample printouts
        assert letter not in logic.metrics
    assert "printed steps" in logic.info["sniffed"]  # formats --explain says why verl won
    verl = _read("verl/dstack-configs_verl_demo_ppo_gsm8k_qwen7b.log")
    assert (int(verl.steps()[0]), int(verl.steps()[-1])) == (101, 435)  # a resumed run


def test_short_key_names_map_by_meaning() -> None:
    run = _read("minimind/minimind-from-scratch_grpo_first10000lines.log")
    assert run.original == {
        "reward/mean": "Reward",
        "train/ref_kl": "KL_ref",
        "train/advantage_std": "Adv Std",
        "train/loss": "Actor Loss",
        "response/length_mean": "Avg Response Len",
        "train/lr": "Learning Rate",
    }
    assert run.series("response/length_mean").at(1) == 271.38
    assert run.series("Avg Response Len").at(1) == 271.38  # the original key stays


def test_a_held_out_split_is_an_evaluation_not_a_training_metric() -> None:
    run = _read("logic-rl/logic-rl-formula_wandb_run-m950nfkl_output.log")
    ev = run.series("eval/logic_assignment/score")
    assert ev is not None and ev.at(0) == 0.0
    assert run.series("reward/mean").at(0) is None  # step 0 holds no training reward
    assert run.resolved["val/test_score/logic_assignment"][0] == "eval/logic_assignment/score"


def test_fractions_stay_fractions_and_a_percent_is_divided_by_100(tmp_path: Path) -> None:
    # A real run's clip ratio is a fraction (0.6): kept as is.
    run = _read("trl/chaos-economy_training_logs.json")
    assert run.series("response/truncated_rate").at(5) == 0.6
    assert "units" not in run.info
    # The same run's clipped ratio logged as a percent by a loop of its own: under a name
    # that says so (trunc_pct), and under one that does not (clip_ratio: told by its values).
    rows = json.loads((WILD / "trl/chaos-economy_training_logs.json").read_text())["log_history"]
    p = tmp_path / "pct.jsonl"
    with p.open("w") as f:
        for r in rows:
            if "reward" in r:
                pct = 100 * r["completions/clipped_ratio"]
                row = {"step": r["step"], "rew": r["reward"], "trunc_pct": pct, "clip_ratio": pct}
                f.write(json.dumps(row) + "\n")
    run = read(p)
    assert run.series("response/truncated_rate").at(5) == pytest.approx(0.6)
    assert run.series("trunc_pct").at(5) == pytest.approx(60.0)  # as printed, under its key
    assert run.series("train/clip_frac").at(5) == pytest.approx(0.6)
    assert run.series("clip_ratio").at(5) == pytest.approx(60.0)
    assert "a percent" in run.info["units"]["train/clip_frac"]
    assert "a percent" in run.resolved["clip_ratio"][2]  # formats --explain says so


def _redteam_rows() -> list[dict[str, Any]]:
    path = WILD / "trl-reward-jsonl/agent-memory-redteam_strict_stage1_train_metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _nonfinite(run: RunData) -> list[Any]:
    report = run_checks(run, only=["nonfinite"])
    return [f for f in report.findings if f.check == "nonfinite" and f.severity != "ok"]


def test_a_field_never_filled_is_not_a_non_finite_metric(tmp_path: Path) -> None:
    rows = _redteam_rows()
    p = tmp_path / "declared.jsonl"
    p.write_text("".join(json.dumps({**r, "judge_score": None}) + "\n" for r in rows))
    run = read(p)
    assert "judge_score" not in run.metrics
    assert run.info["never_measured"] == ["judge_score"]
    assert _nonfinite(run) == []
    # A NaN after real values is still caught: the reward turns null at step 200.
    q = tmp_path / "nan.jsonl"
    q.write_text(
        "".join(
            json.dumps({**r, "reward": None if r["step"] >= 200 else r["reward"]}) + "\n"
            for r in rows
        )
    )
    late = read(q)
    assert late.missing.get("reward") == 200
    assert _nonfinite(late)


def test_a_file_with_nothing_readable_is_an_input_error(tmp_path: Path, capsys: Any) -> None:
    junk = tmp_path / "run" / "steps.jsonl"
    junk.parent.mkdir()
    head = (WILD / "trl/unslothgrpo_checkpoint-250_trainer_state.json").read_bytes()[:64]
    junk.write_bytes(bytes(b ^ 0xA5 for b in head * 40) + b"\n\x00\xff\xfe junk\n")
    for path in (junk, junk.parent):
        assert main(["check", str(path)]) == 2  # was "too early to tell", exit 0
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "nothing could be read" in err[0] and str(path) in err[0]
        assert "expected JSON step records" in err[0]


def test_unmapped_numeric_keys_are_listed_with_the_mapping_line_that_maps_them(
    tmp_path: Path, capsys: Any
) -> None:
    path = WILD / "trl-reward-jsonl/agent-memory-redteam_stage1_final_train_metrics.jsonl"
    assert main(["check", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)["runs"][0]["info"]
    rows = {r["key"]: r for r in info["unmapped"]}
    # The loop's reward parts (attack_reward, noop_penalty) are components by their names.
    assert "attack_reward" not in rows and "noop_penalty" not in rows and "reward" not in rows
    run = _read("trl-reward-jsonl/agent-memory-redteam_stage1_final_train_metrics.jsonl")
    assert run.series("reward/component/attack_reward/mean").at(1) == 0.1875
    # judge_err means nothing the checks know: listed, with a line to fill in.
    line = rows["judge_err"]["mapping"]
    assert line == '"<canonical name>" = "judge_err"'
    mapping = tmp_path / "map.toml"
    mapping.write_text(line.replace("<canonical name>", "rollout/judge_err") + "\n")
    mapped = read(path, mapping=mapping)  # the line, its name filled in, maps it
    assert mapped.series("rollout/judge_err").at(250) == 0
    assert main(["check", str(path)]) == 0
    assert "unmapped: " in capsys.readouterr().out
