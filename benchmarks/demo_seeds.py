"""Does the demo learn clearly on every seed? The reward rise the demo prints, seed by seed.

    python benchmarks/demo_seeds.py [--seeds 0-9] [--cache DIR] [--json] [-- OVERRIDES]

Runs ``rlvitals.grpo.demo_run`` at the demo's defaults (40 updates) for each seed and judges
each run with the checks, as ``rlvitals demo`` does. Reported per seed: the reward finding's own
figure (``first_mean`` over its head window, the first quarter of the updates, against
``last_mean`` over the last 5), the first 5 updates against the last 5 (the demo's summary
table), the held-out score at the first and the last checkpoint, the verdict, and the run's
seconds without its warm start. The bar: a rise of 0.15 or more on every seed, every verdict
LEARNING. Seeds other than 0 train their own warm start once (cached in ``--cache``, default a
temporary directory), 10-30 s each.

OVERRIDES is a JSON object of config sections over the demo's (``'{"task":
{"tasks_per_step": 64}}'``), to compare a setting against the defaults on the same seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads (see rlvitals.grpo)

BAR = 0.15


def seeds_of(text: str) -> list[int]:
    """``0-9`` or ``0,3,8`` to a list of seeds."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def one(seed: int, out: Path, cache: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    from rlvitals.checks import run_checks
    from rlvitals.grpo import demo_run
    from rlvitals.readers import read

    times: dict[str, float] = {}

    def on_event(kind: str, data: Any) -> None:
        if kind in ("warm_done", "run"):
            times.setdefault("trained_from", time.perf_counter())

    start = time.perf_counter()
    run_dir = demo_run(out, seed=seed, cache=cache, overrides=overrides, on_event=on_event)
    seconds = time.perf_counter() - times.get("trained_from", start)
    report = run_checks(read(run_dir))
    reward = next((f for f in report.findings if f.check == "reward"), None)
    ev = reward.evidence if reward is not None else {}
    steps = [json.loads(s) for s in (run_dir / "steps.jsonl").read_text().splitlines()]
    series = [float(s["reward/mean_with_unusable"]) for s in steps]
    evals = [json.loads(s) for s in (run_dir / "evals.jsonl").read_text().splitlines()]
    first, last = ev.get("first_mean"), ev.get("last_mean")
    return {
        "seed": seed,
        "verdict": report.verdict,
        "rise": (last - first) if first is not None and last is not None else None,
        "first_mean": first,
        "first_window": ev.get("first_window"),
        "last_mean": last,
        "rise_first5": sum(series[-5:]) / 5 - sum(series[:5]) / 5,
        "heldout": [evals[0]["score"], evals[-1]["score"]] if evals else None,
        "seconds": round(seconds, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", default="0-9", help="seeds, e.g. 0-9 or 0,3,8 (default 0-9)")
    ap.add_argument("--cache", default=None, help="warm-start cache (default: a fresh temp dir)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("overrides", nargs="?", default="{}", help="JSON config sections")
    args = ap.parse_args()
    try:
        import rlvitals.grpo  # noqa: F401  (torch: the train extra)
    except ImportError as exc:
        print(f"needs the train extra: {exc}", file=sys.stderr)
        return 2
    try:
        overrides = json.loads(args.overrides)
        seeds = seeds_of(args.seeds)
    except ValueError as exc:
        print(f"demo_seeds: bad argument: {exc}", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(args.cache) if args.cache else Path(tmp) / "cache"
        for seed in seeds:
            row = one(seed, Path(tmp) / "runs", cache, overrides)
            rows.append(row)
            if not args.json:
                rise = "n/a" if row["rise"] is None else f"{row['rise']:.3f}"
                held = row["heldout"] or ["n/a", "n/a"]
                print(
                    f"seed {seed}: rise {rise} ({row['first_mean']} -> {row['last_mean']}), "
                    f"first 5 -> last 5 {row['rise_first5']:.3f}, held-out {held[0]} -> "
                    f"{held[1]}, {row['verdict']}, {row['seconds']} s",
                    flush=True,
                )
    rises = [r["rise"] for r in rows if r["rise"] is not None]
    cleared = sum(1 for r in rows if r["rise"] is not None and r["rise"] >= BAR)
    ok = cleared == len(rows) and all(r["verdict"] == "learning" for r in rows)
    if args.json:
        print(json.dumps({"rows": rows, "cleared": cleared, "ok": ok}, indent=2))
    elif rises:
        print(
            f"{cleared} of {len(rows)} seeds rose {BAR} or more (min {min(rises):.3f}, "
            f"mean {sum(rises) / len(rises):.3f}); "
            + ("every verdict LEARNING" if ok else "not every seed clears the bar")
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
