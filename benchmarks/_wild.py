"""The wild corpus (real runs users trained, ``../shared/corpus/wild/``), judged by rlvitals and
rl-doctor side by side (``detect.py --corpus``), by the rule in issue 27 (WILD-SCORING):

| label | verdicts that find it |
|---|---|
| healthy | run verdict ``learning`` and no warn-or-worse finding at all |
| plateau | plateau, mastered, too_hard, not_learning |
| length (truncation) | out_of_room |
| length (collapse) | collapse |
| grad_spikes | unstable |
| kl_drift | drift, ref_drift |
| zero_std_groups | no_signal, too_easy, too_hard, mastered, exploration_stopped |
| no_signal | no_signal |
| entropy_collapse | collapse |
| format-only | nothing: the file must only be read (not refused) |

A label is *found* by a finding with one of its verdicts at warn or worse; on a run that is
also labelled healthy, at info (a warn there would be a false alarm). The run's verdict is
*right* when it is one of its labels' verdicts (healthy: ``learning``; format-only: anything but
an input error). On a healthy run every warn-or-worse finding is a false alarm. The onset
delay is the finding's ``first_step`` less the label's ``onset_step`` (TRL console logs, which
print no step, count records).

The files are read in place, never copied. rlvitals reads each as a user would (``rlvitals
check FILE``: sniffed, no ``--from``, no ``--mapping``). rl-doctor gets each file the way it
reads best: the file itself where it has a loader for it (a trainer_state / log_history JSON, a
JSONL; JSON lines under a ``.json`` name go to its JSONL loader), else the file converted to
JSONL by the corpus's own reference reader
(``scripts/wildlib.py``, never ours), keys as printed and renamed to rl-doctor's field names
only where its alias table does not resolve them.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parent.parent
WILD = REPO.parent / "shared" / "corpus" / "wild"
# real logs from public repositories kept in this repository, in the wild manifest's schema
PUBLIC = REPO / "benchmarks" / "corpus" / "public" / "repos"

LABEL_VERDICTS: dict[str, frozenset[str]] = {
    "healthy": frozenset({"learning"}),
    "plateau": frozenset({"plateau", "mastered", "too_hard", "not_learning"}),
    "length/truncation": frozenset({"out_of_room"}),
    "length/collapse": frozenset({"collapse"}),
    "grad_spikes": frozenset({"unstable"}),
    "kl_drift": frozenset({"drift", "ref_drift"}),
    "zero_std_groups": frozenset(
        {"no_signal", "too_easy", "too_hard", "mastered", "exploration_stopped"}
    ),
    "no_signal": frozenset({"no_signal"}),
    "entropy_collapse": frozenset({"collapse"}),
    "format-only": frozenset(),
    # not in the wild manifest: our loop's reward exploit (train reward up, held-out down)
    "exploit": frozenset({"exploit_suspected"}),
}
# Finding severities as ranks (rlvitals' names and rl-doctor's).
RANK = {"ok": 0, "info": 1, "warn": 2, "fail": 3}
THEIR_RANK = {"OK": 0, "SKIPPED": 0, "INFO": 1, "WARNING": 2, "CRITICAL": 3}


class Hit(NamedTuple):
    """One finding, tool-neutral: its verdicts, severity rank (0 ok .. 3 fail), first step."""

    verdicts: frozenset[str]
    rank: int
    first_step: int | None = None
    title: str = ""


def label_name(label: dict[str, Any]) -> str:
    """``length/truncation`` for a length label of kind truncation, else the label."""
    return f"{label['label']}/{label['kind']}" if label.get("kind") else label["label"]


# -- the rule -----------------------------------------------------------------------------------


def judge(
    labels: list[dict[str, Any]],
    hits: Iterable[Hit],
    run_verdicts: frozenset[str] | None,
    *,
    refused: bool = False,
    onset_to_record: Any = None,
) -> dict[str, Any]:
    """Score one run's findings against its labels (the rule above).

    ``run_verdicts``: the run's verdict (a set, since rl-doctor's worst finding may carry
    several), None when the file was refused. ``onset_to_record`` turns a finding's step into
    the unit of the label's onset (records, for TRL console logs), or None. Returns
    ``{"labels": {name: {found, first_step, delay}}, "right", "false_alarms", "refused"}``."""
    hits = list(hits)
    names = [label_name(lab) for lab in labels]
    healthy = "healthy" in names
    need = 1 if healthy else 2
    warn = [h for h in hits if h.rank >= 2]
    out: dict[str, Any] = {"labels": {}, "refused": refused}
    for lab, name in zip(labels, names):
        if name == "healthy":
            found = not refused and not warn and bool(run_verdicts and "learning" in run_verdicts)
            out["labels"][name] = {"found": found, "first_step": None, "delay": None}
            continue
        if name == "format-only":
            out["labels"][name] = {"found": not refused, "first_step": None, "delay": None}
            continue
        want = LABEL_VERDICTS[name]
        mine = [h for h in hits if h.rank >= need and h.verdicts & want]
        steps = [h.first_step for h in mine if h.first_step is not None]
        first = min(steps) if steps else None
        if first is not None and onset_to_record is not None:
            first = onset_to_record(first)
        onset = lab.get("onset_step")
        delay = None if first is None or onset is None else first - onset
        out["labels"][name] = {"found": bool(mine), "first_step": first, "delay": delay}
    if refused or run_verdicts is None:
        out["right"] = False
    elif "format-only" in names:
        out["right"] = True
    elif healthy:
        out["right"] = "learning" in run_verdicts and not warn
    else:
        ok = frozenset().union(*(LABEL_VERDICTS[n] for n in names))
        out["right"] = bool(run_verdicts & ok)
    out["false_alarms"] = len(warn) if healthy else 0
    return out


# -- the corpus ---------------------------------------------------------------------------------


def load(root: Path = WILD) -> list[dict[str, Any]]:
    """The manifest's files (``manifest.json``), each with its ``path`` relative to ``root``."""
    doc = json.loads((root / "manifest.json").read_text())
    return list(doc["files"])


