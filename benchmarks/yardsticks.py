"""The project's two speed yardsticks, measured exactly as ``../shared/bench/README.md`` writes
them: rlvitals against a raw parse of the same bytes, each a fresh process, in the same run.

    python benchmarks/yardsticks.py [--rounds 5] [--work DIR] [--only ingest|traced]
    python benchmarks/yardsticks.py --same-generator     # our copy of the generator == shared

**Ingest.** ``gen_run.py DIR 10000`` (10,000 steps x 13 groups x 8 attempts: 1,040,000
attempts, ~390 MB; the shared generator when ``../shared/bench/gen_run.py`` is there, else its
copy ``_gen_run.py``). raw: a fresh ``python`` process that reads ``steps.jsonl`` and
``rollouts.jsonl`` line by line and decodes every line with a ``msgspec.json.Decoder()``'s
``decode`` (one decoder made once: the faster reading of the yardstick), building and dropping
each record. rlvitals: ``rlvitals check DIR --json`` as a process. The figure: raw time /
check time (goal >= 0.7) and check's peak RSS (``/usr/bin/time -f %M``; goal < 500 MB).

**A traced run.** ``trace = "full"``, 200 updates x 64 groups x 4 attempts, short transcripts
whose replies repeat as a trained policy's do (``_traced.write_traced``, the shape of the
reference trainer's). raw: every file of the run decoded with msgspec, JSON Lines line by
line and JSON files whole. rlvitals: ``rlvitals check DIR --json``. The figure: check time /
raw time (goal <= 4).

Both sides are processes timed by their wall clock (interpreter start and imports included, as
a user waits for them). The page cache is warmed by one untimed run of each side first; then
the sides alternate, ``--rounds`` times, so a neighbour's load on a shared machine falls on
both alike. Printed: each side's min and median, the ratio of the mins and the median of the
per-round ratios, peak RSS, and the load average (1 min) at each round. The runs are kept in
``--work`` (default: ``$TMPDIR/rlvitals-yardsticks``) and made again only when missing.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED_GEN = ROOT.parent / "shared" / "bench" / "gen_run.py"

RAW = """
import sys
from pathlib import Path

import msgspec

dec = msgspec.json.Decoder()
n = 0
for name in sys.argv[1:]:
    p = Path(name)
    if p.suffix == ".jsonl":
        with open(p, "rb") as f:
            for line in f:
                if line.strip():
                    dec.decode(line)
                    n += 1
    else:
        dec.decode(p.read_bytes())
        n += 1
print(n)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    # What a user's install does: modules compiled once, not in every timed process.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _timed(argv: list[str]) -> dict[str, Any]:
    """Wall seconds and peak RSS (MB) of one process."""
    t0 = time.perf_counter()
    p = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *argv],
        env=_env(),
        capture_output=True,
        text=True,
    )
    dt = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv[:4])}...: exit {p.returncode}: {p.stderr[-2000:]}")
    rss_kb = int(p.stderr.strip().splitlines()[-1])
    return {"seconds": dt, "rss_mb": rss_kb / 1024, "stdout": p.stdout}


def generate_ingest(d: Path, steps: int) -> None:
    gen = SHARED_GEN if SHARED_GEN.is_file() else HERE / "_gen_run.py"
    print(f"generating {d} with {gen} ({steps} steps) ...", flush=True)
    subprocess.run([sys.executable, str(gen), str(d), str(steps)], check=True)


def generate_traced(d: Path, updates: int) -> None:
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT / "src"))
    from _traced import write_traced

    print(f"generating {d} ({updates} updates x 64 groups x 4 attempts, traced) ...", flush=True)
    write_traced(d.parent, updates, tasks=64, group=4, name=d.name)


def _files(d: Path) -> list[str]:
    """Every file of a run (the raw side decodes each)."""
    return sorted(str(p) for p in d.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))


