"""Regenerate the mismatch-cause fixtures in this folder, each written the way its framework's
code writes it, with made-up numbers at the levels the cited reports give.

    python tests/data/causes/make_fixtures.py      # needs trl (1.16), torch, pyyaml

TRL runs (an ``output_dir``): ``checkpoint-20/trainer_state.json`` in HF Trainer's schema
(``log_history`` rows of the keys ``GRPOTrainer`` logs, ``grpo_trainer.py:2776-2812`` @f2cd5771),
``checkpoint-20/training_args.bin`` written by ``torch.save`` of a real ``GRPOConfig`` (what
``Trainer._save`` does), and ``README.md``, the model card TRL writes beside them
(``base_trainer.py:191``) rendered from TRL's own template (``templates/lm_model_card.md``)
with the TRL version the run claims.

- ``trl_top_p``: top_p 0.8, token_truncate at 3: the ratio mean 0.896 (trl PR #7269);
  ``trl_top_p_control``: top_p 1, 0.995 (trl #6789's control).
- ``trl_sequence_mask``: TRL's default sequence_mask at 3, 300-token completions, a per-token
  |Δ| of 0.012 (trl #4772): weights 0.569 with masked zeros (trl PR #5815);
  ``trl_token_truncate``: the same run's numbers token by token, truncated at 3 (the control).
- ``trl_token_truncate_cap2``: token_truncate at 2: the logged max is exactly 2.0 (trl #5231).
- ``trl_liger_0272`` / ``trl_liger_0290``: use_liger_kernel with the vLLM correction, TRL 0.27.2
  (the Liger loss drops it: Liger-Kernel PR #1088) and 0.29.0 (fixed: trl PR #5031).

NeMo-RL (``nemo_precision``, ``nemo_same_precision``): the GRPO console as
``nemo_rl/algorithms/grpo.py`` @7ea279ab prints it (as ``../nemo-rl/constructed_grpo_console.log``)
and the checkpoint's ``config.yaml``, ``yaml.safe_dump`` of the resolved config
(``nemo_rl/utils/checkpoint.py:284-285``): the example config ``../nemo-rl/example_config``
resolved, with ``policy.precision`` float32 and the vLLM engine's bfloat16 (the fp32-trainer,
bf16-engine pair of martingale's finding), or both bfloat16 (``nemo_drift``: the same KL
with the same precision on both sides, a drift no setting explains).

prime-rl (``primerl_stale``, ``primerl_async``): an output dir with ``configs/*.toml`` as
``rl.py`` ``write_subconfigs`` writes them and the rows
its file monitor writes them (``monitors/file/metrics.jsonl``,
``src/prime_rl/monitors/file/monitor.py`` @048a6e23: ``{"step", "time", **metrics}`` and
``producer``): the lag (``off_policy/*``) rising with the mismatch KL, or
held at one update by design.

verl (``verl_top_p``, ``verl_top_p_control``): a console log as ``main_ppo.py`` prints it under
Ray: the resolved config (``pprint``, sorted, width 80) of ``../verl/hydra_run`` with the run's
overrides, then ``step:N - key:value`` lines (``aggregate_logger.py``) with the token-level
rollout correction's ``rollout_corr/rollout_is_*``. ``verl_first_update`` (and its control):
the first update's PPO ratio, KL and one-sided clipping of verl-omni's common pitfalls page;
``verl_bitwise`` (and ``verl_bitwise_off``): the file logger's rows of a batch-invariant run,
``rollout_corr/k3_kl`` exactly 0.0 (or 2e-7 from step 12).
"""

from __future__ import annotations

import json
import math
import os
import pprint
import random
import shutil
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "src"))


def _noise(rng: random.Random, x: float, rel: float) -> float:
    return round(x * (1 + rng.uniform(-rel, rel)), 6)


# -- TRL -------------------------------------------------------------------------------------


