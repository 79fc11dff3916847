"""Live replay of healthy runs: what a user watching each one grow would have been told.

    python benchmarks/live.py [--every 10] [--past 20] [--no-corpus] [--no-wild]
        [--wild DIR] [--no-reference] [--reference DIR] [--reference-seeds 0 1 2]
        [--reference-steps 40 120]
        [--no-loops] [--loops DIR] [--no-heldout] [--families N] [--only TEXT] [--json FILE]

Every run labelled healthy is replayed as prefixes every ``--every`` updates (its first 10,
20, 30, ... step records: ``RunData.until`` at the step of that record, judged at the time
that record was written: the run's own step time, else its files' time), as ``rlvitals
check`` on a file cut there, just written, would judge it. A prefix of a healthy run raises
nothing at warn or worse (DESIGN.md, "Judging principles"); every prefix past ``--past``
updates that does is listed with the findings that did, and counted, per source:

- ``corpus``: the development corpus, ``benchmarks/corpus/manifest.toml``, runs labelled
  ``healthy`` (the peers' simulators and public fragments);
- ``trl``: its real TRL 1.16 runs (``benchmarks/corpus/trl/``, made by ``make_trl.py``), apart.
  ``tests/data`` holds no TRL run past 20 updates (its TRL fixtures are one or two records
  quoted from issues, or constructed), so none is replayed from there;
- ``wild``: the wild corpus, ``../shared/corpus/wild/manifest.json`` (read in place): files
  with a ``healthy`` label;
- ``reference``: the reference trainer's healthy seeds (``--reference-seeds``, default 0 1 2,
  at the demo's default length, 40 updates, and at 120: ``--reference-steps``), made once with
  ``nice`` into ``--reference``
  (default ``~/.cache/rlvitals-bench/reference/<hash of the trainer's source>``; reused while
  it is unchanged), and the shipped async run (``tests/data/runs/grpo-async``);
- ``loops``: our own plain-PyTorch GRPO loop's healthy run (``benchmarks/loop/``, fault
  ``none``) as each of its five trackers wrote it (W&B, trackio, MLflow, TensorBoard, stdout),
  made once into ``--loops`` (``benchmarks/_loops.py``'s cache);
- ``heldout``: the held-out set's runs labelled ``healthy`` (``benchmarks/corpus/heldout``).
  Counted as they come and never tuned on: a rule is not changed for what is seen there;
- with ``--families N``, N healthy runs of each healthy family of the generator
  (``benchmarks/_families.py``; ``benchmarks/families.py`` scores them in full).

The finished run is judged too (the last prefix is the whole run) and reported apart: a
warning there is a false alarm of the finished judgement, not of the live one.
Exit status 1 when any prefix past ``--past`` raises a warning (the held-out set's excepted:
it is a measure, not a gate).
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


CACHE = Path(os.environ.get("RLVITALS_BENCH_CACHE", Path.home() / ".cache" / "rlvitals-bench"))
SOURCES = ("corpus", "trl", "wild", "reference", "loops", "heldout", "families")
# sources whose alarms are counted and shown but do not set the exit status
MEASURES = ("heldout",)

Runs = Iterator[tuple[str, str, Any]]  # (source, name, a loader of its RunData)


def corpus_runs(only: str | None = None) -> Runs:
    """The development corpus's healthy runs; its real TRL runs (``trl/``) as source ``trl``."""
    from _corpus import load_manifest, read_entry

    for entry in load_manifest():
        if entry["label"] != "healthy" or (only and only not in entry["path"]):
            continue
        source = "trl" if entry["path"].startswith("trl/") else "corpus"
        yield source, f"corpus/{entry['path']}", (lambda e=entry: read_entry(e))


def wild_runs(root: Path, only: str | None = None) -> Runs:
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
        yield "wild", f"wild/{entry['path']}", (lambda p=root / entry["path"]: read(p))


