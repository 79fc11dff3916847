"""The development corpus (``benchmarks/corpus/manifest.toml``): runs made by other tools,
judged by rlvitals and rl-doctor side by side (``detect.py --corpus``).

Per run: *found* is a warn-or-worse finding whose verdict is the label (or one the manifest
accepts); *right* is the run's verdict being one of them (for rl-doctor, which gives no run
verdict, the verdict of its worst warning-or-worse finding); the *delay* is rlvitals'
finding ``first_step`` less the onset; the *live delay* replays prefixes of the run (rlvitals:
``RunData.until`` at every step from the onset; rl-doctor: a binary search over prefixes of
the file it reads) for the first step at which the right verdict is raised at warn or worse.
On healthy runs every warn-or-worse finding is a false alarm.
"""

from __future__ import annotations

import statistics
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
MANIFEST = CORPUS / "manifest.toml"

REQUIRED = ("path", "tool", "label")
CLASSES = ("aux_reward", "short_log", "nan_sink", "transient", "reassurance", "wrong_cause")


class ManifestError(ValueError):
    pass


def load_manifest(path: Path = MANIFEST) -> list[dict[str, Any]]:
    """The manifest's runs, checked: required keys, a known label, paths that exist."""
    from rlvitals.checks.base import VERDICTS

    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ManifestError(f"{path}: {exc}") from None
    runs = doc.get("run")
    if not isinstance(runs, list) or not runs:
        raise ManifestError(f"{path}: expected [[run]] tables")
    seen = set()
    for i, r in enumerate(runs):
        where = f"{path}: run {i + 1} ({r.get('path', '?')})"
        for k in REQUIRED:
            if not isinstance(r.get(k), str) or not r[k]:
                raise ManifestError(f"{where}: expected a string {k!r}")
        for v in (r["label"], *r.get("accept", [])):
            if v not in VERDICTS:
                raise ManifestError(f"{where}: {v!r} is not a verdict ({', '.join(VERDICTS)})")
        bad = [c for c in r.get("classes", []) if c not in CLASSES]
        if bad:
            raise ManifestError(f"{where}: unknown classes {bad} ({', '.join(CLASSES)})")
        onset = r.get("onset")
        if r["label"] == "healthy" and onset is not None:
            raise ManifestError(f"{where}: a healthy run has no onset")
        if r["label"] != "healthy" and not isinstance(onset, int):
            raise ManifestError(f"{where}: expected an integer 'onset'")
        for k in ("path", "mapping", "native"):
            if k in r and not (path.parent / r[k]).exists():
                raise ManifestError(f"{where}: {k} {r[k]!r} does not exist")
        if r["path"] in seen:
            raise ManifestError(f"{where}: listed twice")
        seen.add(r["path"])
    return runs


def source(entry: dict[str, Any]) -> str:
    """Which part of the corpus a run is from: trl, peers or public."""
    return entry["path"].split("/", 1)[0]


def read_entry(entry: dict[str, Any], root: Path = CORPUS) -> Any:
    """The run as rlvitals reads it (with the manifest's format and mapping, if any)."""
    from rlvitals import read

    mapping = root / entry["mapping"] if entry.get("mapping") else None
    return read(root / entry["path"], entry.get("format"), mapping=mapping)


def _expected(entry: dict[str, Any]) -> set[str]:
    return {entry["label"], *entry.get("accept", [])}


def _now(data: Any, step: int | None = None) -> float | None:
    times = data.series("time")
    if times is None or not len(times):
        return None
    return float(times.at(step) if step is not None else times.values[-1])


# -- rlvitals ---------------------------------------------------------------------------------


def ours(entry: dict[str, Any], root: Path = CORPUS, live: bool = True) -> dict[str, Any]:
    """rlvitals on one corpus run."""
    from rlvitals.checks import run_checks, severity_rank

    data = read_entry(entry, root)
    want = _expected(entry)
    onset = entry.get("onset")
    t = time.perf_counter()
    rep = run_checks(data, now=_now(data))
    seconds = time.perf_counter() - t
    warn = [f for f in rep.findings if severity_rank(f.severity) >= 2]
    hits = [f for f in warn if f.verdict in want]
    first = min((f.first_step for f in hits if f.first_step is not None), default=None)
    out: dict[str, Any] = {
        "steps": len(data.steps()),
        "verdict": rep.verdict,
        "warn_findings": len(warn),
        "found": bool(hits),
        "right": rep.verdict in want,
        "delay": None if first is None or onset is None else first - onset,
        "live_delay": None,
        "seconds": seconds,
        "titles": [f"{f.severity} {f.check} {f.verdict} @{f.first_step}: {f.title}" for f in warn],
    }
    if live and hits and onset is not None:
        for k in data.steps()[data.steps() >= onset].tolist():
            r = run_checks(data.until(int(k)), now=_now(data, int(k)))
            if any(f.verdict in want and severity_rank(f.severity) >= 2 for f in r.findings):
                out["live_delay"] = int(k) - onset
                break
    return out


