"""A synthetic traced run in the reference trainer's shape, written with the writer.

The reference trainer (``rlvitals.grpo``) learns reversed two-digit additions: prompt
``^12+34=``, reply ``640$``; a quarter of its tasks are lookups (``^uv+34=`` -> ``?``, the
tool answers ``12+34=``, then the answer). Making its 10,000-update traced run takes over an
hour, so the transcript benchmarks write one of the same shape and reply repetition instead:
the policy answers a task with the right reply with a probability that climbs with the
updates, else a near miss (one digit off) or no answer, the way a small policy does. A task's
replies then repeat exactly across its group and across updates, as the real run's do
(``benchmarks/transcripts.py --reference`` measures a real, shorter run beside it).
"""

from __future__ import annotations

import random
from pathlib import Path

from rlvitals.writer import Run

LETTERS = "uvwxyz"


def _reply(a: int, b: int) -> str:
    return f"{a + b:03d}"[::-1] + "$"


def write_traced(
    root: Path, updates: int, tasks: int = 64, group: int = 4, seed: int = 0, name: str = "traced"
) -> Path:
    """A run directory of ``updates`` updates of ``tasks`` x ``group`` traced attempts."""
    rng = random.Random(seed)
    cfg = {
        "output": {"output_dir": str(root), "name": name, "trace": "full"},
        "training": {"max_consecutive_unusable_groups": 0},
    }
    with Run(cfg) as run:
        for s in range(updates):
            skill = min(0.95, 0.3 + 0.65 * s / max(updates * 0.6, 1))
            batch = []
            for t in range(tasks):
                a, b = rng.randrange(100), rng.randrange(100)
                lookup = rng.random() < 0.25
                var = "".join(rng.choice(LETTERS) for _ in range(2)) if lookup else None
                first = var or f"{a:02d}"
                prompt = f"^{first}+{b:02d}="
                tid = f"lookup-{var}-{a:02d}-{b:02d}" if var else f"add-{a:02d}-{b:02d}"
                for _k in range(group):
                    u = rng.random()
                    if u < skill:
                        final, reward = _reply(a, b), 1.0
                    elif u < skill + (1 - skill) * 0.7:
                        final, reward = _reply(a, b + rng.choice((-10, -1, 1, 10))), 0.0
                    else:
                        final, reward = rng.choice(("$", "?", "9")), 0.0
                    gens = []
                    if var and rng.random() < skill + 0.05:  # it calls its tool first
                        gens.append(
                            {"prompt": prompt, "completion": "?", "prompt_tokens": 7,
                             "completion_tokens": 1, "finish_reason": "tool_call"}
                        )  # fmt: skip
                        prompt2 = prompt + f"?{a:02d}+{b:02d}="
                    else:
                        prompt2 = prompt
                        if var:
                            final, reward = _reply(rng.randrange(100), b), 0.0
                    gens.append(
                        {"prompt": prompt2, "completion": final, "prompt_tokens": len(prompt2),
                         "completion_tokens": len(final), "finish_reason": "stop"}
                    )  # fmt: skip
                    batch.append((t, tid, reward, gens, len(final)))
            for t, tid, reward, gens, n in batch:
                run.log_attempt(
                    s, f"{s}-g{t}", tid, reward, policy_version=s, response_tokens=n,
                    transcript=gens,
                )  # fmt: skip
            run.log_step(s, metrics={"train/loss": 0.1, "train/grad_norm": 1.0})
    return root / name
