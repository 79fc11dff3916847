"""Do the front ends agree on every run? Each run under the roots judged by ``check --json``,
``export`` (its ``runs`` table), ``report --json``, ``serve``'s Hub (one read and one judgement
of each run) and ``watch``'s Watcher (one forced tick), each through its own command line and
options; every run whose verdicts differ is printed.

    python benchmarks/front_ends.py [ROOT ...]    # default: test data, dev corpus, wild corpus

tests/test_front_ends_agree.py compares the runs every front end finds under every folder, and
the verdicts on a sample (through ``verdicts`` here); this judges all of them (a minute). Exit 1 when a run differs.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ROOTS = [
    ROOT / "tests" / "data",
    ROOT / "benchmarks" / "corpus",
    ROOT.parent / "shared" / "corpus" / "wild",
]


def _quiet(argv: list[str]) -> tuple[int, str]:
    """Run the CLI in this process; its exit code and standard output."""
    from rlvitals.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    return code, out.getvalue()


def by_check(runs: list[str]) -> dict[str, str | None]:
    _code, out = _quiet(["check", *runs, "--json"])
    return {r["path"]: r.get("verdict") for r in json.loads(out)["runs"]}


def by_export(runs: list[str]) -> dict[str, str | None]:
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as tmp:
        _quiet(["export", *runs, "-o", str(Path(tmp) / "out")])
        rows = pq.read_table(Path(tmp) / "out" / "runs").to_pylist()
    return {r["run"]: r["verdict"] for r in rows}


def by_report(run: str) -> str | None:
    code, out = _quiet(["report", run, "--json"])
    if code != 0:
        return None
    (got,) = json.loads(out)["runs"]
    return got["report"]["verdict"] if got.get("report") else None


def by_serve(runs: list[str]) -> dict[str, str | None]:
    from rlvitals.cli import build_parser
    from rlvitals.cli._options import judge_of, source_of
    from rlvitals.follow.hub import Hub

    args = build_parser().parse_args(["serve", *runs])
    hub = Hub(runs, source_of(args, ""), judge_of(args))
    out: dict[str, str | None] = {}
    for r in hub.runs.values():
        r.read()
        r.judge()
        out[str(r.path)] = r.report.verdict if r.report is not None else None
    return out


def by_watch(run: str) -> str | None:
    from rlvitals.cli import build_parser
    from rlvitals.cli._options import judge_of, source_of
    from rlvitals.follow.watch import Watcher

    args = build_parser().parse_args(["watch", run])
    w = Watcher(source_of(args, run), judge_of(args))
    w.tick(force=True)
    return w.report.verdict if w.report is not None else None


def verdicts(runs: list[str]) -> tuple[list[str], dict[str, dict[str, str | None]]]:
    """The runs ``check`` reads, and each one's verdict by every front end."""
    checked = by_check(runs)
    readable = [r for r in runs if checked.get(r) is not None]
    exported = by_export(readable)
    served = by_serve(readable)
    return readable, {
        run: {
            "check": checked[run],
            "export": exported.get(run),
            "serve": served.get(run),
            "report": by_report(run),
            "watch": by_watch(run),
        }
        for run in readable
    }


def main() -> int:
    from rlvitals.source import find_runs

    roots = [Path(a) for a in sys.argv[1:]] or [r for r in DEFAULT_ROOTS if r.is_dir()]
    runs = [r for root in roots for r in find_runs(root).runs]
    start = time.perf_counter()
    readable, got = verdicts(runs)
    differ = [(run, g) for run, g in got.items() if len(set(g.values())) != 1]
    for run, g in differ:
        print(f"DIFFERS {run}: {g}")
    print(
        f"{len(readable) - len(differ)}/{len(readable)} runs given the same verdict by check, "
        f"export, report, serve and watch ({len(runs) - len(readable)} runs check could not "
        f"read, {time.perf_counter() - start:.0f} s)"
    )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
