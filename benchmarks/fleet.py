"""A fleet of runs: judged with --jobs 1 and --jobs 2, exported to Parquet, queried.

    python benchmarks/fleet.py [--runs 1000] [--steps 1000] [--keep DIR]
    python benchmarks/fleet.py --jobs-only [--small 200x60] [--large 300x1000] [--repeat 3]

Makes ``--runs`` healthy-looking runs of ``--steps`` updates each in our format (the step
records of benchmarks/check_speed.py), then times, each in a fresh process so its peak RSS is
its own:

- ``rlvitals check DIR --json`` with ``--jobs 1`` and ``--jobs 2`` (the ratio is the speed-up;
  on two shared cores it cannot pass 2);
- with ``--jobs-only``: ``--jobs 2`` against ``--jobs 1`` on a small fleet (a few seconds of
  work, where ``--jobs`` keeps to one process) and a large one, the two measured alternately
  ``--repeat`` times; the median of the per-round ratios, with the load average (other
  processes on the cores change the wall clock; alternating shares it between both sides);
- ``rlvitals export DIR -o OUT --jobs 2``;
- one aggregate query over the exported ``steps`` (``rlvitals query OUT ...``) against the same
  query in DuckDB reading the raw ``steps.jsonl`` files directly (``read_json_auto``), the
  baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

SQL = (
    'SELECT count(*) AS n, avg("reward/mean") AS reward, max("train/mismatch_kl") AS kl FROM steps'
)


def make_fleet(root: Path, runs: int, steps: int) -> None:
    from check_speed import make_run

    for i in range(runs):
        d = make_run(root, steps, seed=i)
        d.rename(root / f"run-{i:05d}")


def timed(argv: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) of the child and its stdout."""
    code = (
        "import resource, subprocess, sys, time, json\n"
        "t=time.perf_counter(); p=subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "s=time.perf_counter()-t\n"
        "m=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024\n"
        "print(json.dumps({'s': s, 'mb': m, 'rc': p.returncode, 'out': p.stdout[-4000:], "
        "'err': p.stderr[-2000:]}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    res = json.loads(out.stdout)
    if res["rc"] not in (0, 1):
        raise SystemExit(f"{argv}: exit {res['rc']}: {res['err']}")
    return res["s"], res["mb"], res["out"]


def query_times(fleet: Path, out: Path, repeat: int = 3) -> tuple[float, float, int]:
    """The same aggregate in one DuckDB process: over the exported Parquet (the views
    ``rlvitals query`` makes) and over the raw steps.jsonl files; best of ``repeat``."""
    code = f"""
import json, sys, time, duckdb
from rlvitals.fleet.sql import connect
con = connect({str(out)!r})
glob = {str(fleet / "*" / "steps.jsonl")!r}.replace("'", "''")
duckdb.sql("SET enable_progress_bar = false")
raw = {SQL!r}.replace("FROM steps", f"FROM read_json_auto('{{glob}}', format = 'newline_delimited')")
def best(run):
    times = []
    for _ in range({repeat}):
        t = time.perf_counter(); r = run(); times.append(time.perf_counter() - t)
    return min(times), r
a, ra = best(lambda: con.execute({SQL!r}).fetchall())
b, rb = best(lambda: duckdb.sql(raw).fetchall())
assert ra[0][0] == rb[0][0], (ra, rb)
print(json.dumps([a, b, ra[0][0]]))
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    a, b, n = json.loads(res.stdout.strip().splitlines()[-1])
    return a, b, n


def jobs_only(root: Path, small: str, large: str, repeat: int) -> None:
    """--jobs 2 against --jobs 1 on a small and a large fleet, alternately."""
    import statistics

    rl = [sys.executable, "-m", "rlvitals", "check"]
    for label, shape in (("small", small), ("large", large)):
        runs, steps = (int(x) for x in shape.split("x"))
        fleet = root / f"fleet-{runs}x{steps}"
        if not fleet.is_dir():
            fleet.mkdir(parents=True)
            make_fleet(fleet, runs, steps)
        size = sum(f.stat().st_size for f in fleet.rglob("*") if f.is_file()) / 1e6
        ratios, ones, twos, loads = [], [], [], []
        for _ in range(repeat):
            loads.append(os.getloadavg()[0])
            one, _, out1 = timed([*rl, str(fleet), "--json", "--jobs", "1"])
            two, _, out2 = timed([*rl, str(fleet), "--json", "--jobs", "2"])
            assert out1 == out2, "--jobs 2 printed other findings than --jobs 1"
            ones.append(one)
            twos.append(two)
            ratios.append(one / two)
        print(
            f"{label} fleet, {runs} runs x {steps} updates ({size:,.0f} MB): --jobs 1 "
            f"{statistics.median(ones):.1f} s, --jobs 2 {statistics.median(twos):.1f} s (medians); "
            f"--jobs 2 speed-up {statistics.median(ratios):.2f}x (median of {repeat} alternated "
            f"rounds: {', '.join(f'{r:.2f}' for r in ratios)}); load average "
            f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--keep", metavar="DIR", help="make the fleet here and keep it")
    ap.add_argument("--jobs-only", action="store_true", help="only --jobs 2 against --jobs 1")
    ap.add_argument("--small", default="200x60", help="small fleet, RUNSxSTEPS (200x60)")
    ap.add_argument("--large", default="300x1000", help="large fleet, RUNSxSTEPS (300x1000)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.jobs_only:
        root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="rlvitals-fleet-"))
        try:
            jobs_only(root, args.small, args.large, args.repeat)
        finally:
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
        return
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="rlvitals-fleet-"))
    fleet, out = tmp / "runs", tmp / "tables"
    try:
        if not fleet.is_dir():
            fleet.mkdir(parents=True)
            t0 = time.perf_counter()
            make_fleet(fleet, args.runs, args.steps)
            print(
                f"made {args.runs} runs x {args.steps} updates in {time.perf_counter() - t0:.0f} s"
            )
        size = sum(f.stat().st_size for f in fleet.rglob("*") if f.is_file()) / 1e6
        rl = [sys.executable, "-m", "rlvitals"]
        rows = []
        for jobs in (1, 2):
            s, mb, _ = timed([*rl, "check", str(fleet), "--json", "--jobs", str(jobs)])
            rows.append((f"check --jobs {jobs}", s, mb))
            print(f"check --jobs {jobs}: {s:.1f} s, {mb:.0f} MB", flush=True)
        shutil.rmtree(out, ignore_errors=True)
        s, mb, _ = timed([*rl, "export", str(fleet), "-o", str(out), "--jobs", "2"])
        rows.append(("export --jobs 2", s, mb))
        print(f"export: {s:.1f} s, {mb:.0f} MB", flush=True)
        s, mb, _ = timed([*rl, "query", str(out), SQL, "--json"])
        rows.append(("rlvitals query (command, wall)", s, mb))
        q_parquet, q_raw, n = query_times(fleet, out)
        print(f"query {n} rows: Parquet {q_parquet:.3f} s | DuckDB on raw JSONL {q_raw:.3f} s")
        print()
        print(f"{args.runs} runs x {args.steps} updates ({size:,.0f} MB of run files)")
        print()
        print("| step | seconds | peak MB |")
        print("|---|---:|---:|")
        for name, sec, peak in rows:
            print(f"| {name} | {sec:.2f} | {peak:.0f} |")
        c1, c2 = rows[0][1], rows[1][1]
        print(f"\ncheck speed-up --jobs 2 / --jobs 1: {c1 / c2:.2f}x")
        print(f"per run (--jobs 1): {1000 * c1 / args.runs:.0f} ms")
        print(
            f"the query over exported Parquet: {q_parquet:.3f} s; DuckDB on the raw JSONL: "
            f"{q_raw:.3f} s ({q_raw / q_parquet:.1f}x)"
        )
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
