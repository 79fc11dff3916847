"""Values read back over the reader corpus (tests/data/*/*.expect.json), per format.

For each fixture, the values its expectation names are read back twice: by the reader that
sniffing picks (the format the fixture must be read as), and by the generic console reader that
reads records by shape (``--from console``), which is what a log of an unknown framework gets.
The console column counts a value as read back when the expectation's name is present (a
canonical name where the console's mapping produced it, else the source key, found through
``run.original`` of the sniffed read). Non-text fixtures (TensorBoard event files, JSONL/CSV
tables, a trainer_state.json directory) have no console column.

With ``--speed``, a verl console log of N steps (one ``step:N - key:value`` line of 40 keys
and a plain log line per step) is read by the verl reader and by the console reader in the same
run: lines per second of each and their ratio (the cost of reading by shape).

    python benchmarks/readers.py [--json] [--speed [--steps N]]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rlvitals.errors import RlvitalsError  # noqa: E402
from rlvitals.model import RunData  # noqa: E402
from rlvitals.readers import read  # noqa: E402

DATA = ROOT / "tests" / "data"
TEXT = (".log", ".txt", ".md", ".html", ".out", ".ipynb")


def _want(v: float | str) -> float:
    if isinstance(v, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[v]
    return float(v)


def _same(got: float | None, want: float, rel: float) -> bool:
    if got is None:
        return False
    if math.isnan(want):
        return math.isnan(got)
    return got == want or math.isclose(got, want, rel_tol=rel, abs_tol=1e-12)


def _count(run: RunData | None, values: dict, rel: float, names: dict[str, str]) -> int:
    if run is None:
        return 0
    n = 0
    for name, points in values.items():
        s = run.series(name)
        if s is None and name in names:
            s = run.series(names[name])  # the source key the canonical name came from
        for step, value in points:
            n += s is not None and _same(s.at(step), _want(value), rel)
    return n


def _read(path: Path, fmt: str | None, mapping: Path | None) -> RunData | None:
    try:
        return read(path, fmt, mapping=mapping)
    except (RlvitalsError, OSError, ValueError):
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    ap.add_argument("--speed", action="store_true", help="time the console reader vs verl's")
    ap.add_argument("--steps", type=int, default=5000, help="steps of the --speed log")
    args = ap.parse_args(argv)
    if args.speed:
        return speed(args.steps)
    rows: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    t0 = time.perf_counter()
    for spec_path in sorted(DATA.glob("*/*.expect.json")):
        spec = json.loads(spec_path.read_text())
        path = spec_path.parent / spec["path"]
        mapping = spec_path.parent / spec["mapping"] if "mapping" in spec else None
        values = spec.get("values", {})
        rel = spec.get("rel", 1e-9)
        expected = sum(len(p) for p in values.values())
        run = _read(path, None, mapping)
        row = rows[spec_path.parent.name]
        row["fixtures"] += 1
        row["expected"] += expected
        row["read"] += _count(run, values, rel, {})
        row["sniffed_right"] += run is not None and run.format == spec["format"]
        if path.is_file() and path.suffix in TEXT:
            names = dict(run.original) if run is not None else {}
            row["console_expected"] += expected
            row["console_read"] += _count(_read(path, "console", mapping), values, rel, names)
    seconds = time.perf_counter() - t0
    table = [{"format": name, **{k: int(v) for k, v in r.items()}} for name, r in rows.items()]
    if args.json:
        print(json.dumps({"formats": table, "seconds": round(seconds, 2)}, indent=2))
        return 0
    head = ["format", "fixtures", "sniffed right", "values read / expected", "by shape (console)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    tot: dict[str, float] = defaultdict(float)
    for r in table:
        for k, v in r.items():
            if k != "format":
                tot[k] += v
        console = (
            f"{r.get('console_read', 0)} / {r['console_expected']}"
            if r.get("console_expected")
            else "-"
        )
        lines.append(
            f"| {r['format']} | {r['fixtures']} | {r['sniffed_right']} | "
            f"{r['read']} / {r['expected']} | {console} |"
        )
    lines.append(
        f"| **all** | {int(tot['fixtures'])} | {int(tot['sniffed_right'])} | "
        f"{int(tot['read'])} / {int(tot['expected'])} | "
        f"{int(tot['console_read'])} / {int(tot['console_expected'])} |"
    )
    print("\n".join(lines))
    print(f"\n{len(table)} formats, {int(tot['fixtures'])} fixtures, read in {seconds:.2f} s")
    return 0


def speed(steps: int) -> int:
    """Lines per second of the verl reader and of the console reader on one verl log."""
    import random
    import tempfile

    rng = random.Random(0)
    keys = [f"actor/k{i}" for i in range(36)] + [
        "critic/score/mean",
        "actor/entropy",
        "response_length/mean",
        "timing_s/step",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.log"
        with open(path, "w") as f:
            for s in range(1, steps + 1):
                pairs = " - ".join(f"{k}:{rng.random():.4f}" for k in keys)
                f.write(f"(TaskRunner pid=7) step:{s} - {pairs}\n")
                f.write(f"(TaskRunner pid=7) INFO 12-01 10:00:00 worker.py:88] step {s} done\n")
        lines = 2 * steps
        out = {}
        for fmt in ("verl", "console"):
            t0 = time.perf_counter()
            run = read(path, fmt)
            dt = time.perf_counter() - t0
            assert len(run.steps()) == steps, (fmt, len(run.steps()))
            out[fmt] = dt
            print(f"{fmt:8s} {lines:7d} lines in {dt:6.2f} s = {lines / dt:8.0f} lines/s")
        print(f"console / verl time: {out['console'] / out['verl']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
