"""Supervised warm start, cached on disk.

GRPO learns only from groups whose attempts disagree, so a model trained from scratch first
needs a pass rate well above zero. The warm start trains on correct episodes (next-token cross
entropy on the tokens the model itself would write: ``?``, the answer digits, ``$``; never on
the prompt or the tool's reply) and **stops on a target pass rate**, not after a fixed number
of steps: a small transformer picks up addition suddenly, at a step that varies by seed
(measured: 180-320 steps), and a fixed length leaves some seeds at a pass rate near 0,
where every group scores all zeros and GRPO has nothing to learn from. The sampled check is
skipped while even greedy decoding (read off each step's logits) solves too few episodes of the
batch to be near the target: the long plateau before addition clicks costs no sampling.

The result is cached under ``$RLVITALS_CACHE`` (default ``~/.cache/rlvitals``), keyed by every
setting it depends on (model, task, warm-start settings, seed, thread count, torch version),
so the second run with the same settings skips it.

The demo's own warm start (the default settings, seed 0) ships with the package
(``warmstarts/``, made by ``scripts/make_warmstart.py``), so a first demo on a new machine
starts GRPO at once: a shipped file is keyed by the same settings but the torch version and the
thread count, and loads under any. Another seed, or any other setting, trains its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .config import ModelConfig, OptimConfig, TaskConfig
from .grader import grade
from .model import GPT
from .optim import AdamW
from .sampler import Sampler
from .tasks import PAD_ID, Task, TaskPool, encode

__all__ = [
    "WarmStart",
    "WarmStartWarning",
    "cache_dir",
    "demonstrations",
    "is_cached",
    "memorize",
    "shipped_path",
    "warm_source",
    "warm_start",
]

CACHE_VERSION = 4  # 4: the sampler computes in float32 on rounded numbers
CHECK_TASKS = 128  # problems sampled at each pass-rate check
SHIPPED = Path(__file__).with_name("warmstarts")  # warm starts that ship with the package


def cache_dir() -> Path:
    """``$RLVITALS_CACHE``, else ``~/.cache/rlvitals`` (read when called, not at import)."""
    env = os.environ.get("RLVITALS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "rlvitals"


class WarmStartWarning(UserWarning):
    """The warm start gave up (``warm_max_steps``) below its target pass rate."""


@dataclass
class WarmStart:
    """What the warm start did (recorded in run.json as ``warm_start``)."""

    steps: int
    pass_rate: float
    reached_target: bool
    seconds: float
    cached: bool
    key: str
    shipped: bool = False  # loaded from the package's warmstarts/, not trained or cached here


_TASK_KEYS = (
    "digits",
    "tool_fraction",
    "heldout_fraction",
    "temperature",
    "max_new_tokens",
    "max_turns",
)


def _key(
    model: ModelConfig, task: TaskConfig, optim: OptimConfig, *, portable: bool = False
) -> str:
    """The cache key; ``portable``: without the torch version and the thread count (the key
    of a shipped warm start)."""
    parts: dict[str, Any] = {
        "v": CACHE_VERSION,
        "model": asdict(model),
        # The tasks, and what the pass-rate check that stops it samples with.
        "task": {k: getattr(task, k) for k in _TASK_KEYS},
        "optim": {k: v for k, v in asdict(optim).items() if k.startswith("warm_")},
        "seed": optim.seed,
    }
    if not portable:
        parts.update(torch=torch.__version__, threads=optim.threads)
    blob = json.dumps(parts, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def shipped_path(model: ModelConfig, task: TaskConfig, optim: OptimConfig) -> Path:
    """Where the package keeps a shipped warm start for these settings (it may not exist)."""
    return SHIPPED / f"{_key(model, task, optim, portable=True)}.pt"


def _load(model: GPT, path: Path) -> dict[str, Any] | None:
    """Load a saved warm start into ``model``; its info, or None for a corrupt or foreign
    file (the model is then left as it was)."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        info = saved["info"]
        got = {k: info[k] for k in ("steps", "pass_rate", "reached_target")}
    except Exception:
        return None
    before = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        model.load_state_dict(saved["state_dict"])
    except Exception:  # a foreign shape: the initial weights back, untouched
        model.load_state_dict(before)
        return None
    return got


