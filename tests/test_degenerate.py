"""Degenerate text measured on every sample with token ids and logprobs: gibberish (a rare id at
a logprob far below uniform, prime-rl), repetition (a long run sampled at p > 0.99, prime-rl),
4-gram duplication past 0.5 on replies of 32+ tokens (Trinity-RFT #620); rates per step from
a NeMo-RL train_data dump, quiet on the healthy fixture."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from rlvitals import read
from rlvitals.model import RunData
from rlvitals.readers.samples import open_samples
from rlvitals.transcripts.degenerate import (
    REPETITION_RUN,
    DegenerateCounts,
    gibberish,
    ngram_dup_ratio,
    repetition_run,
)

DATA = Path(__file__).parent / "data" / "samples"


def test_the_three_measures_on_known_tokens():
    v = 151_936  # a Qwen vocabulary: -ln V - 2 = -13.93
    ids = np.array([11, 150_000, 12])
    assert gibberish(ids, np.array([-0.1, -14.5, -0.3]), v)
    assert not gibberish(ids, np.array([-0.1, -13.0, -0.3]), v)  # rare, but not that unlikely
    assert not gibberish(np.array([11, 99_999, 12]), np.array([-0.1, -20.0, -0.3]), v)
    assert repetition_run(np.array([-0.5, -0.001, -0.002, -0.003, -0.5, -0.001])) == 3
    assert repetition_run(np.array([-0.5, -0.2])) == 0
    assert ngram_dup_ratio(np.tile([1, 2, 3, 4], 10)) == 1 - 4 / 37  # 37 4-grams, 4 distinct
    assert ngram_dup_ratio(np.arange(31)) is None  # a reply under 32 tokens is not judged
    assert ngram_dup_ratio(np.arange(40)) == 0.0


def test_counts_cite_the_samples_they_flag():
    c = DegenerateCounts(vocab_size=151_936)
    c.add(0, np.arange(40), np.full(40, -0.7))
    c.add(1, np.tile([5, 6, 7, 8], 10), np.full(40, -0.7))
    c.add(2, np.full(REPETITION_RUN, 9), np.full(REPETITION_RUN, -0.001))
    c.add(3, np.array([1, 123_456]), np.array([-0.2, -16.0]))
    assert c.flagged == {"gibberish": [3], "repetition": [2], "ngram_dup": [1, 2]}
    r = c.rates()
    assert r["text/gibberish_rate"] == 0.25 and r["text/repetition_rate"] == 0.25
    assert r["text/ngram_dup_rate"] == 2 / 3  # of the three replies of 32+ tokens
    assert "text/gibberish_rate" not in DegenerateCounts().rates()  # no vocabulary: not measured
    # Logprobs alone (a dump without token ids): repetition only.
    c = DegenerateCounts(vocab_size=151_936)
    c.add(0, None, np.full(REPETITION_RUN, -0.002))
    c.add(1, None, np.full(50, -0.002))
    assert c.rates() == {"text/repetition_rate": 0.5}  # gibberish needs the ids


def _nemo_dump(d: Path, replies: list[list[int]], logprobs: list[list[float]]) -> Path:
    """A train_data_step1.jsonl as NeMo-RL writes it (tests/data/samples/make_fixtures.py,
    nemo_log_batched_dict_as_jsonl: every value a list of one, tensors padded), two samples
    per prompt."""
    d.mkdir(parents=True)
    width = 3 + max(map(len, replies))
    with open(d / "train_data_step1.jsonl", "w") as f:
        for i, (reply, lp) in enumerate(zip(replies, logprobs)):
            prompt = [1, 2, 3] if i < 2 else [1, 4, 5]
            pad = width - 3 - len(reply)
            rec = {
                "content": [["question", "answer"]],
                "rewards": [float(i % 2)],
                "input_lengths": [3 + len(reply)],
                "token_ids": [prompt + reply + [0] * pad],
                "token_loss_mask": [[0, 0, 0] + [1] * len(reply) + [0] * pad],
                "sample_loss_mask": [1],
                "generation_logprobs": [[0.0, 0.0, 0.0] + lp + [0.0] * pad],
                "prev_logprobs": [[0.0, 0.0, 0.0] + lp + [0.0] * pad],
                "idx": i,
            }
            f.write(json.dumps(rec) + "\n")
    return d


def _read(d: Path) -> RunData:
    run = RunData(source=str(d), format="none")
    open_samples(d, run).poll(final=True)
    return run


def test_a_looping_reply_is_found_in_a_nemo_rl_dump(tmp_path):
    ok = list(range(10, 50))  # 40 distinct tokens
    loop = [7, 8, 9, 10] * 10  # the same 4-gram again and again
    run = _read(
        _nemo_dump(
            tmp_path / "logs", [ok, loop, ok, ok], [[-0.7] * 40, [-0.001] * 40] + [[-0.7] * 40] * 2
        )
    )
    dup = run.series("text/ngram_dup_rate")
    assert dup is not None and dup.at(1) == 0.25
    assert run.series("text/repetition_rate").at(1) == 0.0  # a 40-token run is no 3,000 one


def test_healthy_nemo_rl_fixture_is_quiet():
    run = _read(DATA / "nemo-rl" / "logs")
    rep = run.series("text/repetition_rate")
    assert rep is not None and rep.at(1) == 0.0
    assert run.series("text/ngram_dup_rate") is None  # two-token replies: not judged
    assert not math.isnan(run.series("train/mismatch_seq_over").at(1))


# -- judged: said alone, warned with a number that agrees -------------------------------------


def _nemo_steps(d: Path, steps: int, loop_from: int) -> Path:
    d.mkdir(parents=True)
    ok = list(range(10, 50))
    loop = [7, 8, 9, 10] * 10
    for step in range(1, steps + 1):
        with open(d / f"train_data_step{step}.jsonl", "w") as f:
            for i in range(4):
                reply = loop if (step >= loop_from and i == 1) else ok
                rec = {
                    "content": [["question", "answer"]],
                    "rewards": [float(i % 2)],
                    "input_lengths": [43],
                    "token_ids": [[1, 2, 3, *reply]],
                    "token_loss_mask": [[0, 0, 0] + [1] * 40],
                    "sample_loss_mask": [1],
                    "generation_logprobs": [[0.0] * 3 + [-0.7] * 40],
                    "prev_logprobs": [[0.0] * 3 + [-0.7] * 40],
                    "idx": i,
                }
                f.write(json.dumps(rec) + "\n")
    return d


def test_a_looping_sample_is_said_with_the_attempts_that_loop(tmp_path):
    from rlvitals.checks import run_checks

    run = _read(_nemo_steps(tmp_path / "logs", 10, loop_from=4))
    rep = run_checks(run)
    (f,) = [f for f in rep.findings if f.check == "text"]
    # No entropy or length series says the same: info, never a warning on the rate alone.
    assert f.severity == "info" and f.first_step == 4 and f.metric == "text/ngram_dup_rate"
    assert f.evidence["attempt_ids"][:2] == ["4-1", "5-1"]


def test_healthy_samples_say_nothing(tmp_path):
    from rlvitals.checks import run_checks

    rep = run_checks(_read(_nemo_steps(tmp_path / "logs", 10, loop_from=99)))
    assert not [f for f in rep.findings if f.check == "text"]


def test_gibberish_with_rising_entropy_warns(tmp_path):
    from rlvitals.checks import run_checks

    p = tmp_path / "m.jsonl"
    with open(p, "w") as f:
        for s in range(12):
            row = {
                "step": s,
                "reward/mean": 0.4,
                "train/entropy": 0.4 if s < 5 else 0.4 + 0.15 * (s - 4),
                "text/gibberish_rate": 0.0 if s < 5 else 0.12,
            }
            f.write(json.dumps(row) + "\n")
    (f,) = [f for f in run_checks(read(p)).findings if f.check == "text"]
    assert f.severity == "warn" and f.verdict == "drift" and f.first_step == 5
    assert f.evidence["corroborated_by"]["entropy_ratio"] >= 1.5
