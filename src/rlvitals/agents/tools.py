"""The read-only tools ``rlvitals mcp`` serves, as plain functions over JSON-able dicts.

Every answer holds ``not_read`` (what was passed over, cut or could not be read: reader
warnings, numbers that mean nothing to the checks, steps outside the range asked, texts cut)
and, where the answer rests on a verdict, ``abstained``: the checks' own "too early to tell"
(``overall_verdict``'s ``too_early``), with the reasons the checks gave. Nothing here judges:
runs are found by ``source.find_runs``, read by ``Source.read`` and judged by
``fleet.judging.judged`` with the server's one ``Judge``, as ``rlvitals check`` does.

Paths: every path an agent names is taken relative to the first root when it is not absolute,
resolved with its symbolic links, and refused (``PathRefused``) unless it lies inside one of
the roots the server was started with; URLs are refused too (a server that reads buckets is
another server's decision). Runs found under a folder never follow a link out of the roots.
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..checks.base import Finding, Report, severity_rank
from ..errors import PathRefused, ReadError, UsageError
from ..fleet.judging import judged
from ..jsonio import clean
from ..judge import Judge, judging, load_run_rules
from ..readers.keys import require_metrics
from ..source import Source, find_runs, run_dir

if TYPE_CHECKING:
    from ..model import RunData

__all__ = ["Roots", "Tools"]

SHOWN_WARNINGS = 20  # reader warnings quoted in an answer (the count says how many in all)
CACHED_RUNS = 2  # runs kept read (and judged) between calls: compare_runs holds two
MAX_LISTED = 2000  # runs find_runs lists at most
MAX_POINTS = 2000  # points of a series read_metrics returns at most (it thins beyond)
MAX_CHARS = 20000  # characters of one transcript text at most


class Roots:
    """The folders a server may read: each an existing directory, taken with its links
    resolved. ``resolve`` turns an agent's path into one under them, or refuses it."""

    def __init__(self, roots: Sequence[str | os.PathLike[str]]) -> None:
        if not roots:
            raise UsageError("--root: expected at least one folder")
        self.roots: list[Path] = []
        for r in roots:
            p = Path(r).expanduser()
            if not p.is_dir():
                raise UsageError(f"--root {os.fspath(r)}: not a folder")
            self.roots.append(p.resolve())

    def __str__(self) -> str:
        return ", ".join(map(str, self.roots))

    def inside(self, real: Path) -> bool:
        """Whether the resolved path ``real`` is one of the roots or lies under one."""
        return any(real == r or r in real.parents for r in self.roots)

    def resolve(self, path: str) -> Path:
        """``path`` (relative to the first root unless absolute) with its links resolved,
        when it lies under a root; else ``PathRefused``."""
        text = str(path).strip()
        if not text:
            raise UsageError("expected a path (a run, or a folder of runs)")
        if "://" in text or "\x00" in text:
            raise PathRefused(
                f"{text!r}: only local paths under the server's roots are read ({self})"
            )
        p = Path(text).expanduser()
        if not p.is_absolute():
            p = self.roots[0] / p
        try:
            real = p.resolve()
        except (OSError, RuntimeError):
            raise PathRefused(f"{text}: cannot be resolved (a loop of links?)") from None
        if not self.inside(real):
            raise PathRefused(
                f"{text}: outside the roots this server was started with ({self}); not read"
            )
        return real


def _stamp(path: Path) -> tuple[Any, ...]:
    """What changes when a run is written to: its files' sizes and times, two levels down
    (a run directory's transcripts, a W&B folder's run directory)."""
    out: list[Any] = []

    def walk(p: Path, depth: int) -> None:
        try:
            with os.scandir(p) as it:
                for e in it:
                    if len(out) > 50_000:
                        return
                    if e.is_file(follow_symlinks=True):
                        st = e.stat()
                        out.append((e.path, st.st_size, st.st_mtime_ns))
                    elif depth < 2 and e.is_dir(follow_symlinks=True):
                        walk(Path(e.path), depth + 1)
        except OSError:
            out.append((str(p), "unreadable"))

    try:
        st = path.stat()
    except OSError:
        return ("missing",)
    if not path.is_dir():
        return (st.st_size, st.st_mtime_ns)
    walk(path, 0)
    return tuple(sorted(out, key=repr))


def _warnings(data: RunData, report: Report | None) -> dict[str, Any]:
    said = list(data.warnings)
    if report is not None:
        said += [w for w in report.warnings if w not in data.warnings]
    return {
        "reader_warnings": said[:SHOWN_WARNINGS],
        "reader_warning_count": len(said),
        "notes": list(data.notes),
    }


