"""The sampler's prompt prefill: once per distinct prompt against once per attempt, same run.

    python benchmarks/prefill.py [--tasks 64] [--group 4] [--threads 2] [--repeat 20]

The reference trainer's sampler prefills each distinct prompt once and copies its cache rows
to the group's attempts (``Sampler.rollout``). Baseline, in the same process and alternated
with it: prefilling every attempt's row, as it did before. Both start from the demo's shipped
warm start with bfloat16-rounded weights, on one batch of ``--tasks`` tasks × ``--group``
attempts. Also timed: the KV cache as it was allocated (zero-filled, the model's max_len long)
against now (uninitialised, the episode's length), and a whole rollout of the batch for scale.
Reported: medians and best times in ms, and the ratios. Needs the ``train`` extra.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads (see rlvitals.grpo)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=64)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    try:
        import numpy as np
        import torch

        from rlvitals.grpo.config import ModelConfig, OptimConfig, TaskConfig
        from rlvitals.grpo.loop import MAX_LEN
        from rlvitals.grpo.model import GPT
        from rlvitals.grpo.sampler import Sampler, episode_length
        from rlvitals.grpo.tasks import VOCAB, TaskPool, encode
        from rlvitals.grpo.warmstart import shipped_path
    except ImportError as exc:
        print(f"needs the train extra: {exc}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    mcfg, tcfg, ocfg = ModelConfig(), TaskConfig(), OptimConfig()
    model = GPT(len(VOCAB), mcfg.n_layer, mcfg.n_head, mcfg.d_model, max_len=MAX_LEN)
    saved = torch.load(shipped_path(mcfg, tcfg, ocfg), map_location="cpu", weights_only=True)
    model.load_state_dict(saved["state_dict"])
    sampler = Sampler(model, torch.bfloat16)
    pool = TaskPool(tcfg.digits, tcfg.tool_fraction, tcfg.heldout_fraction)
    distinct = pool.sample(args.tasks, np.random.default_rng(0))
    tasks = [t for t in distinct for _ in range(args.group)]
    prompts = torch.tensor([encode(t.prompt) for t in tasks])
    replies = torch.tensor([encode(t.tool_reply) for t in tasks])
    T = episode_length(prompts.shape[1], replies.shape[1], tcfg.max_new_tokens, tcfg.max_turns)
    m = sampler.model

    @torch.no_grad()
    def every_row() -> None:
        m.prefill(prompts, m.new_cache(len(prompts), T))

    @torch.no_grad()
    def once_per_prompt() -> None:
        unique, owner = torch.unique(prompts, dim=0, return_inverse=True)
        cache = m.new_cache(len(unique), T)
        m.prefill(unique, cache)[owner]
        cache.keep(owner)

    hd = m.d_model // m.n_head

    def zeroed() -> None:  # what KVCache allocated before: zeros, the model's max_len long
        [torch.zeros(len(prompts), m.n_head, m.max_len, hd) for _ in range(2 * m.n_layer)]

    def uninitialised() -> None:  # what it allocates now: empty, the episode's length
        [torch.empty(len(prompts), m.n_head, T, hd) for _ in range(2 * m.n_layer)]

    def rollout() -> None:
        sampler.rollout(
            tasks,
            max_new_tokens=tcfg.max_new_tokens,
            max_turns=tcfg.max_turns,
            generator=torch.Generator().manual_seed(0),
        )

    timed: dict[str, list[float]] = {}
    pairs: list[tuple[str, Callable[[], None]]] = [
        ("prefill, every row", every_row),
        ("prefill, once per prompt", once_per_prompt),
        ("cache, zero-filled", zeroed),
        ("cache, uninitialised", uninitialised),
        ("whole rollout", rollout),
    ]
    for _ in range(args.repeat):  # alternated, so the machine's drift hits each alike
        for name, f in pairs:
            t = time.perf_counter()
            f()
            timed.setdefault(name, []).append(1e3 * (time.perf_counter() - t))
    print(
        f"{args.tasks} tasks x {args.group} attempts ({len(prompts)} rows, {len(distinct)} "
        f"prompts), {args.threads} threads, {args.repeat} alternated repeats"
    )
    for name, ms in timed.items():
        print(f"  {name:<26} median {statistics.median(ms):8.2f} ms   best {min(ms):8.2f} ms")
    med = {k: statistics.median(v) for k, v in timed.items()}
    saved_ms = (med["prefill, every row"] - med["prefill, once per prompt"]) + (
        med["cache, zero-filled"] - med["cache, uninitialised"]
    )
    print(
        f"prefill once per prompt: {med['prefill, every row'] / med['prefill, once per prompt']:.2f}x"
        f" faster; with the cache, {saved_ms:.1f} ms saved per rollout "
        f"({100 * saved_ms / (med['whole rollout'] + saved_ms):.0f}% of one as it was)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
