"""Our own plain-PyTorch GRPO loop (``benchmarks/loop/tinygrpo.py``): a healthy run and broken
ones, each logged to W&B, trackio, MLflow, TensorBoard and stdout, judged from every tracker's
files by rlvitals and from its TensorBoard folder (a loader of its own) by rl-doctor, by the
wild corpus's rule (``_wild.judge``).

Runs are made into ``--loops`` (default ``~/.cache/rlvitals-bench/loops/<hash of the loop's
source>``), niced, one torch thread each, and reused while the loop's source is unchanged.
Labels are known from how each run was broken; onsets are measured on the values the loop
computed (``truth.jsonl``) by the rules in ``onset``.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
LOOP = HERE / "loop" / "tinygrpo.py"
CACHE = Path(os.environ.get("RLVITALS_BENCH_CACHE", Path.home() / ".cache" / "rlvitals-bench"))

# fault -> the labels it is known to carry (the wild vocabulary; exploit is the loop's own)
LABELS: dict[str, list[str]] = {
    "none": ["healthy"],
    "flat": ["no_signal"],
    "collapse": ["length/collapse"],
    "spikes": ["grad_spikes"],
    "exploit": ["exploit"],
    "entropy": ["entropy_collapse"],
}
TRACKERS = ("wandb", "trackio", "mlflow", "tensorboard", "console")
# keys the loop logs every step, read back from each tracker
KEYS = ("rew", "rew_std", "kl", "ent", "len", "gn", "lr", "loss", "acc", "zero_adv", "trunc_pct")
CONSOLE_KEYS = ("rew", "kl", "ent", "len", "gn", "acc")  # the ones its console line prints


def default_dir() -> Path:
    digest = hashlib.sha256(LOOP.read_bytes()).hexdigest()[:10]
    return CACHE / "loops" / digest


def make(out: Path, fault: str, steps: int = 150, seed: int = 0, trackers: str = "") -> Path:
    """Run the loop once into ``out/<fault>`` (kept when already done); its stdout is
    ``console.log``."""
    run = out / fault
    if (run / "done.json").is_file():
        return run
    run.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        WANDB_DISABLE_CODE="true",
        HF_HUB_OFFLINE="1",
    )
    cmd = ["nice", "-n", "10", sys.executable, str(LOOP), "--out", str(run), "--fault", fault]
    cmd += ["--steps", str(steps), "--seed", str(seed)]
    if trackers:
        cmd += ["--trackers", trackers]
    t = time.time()
    with open(run / "console.log", "w") as log:
        subprocess.run(cmd, stdout=log, stderr=subprocess.DEVNULL, env=env, check=True, timeout=900)
    print(f"  made loop run {fault} in {time.time() - t:.0f} s", file=sys.stderr, flush=True)
    return run


def sources(run: Path) -> dict[str, Path]:
    """Each tracker's files of one run, as a user would point rlvitals at them."""
    return {
        "wandb": run / "wandb",
        "trackio": run / "trackio" / "tinygrpo.db",
        "mlflow": run / "mlflow.db",
        "tensorboard": run / "tb",
        "console": run / "console.log",
    }


def truth(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "truth.jsonl").read_text().splitlines() if x]


def onset(fault: str, rows: list[dict[str, Any]]) -> int | None:
    """Where each fault shows, measured on the loop's own values."""
    if fault == "flat":
        return rows[0]["step"]  # broken from the first step
    if fault == "collapse":  # mean length below half its first value
        first = rows[0]["len"]
        return next((r["step"] for r in rows if r["len"] < 0.5 * first), None)
    if fault == "spikes":  # grad norm above 10x the run's median (the wild rule)
        med = statistics.median(r["gn"] for r in rows)
        return next((r["step"] for r in rows if r["gn"] > 10 * med), None)
    if fault == "entropy":  # entropy below a quarter of its first value
        first = rows[0]["ent"]
        return next((r["step"] for r in rows if r["ent"] < 0.25 * first), None)
    if fault == "exploit":  # held-out 0.1 below its best so far
        best = -1e9
        for r in rows:
            h = r.get("heldout/acc")
            if h is None:
                continue
            if h < best - 0.1:
                return r["step"]
            best = max(best, h)
    return None


