"""Ingest benchmark: a run of 1,000,000 attempts and 10,000 steps, read by rlvitals in-process.

    python benchmarks/ingest.py [--attempts 1000000] [--steps 10000] [--keep DIR]

The project's speed figures are ``benchmarks/yardsticks.py``'s (``../shared/bench/README.md``:
``rlvitals check`` as a process against a raw decode of the same files as a process). This
script looks inside: it generates a run directory (rollouts.jsonl ~270 MB) and reports,
measured in the same run:

- our ingest (``rlvitals.readers.read`` of the whole directory: steps, rollouts into the
  columnar attempts table) against the raw decode, both timed inside their process (no
  interpreter start, no imports); target >= 0.7;
- ``rlvitals check RUN`` the same way (read and every check, the report printed);
- peak memory of each (max RSS of a fresh process doing only that); target < 500 MB;
- a live run: after a full read, 1,000 new steps are appended; the cost of the reader's next
  poll against the cost of reading everything, next to the share of new bytes (it should be
  proportional to the new bytes, not to the file).

The raw decode is the yardstick's: ``steps.jsonl`` and ``rollouts.jsonl`` line by line, each
line decoded by one ``msgspec.json.Decoder()`` and dropped. (Until December 2026 it was
``Decoder().decode_lines`` over 8 MiB chunks, which builds every record of a chunk at once,
nested dicts and all: 40-45% slower than decoding line by line on the same machine, 168 against
310 MB/s measured on one core, and far slower on a loaded one, where the collector walks the
chunk's live dicts again and again. It flattered the reader: the ratios it printed, 0.95-1.36,
are not comparable with the yardstick's.)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

REASONS = ("max_turns", "done", "error")


def _attempts(step: int, per_step: int, group: int, counter: int) -> list[dict]:
    out = []
    for k in range(per_step):
        g = k // group
        i = counter + k
        solved = (i * 2654435761) % 7 < 3
        out.append(
            {
                "step": step,
                "attempt_id": f"a{i}",
                "group_id": f"{step}-g{g}",
                "task_id": f"t{(step * 13 + g) % 5000}",
                "policy_version": step,
                "reward": 1.0 if solved else 0.0,
                "trained": True,
                "discard_reason": None,
                "response_tokens": 100 + (i % 900),
                "truncated": i % 97 == 0,
                "lag": 0,
                "time": round(1_790_000_000.0 + step * 10 + k * 0.01, 2),
                "duration": round(3.2 + (i % 50) * 0.1, 1),
                "metadata": {
                    "termination_reason": REASONS[i % 3],
                    "turns": 1 + i % 12,
                },
            }
        )
    return out


def _step_record(step: int) -> dict:
    rec: dict = {"step": step, "time": 1_790_000_000.0 + step * 10, "policy_version": step + 1}
    for j, name in enumerate(
        (
            "reward/mean",
            "reward/std",
            "reward/group_std_mean",
            "reward/mean_with_unusable",
            "groups/trained",
            "groups/rejected",
            "groups/all_solved",
            "groups/none_solved",
            "groups/signal_fraction",
            "response/length_mean",
            "response/truncated_rate",
            "train/mismatch_kl",
            "train/mismatch_k1",
            "train/logprob_abs_diff",
            "train/mismatch_ess",
            "freshness/lag_mean",
            "train/loss",
            "train/grad_norm",
            "perf/step_seconds",
            "perf/tokens_per_second",
        )
    ):
        rec[name] = round(0.001 * ((step * 31 + j * 17) % 1000), 6)
    return rec


def generate(d: Path, attempts: int, steps: int, *, first_step: int = 0) -> None:
    """Append ``steps`` updates with ``attempts`` attempts in all to the run at ``d``."""
    d.mkdir(parents=True, exist_ok=True)
    enc = msgspec.json.Encoder()
    if not (d / "run.json").exists():
        (d / "run.json").write_text(
            json.dumps({"format": "rlvitals-run/1", "run_id": "bench", "name": d.name})
        )
    per_step = attempts // steps
    with open(d / "rollouts.jsonl", "ab") as r, open(d / "steps.jsonl", "ab") as s:
        counter = first_step * per_step
        for step in range(first_step, first_step + steps):
            r.write(enc.encode_lines(_attempts(step, per_step, 8, counter)))
            counter += per_step
            s.write(enc.encode(_step_record(step)) + b"\n")


def raw_decode(d: Path) -> int:
    """The baseline (the yardstick's): every line of steps.jsonl and rollouts.jsonl decoded by
    msgspec's generic decoder, built as Python objects and dropped."""
    dec = msgspec.json.Decoder()
    n = 0
    for name in ("steps.jsonl", "rollouts.jsonl"):
        with open(d / name, "rb") as f:
            for line in f:
                if line.strip():
                    dec.decode(line)
                    n += 1
    return n


def _child(what: str, d: str) -> None:
    """Run one measurement in this (fresh) process and print its time and peak RSS."""
    if what != "raw":  # imported before the clock starts: the reading is timed, not Python's
        import rlvitals.cli
        import rlvitals.readers

        rlvitals.readers.formats()
        rlvitals.cli.build_parser()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if what == "raw":
        n = raw_decode(Path(d))
    elif what == "check":
        import contextlib
        import io

        from rlvitals.cli import main as cli

        with contextlib.redirect_stdout(io.StringIO()) as out:
            code = cli(["check", d, "--json"])
        assert code == 0, code
        n = len(json.loads(out.getvalue())["runs"])  # one run judged
    else:
        from rlvitals.readers import read

        run = read(d)
        assert run.attempts is not None and not run.warnings, run.warnings[:3]
        n = len(run.attempts)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"n": n, "seconds": dt, "peak_rss_kb": peak, "start_rss_kb": base}))


