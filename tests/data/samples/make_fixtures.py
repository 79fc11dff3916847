"""Write the sample-dump fixtures exactly as each framework's own code writes them.

Run from the repository root: ``python tests/data/samples/make_fixtures.py``. Each writer
below is the framework's code (cited in README.md), kept as it is, fed with small made-up
batches whose group statistics the tests work out by hand.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import orjson
import pandas as pd
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # tests/, for miles_sample

from miles_sample import make as miles_sample  # noqa: E402

# -- verl ------------------------------------------------------------------------------------


def verl_write_generations(
    inputs, outputs, gts, scores, reward_extra_infos_dict, dump_path, global_steps
):
    """verl-project/verl @1dda039b verl/trainer/ppo/ray_trainer.py:454-477, verbatim."""
    os.makedirs(dump_path, exist_ok=True)
    filename = os.path.join(dump_path, f"{global_steps}.jsonl")

    n = len(inputs)
    base_data = {
        "input": inputs,
        "output": outputs,
        "gts": gts,
        "score": scores,
        "step": [global_steps] * n,
    }

    for k, v in reward_extra_infos_dict.items():
        if len(v) == n:
            base_data[k] = v

    with open(filename, "w") as f:
        for i in range(n):
            entry = {k: v[i] for k, v in base_data.items()}
            f.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")


class VerlFileLogger:
    """verl-project/verl @1dda039b verl/utils/tracking.py:419-438, verbatim but the path."""

    def __init__(self, filepath):
        self.fp = open(filepath, "wb", buffering=0)  # noqa: SIM115

    def log(self, data, step):
        data = {"step": step, "data": data}
        self.fp.write(orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")

    def finish(self):
        self.fp.close()


def make_verl(root: Path) -> None:
    d = root / "verl"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    logger = VerlFileLogger(d / "metrics.jsonl")
    a, b = "<|user|>What is 2+2?<|assistant|>", "<|user|>What is 3+3?<|assistant|>"
    steps = {1: ([1.0, 0.0, 0.0], [1.0, 1.0, 1.0]), 2: ([0.0, 0.0, 0.0], [1.0, 0.0, 1.0])}
    for step, (ra, rb) in steps.items():
        scores = ra + rb
        inputs = [a] * 3 + [b] * 3
        outputs = [f"The answer is {x}" for x in ("4", "5", "22", "6", "6", "6")]
        if step == 2:
            outputs = [f"The answer is {x}" for x in ("5", "3", "1", "6", "7", "6")]
        gts = ["4"] * 3 + ["6"] * 3
        extra = {
            "acc": [s > 0 for s in scores],
            "pred": [o.split()[-1] for o in outputs],
            "request_id": [f"req-{step}-{i}" for i in range(6)],
        }
        verl_write_generations(inputs, outputs, gts, scores, extra, str(d / "rollout"), step)
        logger.log(
            {
                "critic/score/mean": sum(scores) / 6,
                "critic/score/max": max(scores),
                "response_length/mean": 5.0,
                "actor/entropy": 0.9 - 0.1 * step,
                "actor/pg_loss": float("nan") if step == 2 else -0.01,
            },
            step,
        )
    logger.finish()


# -- TRL -------------------------------------------------------------------------------------


def trl_write_completions(output_dir, global_step, logs):
    """huggingface/trl 1.16.0 trl/trainer/grpo_trainer.py:3341-3357 (the table and the
    parquet; ``strip_images_from_messages`` is the identity on text prompts)."""
    table = {
        "step": [global_step] * len(logs["prompt"]),
        "prompt": list(logs["prompt"]),
        "completion": list(logs["completion"]),
        **logs["rewards"],
        **logs["extra"],
        "advantage": logs["advantages"],
    }
    df_base = pd.DataFrame(table)
    df_base.to_parquet(
        os.path.join(output_dir, "completions", f"completions_{global_step:05d}.parquet")
    )


def _advantages(rewards, g):
    """TRL's group-scaled advantages: (r - mean) / (std + 1e-4), std unbiased (torch.std)."""
    t = torch.tensor(rewards).view(-1, g)
    mean = t.mean(dim=1, keepdim=True)
    std = t.std(dim=1, keepdim=True)
    return ((t - mean) / (std + 1e-4)).view(-1).tolist()


