"""Families of runs, healthy and broken (``benchmarks/_families.py``), judged by rlvitals and by
rl-doctor side by side: precision on healthy runs finished and live, recall and delay per
broken family and severity, per rule.

    python benchmarks/families.py [--seeds 20] [--length N] [--family NAME ...]
        [--severity mild ...] [--set NAME=VALUE ...] [--files] [--no-prefixes]
        [--no-rldoctor] [--json FILE] [--md FILE]

Each run is judged finished (at its own last record's time: a stalled run a gap after it)
and, live, at every prefix past 20 updates, every 10 updates (``RunData.until``; each prefix
at its own step's time), with the public API (``rlvitals.judge.Judge``).

- *Quiet* (the issue's precision on healthy runs): the share of healthy runs, or of their
  prefixes, with no finding at warn or worse. Prefixes of broken runs before their onset are
  healthy too; they are counted apart ("before onset").
- *Found* (recall): a warn-or-worse finding whose verdict is one of the label's
  (``Label.verdicts``); *delay*: that finding's ``first_step`` less the onset (finished run);
  *live delay*: the first prefix (every 10 updates, then the finished run) at which it is
  raised, less the onset.
- *Per rule*: a rule is a finding's check and verdict (``check:verdict``; findings carry no
  rule id). Per rule: healthy runs (finished) and healthy prefixes (healthy families' and
  broken runs' before their onset) it raises at warn or worse, broken runs it finds (its
  verdict is the label's) and broken runs it fires on with another verdict; precision on
  finished runs = found / (found + healthy runs raised); on prefixes = prefixes at or after
  the onset it finds / (those + healthy prefixes raised).
- rl-doctor 0.2.0 (in its own venv, ``_rldoctor.py``) gets each run as JSONL in its own field
  names (``data_to_rldoctor_jsonl``), finished and at the same prefixes (its findings mapped
  to our verdicts by ``_rldoctor.their_verdict``); it has no clock, so stalls and crashes are
  beyond it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import _families as fam  # noqa: E402

WARN = ("warn", "fail")
PREFIX_FROM = 20  # prefixes past this many updates
PREFIX_EVERY = 10


def prefixes(label: fam.Label, last: int) -> list[int]:
    """The prefix steps judged live: past 20 updates, every 10, before the last record."""
    return [s for s in range(PREFIX_FROM + PREFIX_EVERY, last, PREFIX_EVERY)]


def _raised(findings: list[Any]) -> list[tuple[str, str, int | None]]:
    return [(f.check, f.verdict, f.first_step) for f in findings if f.severity in WARN]


def judge_run(data: Any, label: fam.Label, judge: Any, live: bool) -> dict[str, Any]:
    """rlvitals on one run: the finished run's warn-or-worse findings, and per prefix step
    the rules raised there."""
    last = int(data.last_step)
    rep = judge(data, now=label.now_at(last))
    out: dict[str, Any] = {
        "final": _raised(rep.findings),
        "verdict": rep.verdict,
        "prefixes": {},
    }
    if live:
        for s in prefixes(label, last):
            p = judge(data.until(s), now=label.now_at(s))
            out["prefixes"][s] = [(c, v) for c, v, _ in _raised(p.findings)]
    return out


class Doctor:
    """rl-doctor on the same runs: a worker process, files written to a temporary folder."""

    def __init__(self, tmp: Path) -> None:
        import _rldoctor

        self.rd = _rldoctor
        self.tmp = tmp
        self.worker = _rldoctor.Worker()

    def hits(self, data: Any) -> list[str]:
        path = self.rd.data_to_rldoctor_jsonl(data, self.tmp / "run.jsonl")
        res = self.worker.diagnose(path)
        if "error" in res:
            return ["error"]
        return self.rd.their_hits(res)

    def judge_run(self, data: Any, label: fam.Label, live: bool) -> dict[str, Any]:
        last = int(data.last_step)
        out: dict[str, Any] = {"final": self.hits(data), "prefixes": {}}
        if live:
            for s in prefixes(label, last):
                out["prefixes"][s] = self.hits(data.until(s))
        return out

    def close(self) -> None:
        self.worker.close()


# -- scoring -----------------------------------------------------------------------------------


def _first_live(pre: dict[int, list[Any]], final_hit: bool, last: int, ok: Callable) -> int | None:
    for s in sorted(pre):
        if any(ok(x) for x in pre[s]):
            return s
    return last if final_hit else None


def score_ours(label: fam.Label, res: dict[str, Any], last: int) -> dict[str, Any]:
    want = set(label.verdicts)
    hits = [(c, v, st) for c, v, st in res["final"] if v in want]
    first = min((st for _, _, st in hits if st is not None), default=None)
    out: dict[str, Any] = {
        "alarm": bool(res["final"]),
        "found": bool(hits),
        "delay": None if first is None or label.onset is None else first - label.onset,
    }
    onset = label.onset if label.onset is not None else 10**9
    pre = res["prefixes"]
    out["prefix_alarms"] = sum(1 for s, r in pre.items() if r and s < onset)
    out["prefix_judged"] = sum(1 for s in pre if s < onset)
    if not label.healthy:
        after = {s: r for s, r in pre.items() if s >= onset}
        live = _first_live(after, bool(hits), last, lambda cv: cv[1] in want)
        out["live_delay"] = None if live is None else live - onset
    return out


def score_theirs(label: fam.Label, res: dict[str, Any], last: int) -> dict[str, Any]:
    want = set(label.verdicts)
    found = any(v in want for v in res["final"])
    onset = label.onset if label.onset is not None else 10**9
    pre = res["prefixes"]
    out: dict[str, Any] = {
        "alarm": bool(res["final"]) and res["final"] != ["error"],
        "found": found,
        "error": res["final"] == ["error"],
        "prefix_alarms": sum(1 for s, r in pre.items() if r and r != ["error"] and s < onset),
        "prefix_judged": sum(1 for s in pre if s < onset),
    }
    if not label.healthy:
        after = {s: r for s, r in pre.items() if s >= onset}
        live = _first_live(after, found, last, lambda v: v in want)
        out["live_delay"] = None if live is None else live - onset
    return out


def rules_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per rule (check:verdict): healthy runs and prefixes it raised, broken runs it found or
    fired on with a verdict not the label's."""
    agg: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        lab: fam.Label = r["label"]
        res = r["ours_raw"]
        fired = {f"{c}:{v}" for c, v, _ in res["final"]}
        for rule in fired:
            a = agg[rule]
            v = rule.split(":", 1)[1]
            if lab.healthy:
                a["healthy_runs"] += 1
            elif v in lab.verdicts:
                a["found"] += 1
            else:
                a["other"] += 1
        onset = lab.onset if lab.onset is not None else 10**9
        for s, raised in res["prefixes"].items():
            for rule in {f"{c}:{v}" for c, v in raised}:
                if s < onset:
                    agg[rule]["healthy_prefixes"] += 1
                elif rule.split(":", 1)[1] in lab.verdicts:
                    agg[rule]["found_prefixes"] += 1
    out = []
    for rule, a in sorted(agg.items(), key=lambda kv: -sum(kv[1].values())):
        found, bad = a["found"], a["healthy_runs"]
        fp, bp = a["found_prefixes"], a["healthy_prefixes"]
        out.append(
            {
                "rule": rule,
                "found": found,
                "other": a["other"],
                "healthy_runs": bad,
                "healthy_prefixes": bp,
                "precision": found / (found + bad) if found + bad else None,
                "prefix_precision": fp / (fp + bp) if fp + bp else None,
            }
        )
    return out


