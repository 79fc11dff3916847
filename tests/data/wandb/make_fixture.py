"""Regenerate ``offline-run/`` with the real wandb in offline mode (no network).

    pip install wandb==0.31.0 && python tests/data/wandb/make_fixture.py

A TRL GRPO run's logging as transformers' ``WandbCallback`` does it (``integration_utils.py``:
``define_metric("train/global_step")`` then every key plotted against it, ``train/`` keys from
``rewrite_logs``), 12 logging steps of 2 optimizer steps each, a NaN grad norm at step 8, an
infinite loss at step 10, and a summary value. Only the ``.wandb`` transaction log is kept (the
folder's ``logs/`` hold machine paths), renamed to a fixed id so the fixture is stable.
"""

from __future__ import annotations

import glob
import math
import os
import shutil
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    tmp = tempfile.mkdtemp()
    os.environ.update(WANDB_MODE="offline", WANDB_DIR=tmp, WANDB_SILENT="true")
    os.environ["WANDB_DISABLE_CODE"] = "true"
    import wandb

    run = wandb.init(
        project="grpo-fixture",
        name="qwen-0.5b-gsm8k",
        id="fixture01",
        config={"learning_rate": 1e-6, "num_generations": 8, "beta": 0.04},
        settings=wandb.Settings(console="off", x_disable_stats=True, x_disable_meta=True),
    )
    run.define_metric("train/global_step")
    run.define_metric("*", step_metric="train/global_step", step_sync=True)
    for i in range(12):
        step = 2 * (i + 1)
        wandb.log(
            {
                "train/loss": math.inf if step == 10 else round(0.01 - 0.0005 * i, 6),
                "train/grad_norm": math.nan if step == 8 else round(0.8 + 0.05 * i, 6),
                "train/learning_rate": 1e-6,
                "train/reward": round(0.2 + 0.04 * i, 6),
                "train/reward_std": round(0.3 - 0.01 * i, 6),
                "train/rewards/accuracy_reward/mean": round(0.1 + 0.04 * i, 6),
                "train/kl": round(0.0005 * i, 6),
                "train/entropy": round(0.9 - 0.02 * i, 6),
                "train/completions/mean_length": 180.0 + 4 * i,
                "train/frac_reward_zero_std": round(0.5 - 0.02 * i, 6),
                "train/epoch": round(0.01 * step, 6),
                "train/global_step": step,
            }
        )
    run.summary["eval/accuracy"] = 0.41
    run.finish()
    out = os.path.join(HERE, "offline-run")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    (log,) = glob.glob(os.path.join(tmp, "wandb", "offline-run-*", "*.wandb"))
    shutil.copy(log, os.path.join(out, "run-fixture01.wandb"))
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