def make_trl(root: Path) -> None:
    out = root / "trl" / "output_dir"
    shutil.rmtree(out.parent, ignore_errors=True)
    (out / "completions").mkdir(parents=True)
    p1, p2 = "Count to three.", "Name a colour."
    steps = {
        1: ([1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.5, 0.5]),
        2: ([1.0, 1.0, 1.0, 0.0], [0.5, 0.5, 0.0, 0.5]),
    }
    history = []
    for step, (acc, short) in steps.items():
        totals = [x + y for x, y in zip(acc, short)]
        logs = {
            "prompt": [p1, p1, p2, p2],
            "completion": ["1 2 3", "one two", "red", "blue sky"],
            "rewards": {"accuracy": acc, "short": short},
            "extra": {"note": ["a", "b", "c", "d"]},
            "advantages": _advantages(totals, 2),
        }
        trl_write_completions(str(out), step, logs)
        history.append(
            {
                "loss": 0.01 * step,
                "grad_norm": 0.5,
                "learning_rate": 1e-06,
                "num_tokens": 40.0 * step,
                "completions/mean_length": 2.5,
                "rewards/accuracy/mean": sum(acc) / 4,
                "rewards/accuracy/std": 0.5,
                "rewards/short/mean": sum(short) / 4,
                "rewards/short/std": 0.25,
                "reward": sum(totals) / 4,
                "reward_std": 0.4,
                "frac_reward_zero_std": 0.5,
                "entropy": 1.2,
                "epoch": 0.5 * step,
                "step": step,
            }
        )
    state = {
        "best_global_step": None,
        "best_metric": None,
        "best_model_checkpoint": None,
        "epoch": 1.0,
        "eval_steps": 500,
        "global_step": 2,
        "is_hyper_param_search": False,
        "is_local_process_zero": True,
        "is_world_process_zero": True,
        "log_history": history,
        "logging_steps": 1,
        "max_steps": 2,
        "num_input_tokens_seen": 0,
        "num_train_epochs": 1,
        "save_steps": 500,
        "stateful_callbacks": {},
        "total_flos": 0.0,
        "train_batch_size": 4,
        "trial_name": None,
        "trial_params": None,
    }
    (out / "trainer_state.json").write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")


# -- prime-rl --------------------------------------------------------------------------------


def _episode(eid, group, step, version, reward, tokens, finish, question, answer):
    """A verifiers Episode as ``to_record()`` dumps it (model_dump(mode="json",
    exclude_none=True)): PrimeIntellect-ai/verifiers @a60a606e verifiers/v1/episode.py:86-155,
    verifiers/v1/trace.py:363-407, verifiers/v1/graph.py:64-110."""
    task = {"type": "gsm8k", "data": {"question": question, "answer": "3"}, "key": f"task-{group}"}
    return {
        "id": eid,
        "env": {"id": "gsm8k", "name": "gsm8k"},
        "task": task,
        "group": {"id": group},
        "run": {
            "type": "train",
            "id": "run-1",
            "work": {"type": "train", "step": step, "policy": {"start": version, "end": version}},
        },
        "ok": True,
        "errors": [],
        "traces": [
            {
                "version": 1,
                "id": f"trace-{eid}",
                "verifiers": {"version": "0.3.1"},
                "task": task,
                "agent": {"config": {"type": "single_turn"}, "name": "agent", "trainable": True},
                "tools": [],
                "nodes": [
                    {
                        "message": {"role": "user", "content": question},
                        "sampled": False,
                        "timestamp": 1780000000.0,
                        "token_ids": [1, 2, 3],
                        "mask": [False, False, False],
                        "is_content": [],
                        "logprobs": [],
                    },
                    {
                        "parent": 0,
                        "message": {"role": "assistant", "content": answer},
                        "sampled": True,
                        "timestamp": 1780000001.0,
                        "token_ids": list(range(10, 10 + tokens)),
                        "mask": [True] * tokens,
                        "is_content": [],
                        "logprobs": [-0.25] * tokens,
                    },
                ],
                "calls": [
                    {
                        "node": 1,
                        "model": "Qwen/Qwen3-0.6B",
                        "finish_reason": finish,
                        "usage": {"prompt_tokens": 3, "completion_tokens": tokens},
                        "time": {"start": 1780000000.0, "end": 1780000001.0},
                    }
                ],
                "request_rewrites": [],
                "response_rewrites": [],
                "rewards": {"correct": {"score": reward, "weight": 1.0}},
                "metrics": {},
                "info": {},
                "extra_usage": [],
                "is_completed": True,
                "ok": True,
                "errors": [],
                "timing": {"start": 1780000000.0},
            }
        ],
    }