def _median(xs: list[int | None]) -> str:
    ys = [x for x in xs if x is not None]
    return f"{statistics.median(ys):g}" if ys else "-"


def _share(n: int, d: int) -> str:
    return f"{n}/{d} ({n / d:.2f})" if d else "-"


def tables(rows: list[dict[str, Any]], rldoctor: bool) -> str:
    """The markdown tables: healthy families, broken families by severity, rules."""
    out = []
    healthy = [r for r in rows if r["label"].healthy]
    broken = [r for r in rows if not r["label"].healthy]
    head = "| healthy family | runs | quiet finished | quiet prefixes |"
    if rldoctor:
        head += " rl-doctor quiet finished | rl-doctor quiet prefixes |"
    out += [head, "|---" * (head.count("|") - 1) + "|"]
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in healthy:
        groups[r["label"].family].append(r)
    groups["**all healthy**"] = healthy
    for name, rs in groups.items():
        line = f"| {name} | {len(rs)} | " + _quiet(rs, "ours")
        if rldoctor:
            line += " | " + _quiet(rs, "theirs")
        out.append(line + " |")
    pre_b = sum(r["ours"]["prefix_alarms"] for r in broken)
    pre_n = sum(r["ours"]["prefix_judged"] for r in broken)
    out.append(
        f"\nPrefixes of broken runs before their onset (healthy so far) raising warn or worse: "
        f"rlvitals {_share(pre_b, pre_n)}"
        + (
            f", rl-doctor {_share(sum(r['theirs']['prefix_alarms'] for r in broken), pre_n)}"
            if rldoctor
            else ""
        )
        + ".\n"
    )
    head = "| broken family | severity | runs | found | delay | live delay |"
    if rldoctor:
        head += " rl-doctor found | rl-doctor live delay |"
    out += [head, "|---" * (head.count("|") - 1) + "|"]
    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in broken:
        cells[(r["label"].family, str(r["label"].severity))].append(r)
    for (family, sev), rs in cells.items():
        o = [r["ours"] for r in rs]
        line = (
            f"| {family} | {sev} | {len(rs)} | {_share(sum(x['found'] for x in o), len(o))} | "
            f"{_median([x['delay'] for x in o])} | {_median([x['live_delay'] for x in o])} |"
        )
        if rldoctor:
            t = [r["theirs"] for r in rs]
            line += (
                f" {_share(sum(x['found'] for x in t), len(t))} |"
                f" {_median([x['live_delay'] for x in t])} |"
            )
        out.append(line)
    out += [
        "",
        "| rule (check:verdict) | broken runs found | broken runs, other verdict | "
        "healthy runs raised | healthy prefixes raised | precision finished | "
        "precision prefixes |",
        "|---|---|---|---|---|---|---|",
    ]
    for x in rules_table(rows):
        p, pp = ("-" if x[k] is None else f"{x[k]:.2f}" for k in ("precision", "prefix_precision"))
        out.append(
            f"| {x['rule']} | {x['found']} | {x['other']} | {x['healthy_runs']} | "
            f"{x['healthy_prefixes']} | {p} | {pp} |"
        )
    return "\n".join(out)