def _trl_rows(kind: str, steps: int = 20) -> list[dict[str, Any]]:
    rng = random.Random(kind)
    rows = []
    for i in range(1, steps + 1):
        reward = round(0.25 + 0.4 * i / steps + rng.uniform(-0.03, 0.03), 4)
        row: dict[str, Any] = {
            "clip_ratio/high_max": 0.0,
            "clip_ratio/high_mean": 0.0,
            "clip_ratio/low_mean": 0.0,
            "clip_ratio/low_min": 0.0,
            "clip_ratio/region_mean": 0.0,
            "completions/clipped_ratio": 0.0,
            "completions/mean_length": round(300 + rng.uniform(-20, 20), 2),
            "entropy": _noise(rng, 0.42, 0.05),
            "epoch": round(i / 250, 4),
            "frac_reward_zero_std": _noise(rng, 0.2, 0.2),
            "grad_norm": _noise(rng, 0.35, 0.2),
            "learning_rate": 1e-06,
            "loss": round(rng.uniform(-0.02, 0.02), 5),
            "num_tokens": 240000.0 * i,
            "reward": reward,
            "reward_std": _noise(rng, 0.41, 0.05),
            "rewards/accuracy_reward/mean": reward,
            "step": i,
        }
        diff, dmax, lo, mean, hi = {
            "top_p": (0.11, 1.6, 0.2, 0.896, 1.0),
            "top_p_control": (0.012, 0.6, 0.55, 0.995, 1.6),
            "sequence_mask": (0.012, 0.6, 0.0, 0.569, 2.9),
            "token_truncate": (0.012, 0.6, 0.55, 0.995, 1.8),
            "cap2": (0.03, 1.4, 0.3, 0.99, 2.0),
            "liger": (0.03, 1.2, 0.2, 1.0, 2.6),
        }[kind]
        row["sampling/sampling_logp_difference/mean"] = _noise(rng, diff, 0.1)
        row["sampling/sampling_logp_difference/max"] = _noise(rng, dmax, 0.1)
        row["sampling/importance_sampling_ratio/min"] = 0.0 if lo == 0.0 else _noise(rng, lo, 0.2)
        row["sampling/importance_sampling_ratio/mean"] = round(
            min(mean + rng.uniform(-0.006, 0.006), 1.0 if kind == "top_p" else 9), 6
        )
        row["sampling/importance_sampling_ratio/max"] = (
            hi if kind == "cap2" else round(min(hi * (1 - rng.uniform(0, 0.02)), 2.99), 6)
        )
        if kind == "sequence_mask":
            row["sampling/importance_sampling_ratio/mean"] = _noise(rng, 0.569, 0.06)
        if kind == "liger":
            row["grad_norm"] = _noise(rng, 35.0, 0.3)
        rows.append(row)
    return rows