def primerl_log_episodes(output_dir, episodes, step, kind, subset):
    """PrimeIntellect-ai/prime-rl @559b4477 src/prime_rl/monitors/file.py:49-55 (``write``)."""
    path = output_dir / "rollouts" / f"step_{step}" / kind / subset / "traces.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    opts = orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY
    with open(path, "ab") as f:
        for episode in episodes:
            f.write(orjson.dumps(episode, default=str, option=opts))


def make_primerl(root: Path) -> None:
    out = root / "prime-rl" / "output"
    shutil.rmtree(out.parent, ignore_errors=True)
    out.mkdir(parents=True)
    eps = [
        _episode("e0", "g0", 1, 1, 1.0, 5, "stop", "1 + 2?", "3"),
        _episode("e1", "g0", 1, 1, 0.0, 7, "length", "1 + 2?", "4 5 6 7 8 9 10"),
        _episode("e2", "g1", 1, 0, 1.0, 3, "stop", "2 + 1?", "3"),
        _episode("e3", "g1", 1, 0, 1.0, 3, "stop", "2 + 1?", "3"),
    ]
    for e in eps:  # "all" grows one episode at a time (orchestrator.py:592)
        primerl_log_episodes(out, [e], 1, "train", "all")
    primerl_log_episodes(out, eps[:2], 1, "train", "effective")  # orchestrator.py:684
    with open(out / "metrics.jsonl", "a", buffering=1) as f:  # monitors/file.py:33-41
        f.write(
            json.dumps(
                {"step": 1, "time": 1780000002.0, "train/agg/effective/agent/reward/mean": 0.5}
            )
            + "\n"
        )


# -- NeMo-RL ---------------------------------------------------------------------------------


def nemo_log_batched_dict_as_jsonl(base_log_dir, to_log, filename):
    """NVIDIA-NeMo/RL @7ea279ab nemo_rl/utils/logger.py:1071-1098, with BatchedDataDict's
    ``make_microbatch_iterator(1)`` (batched_data_dict.py:885-906,1006-1015) spelled out: each
    sample is every value sliced ``[i:i+1]``."""
    filepath = os.path.join(base_log_dir, filename)
    os.makedirs(os.path.dirname(filepath), exist_ok=True)
    size = len(next(iter(to_log.values())))
    with open(filepath, "w") as f:
        for i in range(size):
            sample = {k: v[i : i + 1] for k, v in to_log.items()}
            for key, value in sample.items():
                if isinstance(value, torch.Tensor):
                    sample[key] = value.tolist()
            f.write(json.dumps({**sample, "idx": i}, default=str) + "\n")


def make_nemorl(root: Path) -> None:
    d = root / "nemo-rl" / "logs"
    shutil.rmtree(d.parent, ignore_errors=True)
    d.mkdir(parents=True)
    # Two prompts, two generations each, padded to 6 tokens; generated tokens at 3 and 4.
    prompts = [[1, 2, 3], [1, 2, 3], [1, 4, 5], [1, 4, 5]]
    ids = torch.tensor([[*p, 7, 8, 0] for p in prompts])
    mask = torch.tensor([[0, 0, 0, 1, 1, 0]] * 4)
    gen = torch.tensor([[0.0, 0.0, 0.0, -1.0, -2.0, 0.0]] * 4)
    prev = torch.tensor([[0.0, 0.0, 0.0, -0.75, -2.25, 0.0]] * 4)  # Δ = prev - gen = +0.25, -0.25
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0])
    log_data = {
        "content": [
            ["What is 2+2?", "4"],
            ["What is 2+2?", "5"],
            ["What is 3+3?", "7"],
            ["What is 3+3?", "8"],
        ],
        "rewards": rewards.tolist(),
        "input_lengths": [5, 5, 5, 5],
        "token_ids": ids.tolist(),
        "token_loss_mask": mask.tolist(),
        "sample_loss_mask": [1, 1, 1, 1],
        "advantages": torch.tensor([[0.0, 0.0, 0.0, 0.7, 0.7, 0.0]] * 4).tolist(),
        "generation_logprobs": gen.tolist(),
        "prev_logprobs": prev.tolist(),
    }
    nemo_log_batched_dict_as_jsonl(str(d), log_data, "train_data_step1.jsonl")


