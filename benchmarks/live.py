"""Live replay of healthy runs: what a user watching each one grow would have been told.

    python benchmarks/live.py [--every 10] [--past 20] [--no-corpus] [--no-wild]
        [--wild DIR] [--families N] [--only TEXT] [--json FILE]

Every run labelled healthy is replayed as prefixes every ``--every`` updates (its first 10,
20, 30, ... step records: ``RunData.until`` at the step of that record, judged at the time
that record was written: the run's own step time, else its files' time), as ``rlvitals
check`` on a file cut there, just written, would judge it. A prefix of a healthy run raises nothing at warn or worse (DESIGN.md,
"Judging principles"); every prefix past ``--past`` updates that does is listed with the
findings that did, and counted:

- the development corpus, ``benchmarks/corpus/manifest.toml``: runs labelled ``healthy``;
- the wild corpus, ``../shared/corpus/wild/manifest.json`` (read in place): files with a
  ``healthy`` label;
- with ``--families N``, N healthy runs of each healthy family of the generator
  (``benchmarks/_families.py``; ``benchmarks/families.py`` scores them in full).

The finished run is judged too (the last prefix is the whole run) and reported apart: a
warning there is a false alarm of the finished judgement, not of the live one.
Exit status 1 when any prefix past ``--past`` raises a warning.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

RANK = {"ok": 0, "info": 1, "warn": 2, "fail": 3}


def corpus_runs(only: str | None = None) -> Iterator[tuple[str, Any]]:
    """The development corpus's healthy runs: (name, a loader of its RunData)."""
    from _corpus import load_manifest, read_entry

    for entry in load_manifest():
        if entry["label"] != "healthy" or (only and only not in entry["path"]):
            continue
        yield f"corpus/{entry['path']}", (lambda e=entry: read_entry(e))


def wild_runs(root: Path, only: str | None = None) -> Iterator[tuple[str, Any]]:
    """The wild corpus's files labelled healthy, read as ``rlvitals check FILE`` reads them."""
    from _wild import label_name, load
    from rlvitals.readers import read

    if not (root / "manifest.json").is_file():
        return
    for entry in load(root):
        if "healthy" not in {label_name(lab) for lab in entry["labels"]}:
            continue
        if only and only not in entry["path"]:
            continue
        yield f"wild/{entry['path']}", (lambda p=root / entry["path"]: read(p))


def family_runs(n: int, only: str | None = None) -> Iterator[tuple[str, Any]]:
    """``n`` runs (seeds 0..n-1) of each healthy family of the generator (``_families.py``)."""
    import _families

    for family in _families.HEALTHY:
        for seed in range(n):
            name = f"{family}-s{seed}"
            if only and only not in name:
                continue
            yield f"families/{name}", (lambda f=family, s=seed: _families.make(f, s)[0])


def _now(data: Any, step: int) -> float | None:
    """The time the prefix is judged at: when its last record was written. A run that logs
    its step times gives it; otherwise the run's files' own time (they were written as the
    records came), never the clock, which would read a file saved long ago as a silence."""
    times = data.series("time")
    if times is not None and len(times):
        got = times.at(step)
        if got is not None:
            return float(got)
    return _written(data.source)


def _written(source: str) -> float | None:
    """When the run's files last changed (the newest file of a run folder)."""
    try:
        if os.path.isdir(source):
            stamps = [e.stat().st_mtime for e in os.scandir(source) if e.is_file()]
            return max(stamps) if stamps else None
        return os.path.getmtime(source)
    except OSError:
        return None