def heldout_runs(root: Path, only: str | None = None) -> Runs:
    """The held-out set's runs labelled healthy (by its own ``label.py``), read as ``rlvitals
    check FILE`` reads them. A measure: never a reason to change a rule."""
    from rlvitals.readers import read

    manifest = root / "manifest.json"
    if not manifest.is_file():
        return
    for entry in json.loads(manifest.read_text())["files"]:
        if not any(lab["label"] == "healthy" for lab in entry["labels"]):
            continue
        if only and only not in entry["path"]:
            continue
        yield "heldout", f"heldout/{entry['path']}", (lambda p=root / entry["path"]: read(p))


def reference_dir() -> Path:
    """Where the reference trainer's healthy runs are kept: by a hash of its source."""
    import hashlib

    import rlvitals

    grpo = Path(rlvitals.__file__).parent / "grpo"
    digest = hashlib.sha256()
    for f in sorted(grpo.rglob("*.py")):
        digest.update(f.read_bytes())
    return CACHE / "reference" / digest.hexdigest()[:10]


def make_reference(out: Path, seed: int, steps: int = 40) -> Path:
    """The reference trainer's healthy run of ``seed`` at ``steps`` updates (the demo's
    default), made once with ``nice`` in a process of its own; reused once finished."""
    import subprocess

    import rlvitals

    run = out / f"healthy-s{seed}-n{steps}"
    if (run / "run.json").is_file() and '"finished"' in (run / "run.json").read_text():
        return run
    if run.exists():  # a run cut short (interrupted): made again
        import shutil

        shutil.rmtree(run)
    out.mkdir(parents=True, exist_ok=True)
    code = (
        "import sys; from rlvitals.grpo import demo_run; "
        f"demo_run(sys.argv[1], name={run.name!r}, seed={seed}, steps={steps})"
    )
    src = str(Path(rlvitals.__file__).parents[1])
    env = dict(os.environ, PYTHONPATH=src, OMP_WAIT_POLICY="PASSIVE")
    t = time.time()
    subprocess.run(
        ["nice", "-n", "10", sys.executable, "-c", code, str(out)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=1800,
    )
    print(f"  made {run.name} in {time.time() - t:.0f} s", file=sys.stderr, flush=True)
    return run


def reference_runs(
    out: Path | None, seeds: list[int], lengths: list[int], only: str | None = None
) -> Runs:
    """The reference trainer's healthy seeds at each length (made once) and its shipped async
    run."""
    from rlvitals.readers import read

    shipped = HERE.parent / "tests" / "data" / "runs" / "grpo-async"
    if not only or only in "grpo-async":
        yield "reference", "reference/grpo-async", (lambda: read(shipped))
    where = out or reference_dir()
    for n in lengths:
        for seed in seeds:
            name = f"reference/healthy-s{seed}-n{n}"
            if only and only not in name:
                continue
            yield "reference", name, (lambda s=seed, k=n: read(make_reference(where, s, k)))


def loop_runs(out: Path | None, only: str | None = None) -> Runs:
    """Our plain-PyTorch loop's healthy run, as each of its five trackers wrote it."""
    import _loops
    from rlvitals.readers import read

    for tracker in _loops.TRACKERS:
        name = f"loops/none/{tracker}"
        if only and only not in name:
            continue

        def load(t: str = tracker) -> Any:
            run = _loops.make(out or _loops.default_dir(), "none")
            return read(_loops.sources(run)[t])

        yield "loops", name, load


def family_runs(n: int, only: str | None = None) -> Runs:
    """``n`` runs (seeds 0..n-1) of each healthy family of the generator (``_families.py``)."""
    import _families

    for family in _families.HEALTHY:
        for seed in range(n):
            name = f"{family}-s{seed}"
            if only and only not in name:
                continue
            yield "families", f"families/{name}", (lambda f=family, s=seed: _families.make(f, s)[0])


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
    ap.add_argument("--no-corpus", action="store_true", help="skip benchmarks/corpus (its TRL too)")
    ap.add_argument("--no-wild", action="store_true", help="skip the wild corpus")
    ap.add_argument("--wild", type=Path, default=HERE.parent.parent / "shared" / "corpus" / "wild")
    ap.add_argument("--no-reference", action="store_true", help="skip the reference trainer")
    ap.add_argument("--reference", type=Path, help="its runs' folder (default: the cache)")
    ap.add_argument("--reference-seeds", type=int, nargs="*", default=[0, 1, 2])
    ap.add_argument(
        "--reference-steps",
        type=int,
        nargs="*",
        default=[40, 120],
        help="their lengths in updates (40: the demo's default; 120 as families_measure.py)",
    )
    ap.add_argument("--no-loops", action="store_true", help="skip our loop's five trackers")
    ap.add_argument("--loops", type=Path, help="our loop's runs (default: the cache)")
    ap.add_argument("--no-heldout", action="store_true", help="skip the held-out set")
    ap.add_argument("--heldout", type=Path, default=HERE / "corpus" / "heldout")
    ap.add_argument("--families", type=int, default=0, help="healthy runs per family (0: none)")
    ap.add_argument("--only", help="only runs whose name contains this")
    ap.add_argument("--json", type=Path, help="write every prefix's result here")
    args = ap.parse_args(argv)

    sources: list[Runs] = []
    if not args.no_corpus:
        sources.append(corpus_runs(args.only))
    if not args.no_wild:
        sources.append(wild_runs(args.wild, args.only))
    if not args.no_reference:
        sources.append(
            reference_runs(args.reference, args.reference_seeds, args.reference_steps, args.only)
        )
    if not args.no_loops:
        sources.append(loop_runs(args.loops, args.only))
    if not args.no_heldout:
        sources.append(heldout_runs(args.heldout, args.only))
    if args.families:
        sources.append(family_runs(args.families, args.only))
    results: dict[str, Any] = {}
    t0 = time.perf_counter()
    for runs in sources:
        for source, name, load in runs:
            try:
                data = load()
            except Exception as exc:  # a reader gap is reported, never stops the replay
                results[name] = {"source": source, "error": f"{type(exc).__name__}: {exc}"}
                print(f"{name}: not read: {exc}", file=sys.stderr)
                continue
            res = {"source": source, **replay(data, args.every, args.past)}
            results[name] = res
            _print_run(name, res, args.past)
    _print_totals(results, args.past, time.perf_counter() - t0)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    gate = [r for r in results.values() if r["source"] not in MEASURES]
    return 1 if any(r.get("live_alarmed") for r in gate) else 0


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


def totals(results: dict[str, Any]) -> dict[str, int]:
    """Prefixes judged and alarmed past ``--past``, runs alarmed live and finished, not read."""
    runs = [r for r in results.values() if "error" not in r]
    return {
        "runs": len(runs),
        "judged": sum(r["live_judged"] for r in runs),
        "alarmed": sum(r["live_alarmed"] for r in runs),
        "runs_alarmed": sum(bool(r["live_alarmed"]) for r in runs),
        "final": sum(bool(r["final_alarms"]) for r in runs),
        "errors": len(results) - len(runs),
    }


def _line(t: dict[str, int], past: int) -> str:
    return (
        f"{t['alarmed']}/{t['judged']} prefixes past {past} updates raise warn or fail; "
        f"{t['runs_alarmed']}/{t['runs']} healthy runs alarm live at some point; "
        f"{t['final']}/{t['runs']} finished runs alarm"
        + (f"; {t['errors']} not read" if t["errors"] else "")
    )


def _print_totals(results: dict[str, Any], past: int, seconds: float) -> None:
    print()
    for source in SOURCES:
        part = {k: r for k, r in results.items() if r["source"] == source}
        if part:
            print(f"{source}: {_line(totals(part), past)}")
    gate = {k: r for k, r in results.items() if r["source"] not in MEASURES}
    print(f"\nlive (all but {', '.join(MEASURES)}): {_line(totals(gate), past)} ({seconds:.0f} s)")


if __name__ == "__main__":
    raise SystemExit(main())
