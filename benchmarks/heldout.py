"""The held-out set of real runs (``benchmarks/corpus/heldout/``), scored by the wild corpus's
rule (``_wild.py``): rlvitals and rl-doctor side by side, then a live replay.

    python benchmarks/heldout.py [DIR] [--src SRC] [--no-rldoctor] [--json FILE] [--out MD]

``DIR`` is the set (default ``benchmarks/corpus/heldout``); ``--src`` the rlvitals source to
score (default: whatever ``import rlvitals`` finds, so ``PYTHONPATH=/work/<branch>/src`` scores
a branch). The set's labels come from its own ``label.py``, written before any tool was run on
it; this script never changes them.

Per file: a label is found by a warn-or-worse finding with one of its verdicts (healthy: the run
verdict ``learning`` and no warn-or-worse finding), every expected value is looked up in what
rlvitals read, and a refused file is listed with the one line it gave. rl-doctor gets a TRL
``trainer_state.json`` as it is (its own loader) and every other file as the records the set's
reference reader (``label.py``) reads, keys as printed plus a copy under rl-doctor's field name
for each key the labeller mapped by meaning.

Live replay: each file is read once and judged as it stood after its 30th, 40th, ... record
(``RunData.until``, as ``benchmarks/families.py`` replays); a prefix with a warn-or-worse
finding is an alarm (the stall rule is off: a replayed old file is not a silent run). Reported for the runs labelled healthy and, for every run, for the
prefixes that end before its earliest labelled onset (a label whose onset is the first record,
plateau's, has no such prefix).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
HELDOUT = BENCH / "corpus" / "heldout"
PREFIX_FROM, PREFIX_EVERY = 20, 10  # as benchmarks/families.py: past 20 updates, every 10
# A replayed prefix of an old file looks silent since the file was written: the stall rule is
# switched off in the replay (a real live check sees records arrive), every other rule is not.
NEVER_STALLED = 1e18

# the labeller's roles (label.ROLES) in rl-doctor 0.2.0's field names
THEIR_FIELDS = {
    "reward": "reward_mean",
    "reward_std": "reward_std",
    "entropy": "entropy",
    "kl": "kl",
    "grad": "grad_norm",
    "loss": "policy_loss",
    "length": "response_len_mean",
    "clip": "response_len_clip_ratio",
    "zero_std": "frac_reward_zero_std",
}


def labeller(root: Path) -> Any:
    """The set's own ``label.py`` (its reference readers and rules), imported from its file."""
    spec = importlib.util.spec_from_file_location("_heldout_label", root / "label.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_heldout_label"] = mod
    spec.loader.exec_module(mod)
    return mod


def rldoctor_input(
    entry: dict[str, Any], src: dict[str, Any], lab: Any, root: Path, tmp: Path
) -> Path:
    """The file rl-doctor is given (see the module docstring)."""
    path = root / entry["path"]
    if src["reader"] == "trainer_state" and path.suffix == ".json":
        return path
    out = tmp / (entry["path"].replace("/", "_") + ".rldoctor.jsonl")
    roles = {v: THEIR_FIELDS[k] for k, v in entry.get("keys", {}).items() if k in THEIR_FIELDS}
    with open(out, "w") as f:
        for row in lab.rows_of(src, root):
            rec = {
                k: v
                for k, v in row.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            }
            for printed, theirs in roles.items():
                value = lab._num(row.get(printed))
                if value is not None:
                    rec[theirs] = value
            f.write(json.dumps(rec) + "\n")
    return out


def theirs(
    entry: dict[str, Any], src: dict[str, Any], lab: Any, root: Path, tmp: Path, doctor: Any
) -> dict[str, Any]:
    """rl-doctor on one file, judged by the wild rule."""
    import _wild

    path = rldoctor_input(entry, src, lab, root, tmp)
    res = doctor.diagnose(path)
    if "error" in res:
        return {**_wild.judge(entry["labels"], [], None, refused=True), "error": res["error"]}
    hits = _wild.their_hits(res)
    verdicts = _wild._their_run_verdicts(hits)
    score = _wild.judge(entry["labels"], hits, verdicts)
    score["verdicts"] = sorted(verdicts)
    score["titles"] = [
        f"{f.get('severity')} {f.get('detector')}: {str(f.get('summary', ''))[:160]}"
        for f in res.get("findings", [])
        if _wild.THEIR_RANK.get(f.get("severity", ""), 0) >= 1
    ]
    return score


def replay(entry: dict[str, Any], root: Path) -> dict[str, Any]:
    """rlvitals on the file's prefixes (every 10 records past 20): per prefix, its record count,
    last step and the warn-or-worse findings raised there."""
    from rlvitals.checks import run_checks
    from rlvitals.errors import RlvitalsError
    from rlvitals.readers import read

    try:
        data = read(root / entry["path"])
    except (RlvitalsError, OSError, ValueError) as exc:
        return {"error": str(exc), "prefixes": []}
    steps = [int(s) for s in data.steps().tolist()]
    times = data.series("time")
    written = (root / entry["path"]).stat().st_mtime
    out = []
    for k in range(PREFIX_FROM + PREFIX_EVERY, len(steps), PREFIX_EVERY):
        step = steps[k - 1]
        # a prefix is judged when its record was written: its own time, or for records with
        # none, the file's (so the start-up rule does not count the file's age as silence)
        now = float(times.at(step)) if times is not None and len(times) else written
        try:
            rep = run_checks(data.until(step), now=now, stall_after=NEVER_STALLED)
        except RlvitalsError as exc:
            out.append({"records": k, "step": step, "alarms": [f"error: {exc}"]})
            continue
        alarms = [
            f"{f.severity} {f.check} {f.verdict}"
            for f in rep.findings
            if f.severity in ("warn", "fail")
        ]
        out.append({"records": k, "step": step, "alarms": alarms})
    return {"prefixes": out}