def _quiet(rs: list[dict[str, Any]], tool: str) -> str:
    n = len(rs)
    quiet = sum(not r[tool]["alarm"] for r in rs)
    pa = sum(r[tool]["prefix_alarms"] for r in rs)
    pn = sum(r[tool]["prefix_judged"] for r in rs)
    return f"{_share(quiet, n)} | {_share(pn - pa, pn)}"


# -- main --------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    from rlvitals.cli._options import overrides
    from rlvitals.judge import Judge

    # An operating point to try: the thresholds as `rlvitals check --set` takes them.
    judge = Judge(thresholds=overrides(args.set) if args.set else None)
    sevs = tuple(args.severity or fam.SEVERITIES)
    families = args.family or list(fam.FAMILIES)
    doctor = None
    tmp = tempfile.TemporaryDirectory(prefix="families-")
    if args.rldoctor:
        doctor = Doctor(Path(tmp.name))
    rows = []
    t0 = time.perf_counter()
    try:
        for family in families:
            for sev in (None,) if family in fam.HEALTHY else sevs:
                for seed in range(args.seeds):
                    data, label = fam.make(family, seed, severity=sev, length=args.length)
                    if args.files or (label.framework == "native" and family in fam.TRANSCRIPTS):
                        data = from_files(family, seed, sev, args.length, Path(tmp.name) / "f")
                    last = int(data.last_step)
                    raw = judge_run(data, label, judge, live=args.prefixes)
                    row = {"label": label, "ours_raw": raw}
                    row["ours"] = score_ours(label, raw, last)
                    if doctor is not None:
                        theirs = doctor.judge_run(data, label, live=args.prefixes)
                        row["theirs_raw"] = theirs
                        row["theirs"] = score_theirs(label, theirs, last)
                    rows.append(row)
                print(
                    f"  {family} {sev or ''}: {len(rows)} runs, {time.perf_counter() - t0:.0f} s",
                    file=sys.stderr,
                )
    finally:
        if doctor is not None:
            doctor.close()
        tmp.cleanup()
    return rows


