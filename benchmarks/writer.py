"""How fast the run-directory writer logs attempts, against the raw JSON encoder.

    python benchmarks/writer.py [--steps N] [--quick]

Each scenario logs realistic attempts (GRPO groups of 8, episode metadata with a label, a
count, reward components and a flag, a few failed and lagging attempts) with ``log_attempt``
and closes each update with ``log_step``, which decides the discards and computes every step
metric. The baseline, measured in the same run on the same records, is msgspec encoding the
rollouts.jsonl and steps.jsonl lines the writer produced, with nothing else: the floor any
writer of these files pays. Figures are attempts per second on one core (the process is pinned
to one CPU where the OS allows it), in CPU seconds of this process (user and system, so the
writes count), best of ``--repeat`` runs: on a shared machine, wall time measures the
neighbours.

Scenarios:
  plain       attempts with metadata, no logprobs, one log_attempt call each
  batch       the same attempts, each update's in one log_attempts call
  columns     the same attempts as columns (one list per argument, what a sampler holds),
              each update's in one log_attempts call; its failed attempts (1%) in a second
  logprobs    plus 100 sampler logprobs per attempt (Python lists) and trainer logprobs for
              every attempt, so the mismatch metrics (k3, k1, |Δ|, ESS token and sequence) run
  numpy       the same logprobs as numpy arrays (what a trainer holding tensors passes)
  trainer     shaped like the reference trainer's update (32 tasks x 8 attempts, 4 tokens per
              reply, trace = "full" transcripts): the writer's milliseconds per update
  reference   (--reference-steps N) the writer timed inside N updates of the real reference
              trainer (the train extra): its share of an update, target under 2%
  shards      (--writers K) K worker processes log the same attempts through
              ``rlvitals.attach`` shards while the trainer closes each update; wall-clock
              attempts per second end to end, beside the single-process writer's wall-clock
              rate on the same attempts in the same run
  ray         the same through ``rlvitals.ray.RunActor`` with K sampler actors on a local Ray
              cluster (the ray extra)
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from rlvitals import Run
from rlvitals.writer import WriterWarning

GROUP = 8
TARGET = 200_000  # attempts per second (issue 2)


def step_calls(
    step: int,
    groups: int,
    tokens: int,
    rng: random.Random,
    *,
    transcript: bool = False,
    numpy: bool = False,
) -> list[tuple[dict[str, Any], Any]]:
    """One update's log_attempt keyword arguments, each with the trainer's logprobs (or None).

    Built right before the update is logged and dropped after it, outside the timed part, so
    the garbage collector sees what a training loop holds (one update), not a whole plan.
    """
    labels = ["done", "max_turns", "tool_error"]
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
            trainer: Any = None
            if tokens:
                lp: Any = [-rng.expovariate(2.0) for _ in range(tokens)]
                trainer = [x + rng.gauss(0.0, 0.01) for x in lp]
                if numpy:
                    lp = np.asarray(lp, dtype=np.float32)
                    trainer = np.asarray(trainer, dtype=np.float32)
                kw["sampler_logprobs"] = lp
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
            calls.append((kw, trainer))
    return calls


def run_writer(
    root: str,
    steps: int,
    groups: int,
    tokens: int,
    *,
    trace: str = "samples",
    batch: bool = False,
    columns: bool = False,
    **kind: bool,
) -> tuple[float, int, Path]:
    """CPU seconds to log every attempt and close each update; attempts; the run directory.

    Creating and closing the run (run.json, fsync'd twice) happen once per run and are not
    counted: they would make a short benchmark run look slower than a long training run.
    """
    cfg = {
        "output": {"output_dir": root, "name": f"bench-{time.monotonic_ns()}", "trace": trace},
        "training": {"max_consecutive_unusable_groups": None},
        "rollout": {"max_consecutive_rollout_failures": None},
    }
    rng = random.Random(0)
    cpu = 0.0
    n = 0
    gc.collect()
    with Run(cfg) as run:
        for step in range(steps):
            calls = step_calls(step, groups, tokens, rng, transcript=trace == "full", **kind)
            many = [kw for kw, _ in calls] if batch or columns else []
            if columns:  # built before the clock starts, as a sampler holds them
                failed = [kw for kw in many if "error" in kw]
                plain = [kw for kw in many if "error" not in kw]
                cols = {k: [kw[k] for kw in plain] for k in plain[0]}
            t0 = time.process_time()
            if columns:
                run.log_attempts(cols)
                if failed:
                    run.log_attempts(failed)
                run.log_step(step, metrics={"train/loss": 0.1, "train/grad_norm": 1.0})
            elif batch:  # the whole update's attempts in one log_attempts call
                run.log_attempts(many)
                run.log_step(step, metrics={"train/loss": 0.1, "train/grad_norm": 1.0})
            elif tokens:
                logged = {run.log_attempt(**kw): t for kw, t in calls}
                run.log_step(step, trainer_logprobs=logged, metrics={"train/loss": 0.1})
            else:
                for kw, _ in calls:
                    run.log_attempt(**kw)
                run.log_step(step, metrics={"train/loss": 0.1, "train/grad_norm": 1.0})
            cpu += time.process_time() - t0
            n += len(calls)
    return cpu, n, run.dir


def run_encoder(run_dir: Path) -> tuple[float, float]:
    """CPU seconds for msgspec to encode the records the writer wrote (decoded ahead, not
    timed); and for a journal to encode each attempt and write it with its own system call,
    the cost of making every attempt durable as it arrives (see the writer's docstring)."""
    dec = msgspec.json.Decoder()
    with open(run_dir / "rollouts.jsonl", "rb") as f:
        rollouts = [dec.decode(line) for line in f]
    with open(run_dir / "steps.jsonl", "rb") as f:
        steps = [dec.decode(line) for line in f]
    enc = msgspec.json.Encoder()
    gc.collect()
    t0 = time.process_time()
    out = [enc.encode(r) + b"\n" for r in rollouts]
    out += [enc.encode(s) + b"\n" for s in steps]
    blob = b"".join(out)
    encode_s = time.process_time() - t0
    assert blob
    fd = os.open(run_dir / "journal.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        t0 = time.process_time()
        for r in rollouts:
            os.write(fd, enc.encode(r) + b"\n")
        journal_s = time.process_time() - t0
    finally:
        os.close(fd)
    return encode_s, journal_s / max(len(rollouts), 1)


def reference_trainer_share(steps: int, root: str) -> None:
    """The writer's share of the reference trainer's own updates (needs the ``train`` extra):
    every writer call is timed (wall and CPU) inside a real demo run, from the first writer call
    on (the supervised warm start before it is not an update)."""
    try:
        from rlvitals import writer
        from rlvitals.grpo import demo_run
    except ImportError as exc:
        print(f"reference trainer: skipped ({exc})")
        return
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    first: list[float] = []
    originals = {}

    def timed(name: str) -> Any:
        f = originals[name] = getattr(writer.Run, name)

        def call(self: Any, *a: Any, **k: Any) -> Any:
            if not first:
                first.append(time.perf_counter())
            t, c = time.perf_counter(), time.thread_time()
            try:
                return f(self, *a, **k)
            finally:
                wall[name] = wall.get(name, 0.0) + time.perf_counter() - t
                cpu[name] = cpu.get(name, 0.0) + time.thread_time() - c

        return call

    names = ["log_attempt", "log_step", "decide", "log_eval", "progress", "checkpoint_path"]
    for name in names:
        setattr(writer.Run, name, timed(name))
    try:
        demo_run(root, name="reference-share", steps=steps)
        total = time.perf_counter() - first[0]
    finally:
        for name, f in originals.items():
            setattr(writer.Run, name, f)
    w, c = sum(wall.values()), sum(cpu.values())
    print(
        f"reference trainer, {steps} updates: {1e3 * total / steps:.0f} ms per update; the "
        f"writer {1e3 * w / steps:.2f} ms wall ({100 * w / total:.2f}%), {1e3 * c / steps:.2f} ms "
        f"CPU ({100 * c / total:.2f}%) per update (target < 2%)"
    )


def _share(step: int, groups: int, worker: int, writers: int) -> list[dict[str, Any]]:
    """Worker ``worker``'s share of an update's attempts (its groups), as log_attempt kwargs."""
    rng = random.Random(step * 7919 + worker)
    calls = step_calls(step, groups // writers, 0, rng)
    for kw, _ in calls:
        kw["group_id"] = f"w{worker}-{kw['group_id']}"
    return [kw for kw, _ in calls]


def _shard_worker(
    run_dir: str, worker: int, writers: int, steps: int, groups: int, barrier: Any
) -> None:
    import rlvitals

    with rlvitals.attach(run_dir, shard=f"w{worker}") as w:
        for step in range(steps):
            batch = _share(step, groups, worker, writers)
            barrier.wait()
            for g in range(0, len(batch), GROUP):
                w.log_attempts(batch[g : g + GROUP])
            barrier.wait()


def multi_writer(root: str, steps: int, groups: int, writers: int, mode: str) -> tuple[float, int]:
    """Wall seconds for ``writers`` writers to log ``steps`` updates and the trainer to close
    them; the attempts logged. ``mode``: single (one process logs every share), shards, ray."""
    import multiprocessing

    cfg = {
        "output": {"output_dir": root, "name": f"multi-{mode}-{time.monotonic_ns()}"},
        "training": {"max_consecutive_unusable_groups": None},
        "rollout": {"max_consecutive_rollout_failures": None},
    }
    n = steps * (groups // writers) * GROUP * writers
    if mode == "single":
        shares = [[_share(s, groups, w, writers) for w in range(writers)] for s in range(steps)]
        with Run(cfg) as run:
            t0 = time.perf_counter()
            for step in range(steps):
                for batch in shares[step]:
                    for kw in batch:
                        run.log_attempt(**kw)
                run.log_step(step, metrics={"train/loss": 0.1})
            return time.perf_counter() - t0, n
    if mode == "shards":
        ctx = multiprocessing.get_context("fork")
        barrier = ctx.Barrier(writers + 1)
        with Run(cfg) as run:
            procs = [
                ctx.Process(
                    target=_shard_worker, args=(str(run.dir), w, writers, steps, groups, barrier)
                )
                for w in range(writers)
            ]
            for p in procs:
                p.start()
            barrier.wait()
            t0 = time.perf_counter()
            for step in range(steps):
                barrier.wait()
                run.log_step(step, metrics={"train/loss": 0.1})
                if step + 1 < steps:
                    barrier.wait()
            seconds = time.perf_counter() - t0
            for p in procs:
                p.join()
        return seconds, n
    import ray

    from rlvitals.ray import RunActor

    @ray.remote(num_cpus=0)
    class Sampler:
        def __init__(self, worker: int, run: Any) -> None:
            self.worker, self.run = worker, run

        def ready(self) -> bool:
            return True

        def sample(self, step: int) -> int:
            batch = _share(step, groups, self.worker, writers)
            refs = [
                self.run.log_attempts.remote(batch[g : g + GROUP])
                for g in range(0, len(batch), GROUP)
            ]
            ray.get(refs)
            return len(batch)

    run = RunActor.options(num_cpus=0).remote(cfg)
    samplers = [Sampler.remote(w, run) for w in range(writers)]
    ray.get([s.ready.remote() for s in samplers] + [run.info.remote()])  # started, not timed
    t0 = time.perf_counter()
    for step in range(steps):
        ray.get([s.sample.remote(step) for s in samplers])
        ray.get(run.log_step.remote(step, metrics={"train/loss": 0.1}))
    seconds = time.perf_counter() - t0
    ray.get(run.close.remote())
    return seconds, n


def multi_writers(root: str, steps: int, groups: int, writers: int, repeat: int) -> None:
    """The shard and Ray writers against the single-process writer, wall clock, same run."""
    best: dict[str, float] = {}
    n = 0
    modes = ["single", "shards"]
    try:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        modes.append("ray")
    except ImportError:
        print("ray: skipped (pip install 'rlvitals[ray]')")
    try:
        for _ in range(repeat):
            for mode in modes:
                s, n = multi_writer(root, steps, groups, writers, mode)
                best[mode] = min(best.get(mode, float("inf")), s)
    finally:
        if "ray" in modes:
            ray.shutdown()
    single = n / best["single"]
    print(f"{writers} writers, {n} attempts, wall clock (best of {repeat}):")
    for mode in modes:
        rate = n / best[mode]
        print(
            f"  {mode:<7} {rate:>10,.0f} attempts/s  ({rate / single:.2f}x the single-process writer)"
        )


def python_speed() -> float:
    """CPU seconds for a fixed pure-Python loop (10 million additions): how fast this core
    runs Python, so figures from different machines can be compared."""
    t0 = time.process_time()
    x = 0
    for i in range(10_000_000):
        x += i
    assert x
    return time.process_time() - t0


def pin_one_core() -> str:
    try:
        cpu = sorted(os.sched_getaffinity(0))[-1]
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    except (AttributeError, OSError):
        return "not pinned"


def scenario(
    root: str, repeat: int, steps: int, groups: int, tokens: int, **kw: Any
) -> dict[str, float]:
    """Writer and encoder alternately, ``repeat`` times: the best of each (the least disturbed
    by other processes) and the median of the per-round ratios."""
    best_w = best_e = best_j = float("inf")
    ratios = []
    n = 0
    for _ in range(repeat):
        tw, n, run_dir = run_writer(root, steps, groups, tokens, **kw)
        te, tj = run_encoder(run_dir)
        shutil.rmtree(run_dir)
        best_w, best_e, best_j = min(best_w, tw), min(best_e, te), min(best_j, tj)
        ratios.append(te / tw)
    return {
        "attempts": n,
        "steps": steps,
        "writer_s": best_w,
        "encoder_s": best_e,
        "journal_s": best_j,
        "ratio": statistics.median(ratios),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="updates per scenario")
    ap.add_argument("--groups", type=int, default=128, help="groups of 8 per update")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a few updates, one repeat (smoke)")
    ap.add_argument("--only", nargs="*", default=None, help="scenarios to run")
    ap.add_argument(
        "--writers", type=int, default=2, help="writers for the shards and ray scenarios"
    )
    ap.add_argument(
        "--reference-steps",
        type=int,
        default=0,
        metavar="N",
        help="also time the writer inside N updates of the reference trainer (train extra)",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.steps, args.groups, args.repeat = 3, 16, 1
    all_cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    print(f"rlvitals writer benchmark ({pin_one_core()}, python {sys.version.split()[0]})")
    warnings.simplefilter("error", WriterWarning)  # a figure measured around a failure is void
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"python speed: a 10-million-step loop takes {python_speed():.2f} s of CPU here")
    root = tempfile.mkdtemp(prefix="rlvitals-bench-")
    ok = True
    try:
        scenarios: dict[str, dict[str, Any]] = {
            "plain": {"tokens": 0},
            "batch": {"tokens": 0, "batch": True},
            "columns": {"tokens": 0, "columns": True},
            "logprobs": {"tokens": 100},
            "numpy": {"tokens": 100, "numpy": True},
        }
        print(
            f"{'scenario':<10} {'attempts':>9} {'writer/s':>10} {'encoder/s':>10} "
            f"{'writer/encoder':>15} {'us/attempt':>11} {'target':>8}"
        )
        for name, kw in scenarios.items():
            if args.only and name not in args.only:
                continue
            r = scenario(root, args.repeat, args.steps, args.groups, **kw)
            w, e = r["attempts"] / r["writer_s"], r["attempts"] / r["encoder_s"]
            met = w >= TARGET
            ok &= met or name not in ("plain", "batch", "columns")
            print(
                f"{name:<10} {r['attempts']:>9} {w:>10,.0f} {e:>10,.0f} {r['ratio']:>14.3f}x "
                f"{1e6 / w:>11.2f} {'met' if met else 'MISSED':>8}"
            )
            if name == "plain":
                journal = r["journal_s"] * 1e6
                print(
                    f"{'':<10} a journal (encode + write each attempt as it arrives) would add "
                    f"{journal:.2f} us/attempt, {100 * journal * w / 1e6:.0f}% of the writer"
                )
        if not args.only or "trainer" in args.only:
            steps = max(args.steps, 5)
            r = scenario(root, args.repeat, steps, 32, 4, trace="full")
            ms = 1e3 * r["writer_s"] / r["steps"]
            print(
                f"update shaped like the reference trainer's (32 groups of 8, 4 tokens, full "
                f"transcripts): {ms:.2f} ms per update ({1e3 * ms / 256:.1f} us per attempt); "
                f"--reference-steps measures the share inside the real trainer"
            )
        if not args.only or "shards" in args.only or "ray" in args.only:
            with contextlib.suppress(AttributeError, OSError):  # several processes: all CPUs
                os.sched_setaffinity(0, all_cpus)
            multi_writers(root, args.steps, args.groups, args.writers, args.repeat)
        if args.reference_steps:
            with contextlib.suppress(AttributeError, OSError):  # the trainer's own threads
                os.sched_setaffinity(0, all_cpus)
            reference_trainer_share(args.reference_steps, root)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