def _trainer_state(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """HF Trainer's trainer_state.json (TrainerState.save_to_json), as in ../trl/output_dir."""
    last = rows[-1]["step"]
    return {
        "best_global_step": None,
        "best_metric": None,
        "best_model_checkpoint": None,
        "epoch": rows[-1]["epoch"],
        "eval_steps": 500,
        "global_step": last,
        "is_hyper_param_search": False,
        "is_local_process_zero": True,
        "is_world_process_zero": True,
        "log_history": rows,
        "logging_steps": 1,
        "max_steps": last,
        "num_input_tokens_seen": 0,
        "num_train_epochs": 1,
        "save_steps": last,
        "stateful_callbacks": {},
        "total_flos": 0.0,
        "train_batch_size": 8,
        "trial_name": None,
        "trial_params": None,
    }


def _model_card(path: Path, trl_version: str) -> None:
    """README.md from TRL's own template, as GRPOTrainer.create_model_card writes it."""
    import importlib.resources

    from huggingface_hub import ModelCard, ModelCardData

    template = importlib.resources.files("trl") / "templates" / "lm_model_card.md"
    card = ModelCard.from_template(
        card_data=ModelCardData(
            base_model="Qwen/Qwen2.5-1.5B-Instruct",
            library_name="transformers",
            licence="license",
            model_name="grpo-run",
            tags=["generated_from_trainer", "trl", "grpo"],
        ),
        template_path=str(template),
        base_model="Qwen/Qwen2.5-1.5B-Instruct",
        model_name="grpo-run",
        hub_model_id="grpo-run",
        dataset_name=None,
        wandb_url=None,
        trackio_url=None,
        comet_url=None,
        trainer_name="GRPO",
        trainer_citation=None,
        paper_title=None,
        paper_id=None,
        trl_version=trl_version,
        transformers_version="4.57.1",
        pytorch_version="2.9.0",
        datasets_version="4.4.1",
        tokenizers_version="0.22.1",
    )
    card.save(str(path / "README.md"))


def trl_run(name: str, kind: str, trl_version: str, **config: Any) -> None:
    import torch
    from trl import GRPOConfig

    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    ckpt = out / "checkpoint-20"
    ckpt.mkdir(parents=True)
    rows = _trl_rows(kind)
    (ckpt / "trainer_state.json").write_text(json.dumps(_trainer_state(rows), indent=2) + "\n")
    args = GRPOConfig(
        output_dir="grpo-run",
        report_to=[],
        logging_steps=1,
        max_steps=20,
        use_vllm=True,
        vllm_mode="colocate",
        bf16=False,
        **config,
    )
    args.bf16 = True  # the run trained on a GPU; GRPOConfig refuses bf16 on this CPU
    torch.save(args, ckpt / "training_args.bin")
    _model_card(out, trl_version)


# -- NeMo-RL ---------------------------------------------------------------------------------


STEP_BLOCK = """
========================= Step {step}/20 =========================
▶ Preparing batch...
▶ Generating responses for batch of size 512...

📊 Training Results:
  • Loss: {loss:.4f}
  • Generation KL Error: {kl:.4f}
  • Avg Reward: {reward:.4f}
  • Mean Generation Length: {length:.4f}

⏱️  Timing:
  • Total step time: {total:.2f}s
  • generation: {gen:.2f}s ({gen_share:.1f}%)
  • policy_training: 21.40s (23.2%)
"""


def nemo_run(name: str, trainer: str, engine: str, kl: float) -> None:
    import yaml

    from rlvitals.settings.files import resolve

    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    (out / "checkpoints" / "step_20").mkdir(parents=True)
    rng = random.Random(name)
    text = []
    for step in range(1, 21):
        total = 92.0 + rng.uniform(-4, 4)
        gen = 55.0 + rng.uniform(-3, 3)
        text.append(
            STEP_BLOCK.format(
                step=step,
                loss=rng.uniform(-0.02, 0.0),
                kl=_noise(rng, kl, 0.15),
                reward=0.26 + 0.015 * step + rng.uniform(-0.02, 0.02),
                length=800 + rng.uniform(-30, 30),
                total=total,
                gen=gen,
                gen_share=100 * gen / total,
            )
        )
    (out / "console.log").write_text("".join(text))
    cfg = resolve(
        yaml.safe_load((HERE.parent / "nemo-rl" / "example_config" / "config.yaml").read_text())
    )
    cfg["policy"]["precision"] = trainer
    cfg["policy"]["generation"]["vllm_cfg"]["precision"] = engine
    cfg["policy"]["megatron_cfg"]["pipeline_dtype"] = trainer
    with open(out / "checkpoints" / "step_20" / "config.yaml", "w") as f:
        yaml.safe_dump(cfg, f)


# -- prime-rl --------------------------------------------------------------------------------


def _toml(doc: dict[str, Any], prefix: str = "") -> str:
    """TOML as tomli_w.dump writes a model_dump: plain keys first, then each table."""
    plain = [(k, v) for k, v in doc.items() if not isinstance(v, dict)]
    tables = [(k, v) for k, v in doc.items() if isinstance(v, dict)]
    lines = [f"{k} = {json.dumps(v)}" for k, v in plain]
    out = "\n".join(lines) + ("\n" if lines else "")
    for k, v in tables:
        name = f"{prefix}{k}"
        out += f"\n[{name}]\n" + _toml(v, name + ".")
    return out


def primerl_run(name: str, stale: bool) -> None:
    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    for d in ("configs", "monitors/file"):
        (out / d).mkdir(parents=True)
    orch = {
        "batch_size": 128,
        "group_size": 16,
        "seq_len": 2048,
        "max_off_policy_steps": 16,
        "max_steps": 30,
        "output_dir": "outputs",
        "model": {"name": "PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT"},
        "train": {"sampling": {"temperature": 1.0, "max_completion_tokens": 128, "extra_body": {}}},
    }
    trainer = {
        "model": {
            "name": "PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT",
            "optimization_dtype": "float32",
            "reduce_dtype": "float32",
        },
        "loss": {
            "type": "default",
            "dppo_mask_low": 0.2,
            "dppo_mask_high": 0.2,
            "adv_tau": 1.0,
            "kl_tau": 0.001,
        },
        "optim": {"lr": 3e-06},
    }
    inference = {"vllm": {"model": "PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT", "dtype": "auto"}}
    for stem, doc in (("orchestrator", orch), ("trainer", trainer), ("inference", inference)):
        (out / "configs" / f"{stem}.toml").write_text(_toml(doc))
    rng = random.Random(name)
    rows: list[dict[str, Any]] = []
    for step in range(1, 31):
        t = 60.0 * step
        lag = max(0.0, (step - 7) * 0.35) if stale else 1.0  # a broadcast falling behind
        kl = 0.004 * (1 + (lag if stale else 0) ** 1.5) * (1 + rng.uniform(-0.1, 0.1))
        rows.append(
            {
                "step": step,
                "time": t,
                "train/agg/effective/default/reward/mean": round(0.3 + 0.01 * step, 4),
                "off_policy/mean": round(lag + rng.uniform(0, 0.2) * (lag > 0), 3),
                "off_policy/max": math.ceil(lag + 1 if lag else 0),
                "producer": "orchestrator",
            }
        )
        rows.append(
            {
                "step": step,
                "time": t + 5,
                "mismatch_kl/all/mean": round(kl, 6),
                "entropy/all/mean": round(0.4 - 0.002 * step, 4),
                "optim/grad_norm": round(0.05 + rng.uniform(0, 0.01), 4),
                "producer": "trainer",
            }
        )
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (out / "monitors" / "file" / "metrics.jsonl").write_text(text)


# -- verl ------------------------------------------------------------------------------------


def verl_run(name: str, top_p: float, ratio: float) -> None:
    import yaml

    from rlvitals.settings.files import resolve

    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cfg = resolve(
        yaml.safe_load((HERE.parent / "verl" / "hydra_run" / ".hydra" / "config.yaml").read_text())
    )
    r = cfg["actor_rollout_ref"]
    r["rollout"]["name"] = "vllm"
    r["rollout"]["top_p"] = top_p
    r["model"]["path"] = "Qwen/Qwen2.5-3B-Instruct"
    cfg["algorithm"]["rollout_correction"]["rollout_is"] = "token"
    cfg["algorithm"]["adv_estimator"] = "grpo"
    prefix = "(TaskRunner pid=21872) "
    text = "".join(prefix + line + "\n" for line in pprint.pformat(cfg).splitlines())
    rng = random.Random(name)
    for step in range(1, 31):
        kv = {
            "critic/score/mean": round(0.3 + 0.01 * step + rng.uniform(-0.02, 0.02), 4),
            "actor/entropy": _noise(rng, 0.5, 0.05),
            "actor/pg_clipfrac": _noise(rng, 0.002, 0.3),
            "actor/ppo_kl": _noise(rng, 1e-4, 0.3),
            "actor/grad_norm": _noise(rng, 0.3, 0.2),
            "response_length/mean": _noise(rng, 240, 0.05),
            "rollout_corr/rollout_is_mean": round(ratio + rng.uniform(-0.004, 0.004), 6),
            "rollout_corr/rollout_is_max": round(
                min(1.0, 1 - rng.uniform(0, 0.002)) if top_p < 1 else 1.4 + rng.uniform(0, 0.2), 6
            ),
            "rollout_corr/rollout_is_min": _noise(rng, 0.3 if top_p < 1 else 0.6, 0.2),
            "timing_s/step": _noise(rng, 40.0, 0.05),
        }
        text += prefix + f"step:{step} - " + " - ".join(f"{k}:{v}" for k, v in kv.items()) + "\n"
    (out / "train.log").write_text(text)


def verl_first_update(name: str, ratio: float, kl: float, clip: float, higher: float) -> None:
    """A verl-family console (verl-omni's keys, common_pitfalls.html): the first update's
    PPO ratio, KL and clipping sides, then ordinary updates."""
    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    rng = random.Random(name)
    prefix = "(TaskRunner pid=5512) "
    text = ""
    for step in range(1, 13):
        first = step == 1
        kv = {
            "critic/score/mean": round(0.3 + 0.01 * step + rng.uniform(-0.02, 0.02), 4),
            "actor/entropy": _noise(rng, 0.5, 0.05),
            "actor/ratio_mean": ratio if first else round(1 + rng.uniform(-2e-6, 2e-6), 7),
            "actor/ppo_kl": kl if first else _noise(rng, 1e-6, 0.3),
            "actor/pg_clipfrac": clip if first else _noise(rng, 0.01, 0.2),
            "actor/pg_clipfrac_higher": higher if first else _noise(rng, 0.004, 0.2),
            "actor/grad_norm": _noise(rng, 0.3, 0.2),
            "response_length/mean": _noise(rng, 240, 0.05),
        }
        text += prefix + f"step:{step} - " + " - ".join(f"{k}:{v}" for k, v in kv.items()) + "\n"
    (out / "train.log").write_text(text)


def verl_bitwise(name: str, off_from: int | None) -> None:
    """verl's file logger (``verl/utils/tracking.py``: ``{"step": N, "data": {...}}`` rows) of
    a batch-invariant run: rollout_corr/k3_kl exactly 0.0, or a tiny difference from a step."""
    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    rng = random.Random(name)
    rows = []
    for step in range(1, 21):
        k3 = 0.0 if off_from is None or step < off_from else 2e-7 * (1 + rng.uniform(-0.3, 0.3))
        rows.append(
            {
                "step": step,
                "data": {
                    "critic/score/mean": round(0.3 + 0.01 * step, 4),
                    "actor/entropy": _noise(rng, 0.5, 0.05),
                    "rollout_corr/k3_kl": k3,
                    "rollout_corr/kl": 0.0 if k3 == 0.0 else round(k3 * 0.9, 12),
                    "actor/grad_norm": _noise(rng, 0.3, 0.2),
                },
            }
        )
    (out / "bitwise.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def main() -> None:
    os.chdir(HERE)
    trl_run(
        "trl_top_p",
        "top_p",
        "1.16.0",
        top_p=0.8,
        vllm_importance_sampling_mode="token_truncate",
        vllm_importance_sampling_clip_max=3.0,
    )
    trl_run(
        "trl_top_p_control",
        "top_p_control",
        "1.16.0",
        vllm_importance_sampling_mode="token_truncate",
        vllm_importance_sampling_clip_max=3.0,
    )
    trl_run(
        "trl_sequence_mask",
        "sequence_mask",
        "1.16.0",
        vllm_importance_sampling_mode="sequence_mask",
        vllm_importance_sampling_clip_max=3.0,
    )
    trl_run(
        "trl_token_truncate",
        "token_truncate",
        "1.16.0",
        vllm_importance_sampling_mode="token_truncate",
        vllm_importance_sampling_clip_max=3.0,
    )
    trl_run(
        "trl_token_truncate_cap2",
        "cap2",
        "1.16.0",
        vllm_importance_sampling_mode="token_truncate",
        vllm_importance_sampling_clip_max=2.0,
    )
    for version in ("0.27.2", "0.29.0"):
        trl_run(
            f"trl_liger_{version.replace('.', '')}",
            "liger",
            version,
            use_liger_kernel=True,
            vllm_importance_sampling_mode="token_truncate",
            vllm_importance_sampling_clip_max=3.0,
        )
    nemo_run("nemo_precision", "float32", "bfloat16", 0.025)
    nemo_run("nemo_same_precision", "bfloat16", "bfloat16", 0.001)
    nemo_run("nemo_drift", "bfloat16", "bfloat16", 0.025)  # none of the named causes
    primerl_run("primerl_stale", stale=True)
    primerl_run("primerl_async", stale=False)
    verl_run("verl_top_p", 0.9, 0.93)
    verl_run("verl_top_p_control", 1.0, 0.998)
    # verl-omni's pitfall numbers: 0.99996 with every clip on the lower side, and after the fix
    verl_first_update("verl_first_update", 0.99996, 2.1e-4, 0.034, 0.0)
    verl_first_update("verl_first_update_control", 1.0, 1e-6, 0.01, 0.004)
    verl_bitwise("verl_bitwise", None)
    verl_bitwise("verl_bitwise_off", 12)


if __name__ == "__main__":
    main()
