"""The development corpus (benchmarks/corpus/): the manifest is valid, every run in it exists
and reads with ``rlvitals.read``, and the scoring helpers behave."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import _corpus  # noqa: E402
from _rldoctor import data_to_rldoctor_jsonl, prefix_file, their_hits  # noqa: E402

ENTRIES = _corpus.load_manifest()


def test_manifest_is_valid_and_covers_every_source() -> None:
    assert len(ENTRIES) >= 40
    sources = {_corpus.source(e) for e in ENTRIES}
    assert sources == {"trl", "peers", "public"}
    labels = {e["label"] for e in ENTRIES}
    assert "healthy" in labels and len(labels) >= 8
    for e in ENTRIES:
        if _corpus.source(e) == "public":
            assert e["source_url"].startswith("https://github.com/")
    # every TRL run in the corpus is one make_trl.py makes
    sys.path.insert(0, str(BENCH / "corpus"))
    import make_trl

    for e in ENTRIES:
        if _corpus.source(e) == "trl":
            assert e["path"].split("/")[1] in make_trl.RUNS


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["path"] for e in ENTRIES])
def test_every_run_reads(entry: dict) -> None:
    data = _corpus.read_entry(entry)
    steps = data.steps()
    assert len(steps) >= 1
    onset = entry.get("onset")
    if onset is not None:
        assert steps[0] <= onset <= steps[-1], "the onset lies inside the run"
    if "reader_gap" not in entry:
        # read without help, the run has a reward or a non-finite training metric
        assert data.names("reward/") or data.names("train/")


def _write(tmp: Path, text: str) -> Path:
    p = tmp / "manifest.toml"
    p.write_text(text)
    (tmp / "run.jsonl").write_text('{"step": 1, "reward/mean": 0.5}\n')
    return p


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[[run]]\npath = "run.jsonl"\ntool = "x"\nlabel = "bogus"\nonset = 1\n', "not a verdict"),
        ('[[run]]\npath = "nope.jsonl"\ntool = "x"\nlabel = "collapse"\nonset = 1\n', "exist"),
        ('[[run]]\npath = "run.jsonl"\ntool = "x"\nlabel = "collapse"\n', "'onset'"),
        ('[[run]]\npath = "run.jsonl"\ntool = "x"\nlabel = "healthy"\nonset = 3\n', "no onset"),
        ('[[run]]\npath = "run.jsonl"\nlabel = "healthy"\n', "'tool'"),
        ("run = 3\n", "[[run]]"),
        (
            '[[run]]\npath = "run.jsonl"\ntool = "x"\nlabel = "healthy"\nclasses = ["odd"]\n',
            "unknown classes",
        ),
    ],
)
def test_manifest_errors_name_the_problem(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(_corpus.ManifestError, match=message.replace("[", r"\[")):
        _corpus.load_manifest(_write(tmp_path, body))


def test_peers_part_matches_make_peers(tmp_path: Path) -> None:
    """The generated part of the manifest parses back to what make_peers writes."""
    sys.path.insert(0, str(BENCH / "corpus"))
    import make_peers

    entries = [{"path": "a", "tool": "t", "label": "collapse", "onset": 3, "accept": []}]
    p = tmp_path / "m.toml"
    p.write_text("# head\n")
    make_peers.write_manifest(p, entries)
    make_peers.write_manifest(p, entries)  # idempotent: the part is replaced, not appended
    doc = tomllib.loads(p.read_text())
    assert doc["run"] == entries
    assert p.read_text().count(make_peers.MARKER) == 1


def test_rldoctor_handover_and_prefixes(tmp_path: Path) -> None:
    entry = next(e for e in ENTRIES if e["path"].startswith("peers/rlwatch/example"))
    data = _corpus.read_entry(entry)
    out = data_to_rldoctor_jsonl(data, tmp_path / "x.jsonl")
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == len(data.steps())
    assert {"entropy", "reward_mean", "kl"} <= set(rows[0])
    cut = prefix_file(out, 10, tmp_path / "cut.jsonl")
    assert [json.loads(x)["step"] for x in cut.read_text().splitlines()] == list(range(11))
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"log_history": [{"step": s, "loss": 0.1} for s in (1, 2, 3)]}))
    cut = prefix_file(state, 2, tmp_path / "cut.json")
    assert [e["step"] for e in json.loads(cut.read_text())["log_history"]] == [1, 2]


def test_their_hits_worst_first() -> None:
    res = {
        "findings": [
            {"detector": "plateau", "severity": "WARNING"},
            {"detector": "entropy_collapse", "severity": "CRITICAL"},
            {"detector": "kl_drift", "severity": "INFO"},
        ]
    }
    assert their_hits(res) == ["collapse", "not_learning"]


def test_ours_scores_a_run() -> None:
    entry = next(e for e in ENTRIES if e["path"] == "public/agentr1-30-nan.log")
    o = _corpus.ours(entry)
    assert o["found"] and o["right"] and o["delay"] == 0 and o["live_delay"] == 0
