"""Every run's report, written down so a change of structure can show it changed no finding.

    python benchmarks/findings.py ROOT [ROOT ...] --out FILE     # judge and write
    python benchmarks/findings.py --against FILE [--out FILE2]    # judge the same runs, diff

Each ROOT is searched with the one discovery ``check DIR`` uses; every run found is read and
judged with the default options, and its verdict and findings (check, severity, verdict, first
step, title, evidence) are kept, or the error line when it cannot be read. ``--against`` judges
the runs listed in FILE again, the same paths whatever discovery finds now, and prints every
run whose report differs; it exits 1 when one does. Timing fields are left out, so two
machines agree. Default roots: the test data, the development corpus, the wild corpus beside
the repository (``../shared/corpus/wild``) when it is there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Liveness is judged at one fixed time, so a stopped run reads the same on every call.
NOW = 1_798_761_600.0  # 2027-01-01
DEFAULT_ROOTS = [
    ROOT / "tests" / "data",
    ROOT / "benchmarks" / "corpus",
    ROOT.parent / "shared" / "corpus" / "wild",
]


def _clean(value: Any) -> Any:
    """The report without what changes from one reading to the next (times, paths of temp)."""
    if isinstance(value, dict):
        return {
            k: _clean(v)
            for k, v in sorted(value.items())
            if k not in {"elapsed", "elapsed_s", "judged_at", "generated_at", "read_s"}
        }
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, float):
        return round(value, 9)
    return value


def judge(path: str) -> dict[str, Any]:
    """One run's report as a plain dict, or its error line."""
    from rlvitals.checks import run_checks
    from rlvitals.errors import RlvitalsError
    from rlvitals.readers import read

    try:
        data = read(path)
        report = run_checks(data, now=NOW)
    except RlvitalsError as exc:
        return {"error": str(exc).replace(str(ROOT), "<repo>")}
    out = report.to_dict()
    return {
        "verdict": out.get("verdict"),
        "worst": out.get("worst"),
        "steps": out.get("steps"),
        "findings": _clean(out.get("findings", [])),
        "warnings": len(getattr(data, "warnings", []) or []),
    }


def discover(roots: list[Path]) -> list[str]:
    from rlvitals.source import find_runs

    runs: list[str] = []
    for root in roots:
        if root.exists():
            runs.extend(find_runs(root).runs)
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="*", type=Path)
    ap.add_argument("--out", type=Path, default=None, help="write the reports here")
    ap.add_argument("--against", type=Path, default=None, help="diff against this file")
    args = ap.parse_args()
    if args.against is not None:
        before = json.loads(args.against.read_text())
        paths = list(before)
    else:
        before = None
        paths = discover(args.roots or DEFAULT_ROOTS)
    now: dict[str, Any] = {}
    for path in paths:
        now[path] = judge(path)
    if args.out is not None:
        args.out.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    if before is None:
        print(f"{len(now)} runs judged")
        return 0
    changed = [p for p in paths if before[p] != now[p]]
    for p in changed:
        print(f"CHANGED {p}")
        print(f"  before: {json.dumps(before[p], sort_keys=True)[:600]}")
        print(f"  now:    {json.dumps(now[p], sort_keys=True)[:600]}")
    print(f"{len(paths) - len(changed)}/{len(paths)} runs judged the same")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