def _finding(f: Finding) -> dict[str, Any]:
    d = f.to_dict()
    d.pop("steps", None)
    return dict(clean(d))


def _follow_up(run: str, findings: list[Finding]) -> list[dict[str, Any]]:
    """The tool calls that show the evidence of each warn-or-fail finding: its metric over
    the steps around its onset, and the transcripts of that step where it reads them."""
    out: list[dict[str, Any]] = []
    for f in findings:
        if severity_rank(f.severity) < severity_rank("warn"):
            continue
        if f.metric and not f.metric.startswith("transcripts/"):
            args: dict[str, Any] = {"run": run, "metrics": [f.metric]}
            if f.first_step is not None:
                args["first_step"] = max(0, f.first_step - 20)
            out.append({"tool": "read_metrics", "arguments": args, "for": f.title})
        if f.check in ("transcripts", "heldout", "policy") or f.verdict == "exploit_suspected":
            targs: dict[str, Any] = {"run": run}
            if f.check == "transcripts":
                targs["flag"] = "*"
            elif f.first_step is not None:
                targs["step"] = f.first_step
            out.append({"tool": "list_transcripts", "arguments": targs, "for": f.title})
    return out[:10]


def _thin(n: int, most: int) -> np.ndarray:
    """Indices of ``most`` points spread evenly over ``n`` (the first and last kept)."""
    if n <= most:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, most).round().astype(np.int64))


def _summary(values: np.ndarray) -> dict[str, Any]:
    finite = values[np.isfinite(values)]
    out: dict[str, Any] = {"points": len(values), "non_finite": int(len(values) - len(finite))}
    if len(finite):
        out.update(
            first=float(finite[0]),
            last=float(finite[-1]),
            min=float(finite.min()),
            max=float(finite.max()),
            mean=float(finite.mean()),
        )
    return out


def _cut_texts(obj: Any, chars: int, counter: list[int]) -> Any:
    """``obj`` with every string longer than ``chars`` cut to its head and tail (counted)."""
    if isinstance(obj, str):
        if len(obj) <= chars:
            return obj
        counter[0] += 1
        head = chars * 2 // 3
        return obj[:head] + f"\n[… {len(obj) - chars} characters cut …]\n" + obj[-(chars - head) :]
    if isinstance(obj, dict):
        return {k: _cut_texts(v, chars, counter) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_cut_texts(v, chars, counter) for v in obj]
    return obj


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {prefix: d} if prefix else {}
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out.update(_flat(v, key) if isinstance(v, dict) else {key: v})
    return out