def earliest_onset(entry: dict[str, Any]) -> int | None:
    """The earliest onset step among the file's labels (None: no labelled problem)."""
    onsets = [lab.get("onset_step") for lab in entry["labels"] if lab.get("onset_step") is not None]
    return min(onsets) if onsets else None


def score(root: Path, rldoctor: bool = True) -> list[dict[str, Any]]:
    """Both tools on every file of the set, and rlvitals' live replay; one result per file."""
    import _wild
    from _rldoctor import Worker

    _wild.LABEL_VERDICTS.setdefault("non_finite", frozenset({"non_finite"}))
    lab = labeller(root)
    sources = {s["path"]: s for s in lab.sources(root)}
    results = []
    with tempfile.TemporaryDirectory() as tmp, Worker() if rldoctor else nullcontext() as doc:
        for entry in _wild.load(root):
            src = sources[entry["path"]]
            o = _wild.ours(entry, root)
            t = theirs(entry, src, lab, root, Path(tmp), doc) if rldoctor else None
            live = replay(entry, root)
            results.append({"entry": entry, "ours": o, "theirs": t, "live": live})
            print(
                f"{entry['path']}: rlvitals {o.get('verdict') or 'REFUSED'} "
                f"{_wild._found(o)}" + ("" if t is None else f" | rl-doctor {_wild._found(t)}"),
                file=sys.stderr,
                flush=True,
            )
    return results


def live_table(results: list[dict[str, Any]]) -> str:
    """Markdown: prefixes judged and prefixes with an alarm, on healthy runs and before onsets."""
    lines = [
        "| file | labels | prefixes past 20 | with warn/fail | before first onset | with warn/fail there |",
        "|---|---|---:|---:|---:|---:|",
    ]
    tot = [0, 0, 0, 0, 0, 0]  # healthy prefixes, alarms; pre-onset prefixes, alarms; runs
    for r in results:
        e, live = r["entry"], r["live"]
        names = [x["label"] + (f"/{x['kind']}" if x.get("kind") else "") for x in e["labels"]]
        prefixes = live.get("prefixes", [])
        onset = earliest_onset(e)
        before = [p for p in prefixes if onset is None or p["step"] < onset]
        n_alarm = sum(bool(p["alarms"]) for p in prefixes)
        b_alarm = sum(bool(p["alarms"]) for p in before)
        if "healthy" in names:
            tot[0] += len(prefixes)
            tot[1] += n_alarm
            tot[4] += 1
            tot[5] += bool(n_alarm)
        tot[2] += len(before)
        tot[3] += b_alarm
        lines.append(
            f"| {e['path']} | {', '.join(names)} | {len(prefixes)} | {n_alarm} | "
            f"{len(before)} | {b_alarm} |"
            + (f" (read failed: {live['error'][:80]})" if live.get("error") else "")
        )
    lines += [
        "",
        f"Healthy runs: {tot[4]}; their prefixes past 20 updates with a warn or fail: "
        f"{tot[1]} of {tot[0]} ({tot[5]} of {tot[4]} runs alarm at some point).",
        f"All runs, prefixes that end before the earliest labelled onset: {tot[3]} of {tot[2]} "
        "raise a warn or fail.",
    ]
    return "\n".join(lines)


def refused(results: list[dict[str, Any]]) -> str:
    """One line a refused file, with the reason it gave."""
    out = [
        f"- `{r['entry']['path']}`: {r['ours']['error'][:300]}"
        for r in results
        if r["ours"].get("refused")
    ]
    return "\n".join(out) or "(none)"


def scored_commit() -> str:
    """The rlvitals source scored: its folder and the commit checked out there."""
    import rlvitals

    src = Path(rlvitals.__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(src), "status", "--porcelain", "--", "."],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"{src} (not a git checkout)"
    return f"{src} at {head}" + (" (with uncommitted changes)" if dirty else "")


def report(results: list[dict[str, Any]], rldoctor: bool) -> str:
    """The whole markdown report."""
    import _wild

    return "\n\n".join(
        [
            f"# Held-out real runs: scores ({datetime.date.today().isoformat()})",
            f"rlvitals scored: {scored_commit()}. Set: {len(results)} files from "
            f"{len({r['entry']['provenance']['repo'] for r in results})} repositories "
            "(`benchmarks/corpus/heldout/manifest.json`, labels by its `label.py`).",
            "## Labels, verdicts, values read back\n\n" + _wild.table(results, rldoctor=rldoctor),
            "## Files rlvitals refused\n\n" + refused(results),
            "## Live replay (rlvitals)\n\n" + live_table(results),
            "## What rlvitals missed, per file\n\n```\n" + _wild.misses(results) + "\n```",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", type=Path, default=HELDOUT, help="the held-out set")
    ap.add_argument("--src", type=Path, default=None, help="rlvitals source folder to score")
    ap.add_argument("--no-rldoctor", action="store_true")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--out", type=Path, default=None, help="write the markdown report here")
    args = ap.parse_args()
    if args.src is not None:
        sys.path.insert(0, str(args.src.resolve()))
    sys.path.insert(0, str(BENCH))
    results = score(args.dir.resolve(), rldoctor=not args.no_rldoctor)
    text = report(results, rldoctor=not args.no_rldoctor)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
