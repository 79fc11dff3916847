"""Every framework's real log fragments (tests/data/<framework>/) read into canonical values."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from rlvitals.cli import main
from rlvitals.readers import read, sniff

DATA = Path(__file__).parent / "data"
SPECS = sorted(DATA.glob("*/*.expect.json"))


def _want(v: float | str) -> float:
    return (
        {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[v]
        if isinstance(v, str)
        else float(v)
    )


def _same(got: float, want: float, rel: float) -> bool:
    if math.isnan(want):
        return math.isnan(got)
    return got == want or math.isclose(got, want, rel_tol=rel, abs_tol=1e-12)


def _load(spec_path: Path) -> tuple[dict, Path, Path | None]:
    spec = json.loads(spec_path.read_text())
    path = spec_path.parent / spec["path"]
    mapping = spec_path.parent / spec["mapping"] if "mapping" in spec else None
    return spec, path, mapping


def test_every_framework_has_fixtures() -> None:
    frameworks = {p.parent.name for p in SPECS}
    assert {
        "verl",
        "trl",
        "miles",
        "slime",
        "openrlhf",
        "tinker",
        "prime-rl",
        "skyrl",
        "areal",
        "tensorboard",
        "generic",
    } <= frameworks


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_maps_to_canonical_values(spec_path: Path) -> None:
    spec, path, mapping = _load(spec_path)
    assert sniff(path) == spec["format"]
    run = read(path, mapping=mapping)
    rel = spec.get("rel", 1e-9)
    for name, points in spec.get("values", {}).items():
        s = run.series(name)
        assert s is not None, f"{name} missing; have {run.names()}"
        for step, value in points:
            got = s.at(step)
            assert got is not None, f"{name} has no value at step {step}"
            assert _same(got, _want(value), rel), f"{name}@{step}: {got} != {value}"
    for name in spec.get("absent", []):
        assert not run.has(name), f"{name} should be absent (the framework does not log it)"
    for name, source in spec.get("original", {}).items():
        assert run.original.get(name) == source
        assert run.is_canonical(name)
    for key in spec.get("source_keys", []):
        assert key in run.source_keys
        assert not run.is_canonical(key), f"{key} is the framework's, not the canonical family"
    if "warnings" in spec:
        assert len(run.warnings) == spec["warnings"], run.warnings
    else:
        assert run.warnings == []
    if "framework" in spec:
        assert run.info.get("framework") == spec["framework"]


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_metrics_json_command_reads_fixture(spec_path: Path) -> None:
    spec, path, mapping = _load(spec_path)
    name, points = next(iter(spec["values"].items()))
    argv = ["metrics", str(path), "--json", "--all", "-m", name]
    if mapping is not None:
        argv += ["--mapping", str(mapping)]
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(argv) == 0
    data = json.loads(out.getvalue())
    step, value = points[0]
    got = data["metrics"][name][data["steps"].index(step)]
    if isinstance(value, str):
        assert got == value  # non-finite values stay strings, distinct from null
    else:
        assert _same(float(got), float(value), spec.get("rel", 1e-9))


def test_format_flag_overrides_sniffing() -> None:
    log = DATA / "slime" / "issue1837_perf.log"
    assert read(log, "miles").format == "miles"
    assert read(log).format == "slime"


def test_miles_entropy_placeholder_is_not_entropy_but_slime_entropy_is() -> None:
    miles = read(DATA / "miles" / "pr3216_and_others.log")
    assert miles.series("train/entropy_loss") is not None
    assert not miles.has("train/entropy")
    slime = read(DATA / "slime" / "skyrl_issue1864_step.log")
    assert slime.original["train/entropy"] == "train/entropy_loss"


def test_verl_probability_diff_is_not_logprob_diff() -> None:
    run = read(DATA / "verl" / "issue2060_console.log")
    assert run.series("training/rollout_probs_diff_mean").at(1) == 0.003
    assert not run.has("train/logprob_abs_diff")


def test_trl_batch_std_is_not_group_std_but_openrlhf_group_std_is() -> None:
    trl = read(DATA / "trl" / "issue3857_console.log")
    assert trl.original["reward/std"] == "reward_std"
    assert not trl.has("reward/group_std_mean")
    orl = read(DATA / "openrlhf" / "constructed_async.log")
    assert orl.original["reward/group_std_mean"] == "group_reward_std"


def test_tinker_entropy_is_a_sampling_estimate_not_trainer_entropy() -> None:
    run = read(DATA / "tinker" / "metrics.jsonl")
    assert run.original["sampling/entropy_estimate"] == "optim/entropy"
    assert not run.has("train/entropy")


def test_reference_kl_is_not_ppo_kl_nor_mismatch() -> None:
    run = read(DATA / "verl" / "issue7412_console.log")
    assert run.original["train/ref_kl"] == "actor/kl_loss"
    assert run.original["train/ppo_kl"] == "actor/ppo_kl"
    assert not run.has("train/mismatch_kl") and not run.has("train/mismatch_k1")


def test_directory_of_logs_is_read_whole() -> None:
    run = read(DATA / "prime-rl" / "console")
    assert run.series("train/mismatch_kl").steps.tolist() == [1, 2]
    assert run.series("reward/mean").at(1) == 0.7812


def test_trl_output_dir_reads_the_newest_checkpoint() -> None:
    run = read(DATA / "trl" / "output_dir")
    assert run.series("reward/mean").at(1) == 0.375  # not checkpoint-1's 9.9
    assert run.info["global_step"] == 2