def _env() -> dict:
    # Measure what a user's install does: its modules compiled once (a PYTHONDONTWRITEBYTECODE
    # environment would recompile rlvitals in every timed process, ~0.25 s).
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _measure(what: str, d: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", what, str(d)],
        check=True,
        capture_output=True,
        text=True,
        env=_env(),
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--attempts", type=int, default=1_000_000)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=2, help="timed runs of each; the best is kept")
    ap.add_argument("--keep", default=None, help="generate into this directory and keep it")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return 0

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="rlvitals-bench-"))
    d = tmp / "run"
    try:
        if d.exists():
            shutil.rmtree(d)
        t0 = time.perf_counter()
        generate(d, args.attempts, args.steps)
        size = (d / "rollouts.jsonl").stat().st_size
        steps_size = (d / "steps.jsonl").stat().st_size
        print(
            f"generated {args.attempts:,} attempts / {args.steps:,} steps in "
            f"{time.perf_counter() - t0:.1f}s: rollouts.jsonl {size / 1e6:.0f} MB, "
            f"steps.jsonl {steps_size / 1e6:.1f} MB"
        )
        raw_decode(d)  # warm the page cache for both sides
        subprocess.run(  # compile rlvitals' modules once, as a first run of a user's would
            [
                sys.executable,
                "-c",
                "import rlvitals.cli, rlvitals.checks, rlvitals.readers;"
                "rlvitals.readers.formats(); rlvitals.checks.verdict.check_functions()",
            ],
            check=True,
            env=_env(),
        )

        # Interleaved, so that a neighbour's load on a shared machine falls on every side alike.
        raws, ours, checks = [], [], []
        for _ in range(args.repeat):
            raws.append(_measure("raw", d))
            ours.append(_measure("ours", d))
            checks.append(_measure("check", d))
        check = min(checks, key=lambda m: m["seconds"])
        raw = min(raws, key=lambda m: m["seconds"])
        our = min(ours, key=lambda m: m["seconds"])
        assert our["n"] == args.attempts and raw["n"] == args.attempts + args.steps, (our, raw)
        ratio = raw["seconds"] / our["seconds"]
        print(
            f"raw msgspec decode of steps.jsonl and rollouts.jsonl, line by line: {raw['seconds']:.2f}s "
            f"({size / 1e6 / raw['seconds']:.0f} MB/s), peak RSS {raw['peak_rss_kb'] / 1024:.0f} MB"
        )
        print(
            f"rlvitals ingest of the run (steps + attempts table): {our['seconds']:.2f}s "
            f"({size / 1e6 / our['seconds']:.0f} MB/s), peak RSS {our['peak_rss_kb'] / 1024:.0f} MB "
            f"(process start {our['start_rss_kb'] / 1024:.0f} MB)"
        )
        print(f"speed ratio ours / raw decode: {ratio:.2f} (target >= 0.70)")
        e2e = raw["seconds"] / check["seconds"]
        print(
            f"end to end, `rlvitals check RUN` (read and every check): {check['seconds']:.2f}s, "
            f"peak RSS {check['peak_rss_kb'] / 1024:.0f} MB; ratio to the raw decode "
            f"{e2e:.2f} (target >= 0.70)"
        )
        rounds = [
            (r["seconds"] / o["seconds"], r["seconds"] / c["seconds"])
            for r, o, c in zip(raws, ours, checks)
        ]
        print(
            "per round (raw, ours, check run back to back), median ratio: ingest "
            f"{statistics.median(x for x, _ in rounds):.2f}, end to end "
            f"{statistics.median(y for _, y in rounds):.2f} over {len(rounds)} rounds"
        )
        print(f"peak memory: {our['peak_rss_kb'] / 1024:.0f} MB (target < 500 MB)")

        # Live: a reader that has read everything, then 1,000 new steps arrive.
        from rlvitals.readers import open_reader

        reader = open_reader(d)
        t0 = time.perf_counter()
        reader.poll()
        full = time.perf_counter() - t0
        before = size + steps_size
        new_steps = 1000
        generate(d, args.attempts // args.steps * new_steps, new_steps, first_step=args.steps)
        after = (d / "rollouts.jsonl").stat().st_size + (d / "steps.jsonl").stat().st_size
        t0 = time.perf_counter()
        reader.poll()
        inc = time.perf_counter() - t0
        t0 = time.perf_counter()
        reader.poll()  # nothing new
        idle = time.perf_counter() - t0
        assert len(reader.run.attempts) == args.attempts // args.steps * (args.steps + new_steps)
        share = (after - before) / after
        print(
            f"live: full read {full:.2f}s; poll after {new_steps:,} new steps "
            f"({(after - before) / 1e6:.0f} MB, {share:.1%} of the bytes) {inc:.2f}s = "
            f"{inc / full:.1%} of a full read; poll with nothing new {idle * 1e3:.1f} ms"
        )
        return 0 if min(ratio, e2e) >= 0.7 and our["peak_rss_kb"] / 1024 < 500 else 1
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