def _batch(pool: TaskPool, n: int, rng: np.random.Generator) -> tuple[torch.Tensor, ...]:
    """``n`` correct episodes of random training tasks (see ``demonstrations``)."""
    return demonstrations(pool.sample(n, rng))


def demonstrations(tasks: list[Task]) -> tuple[torch.Tensor, ...]:
    """Correct episodes of ``tasks`` as (inputs, targets, loss mask), each (n, T-1)."""
    seqs, masks = [], []
    for task in tasks:
        prompt, rest = task.demonstration()
        ids = encode(prompt + rest)
        # Train on what the model writes: after the prompt, except the tool's reply.
        mask = [False] * len(prompt) + [True] * len(rest)
        if task.variable is not None:
            reply = len(task.tool_reply)
            mask[len(prompt) + 1 : len(prompt) + 1 + reply] = [False] * reply
        seqs.append(ids)
        masks.append(mask)
    T = max(len(s) for s in seqs)
    tokens = torch.tensor([s + [PAD_ID] * (T - len(s)) for s in seqs])  # (n, T)
    loss_mask = torch.tensor([m + [False] * (T - len(m)) for m in masks])  # (n, T)
    # Position t predicts token t+1.
    return tokens[:, :-1], tokens[:, 1:], loss_mask[:, 1:]


def _sft_step(model: GPT, opt: AdamW, batch: tuple[torch.Tensor, ...]) -> tuple[float, float]:
    """One supervised step; returns the loss and the share of the batch's episodes whose every
    trained token is the model's most likely one (teacher forced, before the step): the
    episodes greedy decoding would get right."""
    x, y, mask = batch  # (B, T-1) each
    # Cross entropy summed over the model's own tokens, sequences of one length at a time (a
    # lookup episode is longer than a single-turn one: padding would cost compute), then
    # averaged over all of them.
    lengths = mask.shape[1] - mask.flip(1).int().argmax(1)  # (B,) up to the last loss token
    total = torch.zeros(())
    exact = 0
    for L in torch.unique(lengths).tolist():
        rows = (lengths == L).nonzero().squeeze(1)
        m = mask[rows, :L]
        logits = model(x[rows, :L])  # (b, L, V)
        total = total + F.cross_entropy(logits[m], y[rows, :L][m], reduction="sum")
        with torch.no_grad():
            hit = (logits.argmax(-1) == y[rows, :L]) | ~m
            exact += int(hit.all(1).sum())
    loss = total / mask.sum()
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item(), exact / len(x)


def memorize(
    model: GPT,
    sampler: Sampler,
    tasks: list[Task],
    task: TaskConfig,
    *,
    lr: float,
    target: float = 0.98,
    max_steps: int = 600,
    seed: int = 0,
) -> int:
    """Supervised steps on ``tasks`` alone until the sampler solves ``target`` of 8 attempts
    at each (the ``too_easy`` fault: the RL tasks leaked into the warm-start data). Returns
    the steps taken; ``sampler`` holds the result as version 0."""
    opt = AdamW(model.parameters(), lr=lr)
    batch = demonstrations(tasks)
    rows = [t for t in tasks for _ in range(8)]
    generator = torch.Generator().manual_seed(seed * 1000 + 5)
    model.train()
    step = 0
    while step < max_steps:
        _sft_step(model, opt, batch)
        step += 1
        if step % 10 == 0:
            sampler.load(model, 0)
            if pass_rate_of(sampler, rows, task, generator) >= target:
                break
    sampler.load(model, 0)
    return step


def pass_rate_of(
    sampler: Sampler, tasks: list[Task], task: TaskConfig, generator: torch.Generator
) -> float:
    """Share of ``tasks`` the sampler solves at the task's temperature."""
    from .agent import read_attempts

    ep = sampler.rollout(
        tasks,
        max_new_tokens=task.max_new_tokens,
        max_turns=task.max_turns,
        temperature=task.temperature,
        generator=generator,
    )
    attempts = read_attempts(ep)
    return sum(grade(t, a.final_reply)[0] for t, a in zip(tasks, attempts)) / len(tasks)


def pass_rate(
    sampler: Sampler,
    pool: TaskPool,
    task: TaskConfig,
    rng: np.random.Generator,
    generator: torch.Generator,
    n: int = CHECK_TASKS,
) -> float:
    """Share of ``n`` random training tasks the sampler solves."""
    return pass_rate_of(sampler, pool.sample(n, rng), task, generator)


