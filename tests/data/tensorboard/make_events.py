"""Regenerate the event files in this folder with TensorBoard's own writer and protos.

    pip install tensorboard==2.21.0 && python tests/data/tensorboard/make_events.py

``trl_run/`` holds simple_value scalars as HF Trainer writes them (``train/<key>``, via
transformers' rewrite_logs); ``verl_tf2/`` holds TF2-style tensor-encoded scalars
(``tf.summary.scalar``: a float32 or float64 scalar tensor with plugin "scalars"), both written
by ``tensorboard.summary.writer.event_file_writer.EventFileWriter``; ``nemo_rl_run/`` holds
NeMo-RL's GRPO metrics as its TensorboardLogger writes them (simple_value, ``train/<key>``). Wall times are fixed so the
files are reproducible byte for byte.
"""

from __future__ import annotations

import glob
import os
import shutil
import struct
import sys

from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

HERE = os.path.dirname(os.path.abspath(__file__))

TRL = [
    (
        1,
        {
            "train/loss": -0.2874,
            "train/reward": 0.375,
            "train/reward_std": 0.5175,
            "train/frac_reward_zero_std": 0.0,
            "train/kl": 0.0012,
            "train/entropy": 0.4018,
            "train/grad_norm": 6.2305,
            "train/learning_rate": 1.9465e-06,
        },
    ),
    (
        2,
        {
            "train/loss": 0.0,
            "train/reward": 0.0,
            "train/reward_std": 0.0,
            "train/frac_reward_zero_std": 1.0,
            "train/kl": 0.0015,
            "train/entropy": 0.3511,
            "train/grad_norm": 0.0,
            "train/learning_rate": 1.9614e-06,
        },
    ),
]
VERL = [
    (
        34,
        {
            "critic/score/mean": -0.0183,
            "actor/entropy": 0.2227,
            "actor/kl_loss": 0.0013,
            "response_length/mean": 1267.02,
            "training/rollout_probs_diff_mean": 0.003,
        },
    ),
    (
        35,
        {
            "critic/score/mean": 0.02,
            "actor/entropy": 0.2211,
            "actor/kl_loss": 0.0014,
            "response_length/mean": 1250.5,
            "rollout_corr/k3_kl": 0.0021,
        },
    ),
]
# NeMo-RL's TensorboardLogger.log_metrics (nemo_rl/utils/logger.py @0275e758): for each metric,
# ``name = f"{prefix}/{name}"`` then ``SummaryWriter.add_scalar(name, scalar, step)`` (a
# simple_value scalar); GRPO logs its metrics with prefix="train" (algorithms/grpo.py:3762).
# Key names from the 2026-08-22 snapshot (shared/research/field-2026-12-03.md §2.1); the
# baseline_reward shares are percent (0-100, grpo.py:2441-2445). Values made up.
NEMO = [
    (
        step,
        {
            "train/loss": -0.01 * step,
            "train/token_mult_prob_error": tme,
            "train/gen_kl_error": gen_kl,
            "train/policy_kl_error": gen_kl * 1.1,
            "train/js_divergence_error": gen_kl * 0.25,
            "train/sampling_importance_ratio": 1.0 - gen_kl,
            "train/is_oob_ratio": 0.0,
            "train/approx_entropy": 0.52,
            "train/baseline_reward/pct_0": pct0,
            "train/baseline_reward/pct_1": pct1,
            "train/baseline_reward/pct_mixed": 100.0 - pct0 - pct1,
            "train/mean_gen_tokens_per_sample": 812.0 + step,
        },
    )
    for step, tme, gen_kl, pct0, pct1 in (
        (1, 1.004, 0.0002, 25.0, 12.5),
        (2, 1.006, 0.0003, 18.75, 18.75),
        (3, 1.031, 0.0041, 12.5, 31.25),
    )
]


def _simple(tag: str, v: float) -> summary_pb2.Summary.Value:
    return summary_pb2.Summary.Value(tag=tag, simple_value=v)


def _tensor(tag: str, v: float, double: bool) -> summary_pb2.Summary.Value:
    meta = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
        data_class=summary_pb2.DATA_CLASS_SCALAR,
    )
    shape = tensor_shape_pb2.TensorShapeProto()
    if double:
        t = tensor_pb2.TensorProto(dtype=2, tensor_shape=shape, double_val=[v])
    else:  # float32 packed into tensor_content, as tf.make_tensor_proto does
        t = tensor_pb2.TensorProto(dtype=1, tensor_shape=shape, tensor_content=struct.pack("<f", v))
    return summary_pb2.Summary.Value(tag=tag, tensor=t, metadata=meta)


def write(dirname: str, rows: list, tensor: bool) -> None:
    d = os.path.join(HERE, dirname)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    w = EventFileWriter(d, filename_suffix=".fixture")
    for step, values in rows:
        for i, (tag, v) in enumerate(sorted(values.items())):
            value = _tensor(tag, v, double=i % 2 == 0) if tensor else _simple(tag, v)
            ev = event_pb2.Event(
                wall_time=1_790_000_000.0 + step,
                step=step,
                summary=summary_pb2.Summary(value=[value]),
            )
            w.add_event(ev)
    w.close()
    # A fixed name, so regenerating replaces the file instead of adding one.
    (path,) = glob.glob(os.path.join(d, "events.out.tfevents.*"))
    os.rename(path, os.path.join(d, "events.out.tfevents.fixture"))


if __name__ == "__main__":
    write("trl_run", TRL, tensor=False)
    write("verl_tf2", VERL, tensor=True)
    write("nemo_rl_run", NEMO, tensor=False)
    sys.exit(0)
