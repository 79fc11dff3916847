"""Readers from other packages: a format registered through the ``rlvitals.readers`` entry-point
group (docs/formats.md, "Readers from other packages") is listed, sniffed and read like ours.

The third party here is one module and a ``*.dist-info`` folder with its ``entry_points.txt``,
put on ``sys.path`` inside the test: what ``pip install`` of such a package leaves behind.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlvitals.cli import main
from rlvitals.errors import UnknownFormatError
from rlvitals.readers import FORMATS, formats, read
from rlvitals.readers import registry as registry_mod

READER = '''
from pathlib import Path

from rlvitals.model import RunData
from rlvitals.readers import Format, register
from rlvitals.readers.mapping import Mapper, MappingTable, Rule

TABLE = MappingTable("scorelog", (Rule("score", "reward/mean", "the task score"),))


class ScoreLogReader:
    """``S <step> <score>`` lines."""

    name = "scorelog"

    def __init__(self, path, **_):
        self.path = Path(path)
        self.run = RunData(source=str(path), format=self.name)
        self.mapper = Mapper(TABLE, self.run)
        self.done = 0

    def poll(self):
        lines = self.path.read_text().splitlines()
        for line in lines[self.done:]:
            _, step, score = line.split()
            self.mapper.add(int(step), {"score": float(score), "entropy": 1.0})
        changed = len(lines) > self.done
        self.done = len(lines)
        return changed


def sniff(p):
    return p.is_file() and p.read_text().startswith("S ")


register(
    Format(
        "scorelog", "a score log of another package", sniff, ScoreLogReader, priority=40,
        table=TABLE, kind="score log", files="a .scores file",
    )
)
'''


def _install(root: Path, name: str, entry: str, module: str, source: str) -> None:
    """A package as pip leaves it: the module and its dist-info with the entry point."""
    (root / f"{module}.py").write_text(source)
    info = root / f"{name.replace('-', '_')}-0.1.dist-info"  # as pip names it
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[rlvitals.readers]\n{entry} = {module}\n")


@pytest.fixture
def reload_readers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Readers loaded afresh (entry points read again), the registry restored after."""
    formats()  # ours registered first, whatever ran before
    before = dict(FORMATS)
    errors = dict(registry_mod.LOAD_ERRORS)
    monkeypatch.setattr(registry_mod, "_loaded", False)
    yield
    FORMATS.clear()
    FORMATS.update(before)
    registry_mod.LOAD_ERRORS.clear()
    registry_mod.LOAD_ERRORS.update(errors)
    for mod in ("rlvitals_scorelog", "rlvitals_broken", "rlvitals_verl_again"):
        sys.modules.pop(mod, None)


def test_a_reader_of_another_package_is_listed_sniffed_and_read(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    reload_readers: None,
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "rlvitals-scorelog", "scorelog", "rlvitals_scorelog", READER)
    monkeypatch.syspath_prepend(str(site))

    names = [f.name for f in formats()]
    assert "scorelog" in names
    # Placed by its priority among ours (40: after the frameworks' consoles, before the
    # catch-all readings).
    assert names.index("trl-console") < names.index("scorelog") < names.index("json")
    assert main(["formats"]) == 0
    assert "scorelog" in capsys.readouterr().out

    log = tmp_path / "run.scores"
    log.write_text("S 1 0.25\nS 2 0.5\nS 3 0.75\n")
    run = read(log)
    assert run.format == "scorelog"
    assert run.series("reward/mean").values.tolist() == [0.25, 0.5, 0.75]
    assert run.resolved["score"][:2] == ("reward/mean", "table")
    assert run.resolved["entropy"][:2] == ("train/entropy", "synonym")  # the schema decides