def replay(data: Any, every: int, past: int) -> dict[str, Any]:
    """Judge ``data`` at every ``every``-th step record and at its end: per prefix, its size,
    its last step, the run's verdict and its warn-or-worse findings."""
    from rlvitals.checks import run_checks

    steps = [int(s) for s in data.steps().tolist()]
    sizes = [*range(every, len(steps), every), len(steps)]
    prefixes = []
    for n in sizes:
        k = steps[n - 1]
        part = data if n == len(steps) else data.until(k)
        rep = run_checks(part, now=_now(data, k))
        alarms = [
            {
                "severity": f.severity,
                "check": f.check,
                "verdict": f.verdict,
                "first_step": f.first_step,
                "title": f.title,
            }
            for f in rep.findings
            if RANK[f.severity] >= 2
        ]
        prefixes.append(
            {
                "updates": n,
                "step": k,
                "final": n == len(steps),
                "verdict": rep.verdict,
                "alarms": alarms,
            }
        )
    live = [p for p in prefixes if not p["final"] and p["updates"] > past]
    return {
        "updates": len(steps),
        "prefixes": prefixes,
        "live_judged": len(live),
        "live_alarmed": sum(bool(p["alarms"]) for p in live),
        "final_alarms": prefixes[-1]["alarms"] if prefixes else [],
        "final_verdict": prefixes[-1]["verdict"] if prefixes else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every", type=int, default=10, help="updates between prefixes (10)")
    ap.add_argument("--past", type=int, default=20, help="prefixes past this many updates count")
    ap.add_argument("--no-corpus", action="store_true", help="skip benchmarks/corpus")
    ap.add_argument("--no-wild", action="store_true", help="skip the wild corpus")
    ap.add_argument("--wild", type=Path, default=HERE.parent.parent / "shared" / "corpus" / "wild")
    ap.add_argument("--families", type=int, default=0, help="healthy runs per family (0: none)")
    ap.add_argument("--only", help="only runs whose name contains this")
    ap.add_argument("--json", type=Path, help="write every prefix's result here")
    args = ap.parse_args(argv)

    sources: list[Iterator[tuple[str, Any]]] = []
    if not args.no_corpus:
        sources.append(corpus_runs(args.only))
    if not args.no_wild:
        sources.append(wild_runs(args.wild, args.only))
    if args.families:
        sources.append(family_runs(args.families, args.only))
    results: dict[str, Any] = {}
    t0 = time.perf_counter()
    for source in sources:
        for name, load in source:
            try:
                data = load()
            except Exception as exc:  # a reader gap is reported, never stops the replay
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
                print(f"{name}: not read: {exc}", file=sys.stderr)
                continue
            res = replay(data, args.every, args.past)
            results[name] = res
            _print_run(name, res, args.past)
    _print_totals(results, args.past, time.perf_counter() - t0)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 1 if any(r.get("live_alarmed") for r in results.values()) else 0


def _print_run(name: str, res: dict[str, Any], past: int) -> None:
    print(
        f"{name}: {res['updates']} updates, {res['live_alarmed']}/{res['live_judged']} prefixes "
        f"past {past} alarmed; finished: {res['final_verdict']}"
        + (f", {len(res['final_alarms'])} warn-or-worse" if res["final_alarms"] else "")
    )
    for p in res["prefixes"]:
        if not p["alarms"] or (p["updates"] <= past and not p["final"]):
            continue
        where = "finished" if p["final"] else f"first {p['updates']} (step {p['step']})"
        for a in p["alarms"]:
            print(
                f"    {where}: {a['severity']} {a['check']} {a['verdict']} "
                f"@{a['first_step']}: {a['title'][:160]}"
            )


def _print_totals(results: dict[str, Any], past: int, seconds: float) -> None:
    runs = [r for r in results.values() if "error" not in r]
    judged = sum(r["live_judged"] for r in runs)
    alarmed = sum(r["live_alarmed"] for r in runs)
    runs_alarmed = sum(bool(r["live_alarmed"]) for r in runs)
    final = sum(bool(r["final_alarms"]) for r in runs)
    errors = len(results) - len(runs)
    print(
        f"\nlive: {alarmed}/{judged} prefixes past {past} updates raise warn or fail; "
        f"{runs_alarmed}/{len(runs)} healthy runs alarm live at some point; "
        f"{final}/{len(runs)} finished runs alarm"
        + (f"; {errors} not read" if errors else "")
        + f" ({seconds:.0f} s)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
