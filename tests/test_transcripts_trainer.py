"""The transcripts and held-out checks on real runs of the reference trainer: the exploit of
``grader_exploit`` and the collapse of ``entropy_collapse`` are found, with the attempts that
show them cited; healthy seeds raise nothing. Runs shared per session (conftest)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from rlvitals.checks import run_checks
from rlvitals.readers import read
from rlvitals.transcripts import TranscriptStore

pytestmark = pytest.mark.slow

# The demo's own settings (160 tasks x 4 attempts, 40 updates): the exploit needs the updates
# to take over. The runs are shared with the other trainer tests (conftest's trainer_run).


@pytest.fixture(scope="module")
def runs(trainer_run) -> dict[str, Path]:
    return {
        "healthy0": trainer_run(None, seed=0),
        "exploit": trainer_run("grader_exploit", seed=0),
        "collapse": trainer_run("entropy_collapse", seed=0),
        "healthy1": trainer_run(None, seed=1),
    }


def findings(run: Path, check: str, at_least: tuple[str, ...] = ("warn", "fail")):
    rep = run_checks(read(str(run)))
    return [f for f in rep.findings if f.check == check and f.severity in at_least]


@pytest.mark.parametrize("name", ["healthy0", "healthy1"])
def test_healthy_seeds_raise_nothing(runs, name):
    assert not findings(runs[name], "transcripts")
    assert not findings(runs[name], "heldout")


def test_grader_exploit_is_found_in_transcripts_with_the_shortcut_cited(runs):
    (f,) = [f for f in findings(runs["exploit"], "transcripts") if "flags" in f.evidence]
    assert f.verdict == "exploit_suspected"
    assert {"empty_answer", "answers_disagree", "constant_answer"} & set(f.evidence["flags"])
    store = TranscriptStore(runs["exploit"])
    for e in f.evidence["examples"]:
        a = store.find(e["attempt_id"], e["step"])
        assert a is not None and a.reward == 1.0
        # The shortcut: a rewarded reply shorter than a full answer (digits + 1, then '$').
        answer = a.final_text().split("$", 1)[0]
        task_digits = len(a.task_id.split("-")[-1])
        assert len(answer) < task_digits + 1 or e["flags"] == ["answers_disagree"]


def test_grader_exploit_is_found_from_heldout_divergence(runs):
    (f,) = findings(runs["exploit"], "heldout")
    assert f.verdict == "exploit_suspected"
    assert f.evidence["heldout_last"] <= f.evidence["heldout_first"] + f.evidence["heldout_se"]


def test_entropy_collapse_is_found_with_repeated_replies_cited(runs):
    (f,) = [f for f in findings(runs["collapse"], "transcripts") if f.verdict == "collapse"]
    assert "repeated_reply" in f.evidence["flags"] and f.evidence["entropy"]["falling"]
    store = TranscriptStore(runs["collapse"])
    e = f.evidence["examples"][0]
    a = store.find(e["attempt_id"], e["step"])
    same = {b.task_id for b in store.iter_step(e["step"]) if b.final_text() == a.final_text()}
    assert len(same) >= 3
