"""Synthetic runs written through the real writer, for fast check tests.

A population of tasks with pass rates; each update samples groups, grades Bernoulli attempts,
and nudges pass rates up (learning). Knobs bend it into each failure the checks are for.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

from rlvitals import Run, load_config


def synth_run(
    out: Path,
    name: str,
    *,
    steps: int = 40,
    seed: int = 0,
    groups: int = 16,
    group_size: int = 8,
    lr: float = 0.02,
    start_pass: tuple[float, float] = (0.1, 0.7),
    fail_rate: dict[int, float] | None = None,
    kl_growth: float = 0.0,
    kl_from: int = 10**9,
    entropy_decay_from: int = 10**9,
    truncate_from: int = 10**9,
    nan_loss_from: int = 10**9,
    exploit_from: int = 10**9,
    collapse_from: int = 10**9,
    stuck_share: float = 0.0,
    evals_every: int = 0,
    stale_from: int = 10**9,
    **cfg: Any,
) -> Path:
    rng = random.Random(seed)
    tasks = [rng.uniform(*start_pass) for _ in range(64)]
    stuck = round(stuck_share * len(tasks))  # tasks beyond the policy: never solved, never learnt
    tasks[:stuck] = [0.0] * stuck
    config = load_config(
        {
            "output": {"output_dir": str(out), "name": name, "trace": "samples"},
            "training": {"max_consecutive_unusable_groups": None},
            "rollout": {"max_consecutive_rollout_failures": None},
            **cfg,
        }
    )
    entropy = 0.8
    kl = 3e-5
    with Run(config) as run:
        for step in range(steps):
            tlp = {}
            fr = (fail_rate or {}).get(step, 0.0)
            if step >= entropy_decay_from:
                entropy *= 0.8
            if step >= kl_from:
                kl *= 1 + kl_growth
            for g in range(groups):
                t = rng.randrange(len(tasks))
                p = tasks[t]
                if step >= exploit_from:
                    p = min(1.0, p + 0.02 * (step - exploit_from))
                for _ in range(group_size):
                    n = 20
                    s_lp = [-rng.expovariate(1 / entropy) for _ in range(n)]
                    d = math.sqrt(2 * kl)
                    t_lp = [x + rng.gauss(0, d) for x in s_lp]
                    trunc = step >= truncate_from and rng.random() < 0.7
                    if rng.random() < fr:
                        run.log_attempt(
                            step,
                            f"{step}-{g}",
                            f"t{t}",
                            None,
                            policy_version=min(step, stale_from),
                            error=TimeoutError("sandbox"),
                            response_tokens=0,
                        )
                        continue
                    r = 1.0 if rng.random() < p else 0.0
                    if step >= collapse_from:  # deterministic: one answer per task, same mean
                        r = 1.0 if (t * 0.6180339887) % 1 < p else 0.0
                    aid = run.log_attempt(
                        step,
                        f"{step}-{g}",
                        f"t{t}",
                        r,
                        policy_version=min(step, stale_from),
                        response_tokens=n,
                        truncated=trunc,
                        sampler_logprobs=s_lp,
                        metadata={"termination_reason": "max_turns" if trunc else "done"},
                    )
                    tlp[aid] = t_lp
                if t >= stuck:
                    tasks[t] = min(0.99, tasks[t] + lr * (1 - tasks[t]))
            loss = float("nan") if step >= nan_loss_from else 0.1
            run.log_step(step, trainer_logprobs=tlp, metrics={"train/loss": loss})
            if evals_every and step % evals_every == evals_every - 1:
                honest = sum(tasks) / len(tasks)
                if step >= exploit_from:
                    honest = max(0.0, 0.5 - 0.01 * (step - exploit_from))
                run.log_eval(step, "heldout", honest, n=500)
    return out / name
