"""Regenerate ``wandb_run/`` with the real wandb in offline mode (no network).

    pip install wandb && python tests/data/openrlhf/make_wandb_run.py

An OpenRLHF PPO run's W&B run as ``openrlhf/utils/logging_utils.py:70-81`` @3c3be623 makes it:
``wandb.init(config=args.__dict__)`` where ``args`` is ``train_ppo_ray.py``'s parsed arguments
after ``hierarchize`` (``openrlhf/utils/config.py``: dotted dests such as ``--rollout.top_p``
become nested ``SimpleNamespace`` groups, which W&B stores as their repr), then
``define_metric("train/global_step")`` and ``train/<key>`` rows. The argument names and
defaults are those of ``train_ppo_ray.py`` @3c3be623 (a subset), with a run's overrides
(the model, the vLLM correction on as icepop, n_samples_per_prompt 8); made-up metric values.
Only the ``.wandb`` transaction log is kept, renamed to a fixed id.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))

FLAT = {
    "actor.model_name_or_path": "Qwen/Qwen2.5-7B-Instruct",
    "actor.eps_clip": 0.2,
    "actor.policy_loss_type": "ppo",
    "algo.advantage.estimator": "reinforce_baseline",
    "algo.advantage.is_correction_enable": True,
    "algo.advantage.is_correction_threshold": [0.5, 5.0],
    "algo.advantage.is_correction_type": "icepop",
    "algo.kl.init_coef": 0.01,
    "algo.kl.estimator": "k1",
    "data.max_len": 2048,
    "ds.param_dtype": "bf16",
    "ds.use_liger_kernel": False,
    "rollout.max_new_tokens": 1024,
    "rollout.n_samples_per_prompt": 8,
    "rollout.temperature": 1.0,
    "rollout.top_p": 1.0,
    "train.async_enable": False,
    "train.batch_size": 128,
    "train.max_epochs": 1,
    "train.seed": 42,
    "logger.wandb.project": "openrlhf_train_ppo",
}


def hierarchize(flat: dict) -> SimpleNamespace:
    """openrlhf/utils/config.py's hierarchize, on a dict of dests."""
    root: dict = {}
    for k, v in flat.items():
        node = root
        *parents, last = k.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = v

    def build(x):
        return SimpleNamespace(**{k: build(v) for k, v in x.items()}) if isinstance(x, dict) else x

    return build(root)


def main() -> None:
    tmp = tempfile.mkdtemp()
    os.environ.update(WANDB_MODE="offline", WANDB_DIR=tmp, WANDB_SILENT="true")
    os.environ["WANDB_DISABLE_CODE"] = "true"
    import wandb

    args = hierarchize(FLAT)
    run = wandb.init(
        project="openrlhf_train_ppo",
        id="openrlhf01",
        config=args.__dict__,
        settings=wandb.Settings(console="off", x_disable_stats=True, x_disable_meta=True),
    )
    run.define_metric("train/global_step")
    run.define_metric("train/*", step_metric="train/global_step", step_sync=True)
    for step in range(1, 13):
        wandb.log(
            {
                "train/policy_loss": round(0.01 - 0.001 * step, 5),
                "train/reward": round(0.3 + 0.02 * step, 4),
                "train/response_length": 400.0 + 5 * step,
                "train/kl": round(0.0005 * step, 6),
                "train/vllm_kl": round(0.0004 + 0.00001 * step, 6),
                "train/ppo_clip_ratio": 0.002,
                "train/actor_grad_norm": 0.3,
                "train/actor_lr": 5e-7,
                "train/global_step": step,
            }
        )
    run.finish()
    out = os.path.join(HERE, "wandb_run")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    (log,) = glob.glob(os.path.join(tmp, "wandb", "offline-run-*", "*.wandb"))
    shutil.copy(log, os.path.join(out, "run-openrlhf01.wandb"))
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
