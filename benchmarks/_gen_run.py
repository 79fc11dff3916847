"""The shared speed yardstick's generator (``../shared/bench/gen_run.py``), copied here with its
logic unchanged so the benchmark runs in a clone without ``../shared``: a run directory in the
rlvitals format, STEPS updates x 13 groups x 8 attempts, healthy-looking numbers with noise.
``yardsticks.py`` calls the shared file itself when it is there, and this copy otherwise;
``python benchmarks/yardsticks.py --same-generator`` checks that both write the same bytes.
Only the layout differs from the original (one statement a line, for the linters)."""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time


def main(out: str, steps: int = 10_000, groups: int = 13, g: int = 8, seed: int = 0) -> int:
    rnd = random.Random(seed)
    os.makedirs(out, exist_ok=True)
    t = 1_764_000_000.0
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(
            {"format": "rlvitals-run/1", "run_id": "big", "name": os.path.basename(out),
             "created": "2026-11-29T00:00:00Z", "status": "finished", "stop_reason": None,
             "config": {}, "versions": {}},
            f,
        )  # fmt: skip
    with (
        open(os.path.join(out, "steps.jsonl"), "w") as fs,
        open(os.path.join(out, "rollouts.jsonl"), "w") as fr,
    ):
        n = 0
        for s in range(steps):
            p = 0.3 + 0.5 * (1 - math.exp(-s / 3000))
            trained = []
            for gi in range(groups):
                rs = [1.0 if rnd.random() < p else 0.0 for _ in range(g)]
                nv = len(set(rs)) == 1
                for a in range(g):
                    n += 1
                    lag = rnd.choice((0, 0, 1))
                    rec = {
                        "step": s, "attempt_id": f"{s}-{gi}-{a}", "group_id": f"{s}-{gi}",
                        "task_id": f"t{rnd.randrange(5000)}", "policy_version": s - lag,
                        "reward": rs[a], "trained": not nv,
                        "discard_reason": "no_variance" if nv else None,
                        "response_tokens": rnd.randrange(50, 1024),
                        "truncated": rnd.random() < 0.05, "lag": lag, "time": t,
                        "metadata": {
                            "termination_reason": rnd.choice(("done", "done", "max_turns")),
                            "turns": rnd.randrange(1, 8),
                        },
                        "mismatch": {
                            "kl": abs(rnd.gauss(7e-4, 1e-4)),
                            "abs_diff": abs(rnd.gauss(0.015, 0.001)), "tokens": 300,
                        },
                    }  # fmt: skip
                    if not nv:
                        trained.append(rs[a])
                    fr.write(json.dumps(rec) + "\n")
                    t += 0.01
            rm = sum(trained) / len(trained) if trained else None
            fs.write(
                json.dumps(
                    {"step": s, "time": t, "policy_version": s + 1, "reward/mean": rm,
                     "reward/group_std_mean": 0.45, "reward/mean_with_unusable": p,
                     "discard/groups/no_variance": 1, "response/length_mean": 530.0,
                     "response/truncated_rate": 0.05,
                     "train/mismatch_kl": abs(rnd.gauss(7e-4, 1e-4)),
                     "train/logprob_abs_diff": abs(rnd.gauss(0.015, 0.001)),
                     "train/mismatch_ess": 0.998,
                     "sampling/entropy_estimate": 0.6 * math.exp(-s / 20000) + rnd.gauss(0, 0.01),
                     "freshness/lag_mean": 0.33, "train/loss": rnd.gauss(0, 0.1),
                     "train/grad_norm": abs(rnd.gauss(0.5, 0.1))}
                )
                + "\n"
            )  # fmt: skip
    return n


if __name__ == "__main__":
    out = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    t0 = time.time()
    n = main(out, steps)
    print(f"wrote {n} attempts, {steps} steps in {time.time() - t0:.1f} s")
