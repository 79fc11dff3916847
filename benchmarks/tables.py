"""Shapes drawn, not collected: at least 10,000 files of per-step metrics read back.

    python benchmarks/tables.py [--n 10000] [--seed 0] [--out FILE.json]

Each file is drawn by ``tests/tables_draw.py`` (the property test ``tests/test_tables_drawn.py``
draws from the same dimensions): a layout (JSON Lines, a JSON list of records, an object of
per-step lists, records under a section, pandas' split orient, CSV, TSV, Parquet, a markdown
table, two ASCII grids, TRL's console dicts, ``k: v`` log lines) x real metric names (the
frameworks' tables and ``tests/data/handwritten/names.toml``) x a step column (14 names, none,
one told by content, ``epoch`` with ``batch``) and cadence x a value encoding x noise lines
(tqdm bars, warnings, printed samples, config dumps) x line endings. Each is read as a user's
file is (``rlvitals.read``, sniffed) and counts as read back when every value written is read
at its step and no step is read that the file never wrote.

Prints the share read back by layout, step column, encoding and noise, every shape (layout,
step column, encoding, noise) that was misread with its first difference, and every shape that
was refused with its message. Exits 1 when a file is misread (a refusal with a message is not
a misreading, and is listed).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import tables_draw as td  # noqa: E402
from rlvitals.errors import RlvitalsError  # noqa: E402
from rlvitals.readers import read  # noqa: E402


def one(i: int, seed: int, pool: dict[str, list[str]], d: Path) -> tuple[td.Shape, str, str]:
    """Draw and read file ``i``: (shape, "read" / "misread" / "refused", detail)."""
    rng = random.Random(seed * 1_000_003 + i)
    shape = td.random_shape(rng)
    names = rng.sample(pool[shape.layout], rng.randint(1, 6))
    drawn = td.draw(rng, shape, names, rng.randint(3, 40), d)
    try:
        run = read(drawn.path)
    except RlvitalsError as exc:
        return shape, "refused", str(exc).replace(str(drawn.path), "FILE")
    wrong = td.mismatches(run, drawn)
    if wrong:
        return shape, "misread", f"{run.format}: {wrong[0]}"
    return shape, "read", ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="files to draw (default 10000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write the counts and every failed shape as JSON here")
    args = ap.parse_args(argv)
    names = td.real_names()
    pool = {layout: td.names_for(layout, names) for layout in td.LAYOUTS}
    by: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
    failed: dict[str, dict[str, Any]] = {}
    outcome: Counter[str] = Counter()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.n):
            d = Path(tmp) / str(i)
            d.mkdir()
            shape, result, detail = one(i, args.seed, pool, d)
            for path in d.iterdir():
                path.unlink()
            d.rmdir()
            outcome[result] += 1
            step = shape.step
            if step not in (*td.OTHER_STEPS, "global_step/max_steps"):
                step = "named"
            dims = [
                ("layout", shape.layout),
                ("step column", step),
                ("encoding", shape.encoding),
                ("line ending", repr(shape.ending)),
            ]
            # a file with noise counts under each kind of noise line it holds
            dims += [("noise lines", kind) for kind in shape.noise or ("none",)]
            for dim, value in dims:
                by[dim][(value, result)] += 1
            if result != "read":
                entry = failed.setdefault(
                    shape.key(), {"result": result, "files": 0, "detail": detail}
                )
                entry["files"] += 1
    took = time.perf_counter() - t0
    n = sum(outcome.values())
    print(f"{n} drawn files in {took:.0f} s: {outcome['read']} read back ({outcome['read'] / n:.2%}), "
          f"{outcome['misread']} misread, {outcome['refused']} refused")  # fmt: skip
    for dim, counts in by.items():
        print(f"\nby {dim}:")
        values = sorted({v for v, _ in counts})
        for v in values:
            total = sum(c for (w, _), c in counts.items() if w == v)
            ok = counts[(v, "read")]
            print(f"  {v:<28} {ok:>6}/{total:<6} {ok / total:7.2%}")
    for kind in ("misread", "refused"):
        rows = {k: e for k, e in failed.items() if e["result"] == kind}
        print(f"\n{kind} shapes: {len(rows)}")
        for k, e in sorted(rows.items()):
            print(f"  {k} ({e['files']} files): {e['detail'][:300]}")
    if args.out:
        doc = {
            "files": n,
            "outcome": dict(outcome),
            "seconds": round(took, 1),
            "by": {
                dim: {f"{v} {r}": c for (v, r), c in sorted(cs.items())} for dim, cs in by.items()
            },
            "failed": failed,
        }
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    return 1 if outcome["misread"] else 0


if __name__ == "__main__":
    sys.exit(main())