def measure(name: str, run: Path, raw_files: list[str], rounds: int) -> dict[str, Any]:
    """Alternate raw and check ``rounds`` times (after one untimed warm-up of each)."""
    raw_cmd = [sys.executable, "-c", RAW, *raw_files]
    check_cmd = [sys.executable, "-m", "rlvitals", "check", str(run), "--json"]
    n = int(_timed(raw_cmd)["stdout"].strip())
    out = json.loads(_timed(check_cmd)["stdout"])
    verdict = out["runs"][0].get("verdict")
    rows = []
    for i in range(rounds):
        load = os.getloadavg()[0]
        raw, check = _timed(raw_cmd), _timed(check_cmd)
        rows.append({"load": load, "raw": raw["seconds"], "check": check["seconds"],
                     "check_rss_mb": check["rss_mb"], "raw_rss_mb": raw["rss_mb"]})  # fmt: skip
        print(
            f"  {name} round {i + 1}: load {load:.2f}  raw {raw['seconds']:.2f} s  check "
            f"{check['seconds']:.2f} s ({check['rss_mb']:.0f} MB)",
            flush=True,
        )
    return {"records": n, "verdict": verdict, "rows": rows}


def _report(name: str, m: dict[str, Any], *, inverse: bool) -> None:
    rows = m["rows"]
    raw = [r["raw"] for r in rows]
    chk = [r["check"] for r in rows]
    ratio = [(c / r) if inverse else (r / c) for r, c in zip(raw, chk)]
    best = (min(chk) / min(raw)) if inverse else (min(raw) / min(chk))
    what = "check / raw (goal <= 4)" if inverse else "raw / check (goal >= 0.7)"
    loads = [r["load"] for r in rows]
    print(
        f"{name}: {m['records']:,} records decoded raw; verdict {m['verdict']}\n"
        f"  raw    min {min(raw):.2f} s  median {statistics.median(raw):.2f} s\n"
        f"  check  min {min(chk):.2f} s  median {statistics.median(chk):.2f} s  peak RSS "
        f"{max(r['check_rss_mb'] for r in rows):.0f} MB (raw {max(r['raw_rss_mb'] for r in rows):.0f} MB)\n"
        f"  {what}: of the mins {best:.2f}; per round min {min(ratio):.2f} median "
        f"{statistics.median(ratio):.2f} max {max(ratio):.2f}\n"
        f"  load average (1 min) over the rounds: {min(loads):.2f}-{max(loads):.2f}",
        flush=True,
    )


def same_generator(work: Path) -> int:
    if not SHARED_GEN.is_file():
        print(f"{SHARED_GEN} is not here: nothing to compare")
        return 0
    a, b = work / "gen-shared" / "run", work / "gen-copy" / "run"  # (run.json names the folder)
    subprocess.run([sys.executable, str(SHARED_GEN), str(a), "300"], check=True)
    subprocess.run([sys.executable, str(HERE / "_gen_run.py"), str(b), "300"], check=True)
    names = ["run.json", "steps.jsonl", "rollouts.jsonl"]
    _match, mismatch, errors = filecmp.cmpfiles(a, b, names, shallow=False)
    print("same bytes" if not (mismatch or errors) else f"differ: {mismatch + errors}")
    return 1 if mismatch or errors else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--work", type=Path, default=Path(tempfile.gettempdir()) / "rlvitals-yardsticks"
    )
    ap.add_argument("--only", choices=["ingest", "traced"], default=None)
    ap.add_argument("--steps", type=int, default=10_000, help="ingest run's steps (10,000)")
    ap.add_argument("--updates", type=int, default=200, help="traced run's updates (200)")
    ap.add_argument("--same-generator", action="store_true")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.same_generator:
        return same_generator(args.work)
    ok = True
    if args.only in (None, "ingest"):
        big = args.work / f"big-{args.steps}"
        if not (big / "rollouts.jsonl").is_file():
            generate_ingest(big, args.steps)
        files = [str(big / "steps.jsonl"), str(big / "rollouts.jsonl")]
        m = measure("ingest", big, files, args.rounds)
        _report("ingest", m, inverse=False)
        rows = m["rows"]
        ok &= min(r["raw"] for r in rows) / min(r["check"] for r in rows) >= 0.7
        ok &= max(r["check_rss_mb"] for r in rows) < 500
    if args.only in (None, "traced"):
        traced = args.work / f"traced-{args.updates}"
        if not (traced / "rollouts.jsonl").is_file():
            generate_traced(traced, args.updates)
        m = measure("traced", traced, _files(traced), args.rounds)
        _report("traced", m, inverse=True)
        rows = m["rows"]
        ok &= min(r["check"] for r in rows) / min(r["raw"] for r in rows) <= 4
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
