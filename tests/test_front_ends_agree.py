"""``check``, ``serve``, ``watch``, ``report`` and ``export`` agree (issue 29's "must show").

What is compared, and how far:

- **The runs under a folder**, for every folder (at any depth) of ``tests/data``,
  ``benchmarks/corpus`` and, when it is beside the repository, ``../shared/corpus/wild``
  (without it, those folders are left out):
  the runs ``rlvitals check DIR`` judges (its ``_expand``), the runs ``rlvitals export DIR``
  writes (its ``expand``) and the runs ``rlvitals serve DIR`` serves (the ``Hub``, built in this
  process, nothing served). For the sub-folders the Hub's opening of each run's reader is
  replaced by a stand-in (opening 571 readers takes half a minute); for the roots themselves
  the Hub opens every run's reader as ``serve`` does, so a run found but not openable would
  show there. ``report DIR`` judges the runs ``cli._options.runs_of`` finds (compared, without
  judging them); ``watch`` follows one run: ``cli._options.one_run_of`` gives the folder's one
  run where check finds one and refuses a folder where check finds several (compared).
  ``report`` and ``watch`` on a folder of two verl logs are run end to end in
  ``tests/test_source.py``.
- **Each run's verdict**, through each front end's own path (its command line parsed, its
  options built, its reading and judging), on a sample of runs: the smallest run of every
  top-level folder of those roots under 300 kB (about 35 runs), not all 214; judging every
  run through five front ends would take minutes. ``check --json``, ``export`` (the ``runs``
  table), ``report --json``, the ``Hub`` after one judgement of each run, and ``watch``'s
  ``Watcher`` after one forced tick. Liveness is judged at each front end's own clock, a few
  seconds apart; the sample's verdicts do not hinge on those seconds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import front_ends  # noqa: E402  (each front end's own command path, shared with the benchmark)

ROOTS = [
    ROOT / "tests" / "data",
    ROOT / "benchmarks" / "corpus",
    ROOT.parent / "shared" / "corpus" / "wild",
]


# It reads the wild corpus too where it is beside the checkout (.ci/run runs it there as well).
pytestmark = pytest.mark.wild


def _roots() -> list[Path]:
    return [r for r in ROOTS if r.is_dir()]


def _folders() -> list[Path]:
    out = []
    for root in _roots():
        for d, dirs, _files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x != "__pycache__")
            out.append(Path(d))
    return out


def _checked(folder: Path) -> list[str]:
    from rlvitals.cli.check import _expand

    runs, _skipped, _missing = _expand([str(folder)])
    return runs


def _exported(folder: Path) -> list[str]:
    from rlvitals.cli.export import expand
    from rlvitals.errors import RlvitalsError

    try:
        return expand([str(folder)])
    except RlvitalsError:
        return []  # "no runs given": check names the folder as holding none, serve shows none


def _reported(folder: Path) -> list[str]:
    from rlvitals.cli._options import runs_of
    from rlvitals.errors import RlvitalsError

    try:
        return runs_of([str(folder)])
    except RlvitalsError:
        return []


def _watched(folder: Path) -> list[str]:
    """The run watch follows, or every run check finds when watch refuses the folder."""
    from rlvitals.cli._options import one_run_of
    from rlvitals.errors import UsageError

    try:
        got = one_run_of(str(folder))
    except UsageError:
        return _checked(folder)  # several runs: watch names them and follows none
    return [got] if _checked(folder) else []


def _served(folder: Path) -> list[str]:
    from rlvitals.follow.hub import Hub

    hub = Hub([folder], judge=lambda data, now: None)  # type: ignore[arg-type,return-value]
    return [str(r.path) for r in hub.runs.values()]


class _Unread:
    """A reader that reads nothing: what the Hub holds when only its discovery is compared."""

    def __init__(self, path: str) -> None:
        from rlvitals.model import RunData

        self.run = RunData(source=path, format="")

    def poll(self) -> bool:
        return False


def test_every_front_end_finds_the_same_runs_under_every_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rlvitals.source import Source

    def compare(folder: Path) -> None:
        found = {
            "check": sorted(_checked(folder)),
            "export": sorted(_exported(folder)),
            "serve": sorted(_served(folder)),
            "report": sorted(_reported(folder)),
            "watch": sorted(_watched(folder)),
        }
        if len({tuple(v) for v in found.values()}) != 1:
            differ.append((str(folder), found))

    differ: list[tuple[str, dict[str, list[str]]]] = []
    for root in _roots():  # the Hub as serve runs it: every run's reader opened
        compare(root)
    folders = _folders()
    assert len(folders) > 50
    monkeypatch.setattr(Source, "open", lambda self: _Unread(self.path))
    for folder in folders:
        compare(folder)
    assert differ == []


SAMPLE_BYTES = 300_000


def _sample() -> list[str]:
    """The smallest run of every top-level folder of the roots, if under ``SAMPLE_BYTES``
    (the test fixtures' ``.expect.json`` files, which check finds too, left out)."""
    from rlvitals.fleet.judging import run_bytes

    out: list[str] = []
    for root in _roots():
        for top in sorted(p for p in root.iterdir() if p.is_dir()):
            runs = [r for r in _checked(top) if not r.endswith(".expect.json")]
            sized = sorted((run_bytes(r), r) for r in runs if r not in out)
            if sized and sized[0][0] < SAMPLE_BYTES:
                out.append(sized[0][1])
    return out


def test_every_front_end_gives_each_run_the_same_verdict() -> None:
    runs = _sample()
    assert len(runs) >= 25
    readable, got = front_ends.verdicts(runs)
    assert len(readable) >= 20
    differ = [(run, g) for run, g in got.items() if len(set(g.values())) != 1]
    assert differ == []


def test_a_quiet_file_cut_mid_record_reads_in_watch_as_in_check(tmp_path: Path) -> None:
    """An excerpt whose last record is cut (a public log pasted up to a line break): ``check``
    reads the cut record as far as it goes; ``watch`` and ``serve`` used to wait for its end
    forever, one update short (too_early where check said no_signal). A file quiet for
    ``Follower.SETTLE_S`` is now read as complete; one written a moment ago is still waited
    for."""
    import shutil
    import time

    from rlvitals.follow import Follower
    from rlvitals.judge import Judge
    from rlvitals.readers import read

    log = tmp_path / "cut.log"
    shutil.copy(ROOT / "benchmarks" / "corpus" / "public" / "memgen-33-zero-reward.log", log)
    assert read(str(log)).last_step == 2

    os.utime(log, (time.time(), time.time()))  # written just now: the cut record is waited for
    fresh = Follower(str(log), judge=Judge())
    fresh.read()
    assert fresh.data.last_step == 1

    old = time.time() - 2 * Follower.SETTLE_S
    os.utime(log, (old, old))
    quiet = Follower(str(log), judge=Judge())
    quiet.read()
    assert quiet.data.last_step == 2
    quiet.judge()
    assert quiet.report is not None
    assert quiet.report.verdict == Judge()(read(str(log))).verdict == "no_signal"