class Tools:
    """The tools, over the runs under ``roots``, judged by ``judge`` (``rlvitals check``'s
    options; default: its defaults). Safe to call from several threads."""

    def __init__(self, roots: Roots, judge: Judge | None = None) -> None:
        self.roots = roots
        self.judge = judging(judge)
        self._lock = threading.Lock()
        # path -> (stamp, data, report or None): the last runs read, judged when asked
        self._runs: OrderedDict[str, tuple[Any, RunData, Report | None]] = OrderedDict()

    # -- reading, as check reads ---------------------------------------------------------

    def _read(self, path: Path, *, judge: bool, require: bool = True) -> tuple[RunData, Any]:
        key = str(path)
        stamp = _stamp(path)
        with self._lock:
            got = self._runs.get(key)
        if got is not None and got[0] == stamp:
            data, report = got[1], got[2]
        else:
            data = Source(key).read()
            report = None
        if require:
            require_metrics(data, key)
        if judge and report is None:
            report = judged(data, self.judge)
        with self._lock:
            self._runs[key] = (stamp, data, report)
            self._runs.move_to_end(key)
            while len(self._runs) > CACHED_RUNS:
                self._runs.popitem(last=False)
        return data, report

    def _one_run(self, run: str) -> Path:
        path = self.roots.resolve(run)
        if not path.exists():
            raise ReadError("no such file or directory", path=str(path))
        found = find_runs(path, within=self.roots.roots).runs
        if len(found) > 1:
            names = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
            raise UsageError(
                f"{path}: a folder of {len(found)} runs ({names}); name one of them "
                "(find_runs lists them)"
            )
        return Path(found[0]) if found else path

    # -- the tools -----------------------------------------------------------------------

    def find_runs(self, folder: str = ".", limit: int = 200) -> dict[str, Any]:
        """Every run under ``folder``, as ``rlvitals check FOLDER`` finds them."""
        path = self.roots.resolve(folder)
        found = find_runs(path, within=self.roots.roots)
        limit = max(1, min(int(limit), MAX_LISTED))
        runs = []
        for r in found.runs[:limit]:
            p = Path(r)
            try:
                st = p.stat()
                size, mtime = st.st_size if p.is_file() else None, st.st_mtime
            except OSError:
                size, mtime = None, None
            runs.append({"path": r, "kind": "file" if p.is_file() else "folder",
                         "size_bytes": size, "modified": mtime})  # fmt: skip
        return {
            "folder": str(path),
            "runs": runs,
            "count": len(found.runs),
            "not_read": {
                "runs_not_listed": max(0, len(found.runs) - limit),
                "files_no_reader_recognises": found.skipped[:SHOWN_WARNINGS],
                "files_no_reader_recognises_count": len(found.skipped),
                "links_out_of_roots": "passed over",
            },
            "next": "check_run on one of these paths",
        }

    def check_run(self, run: str) -> dict[str, Any]:
        """The run judged as ``rlvitals check RUN --json`` judges it."""
        path = self._one_run(run)
        data, report = self._read(path, judge=True)
        assert report is not None
        alarms = report.at_least("warn")
        not_judged = [
            {"check": f.check, "why": f.title} for f in report.findings if f.verdict == "too_early"
        ]
        abstained = report.verdict == "too_early"
        if alarms:
            next_action = alarms[0].action
        elif abstained:
            next_action = next(
                (f.action for f in report.findings if f.verdict == "too_early" and f.action),
                "Wait for more updates, then check again.",
            )
        else:
            next_action = "Nothing to act on now: no warning or failure. Check again later."
        return {
            "run": str(path),
            "verdict": report.verdict,
            "verdict_text": report.to_dict()["verdict_text"],
            "worst": report.worst,
            "abstained": abstained,
            "abstained_because": [n["why"] for n in not_judged] if abstained else [],
            "next_action": next_action,
            "last_step": report.last_step,
            "info": clean({k: v for k, v in report.info.items() if k != "unmapped"}),
            "findings": [_finding(f) for f in report.findings],
            "follow_up": _follow_up(str(path), report.findings),
            "not_read": {
                **_warnings(data, report),
                "unmapped_numbers": clean(report.info.get("unmapped", {})),
                "checks_without_enough_evidence": not_judged,
            },
        }

    def read_metrics(
        self,
        run: str,
        metrics: list[str] | None = None,
        first_step: int | None = None,
        last_step: int | None = None,
        max_points: int = 200,
    ) -> dict[str, Any]:
        """Metrics over a step range, with a summary of every point in the range."""
        from ..views.series import select_metrics

        path = self._one_run(run)
        data, _ = self._read(path, judge=False)
        available = {n: len(data.series(n) or ()) for n in data.names() if data.is_canonical(n)}
        names = select_metrics(data, list(metrics or []))
        steps = data.steps()
        lo = -math.inf if first_step is None else first_step
        hi = math.inf if last_step is None else last_step
        if lo > hi:
            raise UsageError(f"first_step {first_step} is after last_step {last_step}")
        in_range = steps[(steps >= lo) & (steps <= hi)]
        pick = _thin(len(in_range), max(2, min(int(max_points), MAX_POINTS)))
        shown = in_range[pick]
        series: dict[str, Any] = {}
        for name in names:
            s = data.series(name)
            if s is None or not len(s):
                series[name] = {"summary": {"points": 0}, "values": [None] * len(shown)}
                continue
            keep = (s.steps >= lo) & (s.steps <= hi)
            at = dict(zip(s.steps[keep].tolist(), s.values[keep].tolist()))
            series[name] = {
                "summary": _summary(s.values[keep]),
                "values": clean([at.get(st) for st in shown.tolist()]),
            }
        thinned = len(shown) < len(in_range)
        return {
            "run": str(path),
            "steps": shown.tolist(),
            "metrics": series,
            "available": available,
            "not_read": {
                **_warnings(data, None),
                "steps_outside_range": int(len(steps) - len(in_range)),
                "steps_in_range_not_shown": int(len(in_range) - len(shown)),
                "thinned": (
                    f"{len(shown)} of {len(in_range)} steps shown, evenly spread; each summary "
                    "covers every point in the range; ask a narrower range for every step"
                    if thinned
                    else None
                ),
                "original_keys": sorted(n for n in data.names() if not data.is_canonical(n))[
                    :SHOWN_WARNINGS
                ],
            },
        }

    def list_transcripts(
        self,
        run: str,
        flag: str | None = "*",
        step: int | None = None,
        lowest: bool = False,
        top: int = 3,
        attempt: str | None = None,
        chars: int = 1200,
    ) -> dict[str, Any]:
        """What ``rlvitals transcripts RUN --json`` selects, texts cut to ``chars``."""
        from ..transcripts.browse import browse
        from ..transcripts.store import TranscriptStore

        path = self._one_run(run)
        data, _ = self._read(path, judge=False, require=False)
        store = Source(str(path)).transcripts(data) or TranscriptStore(path)
        rules = load_run_rules(self.judge.rules, run_dir(data) or store.run_dir)
        payload = browse(
            store,
            rules,
            data,
            top=max(1, min(int(top), 20)),
            step=step,
            attempt=attempt,
            lowest=lowest,
            flag=flag or None,
            max_steps=20,
        )
        cut = [0]
        chars = max(80, min(int(chars), MAX_CHARS))
        payload = _cut_texts(clean(payload), chars, cut)
        payload["not_read"] = {
            "texts_cut": cut[0],
            "texts_cut_to_chars": chars,
            "transcript_warnings": payload.pop("warnings", []),
            "notes": payload.get("notes", []),
            **_warnings(data, None),
        }
        return dict(payload)

    def compare_runs(self, run_a: str, run_b: str, max_metrics: int = 40) -> dict[str, Any]:
        """Two runs judged alike, side by side: verdicts, findings, metrics, settings."""
        a, b = self._one_run(run_a), self._one_run(run_b)
        data_a, rep_a = self._read(a, judge=True)
        data_b, rep_b = self._read(b, judge=True)
        fa = {(f.check, f.verdict, f.metric): f for f in rep_a.findings}
        fb = {(f.check, f.verdict, f.metric): f for f in rep_b.findings}

        def brief(f: Finding) -> dict[str, Any]:
            return clean(
                {"check": f.check, "severity": f.severity, "verdict": f.verdict,
                 "metric": f.metric, "first_step": f.first_step, "title": f.title}
            )  # fmt: skip

        both = [
            {**brief(fa[k]), "severity_b": fb[k].severity, "first_step_b": fb[k].first_step}
            for k in fa
            if k in fb
        ]
        metrics, not_shown = _compare_metrics(data_a, data_b, max_metrics)
        cfg_a, cfg_b = (_flat(d.info.get("config") or {}) for d in (data_a, data_b))
        settings = {
            k: {"a": cfg_a.get(k), "b": cfg_b.get(k)}
            for k in sorted(set(cfg_a) | set(cfg_b))
            if cfg_a.get(k) != cfg_b.get(k)
        }
        abstained = [str(p) for p, r in ((a, rep_a), (b, rep_b)) if r.verdict == "too_early"]
        return {
            "a": _side(a, data_a, rep_a),
            "b": _side(b, data_b, rep_b),
            "abstained": bool(abstained),
            "abstained_because": [f"{p}: too early to tell" for p in abstained],
            "findings_only_in_a": [brief(f) for k, f in fa.items() if k not in fb],
            "findings_only_in_b": [brief(f) for k, f in fb.items() if k not in fa],
            "findings_in_both": both,
            "metrics": metrics,
            "settings_that_differ": clean(dict(list(settings.items())[:50])),
            "not_read": {
                "a": _warnings(data_a, rep_a),
                "b": _warnings(data_b, rep_b),
                "metrics_not_shown": not_shown,
                "settings_not_shown": max(0, len(settings) - 50),
            },
        }


