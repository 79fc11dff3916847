"""What every fixture reads as, written down so a change of the readers can show it read the same.

    python benchmarks/reads.py --out FILE                 # read every path and write
    python benchmarks/reads.py --against FILE [--out F2]  # read them again and diff

Every file and folder under ``tests/data`` and ``benchmarks/corpus`` (the folders too: a run
directory, a folder of runs) is given to ``rlvitals.read`` as a user would; of each reading it
keeps the format, every series (names, steps and values, as digests), the mapping (``original``,
``resolved``, ``unmapped``, ``nulls``), warnings, notes, info, evals, heartbeats, events, the
attempts table (every column) and the transcripts (every attempt), or the error line.
``--against`` reads the paths listed in FILE again and prints, for each one that differs, what
differs; it exits 1 when one does. A second process of the same code reads the same. Sample
times are the files' modification times: write and diff in one checkout (before and after a
change), not across two.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
ROOTS = ("tests/data", "benchmarks/corpus")


def _digest(value: Any) -> str:
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value).tobytes()
    else:
        text = json.dumps(value, sort_keys=True, default=repr)
        data = text.replace(str(ROOT), "<repo>").encode("utf-8", "surrogatepass")
    return hashlib.sha1(data).hexdigest()[:16]


def _attempts(table: Any) -> str | None:
    if table is None:
        return None
    fields = {f.name: _digest(getattr(table, f.name)) for f in dataclasses.fields(table)}
    return f"{len(table)} rows {_digest(fields)}"


def _transcripts(store: Any) -> str | None:
    if store is None:
        return None
    if not hasattr(store, "iter_step"):
        return type(store).__name__
    shown = [type(store).__name__]
    try:
        for step in store.steps():
            shown += [repr(a) for a in store.iter_step(step)]
    except Exception as exc:
        shown.append(f"{type(exc).__name__}: {exc}")
    return f"{len(shown) - 1} attempts {_digest(shown)}"


def reading(path: Path) -> dict[str, Any]:
    """What ``rlvitals.read(path)`` gives, as digests, or its error line."""
    import rlvitals

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            d = rlvitals.read(path)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}".replace(str(ROOT), "<repo>")}
    series = {}
    for name in sorted(d.metrics.names()):
        s = d.metrics.get(name)
        if s is not None:
            series[name] = f"{len(s.steps)} {_digest(s.steps)} {_digest(s.values)}"
    return {
        "format": d.format,
        "series": series,
        "original": dict(d.original),
        "resolved": {k: list(v) for k, v in d.resolved.items()},
        "unmapped": dict(d.unmapped),
        "nulls": dict(d.nulls),
        "source_keys": sorted(d.source_keys),
        **{
            k: _digest(v)
            for k, v in (
                ("warnings", d.warnings),
                ("notes", d.notes),
                ("info", d.info),
                ("evals", d.evals),
                ("heartbeats", d.heartbeats),
                ("events", [repr(e) for e in d.events]),
            )
        },
        "attempts": _attempts(d.attempts),
        "transcripts": _transcripts(d.transcripts),
    }


def paths() -> list[str]:
    """Every folder and file under the roots, in a fixed order, relative to the repository."""
    out = []
    for base in ROOTS:
        for folder, dirs, files in os.walk(ROOT / base):
            dirs.sort()
            out.append(os.path.relpath(folder, ROOT))
            out += [os.path.relpath(os.path.join(folder, f), ROOT) for f in sorted(files)]
    return out


def diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """One line per field of one path that reads otherwise."""
    lines = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                if a.get(k) != b.get(k):
                    lines.append(f"  {key}[{k}]: {a.get(k)!r} -> {b.get(k)!r}")
        else:
            lines.append(f"  {key}: {str(a)[:200]!r} -> {str(b)[:200]!r}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write every path's reading here (JSON)")
    ap.add_argument("--against", type=Path, help="read the paths of this file again and diff")
    args = ap.parse_args(argv)
    before = json.loads(args.against.read_text()) if args.against else None
    listed = sorted(before) if before is not None else paths()
    now = {p: reading(ROOT / p) for p in listed}
    if args.out:
        args.out.write_text(json.dumps(now, indent=1, sort_keys=True))
    if before is None:
        print(f"{len(now)} paths read ({sum('error' not in r for r in now.values())} as runs)")
        return 0
    changed = [p for p in listed if now[p] != before[p]]
    for p in changed:
        print(p)
        print("\n".join(diff(before[p], now[p])))
    print(f"{len(listed) - len(changed)}/{len(listed)} paths read the same")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
