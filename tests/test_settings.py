"""The run's own settings, read from the config files frameworks write (rlvitals.settings)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from rlvitals.readers import read
from rlvitals.settings import read_settings, settings_of
from rlvitals.settings.argsbin import read_training_args
from rlvitals.settings.files import resolve

DATA = Path(__file__).parent / "data"
CAUSES = DATA / "causes"
WILD_VERL = (
    Path(__file__).resolve().parents[2]
    / "shared/corpus/wild/verl/dstack-configs_verl_demo_ppo_gsm8k_qwen7b.log"
)


def _values(s) -> dict:
    return {k: v["value"] for k, v in s.to_dict()["settings"].items() if v["value"] is not None}


def test_verl_hydra_config_is_read_with_its_interpolations() -> None:
    # verl's own composed config (verl-project/verl _generated_ppo_trainer.yaml, its
    # actor_rollout_ref, data and algorithm sections verbatim).
    s = read_settings(None, DATA / "verl" / "hydra_run")
    v = _values(s)
    assert v["framework"] == "verl"
    assert v["top_p"] == 1.0 and v["top_k"] == 0 and v["temperature"] == 1.0
    assert v["engine_dtype"] == v["trainer_dtype"] == "bfloat16"
    assert v["engine_logprobs"] == "processed"
    assert v["loss_agg"] == "token-mean" and v["epochs_per_batch"] == 1
    assert v["is_correction"] is False  # rollout_is: null
    assert v["kl_coef"] == 0.0  # neither use_kl_loss nor use_kl_in_reward
    assert v["max_prompt_length"] == v["max_response_length"] == 512
    o = s.origin["top_p"]
    assert o.key == "actor_rollout_ref.rollout.top_p" and o.source.endswith(".hydra/config.yaml")
    # the typed object holds the same
    assert (s.engine_logprobs, s.epochs_per_batch, s.loss_agg) == ("processed", 1, "token-mean")
    assert (s.max_prompt_length, s.max_response_length) == (512, 512)


@pytest.mark.skipif(not WILD_VERL.exists(), reason="needs ../shared/corpus/wild")
def test_verl_console_prints_its_config_and_it_is_read() -> None:
    s = read_settings(None, WILD_VERL)
    v = _values(s)
    assert v["framework"] == "verl" and v["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert v["max_response_length"] == 256 and v["engine_dtype"] == "bfloat16"
    assert "config it prints at start" in s.origin["model"].source


def test_nemo_rl_example_config_resolves_its_references() -> None:
    s = read_settings(None, DATA / "nemo-rl" / "example_config")
    v = _values(s)
    assert v["framework"] == "nemo-rl" and v["model"] == "Qwen/Qwen2.5-1.5B"
    # ${policy.precision} and ${policy.max_total_sequence_length}, resolved in the file
    assert v["engine_dtype"] == "bfloat16" and v["max_response_length"] == 512
    assert v["kl_coef"] == 0.01 and v["async_lag"] == 0 and v["is_correction"] is False
    assert v["top_k"] == 0  # top_k: null is off


def test_nemo_rl_checkpoint_config_names_the_dtype_pair() -> None:
    s = read_settings(None, CAUSES / "nemo_precision" / "console.log")
    assert s.dtype_pair() == ("float32", "bfloat16")
    assert "checkpoints/step_20/config.yaml" in s.origin["trainer_dtype"].source


def test_prime_rl_configs_and_the_input_rl_toml() -> None:
    v = _values(read_settings(None, DATA / "prime-rl" / "reverse_text"))
    assert v == {
        "framework": "prime-rl",
        "model": "PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT",
        "max_response_length": 128,
    }
    s = read_settings(None, CAUSES / "primerl_stale")
    v = _values(s)
    assert v["async_lag"] == 16 and v["top_p"] == 1.0 and v["trainer_dtype"] == "float32"
    assert "engine_dtype" not in v  # inference.vllm.dtype "auto": the model's own, not said
    assert s.origin["async_lag"].key == "orchestrator.max_off_policy_steps"


def test_trl_training_args_and_model_card_version() -> None:
    s = read_settings(None, CAUSES / "trl_top_p")
    v = _values(s)
    assert v["framework"] == "trl" and v["top_p"] == 0.8
    assert v["is_level"] == "token" and v["is_mode"] == "truncate" and v["is_cap"] == 3.0
    assert v["is_logged"] == "corrected" and v["trainer_dtype"] == "bfloat16"
    assert v["framework_version"] == "1.16.0"
    assert s.origin["framework_version"].source.endswith("README.md")
    seq = _values(read_settings(None, CAUSES / "trl_sequence_mask"))
    assert seq["is_level"] == "sequence" and seq["is_aggregation"] == "sum"
    liger = _values(read_settings(None, CAUSES / "trl_liger_0272"))
    assert liger["liger"] is True and liger["framework_version"] == "0.27.2"


def test_openrlhf_wandb_config_of_nested_namespaces() -> None:
    pytest.importorskip("wandb")
    data = read(DATA / "openrlhf" / "wandb_run")
    v = _values(settings_of(data))
    assert v["framework"] == "openrlhf" and v["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert v["is_level"] == "token" and v["is_mode"] == "mask"
    assert (v["is_cap_min"], v["is_cap"]) == (0.5, 5.0)
    assert v["kl_coef"] == 0.01 and v["async_lag"] == 0 and v["trainer_dtype"] == "bfloat16"
    assert data.settings is not None  # kept on the run


def test_reference_trainer_run_json_settings(tmp_path: Path) -> None:
    v = _values(
        read_settings(
            {
                "model": {"sampler_dtype": "bfloat16"},
                "training": {"mode": "async", "max_steps_off_policy": 2},
                "rollout": {"max_group_losses": 1},
                "optim": {"async_lead": 1},
                "task": {"temperature": 1.0, "max_turns": 3},
                "engine": {"top_p": 0.8, "top_k": 0, "dtype": "float8"},
                "correction": {
                    "mode": "sequence_mask",
                    "aggregation": "sum",
                    "clip_max": 2.0,
                    "clip_min": 0.0,
                    "log": "corrected",
                },
            },
            tmp_path,
        )
    )
    assert v["framework"] == "rlvitals" and v["engine_dtype"] == "float8"
    assert v["trainer_dtype"] == "float32" and v["top_p"] == 0.8 and v["async_lag"] == 1
    assert v["is_level"] == "sequence" and v["is_aggregation"] == "sum" and v["is_cap"] == 2.0
    assert v["multi_turn"] is True and "is_cap_min" not in v


def test_missing_settings_are_listed_never_guessed(tmp_path: Path) -> None:
    s = read_settings(None, tmp_path)
    assert s.framework is None and set(s.missing()) >= {"top_p", "trainer_dtype", "kl_coef"}


def test_bad_config_files_are_one_line_each_never_an_error(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("a: [1, 2\nb: {")
    (tmp_path / "rl.toml").write_text("x = = 1\n")
    (tmp_path / "training_args.bin").write_bytes(b"\x80\x04not a pickle")
    s = read_settings(None, tmp_path)
    assert len(s.problems) == 3 and all(str(tmp_path) in p for p in s.problems)
    assert any("not YAML at line" in p for p in s.problems)


def test_training_args_bin_never_runs_what_it_names(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "training_args.bin"
    path.write_bytes(pickle.dumps(Evil()))
    with pytest.raises(ValueError):
        read_training_args(path)
    assert not marker.exists()
    # nested in a dataclass state, it stays inert data too
    path.write_bytes(pickle.dumps({"x": Evil()}))
    with pytest.raises(ValueError):
        read_training_args(path)
    assert not marker.exists()


def test_yaml_interpolations_resolve_within_the_file() -> None:
    doc = resolve(
        {
            "a": {"b": 3, "c": "${a.b}", "d": "${.b}"},
            "e": "${oc.select:a.x,7}",
            "f": "${oc.env:HOME}",
            "g": "${mul:${a.b}, 2}",
        }
    )
    assert doc["a"]["c"] == 3 and doc["a"]["d"] == 3 and doc["e"] == 7
    assert doc["f"] == "${oc.env:HOME}" and doc["g"].startswith("${mul:")


def test_cli_metrics_config_text_and_json() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    run = [sys.executable, "-m", "rlvitals", "metrics", str(CAUSES / "trl_top_p"), "--config"]
    text = subprocess.run(run, capture_output=True, text=True, env=env, check=True).stdout
    assert "top_p                0.8  top_p" in text and "not said" in text
    out = subprocess.run([*run, "--json"], capture_output=True, text=True, env=env, check=True)
    got = json.loads(out.stdout)["settings"]
    assert got["top_p"]["value"] == 0.8 and got["top_p"]["source"].endswith("training_args.bin")
    assert got["min_p"]["value"] == 0.0 and got["async_lag"] == {"value": None}


def test_a_tracker_config_flattened_with_slashes_reads_as_its_framework() -> None:
    s = read_settings(
        {"actor_rollout_ref/rollout/top_p": 0.9, "data/max_response_length": 1024}, None
    )
    assert (s.framework, s.top_p, s.max_response_length) == ("verl", 0.9, 1024)
    assert s.origin["top_p"].source == "the run's config"


def test_a_huge_config_file_is_refused_in_one_line(tmp_path: Path) -> None:
    with open(tmp_path / "config.yaml", "wb") as f:
        f.truncate(9 << 20)
    s = read_settings(None, tmp_path)
    assert s.problems and "more than a config holds" in s.problems[0]


def test_cli_config_of_a_folder_with_config_files_and_no_logs_yet(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    cmd = [sys.executable, "-m", "rlvitals", "metrics", "--config", "--json"]
    out = subprocess.run(
        [*cmd, str(DATA / "verl" / "hydra_run")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert json.loads(out.stdout)["settings"]["framework"]["value"] == "verl"
    bad = subprocess.run([*cmd, str(tmp_path / "nope")], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "no such file" in bad.stderr and "Traceback" not in bad.stderr
