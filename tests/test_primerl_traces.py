"""prime-rl's chunked, indexed trace stream (``readers/samples/primerl_traces.py``), read
from the fixture ``tests/data/samples/prime-rl-stream`` that prime-rl's own writing code
wrote (``make_primerl_stream.py``, sources cited there)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from rlvitals.model import RunData
from rlvitals.readers import read
from rlvitals.readers.samples import find, open_samples
from rlvitals.readers.samples.primerl_traces import PrimeRlStream

FIXTURE = Path(__file__).parent / "data" / "samples" / "prime-rl-stream" / "output"
OLD = 1_700_000_000  # an mtime long past: the run finished


def _copy(tmp_path: Path, *, finished: bool = True) -> Path:
    out = tmp_path / "output"
    shutil.copytree(FIXTURE, out)
    when = OLD if finished else None  # None: now, the run still being written
    for p in out.rglob("*"):
        os.utime(p, None if when is None else (when, when))
    return out


def _at(run: RunData, name: str, step: int) -> float | None:
    s = run.series(name)
    return None if s is None else s.at(step)


def test_fixture_is_a_sealed_chunk_and_a_live_one():
    stream = FIXTURE / "monitors" / "file" / "traces" / "stream"
    assert sorted(p.name for p in stream.iterdir()) == ["00000.jsonl.zst", "00001.jsonl"]


def test_every_field_read_back(tmp_path):
    out = _copy(tmp_path)
    run = read(out / "monitors" / "file" / "metrics.jsonl")
    assert run.format == "prime-rl"
    assert run.info["samples"]["format"] == "prime-rl-stream"
    a = run.attempts
    assert a is not None
    # Steps are arrival steps; the eval episode (v0, step 2) is held out, not an attempt.
    assert a.step.tolist() == [1] * 5 + [2] * 4 + [3] * 2
    r = a.reward.tolist()
    assert r[:4] + r[5:] == [1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    assert a.reward_missing.tolist()[4]  # e4 failed before any trace
    assert a.policy_version.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2]
    assert a.response_tokens.tolist() == [4, 6, 3, 3, 0, 5, 6, 4, 2, 4, 4]
    assert a.truncated.tolist() == [False, True] + [False] * 9  # e1 finished for "length"
    # Shipped (the orchestrator's update) trains; e3 was left out of step 1's batch.
    assert a.trained.tolist()[:4] == [True, True, True, False]
    assert a.trained.tolist()[5:9] == [True] * 4
    why = [a.discard_reasons[c] if c >= 0 else None for c in a.discard_code.tolist()]
    assert why[3] == "filtered" and why[4] is not None and why[4].startswith("rollout_failed")
    assert run.info["samples"]["rule"].startswith("prime-rl trace stream")
    # The step records from monitors/file/metrics.jsonl, and the dump's own aggregates.
    assert _at(run, "train/mismatch_kl", 2) == pytest.approx(0.004)  # the trainer's row wins
    assert _at(run, "reward/group_std_mean", 2) == pytest.approx(0.5)
    assert _at(run, "response/truncated_rate", 1) is not None


def test_mismatch_tail_from_the_trainer_annotations(tmp_path):
    run = read(_copy(tmp_path) / "monitors" / "file" / "metrics.jsonl")
    # Step 1: trainer = sampler - 0.0125 on every token; step 2: e6 is 2 nats lower.
    assert _at(run, "train/logprob_abs_diff", 1) == pytest.approx(0.0125, abs=1e-9)
    assert _at(run, "train/mismatch_seq_over", 1) == 0.0
    assert _at(run, "train/mismatch_seq_over", 2) == pytest.approx(1 / 4)
    assert _at(run, "train/mismatch_seq_tme_max", 2) == pytest.approx(2.718281828**2, rel=1e-6)
    # Step 3's batch has not shipped: no trainer logprobs, no mismatch measured there.
    assert _at(run, "train/logprob_abs_diff", 3) is None


def test_transcripts_text_and_trained(tmp_path):
    run = read(_copy(tmp_path) / "monitors" / "file" / "metrics.jsonl")
    t = list(run.transcripts.iter_step(1))
    assert [x.attempt_id for x in t] == ["1-0", "1-1", "1-2", "1-3", "1-4"]
    assert "0 1 2 3 4 5" in t[1].final_text() and t[1].trained is True
    assert t[3].trained is False and t[4].generations == []
    assert "g0: 1 + 2?" in t[0].generations[0].prompt_text()
    t3 = list(run.transcripts.iter_step(3))
    assert [x.trained for x in t3] == [None, None]  # not shipped yet: undecided


def test_found_from_the_run_folder_and_monitors_file(tmp_path):
    out = _copy(tmp_path)
    for p in (out, out / "monitors" / "file"):
        run = read(p)
        assert run.format == "prime-rl" and run.attempts is not None and len(run.attempts) == 11
    got = find(out / "monitors" / "file" / "metrics.jsonl")
    assert got is not None and got[1].name == "prime-rl-stream"
    run = RunData(source="x", format="none")
    src = open_samples(out / "monitors" / "file" / "traces", run, format="prime-rl-stream")
    src.poll(final=True)
    assert run.attempts is not None and len(run.attempts) == 11


def test_old_layout_still_read():
    d = Path(__file__).parent / "data" / "samples" / "prime-rl" / "output"
    got = find(d / "metrics.jsonl")
    assert got is not None and got[1].name == "prime-rl"
    assert not PrimeRlStream().sniff(d)


def test_a_live_step_waits_for_its_annotations(tmp_path):
    out = _copy(tmp_path, finished=False)
    fmt = PrimeRlStream()
    traces = out / "monitors" / "file" / "traces"
    # Step 1: later arrivals, shipped and trained past it. Step 2: the last batch shipped
    # and trained, no later one yet. Step 3: the newest arrivals.
    assert list(fmt.step_files(traces)) == [1]
    # The orchestrator ships step 3's batch and the trainer writes its streams: 2 is read.
    ship = {"version": 1, "trace_id": "trace-e9", "info": {"effective": True, "ship": {"step": 3}}}
    train = {"version": 1, "trace_id": "trace-e9", "info": {}, "branches": [{"index": 0}]}
    with open(traces / "annotations" / "orchestrator" / "00000.jsonl", "a") as f:
        f.write(json.dumps(ship) + "\n")
    with open(traces / "annotations" / "trainer" / "00000.jsonl", "a") as f:
        f.write(json.dumps(train) + "\n")
    assert sorted(fmt.step_files(traces)) == [1, 2]
    for p in out.rglob("*"):  # nothing changes for a while: every step is read
        os.utime(p, (OLD, OLD))
    assert sorted(fmt.step_files(traces)) == [1, 2, 3]


def test_torn_and_bad_lines(tmp_path):
    out = _copy(tmp_path)
    live = out / "monitors" / "file" / "traces" / "stream" / "00001.jsonl"
    with open(live, "ab") as f:
        f.write(b"not json\n")
        f.write(b'{"id": "e11", "traces": [{"info": {"kind": "tr')  # still being written
    os.utime(live, (OLD, OLD))
    run = read(out / "monitors" / "file" / "metrics.jsonl")
    assert run.attempts is not None and len(run.attempts) == 11
    assert any("00001" in w and "not an episode" in w for w in run.warnings)


def test_sealed_chunk_without_pyzstd_is_one_warning(tmp_path, monkeypatch):
    out = _copy(tmp_path)
    monkeypatch.setitem(sys.modules, "pyzstd", None)
    run = RunData(source="x", format="none")
    open_samples(out, run, format="prime-rl-stream").poll(final=True)
    said = [w for w in run.warnings if "00000.jsonl.zst" in w]
    assert len(said) == 1 and "install pyzstd" in said[0]
    # The live chunk is still read: step 2's last episodes and step 3.
    assert run.attempts is not None and set(run.attempts.step.tolist()) <= {2, 3}


def test_formats_explain_names_the_rule(tmp_path, capsys):
    from rlvitals.cli import main

    out = _copy(tmp_path)
    assert main(["formats", "--explain", str(out / "monitors" / "file" / "metrics.jsonl")]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "read as prime-rl-stream: prime-rl trace stream" in text


def test_formats_lists_it(capsys):
    from rlvitals.cli import main

    assert main(["formats", "samples"]) == 0
    assert "prime-rl-stream" in capsys.readouterr().out


def _tail_run(out: Path, steps: int = 12, onset: int = 5) -> Path:
    """A prime-rl run written by make_primerl_stream.py's copy of prime-rl's writers: 10
    episodes a step, each shipped and trained; from ``onset`` one sequence in ten is sampled
    0.3 nats off the trainer on every token (its ratio e^0.3 = 1.35, past NeMo-RL's 1.05),
    the others 0.0125 off, so the token-mean KL stays near 0.004, under the 0.01 line."""
    sys.path.insert(0, str(Path(__file__).parent / "data" / "samples"))
    import make_primerl_stream as m

    orch = m.FileMonitor(out, "orchestrator", 1 << 20, compress=True)
    trainer = m.FileMonitor(out, "trainer", 1 << 20, compress=True)
    lp = [-0.25, -0.5, -0.125, -1.0, -0.75, -0.375, -0.625, -0.875]
    for step in range(1, steps + 1):
        recs = [
            m._episode(f"s{step}e{i}", f"g{step}-{i // 5}", step, step, float(i % 2), lp, "stop")
            for i in range(10)
        ]
        orch.log_episodes(recs, "all")
        orch.log_annotations(m._shipped(recs, step))
        shift = {f"trace-{r['id']}": -0.0125 for r in recs}
        if step >= onset:
            shift[f"trace-s{step}e3"] = -0.3
        trainer.log_annotations(m._trained(recs, shift))
        orch.log_metrics({"entropy/all/mean": 0.5}, step, m.T0 + step)
    orch.still_running()
    trainer.still_running()
    for p in out.rglob("*"):
        os.utime(p, (OLD, OLD))
    return out


def test_the_checks_find_a_mismatch_tail_in_the_stream(tmp_path):
    from rlvitals.checks import run_checks

    run = read(_tail_run(tmp_path / "output"))
    assert run.format == "prime-rl"
    assert _at(run, "train/mismatch_seq_over", 4) == 0.0
    assert _at(run, "train/mismatch_seq_over", 5) == pytest.approx(0.1)
    assert _at(run, "train/mismatch_kl", 8) < 0.01  # the mean stays under its line
    tail = [f for f in run_checks(run).findings if f.check == "agreement"]
    assert tail and tail[0].severity == "warn" and tail[0].metric == "train/mismatch_seq_over"
    assert 5 <= tail[0].first_step <= 7
    assert tail[0].evidence["attempt_ids"][:2] == ["5-3", "6-3"]  # the far-off sequences


def test_an_old_layout_trace_with_its_own_info_is_still_read(tmp_path: Path) -> None:
    """The old layout's environments may put anything in a trace's ``info`` (the stream's
    orchestrator stamps ``kind`` and ``arrival`` there): no episode is lost for it."""
    src = Path(__file__).parent / "data" / "samples" / "prime-rl" / "output"
    out = tmp_path / "output"
    shutil.copytree(src, out)
    plain = read(str(out))
    for traces in out.glob("rollouts/step_*/*/*/traces.jsonl"):
        lines = []
        for i, line in enumerate(traces.read_text().splitlines()):
            ep = json.loads(line)
            for t in ep.get("traces", []):
                t["info"] = {"kind": 3, "arrival": "soon"} if i % 2 else "a note"
            lines.append(json.dumps(ep))
        traces.write_text("\n".join(lines) + "\n")
    odd = read(str(out))
    assert plain.attempts is not None and odd.attempts is not None
    assert len(odd.attempts) == len(plain.attempts) > 0
    assert not [w for w in odd.warnings if "info" in w]
