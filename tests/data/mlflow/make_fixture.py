"""Regenerate ``mlruns/`` (a file store) with the real mlflow.

    pip install mlflow==3.17.2 && python tests/data/mlflow/make_fixture.py

One run, logged the way SkyRL's and verl's MLflow backends do
(``mlflow.log_metrics(data, step=step)`` with verl's keys): 8 steps, a NaN policy loss at step
3 and an infinite max score at step 5 (written as ``nan``/``inf``), params as the config.
Machine paths in ``meta.yaml`` (artifact URIs) and the user are replaced. The SQLite store is
not kept here (its schema alone is about 1 MB): ``tests/test_readers_mlflow.py`` makes one with
the real mlflow in each run.
"""

from __future__ import annotations

import glob
import math
import os
import re
import shutil
import tempfile
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))


def _log() -> None:
    import mlflow as m

    m.set_experiment("grpo")
    with m.start_run(run_name="grpo-qwen"):
        m.log_params({"actor_lr": 1e-6, "rollout_n": 5})
        for s in range(1, 9):
            m.log_metrics(
                {
                    "critic/score/mean": round(0.05 * s, 6),
                    "critic/score/max": math.inf if s == 5 else 1.0,
                    "actor/entropy": round(0.8 - 0.02 * s, 6),
                    "actor/kl_loss": round(0.002 * s, 6),
                    "actor/pg_loss": math.nan if s == 3 else -0.02,
                    "response_length/mean": 250.0 + 10 * s,
                },
                step=s,
            )


def main() -> None:
    tmp = tempfile.mkdtemp()
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    os.chdir(tmp)
    import mlflow

    mlflow.set_tracking_uri(f"file://{tmp}/mlruns")
    _log()
    for meta in glob.glob(f"{tmp}/mlruns/**/meta.yaml", recursive=True):
        text = Path(meta).read_text().replace(f"file://{tmp}/", "file:///")
        Path(meta).write_text(re.sub(r"^user_id: .*$", "user_id: fixture", text, flags=re.M))
    for user in glob.glob(f"{tmp}/mlruns/*/*/tags/mlflow.user"):
        Path(user).write_text("fixture")
    for src in glob.glob(f"{tmp}/mlruns/*/*/tags/mlflow.source.name"):
        Path(src).write_text("train.py")
    shutil.rmtree(os.path.join(HERE, "mlruns"), ignore_errors=True)
    shutil.copytree(f"{tmp}/mlruns", os.path.join(HERE, "mlruns"))
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