def wildlib(root: Path = WILD) -> Any:
    """The wild corpus's own reference reader (``scripts/wildlib.py``), imported from its
    file (the same reader reads ``PUBLIC``'s files)."""
    name = "_wildlib_ref"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, root / "scripts" / "wildlib.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def by_record(entry: dict[str, Any]) -> bool:
    """A file whose onsets and expected values count records (TRL console logs)."""
    return any(e.get("step") is None for e in entry.get("expected", []))


def _close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


def read_back(entry: dict[str, Any], data: Any) -> list[dict[str, Any]]:
    """Every ``expected`` value looked up in what rlvitals read: under the key as printed
    (or the canonical name it was mapped to), at its step, or for a record-counted file at
    that record of the key's series."""
    out = []
    for e in entry.get("expected", []):
        key, want = e["key"], float(e["value"])
        names = [key, *(c for c, src in data.original.items() if src == key)]
        got, under = None, None
        for n in names:
            s = data.series(n)
            if s is None or not len(s):
                continue
            if e.get("step") is not None:
                v = s.at(int(e["step"]))
            else:
                i = int(e["record"]) - 1
                v = float(s.values[i]) if i < len(s) else None
            if v is not None:
                got, under = float(v), n
                if _close(got, want):
                    break
        where = f"step {e['step']}" if e.get("step") is not None else f"record {e['record']}"
        out.append(
            {
                "key": key,
                "at": where,
                "want": want,
                "got": got,
                "under": under,
                "ok": got is not None and _close(got, want),
            }
        )
    return out


