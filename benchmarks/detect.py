"""Detection benchmark: the reference trainer's faults over several seeds, healthy seeds and a
long healthy run, judged by rlvitals and by rl-doctor side by side.

    python benchmarks/detect.py [--seeds 0 1 2] [--long-steps 10000] [--no-rldoctor]
    python benchmarks/detect.py --corpus [--no-rldoctor] [--no-live] [--json FILE]
        [--wild DIR | --no-wild] [--wild-only] [--loops DIR | --no-loops]

Per fault it reports the detection rate (a warn-or-worse finding with the right verdict, and
the run's verdict right), the median delay in steps from the fault's onset to the finding's
``first_step``, and the live delay: replaying the run step by step (``RunData.until``), the
first step at which a live check raised it. rl-doctor (PyPI ``rldoctor``, in its own venv)
gets the same runs in its field names; it reports no onset step, so only its live delay can be
measured (by diagnosing prefixes of the run). On healthy runs it counts warn-or-worse
findings (false alarms). Runs are kept in --out and reused with --reuse.

With ``--corpus`` it judges the development corpus instead (``benchmarks/corpus/``, runs made
by other tools: real TRL runs, the peers' simulators, public log fragments; see
``benchmarks/_corpus.py``), with a table per label and per source; then the wild corpus
(real runs users trained on GPUs, read in place from ``--wild``, default
``<repo>/../shared/corpus/wild``; scored by issue 27's rule, ``benchmarks/_wild.py``), per label
and per file; then our own plain-PyTorch GRPO loop's runs (``benchmarks/loop/``, made into
``--loops``, default the benchmark cache), each logged to five trackers.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

EXPECTED = {
    "stale_sampler": "stale_policy",
    "too_easy": "too_easy",
    "too_hard": "too_hard",
    "grader_exploit": "exploit_suspected",
    "grader_crash": "infra_failures",
    "rollout_crash": "infra_failures",
    "out_of_room": "out_of_room",
    "entropy_collapse": "collapse",
    "stall": "stalled",
    "nan": "non_finite",
    "bad_replica": "drift",
}


# The long healthy run adds three-digit numbers and keeps going once the policy has learned
# them: the unusable-groups guard is off, since a run that has mastered its tasks rejects every
# group and the guard would end it (on two digits that happens by ~2,000-3,500 updates). Its
# long mastered plateau is where checks that call a plateau a problem raise false alarms. It
# is scored on held-out tasks every 25 updates instead of 5.
LONG_OVERRIDES = {
    "task": {"digits": 3, "max_new_tokens": 10},
    # Three-digit sums need a gentler warm start: at the default 2e-3 it sat near a 0.1
    # greedy pass rate past 3,800 steps; at 1e-3 it reached 0.36 in 590 (one thread).
    "optim": {"warm_lr": 1e-3, "threads": 1},
    "output": {"sampler_checkpoint_every": 25},
    "training": {"max_consecutive_unusable_groups": 0},
}

# -- the runs --------------------------------------------------------------------------------


def make_runs(
    out: Path,
    seeds: list[int],
    faults: list[str],
    steps: int,
    healthy: list[int],
    long_steps: int,
    reuse: bool,
) -> list[dict[str, Any]]:
    from rlvitals.grpo import demo_run

    plan = [(f, s, steps) for s in seeds for f in faults]
    plan += [(None, s, steps) for s in healthy]
    if long_steps:
        plan.append((None, healthy[0] if healthy else 0, long_steps))
    runs = []
    for fault, seed, n in plan:
        name = f"{fault or 'healthy'}-s{seed}-n{n}"
        path = out / name
        if not (reuse and (path / "run.json").exists()):
            if path.exists():
                import shutil

                shutil.rmtree(path)
            t = time.time()
            over = LONG_OVERRIDES if n == long_steps and n != steps else None
            demo_run(out, name=name, fault=fault, seed=seed, steps=n, overrides=over)
            print(f"  ran {name} in {time.time() - t:.0f} s", file=sys.stderr, flush=True)
        runs.append({"fault": fault, "seed": seed, "steps": n, "path": path})
    return runs


# -- rlvitals ----------------------------------------------------------------------------------


def ours(run: dict[str, Any], live: bool = True) -> dict[str, Any]:
    from rlvitals import read
    from rlvitals.checks import run_checks, severity_rank

    data = read(run["path"])
    onset = data.info.get("fault_step")
    expected = EXPECTED.get(run["fault"] or "")
    t = time.perf_counter()
    rep = run_checks(data)
    seconds = time.perf_counter() - t
    warn = [f for f in rep.findings if severity_rank(f.severity) >= severity_rank("warn")]
    # A healthy run that masters its tasks is told to stop (the groups check's "mastered"
    # warning): expected on a run that goes on past mastery, so counted apart, not as a
    # false alarm; any other warning on a healthy run is one.
    stop = [f for f in warn if run["fault"] is None and f.verdict == "mastered"]
    warn = [f for f in warn if f not in stop]
    hits = [f for f in warn if f.verdict == expected]
    first = min((f.first_step for f in hits if f.first_step is not None), default=None)
    out = {
        "steps_run": len(data.steps()),
        "status": data.info.get("status"),
        "verdict": rep.verdict,
        "warn_findings": len(warn),
        "detected": bool(hits) and rep.verdict == expected,
        "found": bool(hits),
        "delay": None if first is None or onset is None else first - onset,
        "live_delay": None,
        "check_seconds": seconds,
        "titles": [f"{f.severity} {f.check} {f.verdict} @{f.first_step}: {f.title}" for f in warn],
        "stop_step": min((f.first_step or 0 for f in stop), default=None),
        # A healthy run is a baseline only if its warm start reached its target pass rate.
        "warm_reached": (data.info.get("warm_start") or {}).get("reached_target", True),
    }
    if live and expected and hits and onset is not None:
        out["live_delay"] = _live_delay(data, expected, onset, hits)
    return out


def _live_delay(data: Any, expected: str, onset: int, hits: list[Any]) -> int | None:
    """Steps after the onset at which a live check first raised the right verdict."""
    from rlvitals.checks import run_checks, severity_rank

    if expected == "stalled":
        # Nothing more is written after a stall: a live check raises it once the silence
        # passes its limit, counted here in typical steps.
        ev = hits[0].evidence
        limit, typical = ev.get("limit_seconds"), ev.get("typical_step_seconds")
        if limit and typical:
            return math.ceil(limit / typical)
        return None
    steps = data.steps()
    times = data.series("time")
    for k in steps[steps >= onset].tolist():
        now = times.at(k) if times is not None else None
        rep = run_checks(data.until(k), now=now)
        if any(f.verdict == expected and severity_rank(f.severity) >= 2 for f in rep.findings):
            return int(k - onset)
    return None


# -- rl-doctor ---------------------------------------------------------------------------------


def theirs(run: dict[str, Any], tmp: Path, live: bool) -> dict[str, Any]:
    from _rldoctor import diagnose, first_raised, to_rldoctor_jsonl
    from _rldoctor import their_hits as _their_hits

    full = to_rldoctor_jsonl(run["path"], tmp / f"{run['path'].name}.jsonl")
    t = time.perf_counter()
    res = diagnose(full)
    seconds = time.perf_counter() - t
    expected = EXPECTED.get(run["fault"] or "")
    if "error" in res:
        return {"error": res["error"], "detected": False, "warn_findings": 0, "live_delay": None}
    hits = _their_hits(res)
    # The same on rl-doctor's side: its saturation warning on a healthy run is the "stop".
    stop = [h for h in hits if run["fault"] is None and h in ("too_easy", "mastered")]
    out = {
        "detected": expected in hits,
        "warn_findings": len(hits) - len(stop),
        "stop": bool(stop),
        "verdicts": hits,
        "live_delay": None,
        "seconds": seconds,
    }
    onset = json.loads((run["path"] / "run.json").read_text()).get("fault_step")
    if live and out["detected"] and onset is not None:
        lines = full.read_text().splitlines()
        steps = [json.loads(x)["step"] for x in lines]

        def raised(k: int) -> bool:
            part = tmp / f"{run['path'].name}.upto.jsonl"
            part.write_text("\n".join(x for x, s in zip(lines, steps) if s <= k) + "\n")
            return expected in _their_hits(diagnose(part))

        first = first_raised(range(onset, max(steps) + 1), raised)
        if first is not None:
            out["live_delay"] = first - onset
    return out


# -- report ------------------------------------------------------------------------------------


def _median(xs: list[int | None]) -> str:
    vals = [x for x in xs if x is not None]
    return f"{statistics.median(vals):g}" if vals else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--healthy-seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--faults", nargs="+", default=list(EXPECTED))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument(
        "--long-steps", type=int, default=10_000, help="one healthy run this long (0: none)"
    )
    ap.add_argument("--no-rldoctor", action="store_true")
    ap.add_argument("--no-live", action="store_true", help="skip the live-replay delays")
    ap.add_argument("--out", type=Path, default=None, help="keep runs here (default: temp)")
    ap.add_argument("--reuse", action="store_true", help="reuse runs already in --out")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument(
        "--corpus", action="store_true", help="judge benchmarks/corpus/ (other tools' runs)"
    )
    ap.add_argument("--only", default=None, help="with --corpus: runs whose path contains this")
    ap.add_argument("--wild", type=Path, default=None, help="the wild corpus (default: ../shared)")
    ap.add_argument("--no-wild", action="store_true", help="with --corpus: skip the wild corpus")
    ap.add_argument("--wild-only", action="store_true", help="with --corpus: only the wild part")
    ap.add_argument("--loops", type=Path, default=None, help="our loop's runs (default: cache)")
    ap.add_argument("--no-loops", action="store_true", help="with --corpus: skip our loop's runs")
    args = ap.parse_args()
    if args.corpus:
        corpus_main(args)
        return

    tmpdir = tempfile.TemporaryDirectory()
    out = args.out or Path(tmpdir.name) / "runs"
    out.mkdir(parents=True, exist_ok=True)
    runs = make_runs(
        out, args.seeds, args.faults, args.steps, args.healthy_seeds, args.long_steps, args.reuse
    )
    results = []
    for run in runs:
        o = ours(run, live=not args.no_live)
        t = None if args.no_rldoctor else theirs(run, Path(tmpdir.name), live=not args.no_live)
        results.append({**run, "path": str(run["path"]), "ours": o, "theirs": t})
        name = f"{run['fault'] or 'healthy'} s{run['seed']} ({run['steps']} steps)"
        print(
            f"{name}: rlvitals {o['verdict']} (delay {o['delay']}, live {o['live_delay']})"
            + ("" if t is None else f" | rl-doctor {t.get('verdicts', t.get('error'))}"),
            file=sys.stderr,
            flush=True,
        )
        if run["fault"] is None and not o["warm_reached"]:
            print(
                "    NOT A HEALTHY BASELINE: its warm start gave up below its target pass rate "
                "(run.json warm_start), so GRPO had little to learn from; its findings say so",
                file=sys.stderr,
            )
        if run["fault"] is None and o["warn_findings"]:
            for title in o["titles"]:
                print(f"    false alarm: {title}", file=sys.stderr)
        elif run["fault"] and not o["detected"]:
            for title in o["titles"]:
                print(f"    {title}", file=sys.stderr)

    print()
    print(
        "| fault | expected verdict | rlvitals detected | rlvitals median delay "
        "(first_step) | rlvitals median live delay | rl-doctor detected | rl-doctor median "
        "live delay |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for fault in args.faults:
        rows = [r for r in results if r["fault"] == fault]
        n = len(rows)
        od = sum(r["ours"]["detected"] for r in rows)
        td = "-" if args.no_rldoctor else f"{sum(r['theirs']['detected'] for r in rows)}/{n}"
        tl = "-" if args.no_rldoctor else _median([r["theirs"]["live_delay"] for r in rows])
        print(
            f"| {fault} | {EXPECTED[fault]} | {od}/{n} | "
            f"{_median([r['ours']['delay'] for r in rows])} | "
            f"{_median([r['ours']['live_delay'] for r in rows])} | {td} | {tl} |"
        )
    healthy = [r for r in results if r["fault"] is None]
    for r in healthy:
        their = "-" if args.no_rldoctor else r["theirs"]["warn_findings"]
        stop = r["ours"].get("stop_step")
        their_stop = not args.no_rldoctor and r["theirs"].get("stop")
        print(
            f"| healthy s{r['seed']}, {r['steps']} steps | learning | "
            f"{r['ours']['warn_findings']} false alarms ({r['ours']['verdict']}"
            + ("" if stop is None else f"; told to stop from step {stop}")
            + ")"
            f"{'' if r['ours']['warm_reached'] else ', warm start missed its target'} | | | "
            f"{their} false alarms" + ("; saturation warned" if their_stop else "") + " | |"
        )
    faulty = [r for r in results if r["fault"]]
    all_delays = [r["ours"]["delay"] for r in faulty]
    print(
        f"\nrlvitals: {sum(r['ours']['detected'] for r in faulty)}/{len(faulty)} faulty runs "
        f"detected with the right verdict; median delay {_median(all_delays)} steps; "
        f"{sum(r['ours']['warn_findings'] for r in healthy)} false alarms (warn-or-worse) on "
        f"{len(healthy)} healthy runs"
        + (
            f", {n_stop} of them told to stop once mastered"
            if (n_stop := sum(r["ours"].get("stop_step") is not None for r in healthy))
            else ""
        )
    )
    if not args.no_rldoctor:
        print(
            f"rl-doctor: {sum(r['theirs']['detected'] for r in faulty)}/{len(faulty)} faulty "
            f"runs detected; {sum(r['theirs']['warn_findings'] for r in healthy)} "
            f"warning-or-worse findings on {len(healthy)} healthy runs"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))


def corpus_main(args: argparse.Namespace) -> None:
    """``--corpus``: both tools on the development corpus, tables per label and source; then
    the wild corpus and our loop's runs."""
    import _corpus

    out: dict[str, Any] = {}
    t = time.time()
    if not args.wild_only:
        results = _corpus.score(
            live=not args.no_live, rldoctor=not args.no_rldoctor, only=args.only
        )
        print()
        print(_corpus.table(results, rldoctor=not args.no_rldoctor))
        print(f"\n{len(results)} corpus runs judged in {time.time() - t:.0f} s")
        out["corpus"] = results
    if not args.no_wild:
        import _wild

        root = args.wild or _wild.WILD
        if not (root / "manifest.json").is_file():
            print(f"detect.py: error: {root}/manifest.json: no wild corpus there", file=sys.stderr)
            sys.exit(2)
        t = time.time()
        wild = _wild.score(root, rldoctor=not args.no_rldoctor, live=not args.no_live)
        print(f"\n## Wild corpus ({root})\n")
        print(_wild.table(wild, rldoctor=not args.no_rldoctor))
        print("\nWhat rlvitals missed, per file:\n")
        print(_wild.misses(wild) or "(nothing)")
        print(f"\n{len(wild)} wild files judged in {time.time() - t:.0f} s")
        out["wild"] = wild
    if True:  # the public repositories' logs: always (small)
        import _wild

        t = time.time()
        pub = _wild.score(_wild.PUBLIC, rldoctor=not args.no_rldoctor, live=not args.no_live)
        print("\n## Real logs from public repositories (benchmarks/corpus/public/repos)\n")
        print(_wild.table(pub, rldoctor=not args.no_rldoctor))
        print("\nWhat rlvitals missed, per file:\n")
        print(_wild.misses(pub) or "(nothing)")
        print(f"\n{len(pub)} files judged in {time.time() - t:.0f} s")
        out["public_repos"] = pub
    if not args.no_loops and not args.wild_only:
        import _loops

        t = time.time()
        loops = _loops.score(args.loops, rldoctor=not args.no_rldoctor, live=not args.no_live)
        print("\n## Our plain-PyTorch GRPO loop, five trackers\n")
        print(_loops.table(loops, rldoctor=not args.no_rldoctor))
        print(f"\n{len(loops)} loop runs judged in {time.time() - t:.0f} s")
        out["loops"] = loops
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
