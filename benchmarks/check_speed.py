"""Check time and peak memory for runs of 1,000, 10,000 and 100,000 steps, beside rl-doctor.

    python benchmarks/check_speed.py [--sizes 1000 10000 100000] [--no-rldoctor]

Each measurement runs in a fresh process (so peak RSS is its own): ours reads the run directory
and runs every check (``rlvitals check``'s work); rl-doctor (installed into its own venv under
~/.cache/rlvitals-bench) diagnoses the same steps in its field names. rl-doctor's quadratic
Mann-Kendall needs gigabytes from 10,000 steps on, so it runs under an address-space cap and a
timeout; where it fails the table says so. Target: linear growth, 100,000 steps under 5 s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

# A step record like the writer's: ~40 canonical metrics.
METRICS = [
    "reward/mean",
    "reward/std",
    "reward/group_std_mean",
    "reward/mean_with_unusable",
    "groups/trained",
    "groups/rejected",
    "groups/all_solved",
    "groups/none_solved",
    "groups/signal_fraction",
    "discard/groups/no_variance",
    "discard/groups/group_too_small",
    "discard/rollouts/rollout_failed/TimeoutError",
    "rollouts/retries",
    "rollouts/attempts",
    "response/length_mean",
    "response/truncated_rate",
    "train/mismatch_kl",
    "train/mismatch_k1",
    "train/logprob_abs_diff",
    "train/mismatch_ess",
    "train/mismatch_ess_seq",
    "freshness/lag_mean",
    "freshness/lag_p90",
    "freshness/lag_max",
    "sampling/entropy_estimate",
    "train/loss",
    "train/grad_norm",
    "train/lr",
    "train/clip_frac",
    "train/advantage_std",
    "perf/step_seconds",
    "perf/tokens_per_second",
    "perf/attempt_seconds_p50",
    "perf/attempt_seconds_p90",
    "perf/attempt_seconds_p99",
    "rollout/turns",
    "rollout/termination_reason/done",
    "rollout/termination_reason/max_turns",
]


def make_run(root: Path, n: int, seed: int = 0) -> Path:
    """A healthy-looking run of ``n`` steps in our format (steps.jsonl + run.json)."""
    import msgspec

    rng = np.random.default_rng(seed)
    d = root / f"run-{n}"
    d.mkdir(parents=True, exist_ok=True)
    t = np.arange(n, dtype=np.float64)
    noise = rng.standard_normal
    learn = np.tanh(t / max(n / 4, 1))
    level = {  # name -> (start, change over the run, noise)
        "reward/mean": (0.35, 0.3, 0.03),
        "reward/mean_with_unusable": (0.35, 0.3, 0.03),
        "reward/std": (0.45, 0.0, 0.01),
        "reward/group_std_mean": (0.4, -0.05, 0.01),
        "groups/signal_fraction": (0.85, -0.1, 0.02),
        "response/truncated_rate": (0.05, -0.03, 0.01),
        "train/mismatch_ess": (0.999, 0.0, 1e-4),
        "train/mismatch_ess_seq": (0.98, 0.0, 0.005),
        "sampling/entropy_estimate": (0.8, -0.2, 0.01),
        "train/clip_frac": (0.01, 0.0, 0.002),
        "train/grad_norm": (0.5, 0.0, 0.05),
        "train/loss": (0.0, 0.0, 0.01),
        "train/lr": (3e-4, 0.0, 0.0),
        "response/length_mean": (120, -20, 3),
    }
    base = {name: np.abs(0.5 + 0.03 * noise(n)) for name in METRICS}
    for name, (a, b, c) in level.items():
        base[name] = a + b * learn + c * noise(n)
    base["train/mismatch_kl"] = 3e-5 * np.exp(0.2 * noise(n))
    base["train/mismatch_k1"] = 1e-5 * noise(n)
    base["train/logprob_abs_diff"] = 0.008 * np.exp(0.1 * noise(n))
    for name in (
        "freshness/lag_mean",
        "freshness/lag_p90",
        "freshness/lag_max",
        "rollouts/retries",
        "discard/groups/group_too_small",
        "discard/rollouts/rollout_failed/TimeoutError",
    ):
        base[name] = np.zeros(n)
    base["groups/trained"] = np.full(n, 28.0)
    base["groups/rejected"] = np.full(n, 4.0)
    base["discard/groups/no_variance"] = np.full(n, 4.0)
    base["groups/all_solved"] = np.full(n, 1.0)
    base["groups/none_solved"] = np.full(n, 3.0)
    base["rollouts/attempts"] = np.full(n, 256.0)
    base["rollout/termination_reason/done"] = np.full(n, 250.0)
    base["rollout/termination_reason/max_turns"] = np.full(n, 6.0)
    enc = msgspec.json.Encoder()
    with open(d / "steps.jsonl", "wb") as f:
        for i in range(n):
            rec = {"step": i, "time": 1.7e9 + i * 10.0, "policy_version": i + 1}
            for name in METRICS:
                rec[name] = float(base[name][i])
            f.write(enc.encode(rec) + b"\n")
    (d / "run.json").write_text(
        json.dumps(
            {
                "format": "rlvitals-run/1",
                "name": d.name,
                "status": "finished",
                "stop_reason": None,
                "config": {},
            }
        )
    )
    return d


def child(path: str) -> None:
    t0 = time.perf_counter()
    from rlvitals.checks import run_checks
    from rlvitals.readers import read

    data = read(path)
    t1 = time.perf_counter()
    report = run_checks(data)
    t2 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "read_s": t1 - t0,
                "check_s": t2 - t1,
                "total_s": t2 - t0,
                "peak_mb": peak,
                "verdict": report.verdict,
            }
        )
    )


def ours(path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(path)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def theirs(path: Path, mem_gb: float, timeout: float) -> dict:
    from _rldoctor import diagnose, rldoctor_bin, to_rldoctor_jsonl

    rldoctor_bin()  # install outside the timing
    conv = to_rldoctor_jsonl(path, path / "rldoctor.jsonl")
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    res = diagnose(conv, timeout=timeout, mem_gb=mem_gb)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "total_s": seconds,
        "peak_mb": peak if peak > before / 1024 else math.nan,
        "error": res.get("error"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--no-rldoctor", action="store_true")
    ap.add_argument("--rldoctor-mem-gb", type=float, default=12.0)
    ap.add_argument("--rldoctor-timeout", type=float, default=300.0)
    ap.add_argument("--child")
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            run = make_run(Path(tmp), n)
            mb = sum(f.stat().st_size for f in run.iterdir()) / 1e6
            o = ours(run)
            t = (
                None
                if args.no_rldoctor
                else theirs(run, args.rldoctor_mem_gb, args.rldoctor_timeout)
            )
            rows.append((n, mb, o, t))
            print(
                f"{n:>7} steps ({mb:6.1f} MB): rlvitals {o['total_s']:6.2f} s "
                f"(read {o['read_s']:.2f}, checks {o['check_s']:.2f}), {o['peak_mb']:6.0f} MB"
                + (
                    ""
                    if t is None
                    else f" | rl-doctor {t['total_s']:6.2f} s, {t['peak_mb']:6.0f} MB"
                    + (f" [{t['error']}]" if t["error"] else "")
                ),
                flush=True,
            )
    print()
    print("| steps | rlvitals s | rlvitals peak MB | rl-doctor s | rl-doctor peak MB |")
    print("|---:|---:|---:|---:|---:|")
    for n, _mb, o, t in rows:
        if t is None:
            their = "- | -"
        elif t["error"]:
            their = f"failed ({t['error']}) after {t['total_s']:.1f} | -"
        else:
            their = f"{t['total_s']:.2f} | {t['peak_mb']:.0f}"
        print(f"| {n:,} | {o['total_s']:.2f} | {o['peak_mb']:.0f} | {their} |")
    if len(rows) >= 2:
        (n0, _, o0, _), (n1, _, o1, _) = rows[0], rows[-1]
        growth = (o1["check_s"] / max(o0["check_s"], 1e-9)) / (n1 / n0)
        print(
            f"\nchecks time growth per unit of steps, {n0:,} -> {n1:,}: {growth:.2f} (1.0 = linear)"
        )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