def is_cached(
    model_cfg: ModelConfig,
    task: TaskConfig,
    optim: OptimConfig,
    directory: Path | None = None,
) -> bool:
    """Whether a warm start for these settings is in the cache already, or ships with the
    package."""
    return warm_source(model_cfg, task, optim, directory) is not None


def warm_source(
    model_cfg: ModelConfig,
    task: TaskConfig,
    optim: OptimConfig,
    directory: Path | None = None,
) -> str | None:
    """Where ``warm_start`` will load these settings' warm start from: ``"cache"``,
    ``"shipped"`` (the package's own), or None (it trains one)."""
    if ((directory or cache_dir()) / "warmstart" / f"{_key(model_cfg, task, optim)}.pt").exists():
        return "cache"
    return "shipped" if shipped_path(model_cfg, task, optim).exists() else None


def warm_start(
    model: GPT,
    pool: TaskPool,
    model_cfg: ModelConfig,
    task: TaskConfig,
    optim: OptimConfig,
    *,
    directory: Path | None = None,
    on_check: Any = None,
    on_step: Any = None,
    shipped: bool = True,
) -> WarmStart:
    """Bring ``model`` to the target pass rate, or load the cached result. Updates it in place.

    Args:
        directory: the cache directory (default ``cache_dir()``); the file is
            ``<directory>/warmstart/<key>.pt``.
        on_check: called as ``on_check(step, pass_rate)`` after each pass-rate check.
        on_step: called as ``on_step(step, greedy)`` every ``warm_check_every`` steps (the
            share of the batch greedy decoding would solve), so a view can show progress
            through the plateau before addition clicks.
        shipped: use a warm start shipped with the package for these settings (False: the
            cache or training only, as ``scripts/make_warmstart.py`` does).
    """
    key = _key(model_cfg, task, optim)
    path = (directory or cache_dir()) / "warmstart" / f"{key}.pt"
    start = time.perf_counter()
    # The cache first, then the package's own; a corrupt or foreign file is trained over.
    sources = [(path, False)]
    if shipped:
        sources.append((shipped_path(model_cfg, task, optim), True))
    for source, packaged in sources:
        info = _load(model, source) if source.exists() else None
        if info is not None:
            return WarmStart(
                steps=int(info["steps"]),
                pass_rate=float(info["pass_rate"]),
                reached_target=bool(info["reached_target"]),
                seconds=time.perf_counter() - start,
                cached=True,
                key=key,
                shipped=packaged,
            )

    rng = np.random.default_rng([optim.seed, 1])
    check_rng = np.random.default_rng([optim.seed, 2])
    generator = torch.Generator().manual_seed(optim.seed * 1000 + 3)
    opt = AdamW(model.parameters(), lr=optim.warm_lr, weight_decay=0.0)
    dtype = torch.bfloat16 if model_cfg.sampler_dtype == "bfloat16" else torch.float32
    sampler = Sampler(model, dtype)
    rate, step = 0.0, 0
    model.train()
    while step < optim.warm_max_steps:
        _, greedy = _sft_step(model, opt, _batch(pool, optim.warm_batch, rng))
        step += 1
        if on_step is not None and step % optim.warm_check_every == 0:
            on_step(step, greedy)
        # Sampling the pass rate costs as much as a few steps; while even greedy decoding
        # would solve few of the batch's episodes (the plateau before addition clicks), the
        # sampled rate cannot be near the target, so the check is skipped.
        if step % optim.warm_check_every == 0 and greedy >= optim.warm_target_pass_rate / 2:
            sampler.load(model, 0)
            rate = pass_rate(sampler, pool, task, check_rng, generator)
            if on_check is not None:
                on_check(step, rate)
            if rate >= optim.warm_target_pass_rate:
                break
    info = {"steps": step, "pass_rate": rate, "reached_target": rate >= optim.warm_target_pass_rate}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    torch.save({"state_dict": model.state_dict(), "info": info}, tmp)
    os.replace(tmp, path)
    return WarmStart(
        step, rate, bool(info["reached_target"]), time.perf_counter() - start, False, key
    )