def measure_labels(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The label rules ``PUBLIC``'s manifest names, applied to a file's records (the wild
    corpus's thresholds): truncation at a clip ratio of 0.5, zero-std groups at a zero-std
    share of 0.5, entropy collapse below 10% of the first record's entropy; onset: the first
    record's step that crosses."""

    def first(key: str, hit: Any) -> int | None:
        xs = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
        return next((s for s, v in xs if hit(v, xs[0][1])), None)

    out = []
    for key in ("completions/clipped_ratio", "response_length/clip_ratio"):
        onset = first(key, lambda v, _: v >= 0.5)
        if onset is not None:
            out.append({"label": "length", "kind": "truncation", "onset_step": onset})
            break
    onset = first("frac_reward_zero_std", lambda v, _: v >= 0.5)
    if onset is not None:
        out.append({"label": "zero_std_groups", "onset_step": onset})
    onset = first("entropy", lambda v, v0: v < 0.1 * v0)
    if onset is not None:
        out.append({"label": "entropy_collapse", "onset_step": onset})
    return out


# -- rlvitals -------------------------------------------------------------------------------------


def ours(entry: dict[str, Any], root: Path = WILD) -> dict[str, Any]:
    """rlvitals on one file, as ``rlvitals check FILE`` reads and judges it."""
    from rlvitals.checks import run_checks
    from rlvitals.errors import RlvitalsError
    from rlvitals.readers import read
    from rlvitals.readers.keys import require_metrics

    path = root / entry["path"]
    t = time.perf_counter()
    try:
        data = read(path)
        require_metrics(data, str(path))
        rep = run_checks(data)
    except RlvitalsError as exc:
        return _refused(entry, str(exc))
    except (OSError, MemoryError, RecursionError, ValueError) as exc:
        return _refused(entry, f"could not be read: {type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - t
    steps = [int(s) for s in data.steps().tolist()]
    rec = None
    if by_record(entry):
        index = {s: i + 1 for i, s in enumerate(steps)}

        def rec(s: int) -> int:
            return index.get(s, s)

    hits = [
        Hit(frozenset({f.verdict}), RANK[f.severity], f.first_step, f.title) for f in rep.findings
    ]
    score = judge(entry["labels"], hits, frozenset({rep.verdict}), onset_to_record=rec)
    return {
        **score,
        "verdict": rep.verdict,
        "format": data.format,
        "notes": list(data.notes),
        "steps_read": len(steps),
        "first_step": steps[0] if steps else None,
        "last_step": steps[-1] if steps else None,
        "expected": read_back(entry, data),
        "titles": [
            f"{f.severity} {f.check} {f.verdict} @{f.first_step}: {f.title}"
            for f in rep.findings
            if RANK[f.severity] >= 1
        ],
        "seconds": seconds,
    }


def _refused(entry: dict[str, Any], error: str) -> dict[str, Any]:
    score = judge(entry["labels"], [], None, refused=True)
    expected = [
        {
            "key": e["key"],
            "at": f"step {e['step']}" if e.get("step") is not None else f"record {e['record']}",
            "want": e["value"],
            "got": None,
            "under": None,
            "ok": False,
        }
        for e in entry.get("expected", [])
    ]
    return {
        **score,
        "verdict": None,
        "error": error,
        "format": None,
        "steps_read": 0,
        "expected": expected,
    }


# -- rl-doctor ------------------------------------------------------------------------------------

# Printed keys rl-doctor 0.2.0's alias table does not resolve, renamed to its field names
# (checked with rl_doctor.aliases.resolve); every other key is handed over as printed.
THEIR_NAMES = {
    "KL_ref": "kl",
    "Avg Response Len": "response_length",
    "Actor Loss": "policy_loss",
    "Adv Std": "advantage_std",
    "Adv Mean": "advantage_mean",
}


def reference_rows(entry: dict[str, Any], root: Path = WILD) -> list[dict[str, Any]]:
    """The file's records as the corpus's reference reader reads them."""
    lib = wildlib(WILD)
    path = root / entry["path"]
    fw = entry["framework"].lower()
    if fw.startswith("minimind"):
        return list(lib.read_minimind(path))
    if "console" in fw and fw.startswith("trl"):
        return list(lib.read_trl_console(path))
    if path.suffix == ".jsonl":
        return list(lib.read_jsonl(path))
    if path.suffix == ".json":
        if _is_jsonl(path):
            return list(lib.read_jsonl(path))
        return list(lib.read_trainer_state(path))
    return list(lib.read_verl_console(path))


def _is_jsonl(path: Path) -> bool:
    """JSON lines under a ``.json`` name (one object a line, not one document)."""
    text = path.read_text(errors="replace")
    try:
        json.loads(text)
        return False
    except ValueError:
        first = text.lstrip().split("\n", 1)[0]
        try:
            return isinstance(json.loads(first), dict)
        except ValueError:
            return False


def rldoctor_input(entry: dict[str, Any], tmp: Path, root: Path = WILD) -> Path:
    """The file rl-doctor is given (see the module's docstring)."""
    path = root / entry["path"]
    if path.suffix == ".json" and _is_jsonl(path):
        out = tmp / (entry["path"].replace("/", "_") + "l")  # the same bytes, named .jsonl
        out.write_bytes(path.read_bytes())
        return out
    if path.suffix in (".json", ".jsonl"):
        return path  # rl-doctor's own loaders: load_json (log_history or a list), load_jsonl
    out = tmp / (entry["path"].replace("/", "_") + ".rldoctor.jsonl")
    with open(out, "w") as f:
        for row in reference_rows(entry, root):
            f.write(json.dumps({THEIR_NAMES.get(k, k): v for k, v in row.items()}) + "\n")
    return out


def their_verdicts(f: dict[str, Any]) -> frozenset[str]:
    """One rl-doctor finding in rlvitals' verdicts (all the parts its summary names)."""
    from _rldoctor import their_verdict

    det = f.get("detector", "")
    text = f"{f.get('title', '')} {f.get('summary', '')}".lower()
    if det in ("gradient_pathology", "grad_pathology"):
        out = set()
        if "non-finite" in text or "nan" in text.split():
            out.add("non_finite")
        if "spike" in text:
            out.add("unstable")
        if "zero gradient" in text:
            out.add("no_signal")  # its text: every rollout in every group scored the same
        return frozenset(out or {"drift"})
    if det == "plateau":
        return frozenset({"plateau"})
    if det in ("length_pathology", "length_hacking"):
        out = set()
        if "truncat" in text:
            out.add("out_of_room")
        if "grew" in text:
            out.add("exploit_suspected")
        return frozenset(out or {their_verdict(f)})
    return frozenset({their_verdict(f)})


def their_hits(res: dict[str, Any]) -> list[Hit]:
    return [
        Hit(their_verdicts(f), THEIR_RANK.get(f.get("severity", ""), 0), None, f.get("title", ""))
        for f in res.get("findings", [])
    ]


def _their_run_verdicts(hits: list[Hit]) -> frozenset[str]:
    """rl-doctor gives no run verdict: its worst warn-or-worse finding's, else learning."""
    warn = [h for h in hits if h.rank >= 2]
    if not warn:
        return frozenset({"learning"})
    top = max(h.rank for h in warn)
    return next(h.verdicts for h in warn if h.rank == top)


def _prefix(src: Path, step: int, out: Path) -> Path:
    """``src`` cut after ``step`` (a JSONL, a log_history JSON, or a bare list)."""
    if src.suffix == ".json":
        doc = json.loads(src.read_text())
        hist = doc["log_history"] if isinstance(doc, dict) else doc
        cut = [e for e in hist if int(e.get("step", 0)) <= step]
        out.write_text(json.dumps({**doc, "log_history": cut} if isinstance(doc, dict) else cut))
        return out
    keep = [x for x in src.read_text().splitlines() if x.strip() and json.loads(x)["step"] <= step]
    out.write_text("\n".join(keep) + "\n")
    return out


def theirs(
    entry: dict[str, Any], tmp: Path, doctor: Any, root: Path = WILD, live: bool = True
) -> dict[str, Any]:
    """rl-doctor on one file; ``doctor``: an ``_rldoctor.Worker``. Its delay is a live one:
    the first prefix of the file (binary search) at which the label is found."""
    src = rldoctor_input(entry, tmp, root)
    t = time.perf_counter()
    res = doctor.diagnose(src)
    seconds = time.perf_counter() - t
    if "error" in res:
        return {**judge(entry["labels"], [], None, refused=True), "error": res["error"]}
    hits = their_hits(res)
    score = judge(entry["labels"], hits, _their_run_verdicts(hits))
    score["verdicts"] = sorted(_their_run_verdicts(hits))
    score["input"] = src.name if not src.is_relative_to(root) else str(src.relative_to(root))
    score["titles"] = [
        f"{f.get('severity')} {f.get('detector')} {sorted(their_verdicts(f))}: "
        f"{f.get('summary', '')[:160]}"
        for f in res.get("findings", [])
        if THEIR_RANK.get(f.get("severity", ""), 0) >= 1
    ]
    score["seconds"] = seconds
    if live:
        from _rldoctor import first_raised

        rows = reference_rows(entry, root)
        steps = sorted({int(r["step"]) for r in rows if isinstance(r.get("step"), (int, float))})
        part = tmp / f"prefix-{src.name}"
        for lab in entry["labels"]:
            name = label_name(lab)
            onset = lab.get("onset_step")
            if not score["labels"][name]["found"] or onset is None:
                continue
            later = [s for s in steps if s >= onset]

            def raised(k: int, lab: dict[str, Any] = lab, name: str = name) -> bool:
                r = doctor.diagnose(_prefix(src, k, part))
                h = their_hits(r) if "error" not in r else []
                return judge([lab], h, _their_run_verdicts(h))["labels"][name]["found"]

            first = first_raised(later, raised)
            if first is not None:
                score["labels"][name]["first_step"] = first
                score["labels"][name]["delay"] = first - onset
    return score


# -- scoring and tables -------------------------------------------------------------------------


def score(
    root: Path = WILD, rldoctor: bool = True, live: bool = True, only: str | None = None
) -> list[dict[str, Any]]:
    """Both tools on every file of a corpus in the wild schema (``WILD`` or ``PUBLIC``); one
    result per file."""
    import tempfile
    from contextlib import nullcontext

    from _rldoctor import Worker

    results = []
    with tempfile.TemporaryDirectory() as tmp, Worker() if rldoctor else nullcontext() as doc:
        for entry in load(root):
            if only and only not in entry["path"]:
                continue
            o = ours(entry, root)
            t = theirs(entry, Path(tmp), doc, root, live=live) if rldoctor else None
            results.append({"entry": entry, "ours": o, "theirs": t})
            print(
                f"{root.name}/{entry['path']} {[label_name(x) for x in entry['labels']]}: rlvitals "
                f"{o.get('verdict') or 'REFUSED'} {_found(o)}"
                + (
                    ""
                    if t is None
                    else f" | rl-doctor {t.get('verdicts', t.get('error'))} {_found(t)}"
                ),
                file=sys.stderr,
                flush=True,
            )
    return results


def _found(res: dict[str, Any]) -> str:
    return " ".join(f"{k}={'Y' if v['found'] else 'n'}" for k, v in res["labels"].items())


def _median(xs: list[int | None]) -> str:
    import statistics

    vals = [x for x in xs if x is not None]
    return f"{statistics.median(vals):g}" if vals else "-"


def totals(results: list[dict[str, Any]], tool: str) -> dict[str, Any]:
    """Labels found (format-only and healthy included), right verdicts, false alarms, files
    refused, expected values read back."""
    labs = [v for r in results if r[tool] for v in r[tool]["labels"].values()]
    probs = [
        v
        for r in results
        if r[tool]
        for k, v in r[tool]["labels"].items()
        if k not in ("healthy", "format-only")
    ]
    healthy = [r for r in results if any(x["label"] == "healthy" for x in r["entry"]["labels"])]
    exp = [e for r in results for e in (r[tool] or {}).get("expected", [])]
    return {
        "labels": len(labs),
        "found": sum(v["found"] for v in labs),
        "problems": len(probs),
        "problems_found": sum(v["found"] for v in probs),
        "files": len(results),
        "right": sum(bool(r[tool] and r[tool]["right"]) for r in results),
        "healthy": len(healthy),
        "false_alarm_runs": sum(bool(r[tool] and r[tool]["false_alarms"]) for r in healthy),
        "refused": sum(bool(r[tool] and r[tool]["refused"]) for r in results),
        "expected": len(exp),
        "expected_ok": sum(e["ok"] for e in exp),
    }


def table(results: list[dict[str, Any]], rldoctor: bool = True) -> str:
    """Markdown: per label, per file, and the totals."""
    names: list[str] = []
    for r in results:
        for lab in r["entry"]["labels"]:
            if label_name(lab) not in names:
                names.append(label_name(lab))
    lines = [
        "| label (wild) | runs | rlvitals found | rlvitals median onset delay | "
        "rl-doctor found | rl-doctor median live delay |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        rows = [r for r in results if name in r["ours"]["labels"]]
        n = len(rows)
        o = [r["ours"]["labels"][name] for r in rows]
        cells = [
            name,
            str(n),
            f"{sum(x['found'] for x in o)}/{n}",
            _median([x["delay"] for x in o]),
        ]
        if rldoctor:
            t = [r["theirs"]["labels"][name] for r in rows]
            cells += [f"{sum(x['found'] for x in t)}/{n}", _median([x["delay"] for x in t])]
        else:
            cells += ["-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    a = totals(results, "ours")
    b = totals(results, "theirs") if rldoctor else None
    lines.append(
        f"| **problems** (all but healthy, format-only) | {a['problems']} | "
        f"{a['problems_found']}/{a['problems']} | | "
        + (f"{b['problems_found']}/{b['problems']} | |" if b else "- | |")
    )
    lines.append(
        f"| **all labels** | {a['labels']} | {a['found']}/{a['labels']} | | "
        + (f"{b['found']}/{b['labels']} | |" if b else "- | |")
    )
    lines += [
        "",
        "| | rlvitals | rl-doctor |",
        "|---|---:|---:|",
        f"| run verdict right | {a['right']}/{a['files']} | "
        + (f"{b['right']}/{b['files']} |" if b else "- |"),
        f"| healthy runs with a false alarm | {a['false_alarm_runs']}/{a['healthy']} | "
        + (f"{b['false_alarm_runs']}/{b['healthy']} |" if b else "- |"),
        f"| files refused | {a['refused']}/{a['files']} | "
        + (f"{b['refused']}/{b['files']} |" if b else "- |"),
        f"| expected values read back | {a['expected_ok']}/{a['expected']} | (not measured) |",
        "",
        "| file | labels | reader | steps read / manifest | expected read | rlvitals verdict "
        "| rlvitals found | rl-doctor found |",
        "|---|---|---|---:|---:|---|---|---|",
    ]
    for r in results:
        e, o, t = r["entry"], r["ours"], r["theirs"]
        ex = o.get("expected", [])
        lines.append(
            f"| {e['path']} | {', '.join(label_name(x) for x in e['labels'])} | "
            f"{o.get('format') or '-'} | {o.get('steps_read', 0)} / {e['steps']['records']} | "
            f"{sum(x['ok'] for x in ex)}/{len(e.get('expected', []))} | "
            f"{o.get('verdict') or 'refused'} | {_yn(o)} | {_yn(t) if t else '-'} |"
        )
    return "\n".join(lines)


def _yn(res: dict[str, Any]) -> str:
    return ", ".join(f"{k} {'yes' if v['found'] else 'no'}" for k, v in res["labels"].items())


def misses(results: list[dict[str, Any]]) -> str:
    """Per file, what rlvitals got wrong: labels missed, values not read back, false alarms."""
    out = []
    for r in results:
        e, o = r["entry"], r["ours"]
        bad = [k for k, v in o["labels"].items() if not v["found"]]
        vals = [
            f"{x['key']}@{x['at']}: want {x['want']:g}, got "
            + ("nothing" if x["got"] is None else f"{x['got']:g} ({x['under']})")
            for x in o.get("expected", [])
            if not x["ok"]
        ]
        if not (bad or vals or o.get("error") or o.get("false_alarms")):
            continue
        out.append(
            f"{e['path']}: reader {o.get('format')}, {o.get('steps_read')} steps read "
            f"of {e['steps']['records']} ({e['steps']['first']}-{e['steps']['last']})"
        )
        if o.get("error"):
            out.append(f"    REFUSED: {o['error'][:240]}")
        if bad:
            out.append(f"    missed: {', '.join(bad)} (verdict {o.get('verdict')})")
        for v in vals:
            out.append(f"    not read back: {v}")
        for title in o.get("titles", []):
            out.append(f"    {title[:200]}")
    return "\n".join(out)
