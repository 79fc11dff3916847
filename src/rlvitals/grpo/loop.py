"""The training loop, instrumented with rlvitals' writer: the worked example of docs/trainer.md.

Per update ``step`` (docs/format.md's versions: update s trains weights of version s, makes s + 1):

    sample    the sampler plays tasks_per_step x group_size episodes with its weight copy;
              each attempt is graded as it finishes and logged with ``run.log_attempt``
              (reward, policy version, tokens, episode metadata, sampler logprobs, transcript,
              or the exception that ended it)
    decide    ``run.decide(step)``: which attempts train (stale, failed, no-variance groups out)
    train     trainer logprobs in float32 for every sampled token, advantages over the trained
              attempts of each group, the GRPO update (trainer.py)
    log       ``run.log_step(step, trainer_logprobs=..., metrics=...)``: the writer computes
              every canonical metric from the attempts and the two sets of logprobs
    sync      the sampler receives the new weights as version step + 1
    evaluate  every ``sampler_checkpoint_every`` updates, the sampler checkpoint is saved and
              scored greedily on held-out tasks with the honest grader (``run.log_eval``)

In ``[training] mode = "async"`` the sampler runs ``[optim] async_lead`` updates ahead: the
batch update s trains on was sampled before update s - lead finished, with the weights of that
time, so its attempts carry an older policy version (lag = lead). The pipeline is simulated
deterministically in one process (sample ahead, then train), so a seed still reproduces the
run; the staleness is real, the overlap in wall time is not.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
import warnings
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import __version__
from ..config import Config, load_config
from ..errors import ConfigError, RunStopped
from ..writer import Run
from .agent import read_attempts
from .config import SECTIONS, CorrectionConfig, EngineConfig, ModelConfig, OptimConfig, TaskConfig
from .faults import ActiveFault
from .grader import grade
from .model import GPT
from .sampler import Episodes, Sampler, episode_length
from .tasks import VOCAB, Task, TaskPool
from .trainer import Correction, Trainer, group_advantages
from .warmstart import WarmStart, WarmStartWarning, cache_dir, warm_source, warm_start

__all__ = ["train"]

Event = Callable[[str, Mapping[str, Any]], None]

# Positions the model holds (prompt, replies and tool replies of one episode). Fixed, so the
# position table, and with it a cached warm start, does not depend on the agent's budget.
MAX_LEN = 64

# A trickle of infrastructure failures, as cloud sandboxes have: per try of an attempt.
# Retries (``[rollout] max_rollout_retries``) absorb nearly all of it.
BASE_FAILURE_RATE = 0.002


@dataclass
class Batch:
    """The episodes sampled for one update and what was logged about them."""

    step: int
    episodes: Episodes
    attempt_ids: list[str]
    group_ids: list[str]
    rewards: list[float | None]
    sampling_seconds: float
    grading_seconds: float


def _max_len(task: TaskConfig) -> int:
    prompt = 2 * task.digits + 3  # ^ a + b =
    return episode_length(prompt, 2 * task.digits + 2, task.max_new_tokens, task.max_turns)


def _quiet(kind: str, data: Mapping[str, Any]) -> None:
    pass


def train(
    config: Config | Mapping[str, Any] | str | Path | None = None,
    *,
    fault: str | None = None,
    fault_step: int | None = None,
    stall_seconds: float = 20.0,
    cache: str | os.PathLike[str] | None = None,
    on_event: Event | None = None,
) -> Path:
    """Warm-start and train the reference GRPO trainer; returns the run directory.

    Args:
        config: the TOML path, a dict shaped like it, or a Config (writer sections plus
            ``[model]``, ``[task]``, ``[optim]``).
        fault: a fault from ``faults.FAULTS`` to inject, at ``fault_step`` (default: its own).
        stall_seconds: how long the ``stall`` fault hangs before the process gives up.
        cache: warm-start cache directory (default ``$RLVITALS_CACHE`` or ~/.cache/rlvitals).
        on_event: called as ``on_event(kind, data)`` for live views: ``warm_begin``,
            ``warm_step``, ``warm_check``, ``warm_done``, ``run`` (its directory), ``step``,
            ``eval``, ``stall``, ``stopped``.
    """
    cfg = config if isinstance(config, Config) else load_config(config, sections=SECTIONS)
    emit = on_event or _quiet
    active = ActiveFault.create(fault, fault_step, stall_seconds=stall_seconds)
    cfg = _checked(cfg, active)
    mcfg: ModelConfig = cfg.section("model")
    tcfg: TaskConfig = cfg.section("task")
    ocfg: OptimConfig = cfg.section("optim")

    # Determinism: one seed for everything, a fixed thread count (numerics depend on it).
    torch.set_num_threads(ocfg.threads)
    torch.manual_seed(ocfg.seed)
    pool = TaskPool(tcfg.digits, tcfg.tool_fraction, tcfg.heldout_fraction)
    if max(_max_len(tcfg), active.max_len(tcfg)) > MAX_LEN:
        raise ConfigError(
            f"episodes would need {_max_len(tcfg)} positions, more than the model's {MAX_LEN}; "
            "lower max_new_tokens, max_turns or digits",
            section="task",
            key="max_new_tokens",
        )
    model = GPT(len(VOCAB), mcfg.n_layer, mcfg.n_head, mcfg.d_model, max_len=MAX_LEN)
    ws = _warm_start(model, pool, cfg, Path(cache) if cache is not None else None, emit)

    ecfg: EngineConfig = cfg.section("engine")
    first = mcfg.sampler_dtype if not ecfg.dtype or active.name == "dtype_pair" else ecfg.dtype
    sampler = Sampler(model, torch_dtype(first))
    trainer = _trainer(model, cfg)
    task_rng = np.random.default_rng([ocfg.seed, 10])
    fail_rng = np.random.default_rng([ocfg.seed, 11])
    sample_gen = torch.Generator().manual_seed(ocfg.seed * 1000 + 12)
    heldout = pool.heldout_tasks(tcfg.heldout_tasks)
    active.prepare(model, pool, sampler, tcfg, task_rng, lr=ocfg.warm_lr, seed=ocfg.seed)

    info = {
        "fault": active.name,
        "fault_step": active.step,
        "warm_start": dataclasses.asdict(ws),
        "trainer": "rlvitals.grpo",
    }
    run = Run(cfg, sections=SECTIONS, versions=_versions(model, cfg), info=info)
    emit("run", {"run_dir": str(run.dir)})
    try:
        with run:
            _loop(
                run,
                cfg,
                sampler,
                trainer,
                pool,
                heldout,
                active,
                task_rng,
                fail_rng,
                sample_gen,
                emit,
            )
    except RunStopped as exc:
        if exc.record is not None:  # the update that tripped the guard is in steps.jsonl
            emit("step", exc.record)
        emit("stopped", {"reason": exc.reason, "message": str(exc)})
    return run.dir


def _checked(cfg: Config, active: ActiveFault) -> Config:
    """The config the run trains with: ``cfg``, or a copy with the fault's own warm-start
    target; ConfigError for a model shape the trainer cannot build."""
    for name, values in active.settings().items():
        # A fault that is a setting (top_p, a dtype, a correction): run.json records it.
        if name == "training":
            cfg = dataclasses.replace(cfg, training=dataclasses.replace(cfg.training, **values))
        else:
            section = dataclasses.replace(cfg.section(name), **values)
            cfg = dataclasses.replace(cfg, extra={**cfg.extra, name: section})
    mcfg: ModelConfig = cfg.section("model")
    ocfg: OptimConfig = cfg.section("optim")
    target = active.warm_target(ocfg.warm_target_pass_rate)
    if target != ocfg.warm_target_pass_rate:
        # A fault with its own warm start (grader_exploit): a copy of the config says so, in
        # the warm start's cache key and in run.json; the caller's Config is left as it was.
        ocfg = dataclasses.replace(ocfg, warm_target_pass_rate=target)
        cfg = dataclasses.replace(cfg, extra={**cfg.extra, "optim": ocfg})
    if mcfg.d_model % (2 * mcfg.n_head):
        raise ConfigError(
            f"expected a multiple of 2 * n_head = {2 * mcfg.n_head} (not {mcfg.d_model})",
            section="model",
            key="d_model",
        )
    return cfg


def _warm_start(
    model: GPT, pool: TaskPool, cfg: Config, cache_path: Path | None, emit: Event
) -> WarmStart:
    """Warm-start ``model`` (from the cache when it holds this config's), telling ``emit``;
    a warm start that missed its target is also warned once."""
    mcfg: ModelConfig = cfg.section("model")
    tcfg: TaskConfig = cfg.section("task")
    ocfg: OptimConfig = cfg.section("optim")
    source = warm_source(mcfg, tcfg, ocfg, cache_path)
    emit(
        "warm_begin",
        {
            "cached": source is not None,
            "shipped": source == "shipped",
            "target": ocfg.warm_target_pass_rate,
            "cache": str(cache_path or cache_dir()),
        },
    )
    ws = warm_start(
        model,
        pool,
        mcfg,
        tcfg,
        ocfg,
        directory=cache_path,
        on_check=lambda s, r: emit("warm_check", {"step": s, "pass_rate": r}),
        on_step=lambda s, g: emit("warm_step", {"step": s, "greedy": g}),
    )
    emit("warm_done", dataclasses.asdict(ws))
    if not ws.reached_target:
        # Said once, also where no live view listens (demo_run, the benchmarks); run.json
        # records it as warm_start.reached_target.
        from ..views.live import warm_missed

        warnings.warn(
            warm_missed(ws.steps, ws.pass_rate, ocfg.warm_target_pass_rate),
            WarmStartWarning,
            stacklevel=3,  # train's caller
        )
    return ws


def _trainer(model: GPT, cfg: Config) -> Trainer:
    """The trainer of ``model`` as the config's ``[optim]`` and ``[task]`` say."""
    tcfg: TaskConfig = cfg.section("task")
    ocfg: OptimConfig = cfg.section("optim")
    ccfg: CorrectionConfig = cfg.section("correction")
    correction = Correction.of(
        ccfg.mode,
        aggregation=ccfg.aggregation,
        clip_max=ccfg.clip_max,
        clip_min=ccfg.clip_min,
        log=ccfg.log,
    )
    return Trainer(
        model,
        lr=ocfg.lr,
        clip_eps=ocfg.clip_eps,
        minibatches=ocfg.minibatches,
        grad_clip=ocfg.grad_clip,
        weight_decay=ocfg.weight_decay,
        temperature=tcfg.temperature,
        seed=ocfg.seed,
        warmup=ocfg.lr_warmup,
        # Async batches are updates old: clip to the policy that sampled them (trainer.py),
        # unless a correction weighs them (decoupled PPO).
        clip_to_sampler=cfg.training.mode == "async",
        correction=correction,
    )


def _versions(model: GPT, cfg: Config) -> dict[str, str]:
    """What a comparison of runs must hold fixed (run.json ``versions``)."""
    mcfg: ModelConfig = cfg.section("model")
    tcfg: TaskConfig = cfg.section("task")
    size = sum(p.numel() for p in model.parameters())
    return {
        "framework": f"rlvitals.grpo {__version__}",
        "model": f"char-gpt-{mcfg.n_layer}x{mcfg.d_model}-{size}",
        "task": f"addition-{tcfg.digits}d-lookup{tcfg.tool_fraction:g}",
        "grader": "exact-match-1",
    }


def _loop(
    run: Run,
    cfg: Config,
    sampler: Sampler,
    trainer: Trainer,
    pool: TaskPool,
    heldout: list[Task],
    active: ActiveFault,
    task_rng: np.random.Generator,
    fail_rng: np.random.Generator,
    sample_gen: torch.Generator,
    emit: Event,
) -> None:
    tcfg: TaskConfig = cfg.section("task")
    ocfg: OptimConfig = cfg.section("optim")
    lead = ocfg.async_lead if cfg.training.mode == "async" else 0
    queue: deque[Batch] = deque()
    next_to_sample = 0
    replica: Sampler | None = None
    walls: list[float] = [time.monotonic()]  # when each update ended, on this machine's clock
    for step in range(ocfg.steps):
        # -- sample: fill the pipeline up to `lead` updates ahead -------------------------
        while next_to_sample <= step + lead:
            stall = active.stall(next_to_sample)
            switch = active.engine_switch(next_to_sample)
            if switch is not None:
                sampler.set_dtype(torch_dtype(switch))
            if replica is None and active.on("stale_replica", next_to_sample):
                replica = sampler.clone()  # this replica keeps the weights it holds now
            batch = _sample(
                run,
                next_to_sample,
                sampler,
                pool,
                active,
                tcfg,
                cfg,
                task_rng,
                fail_rng,
                sample_gen,
                stop_after=(0.5 if stall else None),
                replica=replica,
            )
            if stall:
                _hang(run, batch, stall, walls, emit)
                return
            queue.append(batch)
            next_to_sample += 1
        batch = queue.popleft()
        assert batch.step == step

        # -- decide, train, log -----------------------------------------------------------
        record = _update(run, batch, trainer, active)
        walls.append(time.monotonic())
        emit("step", record)

        # -- sync the sampler --------------------------------------------------------------
        if active.syncs_weights(step):
            sampler.load(trainer.model, step + 1)

        # -- sampler checkpoint, scored on held-out tasks -------------------------------------
        if run.checkpoint_due(step) or (
            step == ocfg.steps - 1 and cfg.output.sampler_checkpoint_every
        ):
            score = _checkpoint(run, step, sampler, heldout, tcfg)
            emit("eval", {"step": step, "score": score})


def _hang(run: Run, batch: Batch, stall: float, walls: list[float], emit: Event) -> None:
    """The ``stall`` fault: half of the batch's attempts came back; the rest never will."""
    # The heartbeat keeps reporting the same phase and count; no step record comes. After
    # `stall` seconds (longer on a busy machine, so the stall outlasts the line the checks
    # draw from the steps this machine took) the process gives up without closing the run,
    # as a job killed by its scheduler leaves it: run.json still says "running".
    stall = stall_wait(stall, walls)
    emit("stall", {"step": batch.step, "seconds": stall})
    run.progress("sampling", attempts_needed=len(batch.attempt_ids) * 2)
    time.sleep(stall)
    run.abandon()


def _update(run: Run, batch: Batch, trainer: Trainer, active: ActiveFault) -> dict[str, Any]:
    """Update ``batch.step``: decide which attempts train, the GRPO update on them, the
    trainer's logprobs of every sampled token; returns the step record as written."""
    step = batch.step
    with run.phase("training"):
        t0 = time.perf_counter()
        decision = run.decide(step)
        row_of = {aid: i for i, aid in enumerate(batch.attempt_ids)}
        rows = [row_of[a.attempt_id] for a in decision.trained]
        rewards = [batch.rewards[i] for i in rows]
        groups = [batch.group_ids[i] for i in rows]

        # -- the GRPO update, and the trainer's logprobs of every sampled token --------
        active.before_update(step, trainer)
        adv = group_advantages([float(r) for r in rewards if r is not None], groups)
        if trainer.entropy_coef:
            # An entropy term averages over every sampled token of the batch; attempts
            # that do not train carry no advantage (0), only their entropy.
            trained = set(rows)
            extra = [i for i in range(len(batch.attempt_ids)) if i not in trained]
            rows, adv = rows + extra, adv + [0.0] * len(extra)
        stats = trainer.update(batch.episodes, rows, adv)
        metrics: dict[str, Any] = dict(stats.metrics)
        # logp_old from before the update, against the sampler's (the mismatch metrics).
        trainer_logprobs = _per_attempt(stats.logp_old, batch)
        training_seconds = time.perf_counter() - t0

    metrics["perf/sampling_seconds"] = batch.sampling_seconds
    metrics["perf/grading_seconds"] = batch.grading_seconds
    metrics["perf/training_seconds"] = training_seconds
    return run.log_step(step, trainer_logprobs=trainer_logprobs, metrics=metrics)


def _checkpoint(
    run: Run, step: int, sampler: Sampler, heldout: list[Task], tcfg: TaskConfig
) -> float:
    """Save the sampler checkpoint of update ``step`` and score it on the held-out tasks."""
    with run.phase("evaluating"):
        path = run.checkpoint_path(step)
        torch.save(sampler.state_dict(), path)
        score = evaluate(sampler, heldout, tcfg)
        run.log_eval(
            step,
            "heldout",
            score,
            len(heldout),
            checkpoint=str(path.relative_to(run.dir)),
            policy_version=sampler.version,
        )
    return score


def evaluate(sampler: Sampler, tasks: list[Task], tcfg: TaskConfig) -> float:
    """Greedy pass rate on ``tasks`` with the honest grader."""
    ep = sampler.rollout(
        tasks, max_new_tokens=tcfg.max_new_tokens, max_turns=tcfg.max_turns, greedy=True
    )
    attempts = read_attempts(ep)
    return sum(grade(t, a.final_reply)[0] for t, a in zip(tasks, attempts)) / len(tasks)


def _per_attempt(logp: torch.Tensor, batch: Batch) -> dict[str, list[float]]:
    """Trainer logprobs of each attempt's sampled tokens, aligned with its sampler logprobs."""
    gen = batch.episodes.generated[:, 1:]  # (B, T-1): token t+1 was sampled
    values = logp.tolist()
    flags = gen.tolist()
    return {
        aid: [v for v, g in zip(values[i], flags[i]) if g]
        for i, aid in enumerate(batch.attempt_ids)
    }


def _sample(
    run: Run,
    step: int,
    sampler: Sampler,
    pool: TaskPool,
    active: ActiveFault,
    tcfg: TaskConfig,
    cfg: Config,
    task_rng: np.random.Generator,
    fail_rng: np.random.Generator,
    generator: torch.Generator,
    stop_after: float | None = None,
    replica: Sampler | None = None,
) -> Batch:
    """Sample, grade and log the attempts of update ``step`` (``replica``: the engine replica
    the ``stale_replica`` fault left on old weights)."""
    G = tcfg.group_size
    with run.phase("sampling", attempts_needed=tcfg.tasks_per_step * G):
        tasks = active.tasks(step, pool, tcfg.tasks_per_step, task_rng)
        rows = [t for t in tasks for _ in range(G)]  # each task G times: its group
        t0 = time.perf_counter()
        ep = _rollout(sampler, replica, active, step, rows, cfg, generator)
        ep.seconds = time.perf_counter() - t0
        attempts = read_attempts(ep)

    grader = active.grader(step)
    p_rollout, p_grading = active.failure_rates(step)
    p_rollout, p_grading = p_rollout + BASE_FAILURE_RATE, p_grading + BASE_FAILURE_RATE
    retries_allowed = cfg.rollout.max_rollout_retries
    n_logged = len(rows) if stop_after is None else int(len(rows) * stop_after)
    ids: list[str] = []
    group_ids: list[str] = []
    rewards: list[float | None] = []
    grading_seconds = 0.0
    span = ep.tokens.shape[1]
    with run.phase("grading"):
        for i, (task, att) in enumerate(zip(rows, attempts)):
            # Each try can fail in the environment or in the grader; retries absorb some.
            draws = fail_rng.random((retries_allowed + 1, 2))
            error: BaseException | None = None
            failed_in = "rollout"
            retries = 0
            for k in range(retries_allowed + 1):
                if draws[k, 0] < p_rollout:
                    error, failed_in = (
                        TimeoutError("sandbox did not answer the tool call"),
                        "rollout",
                    )
                elif draws[k, 1] < p_grading:
                    error, failed_in = (
                        ConnectionError("grading service refused the connection"),
                        "grading",
                    )
                else:
                    error = None
                    break
                retries = min(k + 1, retries_allowed)
            reward: float | None = None
            metadata = dict(att.metadata)
            g0 = time.perf_counter()
            if error is None:
                reward, extra = grader(task, att.final_reply)
                metadata.update(extra)
            g1 = time.perf_counter()
            grading_seconds += g1 - g0
            if i >= n_logged:
                continue
            gid = f"{step}-g{i // G}"
            aid = run.log_attempt(
                step,
                gid,
                task.task_id,
                reward,
                policy_version=ep.version_of(i),
                response_tokens=att.response_tokens,
                truncated=att.truncated,
                metadata=metadata,
                sampler_logprobs=att.logprobs,
                transcript=att.transcript,
                error=error,
                failed_in=failed_in,
                retries=retries,
                duration=ep.seconds * att.positions / span + (g1 - g0),
            )
            ids.append(aid)
            group_ids.append(gid)
            rewards.append(reward)
    return Batch(step, ep, ids, group_ids, rewards, ep.seconds, grading_seconds)


def _rollout(
    sampler: Sampler,
    replica: Sampler | None,
    active: ActiveFault,
    step: int,
    rows: list[Task],
    cfg: Config,
    generator: torch.Generator,
) -> Episodes:
    """The episodes of update ``step``'s rows, sampled as the engine config says; the rows of
    a stale replica (``stale_replica``) by that replica, on its own weights."""
    tcfg: TaskConfig = cfg.section("task")
    ecfg: EngineConfig = cfg.section("engine")
    max_new_tokens, max_turns = active.budget(step, tcfg)
    G = tcfg.group_size
    temperature = active.temperature(step, tcfg.temperature, len(rows), G)
    kw: dict[str, Any] = dict(
        max_new_tokens=max_new_tokens,
        max_turns=max_turns,
        generator=generator,
        top_p=ecfg.top_p,
        top_k=ecfg.top_k,
    )
    stale = active.stale_rows(step, len(rows), G) if replica is not None else []
    if not stale:
        return sampler.rollout(rows, temperature=temperature, **kw)
    fresh = [i for i in range(len(rows)) if i not in set(stale)]
    parts = []
    for engine, idx in ((sampler, fresh), (replica, stale)):
        assert engine is not None
        t = temperature[idx] if isinstance(temperature, torch.Tensor) else temperature
        ep = engine.rollout([rows[i] for i in idx], temperature=t, **kw)
        parts.append((torch.tensor(idx, dtype=torch.long), ep))
    return Episodes.merge(parts, rows)


def torch_dtype(name: str) -> torch.dtype:
    """A sampler precision by its config name."""
    return {"bfloat16": torch.bfloat16, "float32": torch.float32}.get(name, torch.float8_e4m3fn)


def stall_wait(seconds: float, walls: list[float]) -> float:
    """How long the ``stall`` fault hangs: ``seconds``, or longer where updates are slow (a
    busy machine), so it outlasts the checks' stall line (``stall_intervals`` typical steps,
    the 90th percentile of the updates so far) by a fifth, and the demo shows the stall."""
    from ..checks.context import Thresholds

    th = Thresholds()
    steps = [b - a for a, b in itertools.pairwise(walls)]
    if not steps:
        return seconds
    typical = sorted(steps)[int(0.9 * (len(steps) - 1))]
    line = max(th.stall_intervals * typical, th.stall_min_seconds)
    return max(seconds, 1.2 * line + 1.0)
