"""Tracker readers against the trackers' own readers, on files made here by the real libraries.

    python benchmarks/trackers.py [--steps 20000]

- TensorBoard: rlvitals' reader (both CRCs checked, every point kept) against TensorBoard's
  ``EventAccumulator`` with ``size_guidance={"scalars": 0}`` (every point; its default keeps
  10,000) on one event file of N steps x 3 scalars; and the resync over 8 MB of zeros inserted
  in the middle of the file (14.8 s before the vectorised scan).
- MLflow file store: rlvitals' reader against ``MlflowClient.get_metric_history`` for every
  key of the same run.

Ratios are rlvitals' time over the baseline's, measured in the same run (lower is faster).
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from pathlib import Path


def _best(fn, repeat: int = 3) -> float:
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def tensorboard(tmp: Path, steps: int) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    from rlvitals.readers import read

    d = tmp / "tb"
    d.mkdir()
    w = EventFileWriter(str(d))
    for i in range(steps):
        vals = [
            summary_pb2.Summary.Value(tag=t, simple_value=v)
            for t, v in (("train/reward", i * 1e-5), ("train/kl", 0.001), ("train/loss", -0.1))
        ]
        w.add_event(
            event_pb2.Event(step=i, wall_time=1.7e9 + i, summary=summary_pb2.Summary(value=vals))
        )
    w.close()
    (f,) = d.glob("*tfevents*")

    def ours() -> None:
        assert len(read(d).series("train/reward")) == steps

    def theirs() -> None:
        acc = EventAccumulator(str(d), size_guidance={"scalars": 0})
        acc.Reload()
        assert len(acc.Scalars("train/reward")) == steps

    a, b = _best(ours), _best(theirs)
    print(
        f"tensorboard  {steps} steps x 3 tags: rlvitals {a:.2f} s, EventAccumulator {b:.2f} s, "
        f"ratio {a / b:.2f}"
    )
    data = f.read_bytes()
    half = len(data) // 2
    # cut at a record boundary found by reading lengths
    i = 0
    while i < half:
        i += 12 + int.from_bytes(data[i : i + 8], "little") + 4
    f.write_bytes(data[:i] + b"\x00" * (8 << 20) + data[i:])
    t = _best(lambda: read(d), repeat=1)
    print(f"tensorboard  8 MB of zeros mid-file: read in {t:.2f} s (was 14.8 s)")


def mlflow_files(tmp: Path, steps: int) -> None:
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    import mlflow
    from mlflow.tracking import MlflowClient

    from rlvitals.readers import read

    uri = f"file://{tmp}/mlruns"
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("bench")
    keys = ("critic/score/mean", "actor/entropy", "actor/kl_loss")
    with mlflow.start_run() as run:
        for lo in range(0, steps, 1000):
            from mlflow.entities import Metric

            ms = [
                Metric(k, 0.001 * s, 1796000000000 + s, s)
                for s in range(lo, min(steps, lo + 1000))
                for k in keys
            ]
            MlflowClient(uri).log_batch(run.info.run_id, metrics=ms)
    rid = run.info.run_id

    def ours() -> None:
        assert len(read(tmp / "mlruns").series("critic/score/mean")) == steps

    def theirs() -> None:
        c = MlflowClient(uri)
        assert all(len(c.get_metric_history(rid, k)) == steps for k in keys)

    a, b = _best(ours), _best(theirs)
    print(
        f"mlflow files {steps} steps x 3 keys: rlvitals {a:.2f} s, MlflowClient {b:.2f} s, "
        f"ratio {a / b:.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        tensorboard(tmp, args.steps)
        mlflow_files(tmp, args.steps)


if __name__ == "__main__":
    main()
