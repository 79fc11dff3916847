"""The reference trainer's speed: seconds per update, where they go, and the writer's share.

    python benchmarks/trainer.py [--steps 40] [--seed 0] [--threads 1] [--cache DIR]

One demo run (``rlvitals.grpo.demo_run``), timed from outside. Every call into rlvitals' writer
(``Run.log_attempt``, ``decide``, ``log_step``, ``log_eval``, ``progress``...) is wrapped with a
timer, so the writer's share is measured against the updates it instruments, in the same run:
the baseline is the update itself. Target: the writer under 2% of an update.

Reported:
  warm start     steps and seconds (a fresh cache unless --cache names one; then it may load)
  per update     median and mean wall seconds, from the step records' ``perf/step_seconds``
  phases         sampling, grading, training (the loop's own ``perf/*`` numbers) and the
                 writer, as shares of the update loop's wall time
  learning       reward/mean over the first and last 5 updates, held-out first and last
  total          the whole run's wall time, warm start included (the demo's 30 s budget)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads (see rlvitals.grpo)

WRITER_METHODS = [
    "log_attempt",
    "decide",
    "log_step",
    "log_eval",
    "progress",
    "checkpoint_path",
    "checkpoint_due",
    "phase",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=40, help="GRPO updates (default 40)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--mode", choices=["sync", "async"], default="sync")
    ap.add_argument("--cache", default=None, help="warm-start cache (default: a fresh temp dir)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    try:
        from rlvitals import writer
        from rlvitals.grpo import demo_run
    except ImportError as exc:
        print(f"needs the train extra: {exc}", file=sys.stderr)
        return 2

    wall: dict[str, float] = {}
    originals: dict[str, Any] = {}

    def timed(name: str) -> Any:
        f = originals[name] = getattr(writer.Run, name)

        def call(self: Any, *a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return f(self, *a, **k)
            finally:
                wall[name] = wall.get(name, 0.0) + time.perf_counter() - t

        return call

    events: dict[str, Any] = {"warm": None, "first_step": None}

    def on_event(kind: str, data: Any) -> None:
        if kind == "warm_done":
            events["warm"] = dict(data)
            events["loop_start"] = time.perf_counter()

    for name in WRITER_METHODS:
        setattr(writer.Run, name, timed(name))
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(args.cache) if args.cache else Path(tmp) / "cache"
        t0 = time.perf_counter()
        try:
            run_dir = demo_run(
                Path(tmp) / "runs",
                name="bench",
                seed=args.seed,
                steps=args.steps,
                mode=args.mode,
                cache=cache,
                on_event=on_event,
                overrides={"optim": {"threads": args.threads}},
            )
        finally:
            for name, f in originals.items():
                setattr(writer.Run, name, f)
        total = time.perf_counter() - t0
        loop = time.perf_counter() - events["loop_start"]
        steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
        evals = [json.loads(line) for line in (run_dir / "evals.jsonl").read_text().splitlines()]

    def col(key: str) -> list[float]:
        return [float(s[key]) for s in steps if isinstance(s.get(key), (int, float))]

    per_update = col("perf/step_seconds")
    sampling, grading, training = (
        sum(col(f"perf/{k}_seconds")) for k in ("sampling", "grading", "training")
    )
    writer_total = sum(wall.values())
    rewards = col("reward/mean")
    warm = events["warm"] or {}
    figures = {
        "warm_start_steps": warm.get("steps"),
        "warm_start_seconds": warm.get("seconds"),
        "warm_start_cached": warm.get("cached"),
        "updates": len(steps),
        "update_seconds_median": statistics.median(per_update),
        "update_seconds_mean": statistics.fmean(per_update),
        "loop_seconds": loop,
        "share_sampling": sampling / loop,
        "share_grading": grading / loop,
        "share_training": training / loop,
        "share_writer": writer_total / loop,
        "writer_ms_per_update": 1e3 * writer_total / len(steps),
        "writer_ms_by_call": {k: round(1e3 * v / len(steps), 3) for k, v in sorted(wall.items())},
        "reward_first5": statistics.fmean(rewards[:5]),
        "reward_last5": statistics.fmean(rewards[-5:]),
        "heldout_first": evals[0]["score"] if evals else None,
        "heldout_last": evals[-1]["score"] if evals else None,
        "total_seconds": total,
        "threads": args.threads,
        "cpus": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    f = figures
    print(
        f"warm start: {f['warm_start_steps']} steps, {f['warm_start_seconds']:.1f} s"
        f"{' (cached)' if f['warm_start_cached'] else ''}"
    )
    print(
        f"updates: {f['updates']}, {f['update_seconds_median']:.3f} s median, "
        f"{f['update_seconds_mean']:.3f} s mean per update ({f['threads']} torch threads, "
        f"{f['cpus']} CPUs visible)"
    )
    print(
        f"  sampling {100 * f['share_sampling']:.1f}%  grading {100 * f['share_grading']:.1f}%  "
        f"training {100 * f['share_training']:.1f}%  of the update loop"
    )
    print(
        f"  writer   {100 * f['share_writer']:.2f}% of the update loop "
        f"({f['writer_ms_per_update']:.2f} ms per update; target < 2%)"
    )
    print(f"    by call (ms per update): {f['writer_ms_by_call']}")
    print(
        f"reward/mean {f['reward_first5']:.3f} (first 5) -> {f['reward_last5']:.3f} (last 5); "
        f"held-out {f['heldout_first']} -> {f['heldout_last']}"
    )
    print(f"total wall time {f['total_seconds']:.1f} s (warm start included; demo budget 30 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