def from_files(family: str, seed: int, sev: str | None, length: Any, tmp: Path) -> Any:
    """The run read back from the files ``write`` gives (its transcripts too, where it has
    them), as ``rlvitals check`` reads them, from ``tmp`` (emptied first)."""
    import shutil

    from rlvitals import read

    shutil.rmtree(tmp, ignore_errors=True)  # the run before's (transcripts read lazily)
    path, _ = fam.write(family, seed, tmp, severity=sev, length=length)
    return read(path)


def _jsonable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        lab = r["label"]
        d = {
            "family": lab.family,
            "severity": lab.severity,
            "seed": lab.seed,
            "onset": lab.onset,
            "length": lab.length,
            "cadence": lab.cadence,
            "framework": lab.framework,
            "metrics": lab.metrics,
            "ours": r["ours"],
            "final": [list(x) for x in r["ours_raw"]["final"]],
            "verdict": r["ours_raw"]["verdict"],
        }
        if "theirs" in r:
            d["rldoctor"] = r["theirs"]
            d["rldoctor_final"] = r["theirs_raw"]["final"]
        out.append(d)
    return out


def _length(text: str) -> int | tuple[int, int]:
    lo, _, hi = text.partition("-")
    return (int(lo), int(hi)) if hi else int(lo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20, help="seeds per family and severity")
    ap.add_argument(
        "--length",
        type=_length,
        help="updates per run: N, or LO-HI drawn log-uniformly (default 40-400; real runs "
        "hold 20 to 2,000 and more)",
    )
    ap.add_argument("--family", action="append", choices=list(fam.FAMILIES))
    ap.add_argument("--severity", action="append", choices=list(fam.SEVERITIES))
    ap.add_argument("--no-prefixes", dest="prefixes", action="store_false")
    ap.add_argument(
        "--files",
        action="store_true",
        help="judge every run from its files (trainer_state.json, verl console, run dir) as "
        "read back; by default only native runs of families with replies are",
    )
    ap.add_argument("--no-rldoctor", dest="rldoctor", action="store_false")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="judge with this threshold overridden (repeatable), as `rlvitals check --set`",
    )
    ap.add_argument("--json", type=Path, help="write every run's scores here")
    ap.add_argument("--md", type=Path, help="write the tables into this markdown file")
    args = ap.parse_args(argv)
    from rlvitals.errors import RlvitalsError

    t = time.perf_counter()
    try:
        rows = run(args)
    except RlvitalsError as exc:  # a bad --set: one line, not a traceback
        print(f"families.py: {exc}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - t
    text = tables(rows, rldoctor=args.rldoctor)
    load = os.getloadavg()
    stamp = (
        f"{time.strftime('%Y-%m-%d')}, {len(rows)} runs ({args.seeds} seeds per family and "
        f"severity), {seconds:.0f} s, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
        f"({os.cpu_count()} cores)"
    )
    print(f"{stamp}\n\n{text}")
    if args.json:
        args.json.write_text(json.dumps({"stamp": stamp, "runs": _jsonable(rows)}, indent=1))
    if args.md:
        write_md(args.md, stamp, text, argv if argv is not None else sys.argv[1:])
    return 0


BEGIN, END = "<!-- families.py results -->", "<!-- end of results -->"


def write_md(path: Path, stamp: str, text: str, argv: list[str]) -> None:
    """Put the tables between the result markers of ``path`` (appended if it has none), with
    the options that made them (not where the output went)."""
    shown: list[str] = []
    skip = False
    for a in argv:
        if skip or a in ("--md", "--json"):
            skip = not skip
            continue
        shown.append(a)
    argv = shown
    block = f"{BEGIN}\n`python benchmarks/families.py{''.join(' ' + x for x in argv)}` ({stamp}):\n\n{text}\n{END}"
    old = path.read_text() if path.exists() else ""
    if BEGIN in old and END in old:
        new = old[: old.index(BEGIN)] + block + old[old.index(END) + len(END) :]
    else:
        new = old + ("\n" if old else "") + block + "\n"
    path.write_text(new)


if __name__ == "__main__":
    raise SystemExit(main())
