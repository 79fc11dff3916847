"""The held-out set of real runs (benchmarks/corpus/heldout/) is whole: every file in its
manifest exists, its provenance is complete, every label re-derived by its own label.py equals
the manifest's, and label.py's rules fire on runs built to break them and stay quiet on a run
built to be healthy. Nothing here asks what rlvitals says about the set."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

HELDOUT = Path(__file__).resolve().parent.parent / "benchmarks" / "corpus" / "heldout"


def _label_module() -> Any:
    spec = importlib.util.spec_from_file_location("_heldout_label_test", HELDOUT / "label.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_heldout_label_test"] = mod
    spec.loader.exec_module(mod)
    return mod


label = _label_module()
MANIFEST = json.loads((HELDOUT / "manifest.json").read_text())
FILES = MANIFEST["files"]


def test_the_set_is_not_empty_and_counts_match() -> None:
    assert FILES
    assert MANIFEST["counts"]["real-run"] == len(FILES)
    assert MANIFEST["counts"]["repos"] == len({f["provenance"]["repo"] for f in FILES})


@pytest.mark.parametrize("entry", FILES, ids=[f["path"] for f in FILES])
def test_every_file_exists_with_complete_provenance(entry: dict[str, Any]) -> None:
    path = HELDOUT / entry["path"]
    assert path.is_file(), entry["path"]
    prov = entry["provenance"]
    for key in ("repo", "path", "commit", "run"):
        assert prov.get(key), f"{entry['path']}: provenance.{key} missing"
    assert len(prov["commit"]) == 40 and all(c in "0123456789abcdef" for c in prov["commit"])
    assert "/" in prov["repo"]
    assert entry["labels"], entry["path"]
    assert 3 <= len(entry["expected"]) <= 6, entry["path"]
    assert entry["steps"]["records"] >= 1


def test_labels_and_values_rederived_by_label_py_equal_the_manifest() -> None:
    assert label.manifest(HELDOUT) == MANIFEST


def test_every_source_names_a_file_in_the_manifest() -> None:
    assert [s["path"] for s in label.sources(HELDOUT)] == [f["path"] for f in FILES]


# -- the rules themselves, on runs built to fire each one and one built to be healthy ---------


def _run(n: int = 60, **cols: Any) -> list[dict[str, Any]]:
    rows = []
    for i in range(1, n + 1):
        row: dict[str, Any] = {"step": i}
        for k, f in cols.items():
            row[k] = f(i)
        rows.append(row)
    return rows


KEYS = {"reward": "r", "kl": "kl", "entropy": "ent", "grad": "g", "length": "len", "clip": "clip"}


def _healthy(**over: Any) -> list[dict[str, Any]]:
    cols = {
        "r": lambda i: 0.1 + 0.01 * i + (0.03 if i % 2 else -0.03),
        "kl": lambda i: 0.001 * i,
        "ent": lambda i: 1.0 - 0.004 * i,
        "g": lambda i: 1.0 + 0.1 * (i % 3),
        "len": lambda i: 200.0 + i,
        "clip": lambda i: 0.02,
    }
    cols.update(over)
    return _run(**cols)


def _names(rows: list[dict[str, Any]]) -> list[str]:
    out = label.labels(rows, KEYS)
    return [x["label"] + (f"/{x['kind']}" if x.get("kind") else "") for x in out]


def test_a_rising_run_with_nothing_else_wrong_is_healthy() -> None:
    assert _names(_healthy()) == ["healthy"]


def test_a_flat_run_is_a_plateau_from_its_first_record() -> None:
    rows = _healthy(r=lambda i: 0.5 + (0.05 if i % 2 else -0.05))
    out = label.labels(rows, KEYS)
    assert [x["label"] for x in out] == ["plateau"] and out[0]["onset_step"] == 1


@pytest.mark.parametrize(
    ("over", "name", "onset"),
    [
        ({"clip": lambda i: 0.6 if i == 40 else 0.02}, "length/truncation", 40),
        ({"len": lambda i: 200.0 if i < 30 else 20.0}, "length/collapse", 30),
        ({"kl": lambda i: 0.001 if i < 25 else 0.8}, "kl_drift", 25),
        ({"g": lambda i: 50.0 if i == 33 else 1.0}, "grad_spikes", 33),
        ({"ent": lambda i: 1.0 if i < 45 else 0.1}, "entropy_collapse", 45),
        ({"r": lambda i: math.nan if i == 17 else 0.1 + 0.01 * i}, "non_finite", 17),
    ],
)
def test_each_rule_fires_at_its_onset(over: dict[str, Any], name: str, onset: int) -> None:
    out = label.labels(_healthy(**over), KEYS)
    hit = [x for x in out if x["label"] + (f"/{x['kind']}" if x.get("kind") else "") == name]
    assert hit and hit[0]["onset_step"] == onset, out
    assert "healthy" not in _names(_healthy(**over))


def test_one_high_kl_record_is_not_drift_but_a_sustained_one_is() -> None:
    assert "kl_drift" not in _names(_healthy(kl=lambda i: 2.0 if i == 30 else 0.01))
    assert "kl_drift" in _names(_healthy(kl=lambda i: 2.0 if i in (30, 31) else 0.01))


def test_a_tenfold_kl_rise_between_tiny_values_is_not_drift() -> None:
    assert "kl_drift" not in _names(_healthy(kl=lambda i: 0.0001 * i))
    assert "kl_drift" in _names(_healthy(kl=lambda i: 0.001 * 1.1**i))


def test_zero_std_and_no_signal_read_their_own_keys() -> None:
    keys = {"reward": "r", "zero_std": "z", "reward_std": "s"}
    rows = _run(
        r=lambda i: 0.01 * i,
        z=lambda i: 0.6 if i == 12 else 0.1,
        s=lambda i: 0.0 if i == 7 else 0.3,
    )
    got = {x["label"]: x["onset_step"] for x in label.labels(rows, keys)}
    assert got == {"zero_std_groups": 12, "no_signal": 7}


def test_nothing_to_judge_is_format_only() -> None:
    assert _names(_run(n=5, r=lambda i: 0.1 * i)) == ["format-only"]


def test_readers_take_printed_values_and_skip_noise(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(
        "loading...\nstep:0 | mean_reward=0.1 | kl=0.0\nCheckpoint saved\nstep:1 | mean_reward=nan | kl=0.1\n"
    )
    rows = label.read_kv_lines(log, reward="mean_reward", line=r"^step:(?P<step>\d+) \|")
    assert [r["step"] for r in rows] == [0, 1] and math.isnan(rows[1]["mean_reward"])
    js = tmp_path / "run.json"
    js.write_text(json.dumps({"steps": [{"step": 3, "reward": 1.0}], "eval": {"x": 1}}))
    assert label.read_json_records(js, reward="reward", under="steps") == [
        {"step": 3, "reward": 1.0}
    ]
    con = tmp_path / "console.txt"
    con.write_text("{'loss': 0.1, 'reward': nan}\n 10%|#| 1/10\n{'loss': 0.2, 'reward': '0.5'}\n")
    got = label.read_dict_console(con, reward="reward")
    assert [r["step"] for r in got] == [1, 2] and math.isnan(got[0]["reward"])
