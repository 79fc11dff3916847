"""How fast the run-directory writer logs attempts, against the raw JSON encoder.

    python benchmarks/writer.py [--steps N] [--quick]

Each scenario logs realistic attempts (GRPO groups of 8, episode metadata with a label, a
count, reward components and a flag, a few failures and stale attempts) with ``log_attempt``
and closes each update with ``log_step``, which decides the discards and computes every step
metric. The baseline, measured in the same run on the same records, is msgspec encoding the
rollouts.jsonl and steps.jsonl lines the writer produced, with nothing else: the floor any
writer of these files pays. Figures are attempts per second on one core (the process is pinned
to one CPU where the OS allows it), in CPU seconds of this process (user and system, so the
writes count), best of ``--repeat`` runs: on a shared machine, wall time measures the
neighbours.

Scenarios:
  plain       attempts with metadata, no logprobs
  logprobs    plus 100 sampler logprobs per attempt (Python lists) and trainer logprobs for
              every attempt, so the mismatch metrics (k3, k1, |Δ|, ESS token and sequence) run
  numpy       the same logprobs as numpy arrays (what a trainer holding tensors passes)
  trainer     shaped like the reference trainer's update (32 tasks x 8 attempts, 4 tokens per
              reply, trace = "full" transcripts): the writer's milliseconds per update, against
              the trainer's measured 65 ms update (research/trainer-notes.md)
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import sys
import tempfile
import time
from typing import Any

import msgspec
import numpy as np

from rlvitals import Run

GROUP = 8
TARGET = 200_000  # attempts per second (issue 2)
TRAINER_STEP_SECONDS = 0.065  # the reference trainer's update (research/trainer-notes.md)


def make_attempts(
    steps: int, groups: int, tokens: int, *, seed: int = 0, transcript: bool = False
) -> list[list[dict[str, Any]]]:
    """Per update, the keyword arguments of each log_attempt call (built ahead, not timed)."""
    rng = random.Random(seed)
    labels = ["done", "max_turns", "tool_error"]
    out = []
    for step in range(steps):
        calls = []
        for g in range(groups):
            p = rng.random()  # the group's pass rate: some groups all pass or all fail
            for _ in range(GROUP):
                kw: dict[str, Any] = {
                    "step": step,
                    "group_id": f"{step}-g{g}",
                    "task_id": f"t{rng.randrange(5000)}",
                    "reward": 1.0 if rng.random() < p else 0.0,
                    "policy_version": step - (1 if rng.random() < 0.02 else 0),
                    "response_tokens": rng.randrange(20, 400),
                    "truncated": rng.random() < 0.03,
                    "duration": rng.uniform(0.5, 30.0),
                    "metadata": {
                        "termination_reason": labels[rng.randrange(3)],
                        "turns": rng.randrange(1, 12),
                        "correctness": rng.random(),
                        "format": rng.random(),
                        "used_tool": rng.random() < 0.5,
                    },
                }
                if rng.random() < 0.01:
                    kw["error"] = TimeoutError("sandbox timed out")
                    kw["reward"] = None
                if tokens:
                    lp = [-rng.expovariate(2.0) for _ in range(tokens)]
                    kw["sampler_logprobs"] = lp
                    kw["_trainer"] = [x + rng.gauss(0.0, 0.01) for x in lp]
                if transcript:
                    kw["transcript"] = [
                        {
                            "prompt": f"{rng.randrange(100)}+{rng.randrange(100)}=",
                            "completion": str(rng.randrange(1000))[::-1] + "$",
                            "prompt_tokens": 6,
                            "completion_tokens": tokens,
                            "finish_reason": "stop",
                        }
                    ]
                calls.append(kw)
        out.append(calls)
    return out


def as_numpy(plan: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    out = []
    for calls in plan:
        new = []
        for kw in calls:
            kw = dict(kw)
            kw["sampler_logprobs"] = np.asarray(kw["sampler_logprobs"], dtype=np.float32)
            kw["_trainer"] = np.asarray(kw["_trainer"], dtype=np.float32)
            new.append(kw)
        out.append(new)
    return out


def run_writer(
    plan: list[list[dict[str, Any]]], root: str, trace: str = "samples"
) -> tuple[float, Any]:
    """Seconds to log every attempt of ``plan`` and close each update."""
    cfg = {
        "output": {"output_dir": root, "name": f"bench-{time.monotonic_ns()}", "trace": trace},
        "training": {"max_consecutive_unusable_groups": None},
        "rollout": {"max_consecutive_rollout_failures": None},
    }
    calls = [[{k: v for k, v in kw.items() if k != "_trainer"} for kw in c] for c in plan]
    trainer = [[kw.get("_trainer") for kw in c] for c in plan]
    gc.collect()
    t0 = time.process_time()
    with Run(cfg) as run:
        for step, (c, tlp) in enumerate(zip(calls, trainer)):
            if tlp[0] is None:
                for kw in c:
                    run.log_attempt(**kw)
                run.log_step(step, metrics={"train/loss": 0.1, "train/grad_norm": 1.0})
            else:
                logged = {}
                for kw, t in zip(c, tlp):
                    logged[run.log_attempt(**kw)] = t
                run.log_step(step, trainer_logprobs=logged, metrics={"train/loss": 0.1})
    return time.process_time() - t0, run.dir


def run_encoder(run_dir: str) -> float:
    """Seconds for msgspec to encode the records the writer wrote (decoded ahead, not timed)."""
    dec = msgspec.json.Decoder()
    with open(os.path.join(run_dir, "rollouts.jsonl"), "rb") as f:
        rollouts = [dec.decode(line) for line in f]
    with open(os.path.join(run_dir, "steps.jsonl"), "rb") as f:
        steps = [dec.decode(line) for line in f]
    enc = msgspec.json.Encoder()
    gc.collect()
    t0 = time.process_time()
    out = []
    for r in rollouts:
        out.append(enc.encode(r) + b"\n")
    for s in steps:
        out.append(enc.encode(s) + b"\n")
    blob = b"".join(out)
    t = time.process_time() - t0
    assert blob
    return t


def pin_one_core() -> str:
    try:
        cpu = sorted(os.sched_getaffinity(0))[-1]
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    except (AttributeError, OSError):
        return "not pinned"


def scenario(name: str, plan, root: str, repeat: int, trace: str = "samples") -> dict[str, float]:
    n = sum(len(c) for c in plan)
    best_w = best_e = float("inf")
    for _ in range(repeat):
        tw, run_dir = run_writer(plan, root, trace)
        te = run_encoder(str(run_dir))
        best_w, best_e = min(best_w, tw), min(best_e, te)
        shutil.rmtree(run_dir)
    return {"attempts": n, "writer_s": best_w, "encoder_s": best_e, "steps": len(plan)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="updates per scenario")
    ap.add_argument("--groups", type=int, default=128, help="groups of 8 per update")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a few updates, one repeat (smoke)")
    ap.add_argument("--only", nargs="*", default=None, help="scenarios to run")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps, args.groups, args.repeat = 3, 16, 1
    print(f"rlvitals writer benchmark ({pin_one_core()}, python {sys.version.split()[0]})")
    root = tempfile.mkdtemp(prefix="rlvitals-bench-")
    try:
        plans = {
            "plain": lambda: make_attempts(args.steps, args.groups, 0),
            "logprobs": lambda: make_attempts(args.steps, args.groups, 100),
            "numpy": lambda: as_numpy(make_attempts(args.steps, args.groups, 100)),
        }
        print(
            f"{'scenario':<10} {'attempts':>9} {'writer/s':>10} {'encoder/s':>10} "
            f"{'writer/encoder':>15} {'target':>8}"
        )
        ok = True
        for name, build in plans.items():
            if args.only and name not in args.only:
                continue
            r = scenario(name, build(), root, args.repeat)
            w, e = r["attempts"] / r["writer_s"], r["attempts"] / r["encoder_s"]
            met = w >= TARGET
            ok &= met or name != "plain"
            print(
                f"{name:<10} {r['attempts']:>9} {w:>10,.0f} {e:>10,.0f} {w / e:>14.2f}x "
                f"{'met' if met else 'MISSED':>8}"
            )
        if not args.only or "trainer" in args.only:
            steps = max(args.steps, 5)
            plan = make_attempts(steps, 32, 4, transcript=True)
            r = scenario("trainer", plan, root, args.repeat, trace="full")
            ms = 1e3 * r["writer_s"] / r["steps"]
            share = ms / 1e3 / TRAINER_STEP_SECONDS
            print(
                f"trainer-shaped update (256 attempts, 4 tokens, full transcripts): "
                f"{ms:.2f} ms per update = {100 * share:.1f}% of a {TRAINER_STEP_SECONDS * 1e3:.0f}"
                f" ms trainer update (target < 2%)"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