# -- rl-doctor --------------------------------------------------------------------------------


def rldoctor_input(entry: dict[str, Any], tmp: Path, root: Path = CORPUS) -> Path:
    """The file rl-doctor is given: one it reads itself (a TRL trainer_state.json, its own
    simulator's JSONL), else the run as rlvitals read it, in rl-doctor's field names."""
    from _rldoctor import data_to_rldoctor_jsonl

    p = root / entry["path"]
    if p.is_dir() and (p / "trainer_state.json").is_file():
        return p / "trainer_state.json"
    if entry["tool"].startswith("rldoctor"):
        return p
    name = entry["path"].replace("/", "_") + ".rldoctor.jsonl"
    return data_to_rldoctor_jsonl(read_entry(entry, root), tmp / name)


def theirs(
    entry: dict[str, Any], tmp: Path, doctor: Any, root: Path = CORPUS, live: bool = True
) -> dict[str, Any]:
    """rl-doctor on one corpus run (``doctor``: an ``_rldoctor.Worker``)."""
    from _rldoctor import first_raised, prefix_file, their_hits

    diagnose = doctor.diagnose
    src = rldoctor_input(entry, tmp, root)
    t = time.perf_counter()
    res = diagnose(src)
    seconds = time.perf_counter() - t
    if "error" in res:
        return {"error": res["error"], "found": False, "right": False, "warn_findings": 0}
    want = _expected(entry)
    hits = their_hits(res)
    out: dict[str, Any] = {
        "found": bool(want & set(hits)),
        "right": bool(hits) and hits[0] in want,
        "warn_findings": len(hits),
        "verdicts": hits,
        "live_delay": None,
        "seconds": seconds,
        "input": str(src.relative_to(root) if src.is_relative_to(root) else src.name),
    }
    onset = entry.get("onset")
    if live and out["found"] and onset is not None:
        steps = _steps_of(src)
        part = tmp / f"prefix-{src.name}"

        def raised(k: int) -> bool:
            return bool(want & set(their_hits(diagnose(prefix_file(src, k, part)))))

        first = first_raised([s for s in steps if s >= onset], raised)
        if first is not None:
            out["live_delay"] = first - onset
    return out


def _steps_of(src: Path) -> list[int]:
    import json

    if src.name.endswith(".json"):
        hist = json.loads(src.read_text()).get("log_history", [])
        return sorted({int(e["step"]) for e in hist if "step" in e})
    steps = set()
    for line in src.read_text().splitlines():
        try:
            s = json.loads(line).get("step")
        except ValueError:
            continue
        if isinstance(s, int):
            steps.add(s)
    return sorted(steps)


# -- the table --------------------------------------------------------------------------------


def _median(xs: list[int | None]) -> str:
    vals = [x for x in xs if x is not None]
    return f"{statistics.median(vals):g}" if vals else "-"


def score(live: bool = True, rldoctor: bool = True, only: str | None = None) -> list[dict]:
    """Judge every corpus run with both tools; one result per run."""
    import tempfile
    from contextlib import nullcontext

    from _rldoctor import Worker

    results = []
    with tempfile.TemporaryDirectory() as tmp, Worker() if rldoctor else nullcontext() as doc:
        for entry in load_manifest():
            if only and only not in entry["path"]:
                continue
            try:
                o = ours(entry, live=live)
            except Exception as exc:  # a reader gap must not stop the benchmark
                o = {"error": f"{type(exc).__name__}: {exc}", "found": False, "right": False}
                o.update({"warn_findings": 0, "delay": None, "live_delay": None})
            t = theirs(entry, Path(tmp), doc, live=live) if rldoctor else None
            for res in (o, t):
                if res is not None:
                    res["healthy_run"] = entry["label"] == "healthy"
            results.append({"entry": entry, "ours": o, "theirs": t})
            print(
                f"{entry['path']} [{entry['label']}]: rlvitals {o.get('verdict', o.get('error'))}"
                f" (found {o['found']}, delay {o.get('delay')}, live {o.get('live_delay')})"
                + ("" if t is None else f" | rl-doctor {t.get('verdicts', t.get('error'))}"),
                file=sys.stderr,
                flush=True,
            )
    return results