def test_a_broken_or_clashing_reader_of_another_package_never_stops_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reload_readers: None
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "rlvitals-broken", "broken", "rlvitals_broken", "raise RuntimeError('oops')\n")
    clash = READER.replace('"scorelog", "a score', '"verl", "a score')
    _install(site, "rlvitals-verl-again", "verl_again", "rlvitals_verl_again", clash)
    monkeypatch.syspath_prepend(str(site))
    ours = FORMATS["verl"]

    formats()
    assert FORMATS["verl"] is ours  # a name of ours stays ours
    assert "RuntimeError: oops" in registry_mod.LOAD_ERRORS["broken"]
    assert "'verl' is registered already" in registry_mod.LOAD_ERRORS["verl_again"]
    data = Path(__file__).parent / "data" / "verl"
    log = sorted(data.glob("*.log"))[0]
    assert read(log).format == "verl"
    # A path no format reads says which reader was left out.
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01\x02" * 100)
    with pytest.raises(UnknownFormatError, match="not loaded: broken"):
        read(junk)


# A reader of a folder layout, as another package would ship it: a run is a folder marked by
# its ``run.pts`` (``markers``), its points in ``points.dat``; and loose ``*.pts`` logs
# (``suffixes``, a suffix no reader of ours sniffs). Nothing of rlvitals lists it.
LAYOUT = '''
from pathlib import Path

from rlvitals.model import RunData
from rlvitals.readers import Format, register
from rlvitals.readers.mapping import Mapper, MappingTable, Rule

TABLE = MappingTable("pts", (Rule("score", "reward/mean", "the task score"),))


class PointsReader:
    """``<step> <score>`` lines, in ``points.dat`` of a marked folder or a ``*.pts`` file."""

    name = "pts"

    def __init__(self, path, **_):
        path = Path(path)
        self.file = path / "points.dat" if path.is_dir() else path
        self.run = RunData(source=str(path), format=self.name)
        self.run.info["status"] = "finished"
        self.mapper = Mapper(TABLE, self.run)
        self.done = 0

    def poll(self):
        lines = self.file.read_text().splitlines()
        for line in lines[self.done:]:
            step, score = line.split()
            self.mapper.add(int(step), {"score": float(score)})
        changed = len(lines) > self.done
        self.done = len(lines)
        return changed


def sniff(p):
    if p.is_dir():
        return (p / "run.pts").is_file()
    return p.suffix == ".pts" and p.read_text()[:1].isdigit()


register(
    Format(
        "pts", "points of another package", sniff, PointsReader, priority=40, table=TABLE,
        kind="run directory", markers=("run.pts",), suffixes=(".pts",),
    )
)
'''


def _points(d: Path, n: int = 30) -> None:
    d.mkdir(parents=True)
    (d / "run.pts").write_text("")
    (d / "points.dat").write_text("".join(f"{i} {0.2 + 0.01 * i}\n" for i in range(n)))


def test_a_reader_of_another_package_is_discovered_by_check_serve_watch_and_export(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    reload_readers: None,
) -> None:
    import json

    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from rlvitals.follow.hub import Hub

    site = tmp_path / "site"
    site.mkdir()
    _install(site, "rlvitals-pts", "pts", "rlvitals_pts", LAYOUT)
    monkeypatch.syspath_prepend(str(site))
    formats()
    root = tmp_path / "runs"
    _points(root / "a")  # a folder run: its marker, and a file no reader of ours sniffs
    _points(root / "deeper" / "b")
    (root / "c.pts").write_text("".join(f"{i} 0.5\n" for i in range(30)))  # a loose log
    want = sorted(str(p) for p in (root / "a", root / "deeper" / "b", root / "c.pts"))

    assert main(["check", str(root), "--json"]) in (0, 1)
    checked = json.loads(capsys.readouterr().out)["runs"]
    assert sorted(r["path"] for r in checked) == want
    assert all(r.get("verdict") for r in checked)  # read and judged, no error

    hub = Hub([root])
    assert sorted(str(r.path) for r in hub.runs.values()) == want
    hub.poll(force=True)
    assert all(r.report is not None for r in hub.runs.values())
    hub.stop()
    hub.close(1)

    assert main(["watch", str(root / "deeper"), "--json"]) in (0, 1)  # its one run, found
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events[-1]["event"] == "finished" and events[-1]["verdict"] is not None

    assert main(["export", str(root), "-o", str(tmp_path / "out")]) == 0
    exported = pq.read_table(tmp_path / "out" / "runs").to_pylist()
    assert sorted(r["run"] for r in exported) == want and all(r["verdict"] for r in exported)
