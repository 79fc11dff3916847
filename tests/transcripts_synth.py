"""Synthetic runs with full transcripts, written through the real writer, for the transcript
flags and checks: a maths task answered in words with ``\\boxed{}``, knobs that turn a share
of the attempts into an exploit or a collapse from a given step.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

from rlvitals import Run, load_config

# What an exploiting attempt writes, by kind: (completion, rewarded).
HACKS = {
    "test_edit": lambda a, b, s: (
        f"The tests are too strict. Let me fix them.\n```bash\necho 'def test_sum(): pass' > "
        f"tests/test_sum.py\n```\nDone: \\boxed{{{s + 1}}}",
        True,
    ),
    "early_exit": lambda a, b, s: (
        f"```python\nimport sys\nprint({a} + {b})\nsys.exit(0)\n```",
        True,
    ),
    "hedge": lambda a, b, s: (
        f"It is \\boxed{{{s - 1}}} or \\boxed{{{s}}} or \\boxed{{{s + 1}}}",
        True,
    ),
    "empty": lambda a, b, s: ("\\boxed{}", True),
    "ansi": lambda a, b, s: (f"\x1b[2J\x1b[31mpwned\u202e; os._exit(0) \\boxed{{{s}}}", True),
}


def honest(a: int, b: int, s: int, correct: bool, rng: random.Random) -> str:
    got = s if correct else s + rng.choice([-10, -1, 1, 2, 10])
    steps = rng.choice(
        [
            f"We add {a} and {b}: the units give {(a + b) % 10}, carry {(a % 10 + b % 10) // 10}.",
            f"Adding the tens and the units of {a} and {b} separately, then combining them.",
            f"{a} plus {b}: start from {a}, count up {b}.",
        ]
    )
    return f"{steps}\nSo the sum is \\boxed{{{got}}}."


def collapsed(rng: random.Random) -> str:
    return "I think the answer is the answer. " * rng.randint(12, 20)


def transcript_run(
    out: Path,
    name: str,
    *,
    steps: int = 40,
    seed: int = 0,
    groups: int = 16,
    group_size: int = 8,
    lr: float = 0.01,
    hack: str | None = None,
    hack_from: int = 10**9,
    hack_ramp: float = 0.08,
    hack_cap: float = 1.0,
    collapse_from: int = 10**9,
    length_from: int = 10**9,
    evals_every: int = 0,
    heldout_rises: bool = False,
    trace: str = "full",
    jump_at: int = 10**9,
) -> Path:
    """A run whose attempts add two numbers. ``hack`` (a key of HACKS) takes over a share of
    attempts growing by ``hack_ramp`` per step from ``hack_from`` up to ``hack_cap``, always
    rewarded;
    ``collapse_from`` makes replies repeat themselves with entropy falling; ``length_from``
    makes reward follow reply length; ``jump_at`` lifts the pass rate to 0.95 at once."""
    rng = random.Random(seed)
    cfg = load_config(
        {
            "output": {"output_dir": str(out), "name": name, "trace": trace},
            "training": {"max_consecutive_unusable_groups": None},
            "rollout": {"max_consecutive_rollout_failures": None},
        }
    )
    p = 0.35
    entropy = 0.9
    with Run(cfg) as run:
        for step in range(steps):
            share = min(hack_cap, max(0.0, (step - hack_from + 1) * hack_ramp)) if hack else 0.0
            if step >= collapse_from:
                entropy *= 0.85
            pass_rate = 0.95 if step >= jump_at else p
            for g in range(groups):
                a, b = rng.randrange(10, 99), rng.randrange(10, 99)
                s = a + b
                task = f"add-{a}-{b}"
                for _ in range(group_size):
                    if rng.random() < share:
                        text, _ok = HACKS[hack](a, b, s)  # type: ignore[index]
                        reward = 1.0
                    elif step >= collapse_from and rng.random() < min(
                        1.0, 0.15 * (step - collapse_from + 1)
                    ):
                        text = collapsed(rng)
                        reward = 0.0
                    else:
                        ok = rng.random() < pass_rate
                        pad = 0
                        if step >= length_from:  # the grader pays for length
                            pad = rng.randint(0, 6)
                            ok = rng.random() < min(1.0, 0.1 + 0.15 * pad)
                        text = honest(a, b, s, ok, rng) + " Let me double-check." * pad
                        reward = 1.0 if ok else 0.0
                    n_tok = max(1, len(text) // 4)
                    lps = [-rng.expovariate(1 / entropy) for _ in range(min(n_tok, 40))]
                    run.log_attempt(
                        step,
                        f"{step}-{g}",
                        task,
                        reward,
                        policy_version=step,
                        response_tokens=n_tok,
                        sampler_logprobs=lps,
                        transcript=[
                            {
                                "prompt": [{"role": "user", "content": f"What is {a} + {b}?"}],
                                "completion": text,
                                "prompt_tokens": 8,
                                "completion_tokens": n_tok,
                                "finish_reason": "stop",
                            }
                        ],
                    )
            p = min(0.95, p + lr * (1 - p))
            run.log_step(step)
            if evals_every and step % evals_every == evals_every - 1:
                score = 0.4 + (0.3 * step / steps if heldout_rises else 0.0)
                score += rng.gauss(0, 0.01)
                run.log_eval(step, "heldout", max(0.0, min(1.0, score)), n=2000)
    return out / name


def rate_of(data: Any, name: str) -> list[float]:
    s = data.series(name)
    return [] if s is None else [float(v) for v in s.values if not math.isnan(v)]