def table(results: list[dict], rldoctor: bool = True) -> str:
    """The markdown tables: per label, per source, and the totals."""
    lines = [
        "| label | runs | rlvitals found | rlvitals right verdict | rlvitals median delay "
        "(first_step) | rlvitals median live delay | rl-doctor found | rl-doctor right "
        "verdict | rl-doctor median live delay |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    labels = sorted({r["entry"]["label"] for r in results} - {"healthy"})
    for label in labels:
        rows = [r for r in results if r["entry"]["label"] == label]
        lines.append(_row(label, rows, rldoctor))
    faulty = [r for r in results if r["entry"]["label"] != "healthy"]
    lines.append(_row("**all faults**", faulty, rldoctor))
    healthy = [r for r in results if r["entry"]["label"] == "healthy"]
    n = len(healthy)
    ours_fa = sum(bool(r["ours"]["warn_findings"]) for r in healthy)
    their_fa = (
        "-"
        if not rldoctor
        else f"{sum(bool(r['theirs']['warn_findings']) for r in healthy)}/{n} with a false alarm"
    )
    lines.append(
        f"| healthy | {n} | {ours_fa}/{n} with a false alarm | "
        f"{sum(r['ours']['right'] or r['ours'].get('verdict') == 'learning' for r in healthy)}"
        f"/{n} judged healthy or learning | | | {their_fa} | | |"
    )
    lines += [
        "",
        "| source | runs | rlvitals found | rlvitals right | rlvitals false alarms "
        "(healthy) | rl-doctor found | rl-doctor right | rl-doctor false alarms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for src in ("trl", "peers", "public"):
        rows = [r for r in results if source(r["entry"]) == src]
        if not rows:
            continue
        f = [r for r in rows if r["entry"]["label"] != "healthy"]
        h = [r for r in rows if r["entry"]["label"] == "healthy"]
        th = (
            ("-", "-", "-")
            if not rldoctor
            else (
                f"{sum(r['theirs']['found'] for r in f)}/{len(f)}",
                f"{sum(r['theirs']['right'] for r in f)}/{len(f)}",
                f"{sum(bool(r['theirs']['warn_findings']) for r in h)}/{len(h)}",
            )
        )
        lines.append(
            f"| {src} | {len(rows)} | {sum(r['ours']['found'] for r in f)}/{len(f)} | "
            f"{sum(r['ours']['right'] for r in f)}/{len(f)} | "
            f"{sum(bool(r['ours']['warn_findings']) for r in h)}/{len(h)} | "
            f"{th[0]} | {th[1]} | {th[2]} |"
        )
    lines += [
        "",
        "| class of miss (issue 12) | runs | rlvitals right | rl-doctor right |",
        "|---|---:|---:|---:|",
    ]
    for c in CLASSES:
        rows = [r for r in results if c in r["entry"].get("classes", [])]
        if rows:
            lines.append(
                f"| {c} | {len(rows)} | {sum(_ok(r['ours']) for r in rows)}/{len(rows)} | "
                + (f"{sum(_ok(r['theirs']) for r in rows)}/{len(rows)} |" if rldoctor else "- |")
            )
    return "\n".join(lines)


def _ok(res: dict[str, Any] | None) -> bool:
    """Right on this run: the right verdict, or on a healthy run no warn-or-worse finding.
    (Set by ``score`` on each tool's result as ``healthy_run``.)"""
    if res is None:
        return False
    if res.get("healthy_run"):
        return not res["warn_findings"]
    return bool(res["right"])


def _row(label: str, rows: list[dict], rldoctor: bool) -> str:
    n = len(rows)
    o = [r["ours"] for r in rows]
    cells = [
        label,
        str(n),
        f"{sum(x['found'] for x in o)}/{n}",
        f"{sum(x['right'] for x in o)}/{n}",
        _median([x.get("delay") for x in o]),
        _median([x.get("live_delay") for x in o]),
    ]
    if rldoctor:
        t = [r["theirs"] for r in rows]
        cells += [
            f"{sum(x['found'] for x in t)}/{n}",
            f"{sum(x['right'] for x in t)}/{n}",
            _median([x.get("live_delay") for x in t]),
        ]
    else:
        cells += ["-", "-", "-"]
    return "| " + " | ".join(cells) + " |"