def labels_of(fault: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for name in LABELS[fault]:
        label, _, kind = name.partition("/")
        lab: dict[str, Any] = {"label": label, "onset_step": onset(fault, rows)}
        if kind:
            lab["kind"] = kind
        out.append(lab)
    return out


def _judge(labels: list[dict[str, Any]], hits: Any, verdicts: Any, **kw: Any) -> dict[str, Any]:
    """The wild rule (``_wild.LABEL_VERDICTS`` has the loop's own ``exploit`` label)."""
    import _wild

    return _wild.judge(labels, hits, verdicts, **kw)


def read_back(
    data: Any, rows: list[dict[str, Any]], keys: tuple[str, ...], held: str = "heldout/acc"
) -> dict[str, Any]:
    """Each key at three steps (and the held-out score at its last step) against the loop's
    values; console values as printed (rounded), so compared to the printed decimals.
    ``held``: the held-out score's key in this source (the console prints ``heldout acc``)."""
    picks = [rows[0], rows[len(rows) // 2], rows[-1]]
    heldrows = [r for r in rows if "heldout/acc" in r]
    out: dict[str, Any] = {}
    for key in (*keys, held):
        names = [key, *(c for c, s in data.original.items() if s == key)]
        at = heldrows[-1:] if key == held else picks
        ok = True
        for r in at:
            want = r["heldout/acc" if key == held else key]
            got = None
            for n in names:
                s = data.series(n)
                if s is not None and s.at(r["step"]) is not None:
                    got = float(s.at(r["step"]))
                    break
            # printed with 2 to 4 decimals on the console; float32 in TensorBoard
            tol = 5.1e-3 if held == "heldout acc" else 1e-6 * max(1.0, abs(want))
            if got is None or abs(got - want) > tol:
                ok = False
        out[key] = ok
    return out


def ours(run: Path, fault: str, tracker: str) -> dict[str, Any]:
    """rlvitals on one tracker's files of one run, as ``rlvitals check PATH`` judges them."""
    import _wild
    from rlvitals.checks import run_checks
    from rlvitals.errors import RlvitalsError
    from rlvitals.readers import read
    from rlvitals.readers.keys import require_metrics

    rows = truth(run)
    labels = labels_of(fault, rows)
    path = sources(run)[tracker]
    keys = CONSOLE_KEYS if tracker == "console" else KEYS
    held = "heldout acc" if tracker == "console" else "heldout/acc"
    data = None
    try:
        data = read(path)
        require_metrics(data, str(path))
        rep = run_checks(data)
    except (RlvitalsError, OSError, ValueError) as exc:
        return {
            **_judge(labels, [], None, refused=True),
            "error": str(exc)[:300],
            "verdict": None,
            "format": None if data is None else data.format,
            "read_back": {} if data is None else read_back(data, rows, keys, held),
        }
    hits = [
        _wild.Hit(frozenset({f.verdict}), _wild.RANK[f.severity], f.first_step, f.title)
        for f in rep.findings
    ]
    score = _judge(labels, hits, frozenset({rep.verdict}))
    return {
        **score,
        "verdict": rep.verdict,
        "format": data.format,
        "steps_read": len(data.steps()),
        "read_back": read_back(data, rows, keys, held),
        "mapped": {k: data.resolved[k][0] for k in (*keys, "heldout/acc") if k in data.resolved},
        "titles": [
            f"{f.severity} {f.check} {f.verdict} @{f.first_step}: {f.title}"
            for f in rep.findings
            if _wild.RANK[f.severity] >= 1
        ],
    }


def theirs(run: Path, fault: str, doctor: Any) -> dict[str, Any]:
    """rl-doctor on the run's TensorBoard folder (its own loader)."""
    import _wild

    labels = labels_of(fault, truth(run))
    res = doctor.diagnose(sources(run)["tensorboard"])
    if "error" in res:
        return {**_judge(labels, [], None, refused=True), "error": res["error"]}
    hits = _wild.their_hits(res)
    verdicts = _wild._their_run_verdicts(hits)
    return {**_judge(labels, hits, verdicts), "verdicts": sorted(verdicts)}


def score(
    out: Path | None = None, rldoctor: bool = True, live: bool = False, steps: int = 150
) -> list[dict[str, Any]]:
    """Make (or reuse) the runs, judge each tracker's files; one result per run."""
    from contextlib import nullcontext

    from _rldoctor import Worker, ensure_tensorboard

    out = out or default_dir()
    if rldoctor:
        ensure_tensorboard()
    results = []
    with Worker() if rldoctor else nullcontext() as doc:
        for fault in LABELS:
            run = make(out, fault, steps=steps)
            o = {t: ours(run, fault, t) for t in TRACKERS}
            th = theirs(run, fault, doc) if rldoctor else None
            results.append({"fault": fault, "run": str(run), "ours": o, "theirs": th})
            print(
                f"loop {fault}: "
                + ", ".join(f"{t} {o[t]['verdict'] or 'REFUSED'}" for t in TRACKERS)
                + (
                    "" if th is None else f" | rl-doctor (tb) {th.get('verdicts', th.get('error'))}"
                ),
                file=sys.stderr,
                flush=True,
            )
    return results


def _cell(res: dict[str, Any]) -> str:
    if res.get("refused"):
        return "refused"
    found = all(v["found"] for v in res["labels"].values())
    return (
        f"{'yes' if found else 'no'} ({res.get('verdict') or ', '.join(res.get('verdicts', []))})"
    )


def table(results: list[dict[str, Any]], rldoctor: bool = True) -> str:
    """Markdown: per run, found (with the verdict) per tracker; then what was read back."""
    head = "| run (label) | " + " | ".join(TRACKERS) + " | rl-doctor (TensorBoard) |"
    lines = [head, "|---|" + "---|" * (len(TRACKERS) + 1)]
    for r in results:
        cells = [_cell(r["ours"][t]) for t in TRACKERS]
        th = _cell(r["theirs"]) if rldoctor and r["theirs"] else "-"
        lab = ", ".join(LABELS[r["fault"]])
        lines.append(f"| {r['fault']} ({lab}) | " + " | ".join(cells) + f" | {th} |")
    n = len(results)
    per = [
        sum(all(v["found"] for v in r["ours"][t]["labels"].values()) for r in results)
        for t in TRACKERS
    ]
    th_n = (
        sum(all(v["found"] for v in r["theirs"]["labels"].values()) for r in results)
        if rldoctor
        else None
    )
    lines.append(
        "| **found** | "
        + " | ".join(f"{p}/{n}" for p in per)
        + f" | {'-' if th_n is None else f'{th_n}/{n}'} |"
    )
    lines += ["", "| tracker | reader | keys read back (value at 3 steps) |", "|---|---|---|"]
    for t in TRACKERS:
        o = results[0]["ours"][t]
        rb = o.get("read_back", {})
        bad = [k for k, ok in rb.items() if not ok]
        fmt = o.get("format") or "-"
        lines.append(
            f"| {t} | {fmt}{' (refused)' if o.get('refused') else ''} | "
            f"{sum(rb.values())}/{len(rb)}" + (f" (not: {', '.join(bad)})" if bad else "") + " |"
        )
    return "\n".join(lines)