def _side(path: Path, data: RunData, report: Report) -> dict[str, Any]:
    return {
        "run": str(path),
        "verdict": report.verdict,
        "worst": report.worst,
        "steps": report.info.get("steps"),
        "format": data.format,
    }


def _compare_metrics(a: RunData, b: RunData, most: int) -> tuple[dict[str, Any], list[str]]:
    """The canonical metrics both runs have, each run's summary, the largest relative
    difference of their means first; and the names left out (past ``most``, or one run's)."""
    names_a = {n for n in a.names() if a.is_canonical(n)}
    names_b = {n for n in b.names() if b.is_canonical(n)}
    rows = []
    for n in sorted(names_a & names_b):
        sa, sb = a.series(n), b.series(n)
        if sa is None or sb is None or not len(sa) or not len(sb):
            continue
        ma, mb = _summary(sa.values), _summary(sb.values)
        if "mean" in ma and "mean" in mb:
            scale = max(abs(ma["mean"]), abs(mb["mean"]), 1e-12)
            gap = abs(ma["mean"] - mb["mean"]) / scale
        else:
            gap = math.inf
        rows.append((gap, n, ma, mb))
    rows.sort(key=lambda r: (-r[0], r[1]))
    shown = {n: clean({"a": ma, "b": mb, "relative_gap": g}) for g, n, ma, mb in rows[:most]}
    left = [n for _g, n, _a, _b in rows[most:]]
    left += [f"{n} (only in a)" for n in sorted(names_a - names_b)]
    left += [f"{n} (only in b)" for n in sorted(names_b - names_a)]
    return shown, left