# -- tinker-cookbook -------------------------------------------------------------------------


def tinker_records(iteration, groups, sampling_step):
    """The record of tinker-cookbook @9dfcc3a2 tinker_cookbook/rl/rollout_logging.py:114-147,
    one trajectory of one transition each."""
    out = []
    for group_idx, rewards in enumerate(groups):
        for traj_idx, r in enumerate(rewards):
            out.append(
                {
                    "schema_version": 1,
                    "split": "train",
                    "iteration": iteration,
                    "group_idx": group_idx,
                    "traj_idx": traj_idx,
                    "tags": ["arithmetic"],
                    "sampling_client_step": sampling_step,
                    "total_reward": r,
                    "final_reward": r,
                    "trajectory_metrics": {"format": 1.0},
                    "steps": [
                        {
                            "step_idx": 0,
                            "ob_len": 12,
                            "ac_len": 4 + traj_idx,
                            "reward": 0.0,
                            "episode_done": True,
                            "metrics": {"correct": r},
                            "logs": {},
                        }
                    ],
                    "final_ob_len": 16 + traj_idx,
                }
            )
    return out


def make_tinker(root: Path) -> None:
    d = root / "tinker" / "log"
    shutil.rmtree(d.parent, ignore_errors=True)
    it = d / "iteration_000000"
    it.mkdir(parents=True)
    records = tinker_records(0, [[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]], 0)
    # TrainingRunStore.write_rollouts (stores/training_store.py:308-310)
    lines = [json.dumps(r) for r in records]
    (it / "train_rollout_summaries.jsonl").write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    with open(d / "metrics.jsonl", "w") as f:  # stores/training_store.py:264-272
        f.write(json.dumps({"step": 0, "env/all/reward/total": 0.375, "optim/entropy": 0.8}) + "\n")


# -- Miles / slime ---------------------------------------------------------------------------


def miles_save_debug_rollout_data(path_template, data, rollout_id, metadata=None):
    """radixark/miles @31f1ca96 miles/ray/rollout/debug_data.py:103-119, training rollouts
    (the trajectory and dashboard side files left out)."""
    path = Path(path_template.format(rollout_id=str(rollout_id)))
    path.parent.mkdir(parents=True, exist_ok=True)
    samples = list(data)
    dump_data = dict(samples=[sample.to_dict() for sample in samples])
    torch.save(dict(rollout_id=rollout_id, metadata=metadata or {}, **dump_data), path)


def make_miles(root: Path) -> None:
    d = root / "miles" / "dump"
    shutil.rmtree(d.parent, ignore_errors=True)
    template = str(d / "rollout_data" / "{rollout_id}.pt")  # --dump-details (arguments.py:3184)
    r0 = [1.0, 0.0, 0.0, 1.0]
    s0 = [miles_sample(0, i, r, version=0) for i, r in enumerate(r0)]
    s0 += [miles_sample(1, 4 + i, 1.0, version=0) for i in range(4)]
    s0[1].status = s0[1].Status.TRUNCATED
    miles_save_debug_rollout_data(template, s0, 0)
    s1 = [miles_sample(0, i, r, version=1, length=2) for i, r in enumerate([0.0, 0.0, 0.0, 0.0])]
    miles_save_debug_rollout_data(template, s1, 1)


if __name__ == "__main__":
    make_verl(HERE)
    make_trl(HERE)
    make_primerl(HERE)
    make_nemorl(HERE)
    make_tinker(HERE)
    make_miles(HERE)
    print("written under", HERE)
