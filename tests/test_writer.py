"""The run directory writer: files as FORMAT.md says, guards, heartbeat, mirror, failures."""

from __future__ import annotations

import errno
import glob
import json
import logging
import math
import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvitals import Run, read
from rlvitals.errors import ConfigError, MissingExtraError, RunStopped, UsageError
from rlvitals.jsonio import decode_line
from rlvitals.schema import ROLLOUTS
from rlvitals.writer import WriterWarning

ROLLOUT_KEYS = {
    "step",
    "attempt_id",
    "group_id",
    "task_id",
    "policy_version",
    "reward",
    "trained",
    "discard_reason",
    "response_tokens",
    "truncated",
    "lag",
    "time",
    "duration",
    "metadata",
}


def config(tmp_path: Path, name: str = "r", **sections: dict) -> dict:
    out = {"output": {"output_dir": str(tmp_path), "name": name}}
    for section, values in sections.items():
        out.setdefault(section, {}).update(values)
    return out


def lines(path: Path) -> list[dict]:
    return [decode_line(x) for x in path.read_bytes().splitlines() if x.strip()]


def group(run: Run, step: int, rewards, gid: str = "g", **kw) -> list[str]:
    return [
        run.log_attempt(step, f"{step}-{gid}", "t", r, policy_version=step, **kw) for r in rewards
    ]


# -- the files -----------------------------------------------------------------------------------


def test_run_json_is_written_at_start_with_the_whole_config(tmp_path):
    run = Run(config(tmp_path), versions={"grader": "v2"}, info={"fault": None})
    meta = json.loads((run.dir / "run.json").read_text())
    assert meta["format"] == "rlvitals-run/1"
    assert meta["status"] == "running" and meta["stop_reason"] is None
    assert meta["name"] == "r" and len(meta["run_id"]) == 32
    assert meta["created"].endswith("Z")
    assert meta["config"]["training"]["max_steps_off_policy"] == 2
    assert meta["config"]["rollout"]["max_group_losses"] == 1
    assert meta["versions"]["grader"] == "v2" and "python" in meta["versions"]
    assert meta["fault"] is None
    run.close()
    assert json.loads((run.dir / "run.json").read_text())["status"] == "finished"


def test_a_name_already_used_is_refused(tmp_path):
    Run(config(tmp_path)).close()
    with pytest.raises(UsageError, match="already there"):
        Run(config(tmp_path))


def test_an_output_dir_that_cannot_be_made_is_a_config_error(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(ConfigError, match=r"\[output.output_dir\]: cannot create"):
        Run({"output": {"output_dir": str(tmp_path / "file"), "name": "r"}})


def test_an_unnamed_run_gets_a_unique_directory(tmp_path):
    a = Run({"output": {"output_dir": str(tmp_path)}})
    b = Run({"output": {"output_dir": str(tmp_path)}})
    assert a.dir != b.dir and a.dir.parent == tmp_path
    a.close()
    b.close()


def test_records_follow_the_format(tmp_path):
    with Run(config(tmp_path)) as run:
        aid = run.log_attempt(
            0,
            "0-g",
            "t17",
            1.0,
            policy_version=0,
            response_tokens=87,
            truncated=False,
            metadata={"termination_reason": "done", "turns": 3},
            sampler_logprobs=[-1.0, -2.0],
            duration=2.5,
            retries=1,
        )
        run.log_attempt(0, "0-g", "t17", 0.0, policy_version=0, response_tokens=5)
        rec = run.log_step(0, trainer_logprobs={aid: [-1.0, -1.5]}, metrics={"train/loss": 0.12})
    rollouts = lines(run.dir / "rollouts.jsonl")
    assert len(rollouts) == 2
    first = rollouts[0]
    assert set(first) >= ROLLOUT_KEYS
    assert first["attempt_id"] == aid and first["trained"] is True and first["lag"] == 0
    assert first["metadata"] == {"termination_reason": "done", "turns": 3}
    assert first["mismatch"]["tokens"] == 2 and first["retries"] == 1
    assert first["duration"] == 2.5
    assert "mismatch" not in rollouts[1] and "retries" not in rollouts[1]
    steps = lines(run.dir / "steps.jsonl")
    assert steps == [rec]
    assert steps[0]["step"] == 0 and steps[0]["policy_version"] == 1
    assert steps[0]["train/loss"] == 0.12
    assert steps[0]["reward/mean"] == 0.5 and steps[0]["rollout/turns"] == 3


def test_written_runs_read_back_through_rlvitals_read(tmp_path):
    with Run(config(tmp_path)) as run:
        for step in range(3):
            group(run, step, [1.0, 0.0, 1.0])
            run.log_step(step, metrics={"train/loss": 1.0 / (step + 1)})
        run.log_eval(2, suite="heldout", score=0.61, n=200, checkpoint="c2")
    data = read(run.dir)
    assert data.format == "rlvitals"
    assert data.info["status"] == "finished"
    assert data.series("train/loss").values.tolist() == [1.0, 0.5, 1.0 / 3]
    assert data.series("reward/mean").values.tolist() == pytest.approx([2 / 3] * 3)
    assert data.series("eval/heldout/score").values.tolist() == [0.61]
    assert not data.warnings
    assert data.attempts is not None and len(data.attempts) == 9
    assert data.attempts.trained.all()


def test_the_loop_can_decide_before_training_and_log_step_uses_that_decision(tmp_path):
    with Run(config(tmp_path)) as run:
        ids = group(run, 0, [1.0, 0.0, 1.0, 1.0])
        group(run, 0, [1.0, 1.0], gid="h")
        d = run.decide(0)
        assert d.trained_ids == ids and d.groups == {"0-g": None, "0-h": "no_variance"}
        rec = run.log_step(0)
    assert rec["groups/trained"] == 1 and rec["discard/groups/no_variance"] == 1


def test_explicit_discards_override_the_writers_rules(tmp_path):
    with Run(config(tmp_path)) as run:
        ids = group(run, 0, [1.0, 0.0, 1.0])
        rec = run.log_step(0, discards={ids[0]: "too_long"})
    rollouts = lines(run.dir / "rollouts.jsonl")
    assert [r["discard_reason"] for r in rollouts] == ["too_long", None, None]
    assert rec["discard/rollouts/too_long"] == 1


def test_attempts_for_later_updates_stay_pending_in_async_mode(tmp_path):
    with Run(config(tmp_path, training={"mode": "async"})) as run:
        group(run, 0, [1.0, 0.0])
        run.log_attempt(1, "1-g", "t", 1.0, policy_version=0)
        run.log_step(0)
        assert run.pending == 1
        run.log_attempt(1, "1-g", "t", 0.0, policy_version=1)
        rec = run.log_step(1)
    assert rec["freshness/lag_max"] == 1 and rec["freshness/lag_mean"] == 0.5
    assert [r["step"] for r in lines(run.dir / "rollouts.jsonl")] == [0, 0, 1, 1]


def test_transcripts_full_keep_text_and_samples_keep_only_identity(tmp_path):
    gen = {"prompt": "2+2=", "completion": "4", "prompt_tokens": 4, "completion_tokens": 1}
    for trace in ("full", "samples"):
        with Run(config(tmp_path, name=trace, output={"trace": trace})) as run:
            run.log_attempt(0, "g", "t", 1.0, policy_version=0, transcript=[gen])
            run.log_attempt(0, "g", "t", 0.0, policy_version=0, transcript=[gen])
            run.log_step(0)
        entries = json.loads((run.dir / "transcripts" / "step-000000.json").read_text())
        assert [e["trained"] for e in entries] == [True, True]
        g = entries[0]["generations"][0]
        assert g["policy_version"] == 0 and g["trains"] is True and g["completion_tokens"] == 1
        assert ("completion" in g) == (trace == "full")
        assert ("prompt" in g) == (trace == "full")


def test_evals_and_checkpoints(tmp_path):
    with Run(config(tmp_path, output={"sampler_checkpoint_every": 5})) as run:
        assert [s for s in range(12) if run.checkpoint_due(s)] == [4, 9]
        path = run.checkpoint_path(4)
        assert path.parent.name == "checkpoints" and path.name == "sampler-step-000004.pt"
        run.log_eval(4, "heldout", 0.5, 100, checkpoint=str(path), seed=3)
    (ev,) = lines(run.dir / "evals.jsonl")
    assert ev["suite"] == "heldout" and ev["score"] == 0.5 and ev["n"] == 100 and ev["seed"] == 3


def test_attempts_logged_from_several_threads_are_all_written(tmp_path):
    with Run(config(tmp_path)) as run:

        def worker(k: int) -> None:
            for i in range(200):
                run.log_attempt(0, f"g{k}", "t", float(i % 2), policy_version=0)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        run.log_step(0)
    rollouts = lines(run.dir / "rollouts.jsonl")
    assert len(rollouts) == 800 and len({r["attempt_id"] for r in rollouts}) == 800


# -- ending a run --------------------------------------------------------------------------------


def test_an_exception_inside_the_block_marks_the_run_crashed_with_the_reason(tmp_path):
    with pytest.raises(ZeroDivisionError), Run(config(tmp_path)) as run:
        group(run, 0, [1.0, 0.0])
        run.log_step(0)
        run.log_attempt(1, "1-g", "t", 1.0, policy_version=1)
        1 / 0  # noqa: B018
    meta = json.loads((run.dir / "run.json").read_text())
    assert meta["status"] == "crashed"
    assert meta["stop_reason"] == "ZeroDivisionError: division by zero"
    # The attempt of the update in progress is not lost: written as unfinished.
    last = lines(run.dir / "rollouts.jsonl")[-1]
    assert last["step"] == 1 and last["trained"] is False
    assert last["discard_reason"] == "unfinished"


def test_too_many_rejected_groups_in_a_row_stop_the_run(tmp_path):
    cfg = config(tmp_path, training={"max_consecutive_unusable_groups": 3})
    with pytest.raises(RunStopped) as stopped, Run(cfg) as run:
        group(run, 0, [1.0, 0.0])  # trains: resets the count
        group(run, 0, [1.0, 1.0], gid="h")
        run.log_step(0)
        group(run, 1, [0.0, 0.0])
        group(run, 1, [1.0, 1.0], gid="h")
        run.log_step(1)  # the third rejected group in a row
        pytest.fail("log_step should have raised RunStopped")
    assert stopped.value.reason == "max_consecutive_unusable_groups"
    meta = json.loads((run.dir / "run.json").read_text())
    assert meta["status"] == "stopped"
    assert meta["stop_reason"] == "max_consecutive_unusable_groups"
    # The update that tripped the guard is written before the run stops.
    assert [s["step"] for s in lines(run.dir / "steps.jsonl")] == [0, 1]
    # ... and handed to the caller with the stop, so a loop's tally of updates (the demo's
    # summary) counts it as the check does: 2 updates, not 1 against "2 steps".
    assert stopped.value.record is not None and stopped.value.record["step"] == 1
    assert stopped.value.record == lines(run.dir / "steps.jsonl")[-1]
    assert run.closed
    with pytest.raises(UsageError):
        run.log_attempt(2, "g", "t", 1.0, policy_version=2)


def test_too_many_failed_attempts_in_a_row_stop_the_run_and_keep_them(tmp_path):
    cfg = config(tmp_path, rollout={"max_consecutive_rollout_failures": 3})
    run = Run(cfg)
    run.log_attempt(0, "g", "t", 1.0, policy_version=0)
    run.log_attempt(0, "g", "t", None, policy_version=0, error=TimeoutError("slow"))
    run.log_attempt(0, "g", "t", 0.0, policy_version=0)  # a success resets the count
    run.log_attempt(0, "g", "t", None, policy_version=0, error=TimeoutError("slow"))
    run.log_attempt(0, "g", "t", None, error="ConnectionError")
    with pytest.raises(RunStopped, match="3 failed attempts in a row"):
        run.log_attempt(0, "h", "t", 0.5, error=ValueError("bad"), failed_in="grading")
    meta = json.loads((run.dir / "run.json").read_text())
    assert (meta["status"], meta["stop_reason"]) == ("stopped", "max_consecutive_rollout_failures")
    reasons = [r["discard_reason"] for r in lines(run.dir / "rollouts.jsonl")]
    assert reasons == [
        "unfinished",
        "rollout_failed/TimeoutError",
        "unfinished",
        "rollout_failed/TimeoutError",
        "rollout_failed/ConnectionError",
        "grading_failed/ValueError",
    ]


@pytest.mark.parametrize("off", [0, None])  # 0 from TOML, which has no null
def test_guards_can_be_switched_off(tmp_path, off):
    cfg = config(
        tmp_path,
        training={"max_consecutive_unusable_groups": off},
        rollout={"max_consecutive_rollout_failures": off},
    )
    with Run(cfg) as run:
        for step in range(3):
            for _ in range(200):
                run.log_attempt(step, "g", "t", None, policy_version=step, error="E")
            run.log_step(step)
    assert run.status == "finished"


def test_an_abandoned_run_is_left_as_a_killed_process_leaves_it(tmp_path):
    with Run(config(tmp_path, output={"progress_every_seconds": 0.02})) as run:
        group(run, 0, [1.0, 0.0])
        run.log_step(0)
        group(run, 1, [1.0, 0.0])
        time.sleep(0.1)  # a few heartbeats
        run.abandon()
        n = len(lines(run.dir / "progress.jsonl"))
        assert n >= 1
        time.sleep(0.1)
        with pytest.raises(UsageError, match="abandoned"):
            run.log_attempt(2, "g", "t", 1.0, policy_version=2)
    assert len(lines(run.dir / "progress.jsonl")) == n  # the heartbeat stopped
    assert json.loads((run.dir / "run.json").read_text())["status"] == "running"
    assert [r["step"] for r in lines(run.dir / "rollouts.jsonl")] == [0, 0]


def test_closing_twice_keeps_the_first_status(tmp_path):
    run = Run(config(tmp_path))
    run.close("crashed", "boom")
    run.close("finished")
    assert json.loads((run.dir / "run.json").read_text())["status"] == "crashed"


# -- misuse fails loudly ----------------------------------------------------------------------


def test_misuse_raises_usage_error(tmp_path):
    run = Run(config(tmp_path))
    group(run, 0, [1.0, 0.0])
    run.log_step(0)
    with pytest.raises(UsageError, match="goes backwards"):
        run.log_step(0)
    with pytest.raises(UsageError, match="already written"):
        run.log_attempt(0, "g", "t", 1.0, policy_version=0)
    with pytest.raises(UsageError, match="integer"):
        run.log_attempt("one", "g", "t", 1.0)
    with pytest.raises(UsageError, match="failed_in"):
        run.log_attempt(1, "g", "t", None, error="E", failed_in="sandbox")
    run.log_attempt(1, "g", "t", 1.0, policy_version=1, attempt_id="mine")
    with pytest.raises(UsageError, match="already logged"):
        run.log_attempt(1, "g", "t", 1.0, policy_version=1, attempt_id="mine")
    run.close()
    for call in (
        lambda: run.log_attempt(2, "g", "t", 1.0),
        lambda: run.log_step(2),
        lambda: run.log_eval(2, "s", 1.0),
        lambda: run.decide(2),
    ):
        with pytest.raises(UsageError, match="finished"):
            call()


def test_numpy_integers_and_floats_are_accepted(tmp_path):
    np = pytest.importorskip("numpy")
    with Run(config(tmp_path)) as run:
        run.log_attempt(np.int64(0), "g", "t", np.float32(1.0), policy_version=np.int32(0))
        run.log_attempt(0, "g", "t", np.float64(0.0), policy_version=0, response_tokens=np.int64(4))
        rec = run.log_step(np.int64(0))
    assert rec["reward/mean"] == 0.5 and rec["step"] == 0


# -- writer failures warn, never raise -------------------------------------------------------


class FullDisk:
    """A file whose writes fail like a full disk, after writing ``partial`` bytes once."""

    def __init__(self, real, partial: int = 0) -> None:
        self.real = real
        self.partial = partial

    def write(self, data) -> int:
        if self.partial:
            n, self.partial = self.partial, 0
            self.real.write(bytes(data[:n]))
        raise OSError(errno.ENOSPC, "No space left on device")

    def truncate(self, size: int) -> int:
        return self.real.truncate(size)

    def seek(self, *a):
        return self.real.seek(*a)

    def close(self) -> None:
        self.real.close()


def test_a_full_disk_warns_and_the_loop_goes_on(tmp_path):
    run = Run(config(tmp_path))
    group(run, 0, [1.0, 0.0])
    run.log_step(0)
    rollouts = run._files[ROLLOUTS]
    real = rollouts._f
    rollouts._f = FullDisk(real, partial=25)  # half a line reaches the disk, then ENOSPC
    group(run, 1, [1.0, 0.0])
    with pytest.warns(WriterWarning, match="No space left"):
        rec = run.log_step(1)
    assert rec["step"] == 1  # the step record is still written
    rollouts._f = real  # space again
    group(run, 2, [0.0, 1.0])
    run.log_step(2)
    run.close()
    # The half line was cut back: the file holds whole records only.
    records = lines(run.dir / "rollouts.jsonl")
    assert [r["step"] for r in records] == [0, 0, 2, 2]
    assert [s["step"] for s in lines(run.dir / "steps.jsonl")] == [0, 1, 2]
    assert not read(run.dir).warnings


def test_a_failing_truncate_still_keeps_records_apart(tmp_path):
    run = Run(config(tmp_path))
    rollouts = run._files[ROLLOUTS]
    real = rollouts._f

    class NoTruncate(FullDisk):
        def truncate(self, size: int) -> int:
            raise OSError(errno.EIO, "I/O error")

    rollouts._f = NoTruncate(real, partial=10)
    group(run, 0, [1.0, 0.0])
    with pytest.warns(WriterWarning):
        run.log_step(0)
    rollouts._f = real
    group(run, 1, [1.0, 0.0])
    run.log_step(1)
    run.close()
    raw = (run.dir / "rollouts.jsonl").read_bytes().split(b"\n")
    # The torn fragment stands alone on its line; every record after it is whole.
    assert raw[0] == b'{"step":0,'[:10]
    assert [json.loads(x)["step"] for x in raw[1:] if x] == [1, 1]


def test_values_json_cannot_hold_are_written_not_lost(tmp_path):
    class BrokenRepr:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    with Run(config(tmp_path)) as run:
        run.log_attempt(
            0,
            "g",
            "t",
            1.0,
            policy_version=0,
            metadata={"text": "bad \ud800 surrogate", (1, 2): "tuple key", "obj": BrokenRepr()},
        )
        run.log_attempt(0, "g", "t", 0.0, policy_version=0, metadata={"s": {1, 2}})
        with pytest.warns(WriterWarning, match="a value JSON cannot hold"):
            rec = run.log_step(0, metrics={"train/odd": BrokenRepr(), "train/loss": 1.0})
    first, second = lines(run.dir / "rollouts.jsonl")
    assert first["metadata"]["text"] == "bad \\ud800 surrogate"
    assert first["metadata"]["(1, 2)"] == "tuple key"
    assert first["metadata"]["obj"] == "<unrepresentable BrokenRepr>"
    assert second["metadata"]["s"] == [1, 2]
    assert rec["train/odd"] == "<unrepresentable BrokenRepr>" and rec["train/loss"] == 1.0


def test_a_failing_mirror_warns_once_and_steps_are_still_written(tmp_path):
    class Down:
        def log(self, record):
            raise ConnectionError("W&B is down")

        def finish(self, status):
            raise ConnectionError("W&B is down")

    run = Run(config(tmp_path))
    run._mirror = Down()
    with pytest.warns(WriterWarning, match="W&B") as caught:
        for step in range(3):
            group(run, step, [1.0, 0.0])
            run.log_step(step)
        run.close()
    assert sum("mirror failed" in str(w.message) for w in caught) == 1
    assert len(lines(run.dir / "steps.jsonl")) == 3


# -- heartbeat -------------------------------------------------------------------------------


def test_heartbeat_writes_progress_while_the_loop_is_busy(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="rlvitals")
    cfg = config(tmp_path, output={"progress_every_seconds": 0.05})
    with Run(cfg) as run:
        run.progress("sampling", attempts_needed=4)
        run.log_attempt(0, "g", "t", 1.0, policy_version=0)
        time.sleep(0.4)  # a slow phase, no step record
        with run.phase("training"):
            time.sleep(0.2)
        run.log_attempt(0, "g", "t", 0.0, policy_version=0)
        run.log_step(0)
    beats = lines(run.dir / "progress.jsonl")
    assert len(beats) >= 4
    assert {"time", "step", "phase", "attempts_done", "attempts_needed"} <= set(beats[0])
    assert beats[0]["step"] == 0 and beats[0]["attempts_needed"] == 4
    assert {b["phase"] for b in beats} >= {"sampling", "training"}
    assert any(b["attempts_done"] == 1 for b in beats)
    assert any("progress: step 0 sampling" in r.getMessage() for r in caplog.records)
    assert len(read(run.dir).heartbeats) == len(beats)
    # The timer stops with the run.
    n = len(beats)
    time.sleep(0.15)
    assert len(lines(run.dir / "progress.jsonl")) == n


# -- W&B mirror ----------------------------------------------------------------------------------


def _wandb_history(wandb_dir: Path) -> list[dict]:
    """History rows of the offline run under ``wandb_dir``, from its transaction log (a LevelDB
    log of protobuf records: 7-byte file header, 32 KiB blocks, 7-byte chunk headers)."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = glob.glob(str(wandb_dir / "wandb" / "offline-run-*" / "run-*.wandb"))
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B"
    block, pos, records, partial = 32768, 7, [], b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, n, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 and n == 0:
            pos += left
            continue
        chunk, pos = data[pos + 7 : pos + 7 + n], pos + 7 + n
        if kind == 1:
            records.append(chunk)
        elif kind == 2:
            partial = chunk
        elif kind == 3:
            partial += chunk
        elif kind == 4:
            records.append(partial + chunk)
    rows = []
    for raw in records:
        rec = pb.Record()
        rec.ParseFromString(raw)
        if rec.WhichOneof("record_type") == "history":
            rows.append(
                {
                    "/".join(i.nested_key) or i.key: json.loads(i.value_json)
                    for i in rec.history.item
                }
            )
    return rows


def test_every_step_record_is_mirrored_to_wandb_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    (tmp_path / "wb").mkdir()
    losses = [0.5, float("nan"), 0.25]
    with Run(config(tmp_path, output={"wandb_project": "rlvitals-test"})) as run:
        for step, loss in enumerate(losses):
            group(run, step, [1.0, 0.0, float(step % 2)])
            run.log_step(step, metrics={"train/loss": loss})
    deadline = time.monotonic() + 30
    rows = _wandb_history(tmp_path / "wb")
    while len(rows) < len(losses) and time.monotonic() < deadline:
        time.sleep(0.1)  # wandb's service process may still be flushing its log to disk
        rows = _wandb_history(tmp_path / "wb")
    steps = lines(run.dir / "steps.jsonl")
    assert [r["_step"] for r in rows] == [0, 1, 2]
    for row, rec in zip(rows, steps):
        for key, value in rec.items():
            if key == "step" or value is None:
                continue
            got = row[key]
            want = {"NaN": math.nan}.get(value, value) if isinstance(value, str) else value
            assert got == pytest.approx(want, nan_ok=True), key


def test_wandb_project_without_the_extra_names_the_pip_command(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError
    from rlvitals.errors import install_command

    with pytest.raises(MissingExtraError) as exc:
        Run(config(tmp_path, output={"wandb_project": "p"}))
    assert install_command("wandb") in str(exc.value)
    assert not (tmp_path / "r").exists()  # nothing half-made


# -- round trips -----------------------------------------------------------------------------


any_float = st.floats(allow_nan=True, allow_infinity=True)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(any_float, min_size=1, max_size=6), reward=any_float)
def test_any_metric_value_round_trips_through_the_files(tmp_path_factory, values, reward):
    root = tmp_path_factory.mktemp("rt")
    with Run(config(root)) as run:
        run.log_attempt(0, "g", "t", reward, policy_version=0, metadata={"x": reward})
        run.log_attempt(0, "g", "t", 0.5, policy_version=0)
        run.log_step(0, metrics={f"custom/v{i}": v for i, v in enumerate(values)})
    data = read(run.dir)
    assert not data.warnings
    for i, v in enumerate(values):
        got = data.series(f"custom/v{i}").values[0]
        assert got == v or (math.isnan(got) and math.isnan(v))
    first = lines(run.dir / "rollouts.jsonl")[0]
    for got in (first["reward"], first["metadata"]["x"]):
        got = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(got, got)
        assert got == reward or (math.isnan(got) and math.isnan(reward))
    table = data.attempts
    assert table is not None
    assert table.reward[0] == reward or (math.isnan(table.reward[0]) and math.isnan(reward))


# -- a killed process loses at most the line being written --------------------------------------

CHILD = textwrap.dedent(
    """
    import sys, time
    from rlvitals import Run, jsonio

    # Write in 4 KiB pieces, as a kernel may when a signal cuts a large write short, so
    # the kill can land inside a record.
    def append(self, data):
        for i in range(0, len(data), 4096):
            self._f.write(data[i : i + 4096])
            time.sleep(0.0005)
        self._good += len(data)

    jsonio.LineFile.append = append
    run = Run({"output": {"output_dir": sys.argv[1], "name": "killed"},
               "training": {"max_consecutive_unusable_groups": None}})
    print("ready", flush=True)
    big = {f"custom/m{i:04d}": float(i) for i in range(3000)}  # ~70 KB step records
    step = 0
    while True:
        for i in range(64):
            run.log_attempt(step, f"g{i // 8}", "t", float(i % 2), policy_version=step,
                            metadata={"pad": "x" * 200})
        run.log_step(step, metrics=big)
        step += 1
    """
)


def test_sigkill_mid_write_loses_at_most_the_record_being_written(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    steps_file = tmp_path / "killed" / "steps.jsonl"
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # a few updates, then kill inside a record
            raw = steps_file.read_bytes() if steps_file.exists() else b""
            if raw.count(b"\n") >= 5 and not raw.endswith(b"\n"):
                break
            time.sleep(0.001)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    run_dir = tmp_path / "killed"
    raw = steps_file.read_bytes()
    complete = raw[: raw.rfind(b"\n") + 1]
    expected = [json.loads(x) for x in complete.splitlines()]
    assert len(expected) >= 5
    data = read(run_dir)
    assert not data.warnings  # a torn last line is not an error
    assert data.info["status"] == "running"
    got = data.series("custom/m0001")
    assert got.steps.tolist() == [r["step"] for r in expected]
    # The attempts of every written update are all there and whole.
    rollouts = (run_dir / "rollouts.jsonl").read_bytes()
    whole = [msgspec.json.decode(x) for x in rollouts[: rollouts.rfind(b"\n") + 1].splitlines()]
    written = {r["step"] for r in expected}
    assert {r["step"] for r in whole} >= written
    assert sum(1 for r in whole if r["step"] in written) == 64 * len(written)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.floats(min_value=0.0, max_value=1.0))
def test_a_file_cut_anywhere_reads_back_every_whole_record(tmp_path_factory, cut):
    root = tmp_path_factory.mktemp("cut")
    with Run(config(root)) as run:
        for step in range(4):
            group(run, step, [1.0, 0.0])
            run.log_step(step, metrics={"train/loss": float(step)})
    path = run.dir / "steps.jsonl"
    raw = path.read_bytes()
    n = int(len(raw) * cut)
    path.write_bytes(raw[:n])
    whole = raw[:n].count(b"\n")
    tail = raw[:n][raw[:n].rfind(b"\n") + 1 :]
    data = read(run.dir)
    # The run is finished: a last record cut short is one warning naming its line, and one
    # whose closing brace made it (only its newline missing) is read. No whole step record
    # left beside the attempts: one more warning, the reward computed from them (F21).
    s = data.series("train/loss")
    lost = [w for w in data.warnings if "reward per update is computed" in w]
    warnings = [w for w in data.warnings if w not in lost]
    assert len(lost) == (1 if whole == 0 and not tail.endswith(b"}") else 0), data.warnings
    if tail.endswith(b"}"):
        assert not warnings and len(s) == whole + 1
        return
    if tail:
        assert len(warnings) == 1 and f"steps.jsonl:{whole + 1}: not JSON" in warnings[0]
    else:
        assert not warnings
    assert (0 if s is None else len(s)) == whole


def test_trainer_logprobs_that_do_not_fit_are_left_out_with_a_warning(tmp_path):
    with Run(config(tmp_path)) as run:
        a = run.log_attempt(0, "g", "t", 1.0, policy_version=0, sampler_logprobs=[-1.0, -2.0])
        b = run.log_attempt(0, "g", "t", 0.0, policy_version=0, sampler_logprobs=[-0.5])
        c = run.log_attempt(0, "g", "t", 0.0, policy_version=0)  # no sampler logprobs
        with pytest.warns(WriterWarning) as caught:
            rec = run.log_step(0, trainer_logprobs={a: [-1.0], b: [-1.0], c: [-1.0]})
    messages = " ".join(str(w.message) for w in caught)
    assert "1 trainer logprobs for 2 sampled tokens" in messages
    assert "without sampler logprobs" in messages and repr(c) in messages
    assert rec["train/mismatch_k1"] == pytest.approx(0.5)  # b alone
    first, second, _ = lines(run.dir / "rollouts.jsonl")
    assert "mismatch" not in first and second["mismatch"]["tokens"] == 1


attempt_strategy = st.fixed_dictionaries(
    {
        "group": st.sampled_from(["a", "b", "c"]),
        "reward": st.one_of(st.none(), st.floats(), st.integers(-3, 3)),
        "pv": st.one_of(st.none(), st.integers(-2, 4)),
        "error": st.one_of(st.none(), st.sampled_from(["E", "TimeoutError"])),
        "tokens": st.integers(0, 50),
        "duration": st.one_of(st.none(), st.floats()),
        "metadata": st.dictionaries(
            st.sampled_from(["end", "turns", "ok", "x"]),
            st.one_of(st.floats(), st.integers(), st.booleans(), st.text(max_size=3), st.none()),
            max_size=3,
        ),
        "lp": st.one_of(st.none(), st.lists(st.floats(max_value=0), min_size=0, max_size=4)),
    }
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(attempt_strategy, max_size=12), st.booleans())
def test_any_attempts_give_a_step_record_and_a_readable_file(tmp_path_factory, attempts, tlp):
    root = tmp_path_factory.mktemp("fuzz")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Run(
            config(
                root,
                training={"max_consecutive_unusable_groups": None},
                rollout={"max_consecutive_rollout_failures": None},
            )
        ) as run:
            ids = {}
            for a in attempts:
                aid = run.log_attempt(
                    3,
                    a["group"],
                    "t",
                    a["reward"],
                    policy_version=a["pv"],
                    error=a["error"],
                    response_tokens=a["tokens"],
                    duration=a["duration"],
                    metadata=a["metadata"],
                    sampler_logprobs=a["lp"],
                )
                if a["lp"] is not None:
                    ids[aid] = [x / 2 for x in a["lp"]]
            rec = run.log_step(3, trainer_logprobs=ids if tlp else None)
    assert not [w for w in caught if "not computed" in str(w.message)]
    assert rec["step"] == 3 and rec["groups/trained"] + rec["groups/rejected"] == len(
        {a["group"] for a in attempts}
    )
    assert len(lines(run.dir / "rollouts.jsonl")) == len(attempts)
    assert not read(run.dir).warnings


def test_logprobs_as_numpy_arrays_give_the_same_metrics_as_lists(tmp_path):
    np = pytest.importorskip("numpy")
    records = []
    for kind in ("lists", "arrays"):
        with Run(config(tmp_path, name=kind)) as run, warnings.catch_warnings():
            warnings.simplefilter("error", WriterWarning)
            conv = (lambda x: np.asarray(x, dtype=np.float32)) if kind == "arrays" else list
            a = run.log_attempt(
                0, "g", "t", 1.0, policy_version=0, sampler_logprobs=conv([-1.0, -2.0])
            )
            b = run.log_attempt(0, "g", "t", 0.0, policy_version=0, sampler_logprobs=conv([-0.5]))
            tlp = {a: conv([-1.0, -1.5]), b: conv([-1.0])}
            records.append(run.log_step(0, trainer_logprobs=tlp))
    for key in ("train/mismatch_kl", "train/mismatch_ess", "sampling/entropy_estimate"):
        assert records[1][key] == pytest.approx(records[0][key], rel=1e-6), key


def test_warnings_are_writer_warnings_not_errors(tmp_path):
    run = Run(config(tmp_path))
    run.log_attempt(0, "g", "t", 1.0, policy_version=0, sampler_logprobs=[-1.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run.log_step(0, trainer_logprobs={"nope": [-1.0]})
    run.close()
    assert caught and all(issubclass(w.category, WriterWarning) for w in caught)


def test_one_cyclic_or_deep_metadata_value_never_costs_its_update(tmp_path):
    """F11 (adversarial 2026-12-03): metadata holding itself, a list 5000 deep, or an object
    whose attributes raise: every attempt is written and the reward metrics computed."""
    import warnings

    class Bad:
        def __getattr__(self, name):
            raise RuntimeError("boom")

    def meta(kind):
        m = {"turns": 1}
        if kind == "cyclic":
            m["me"] = m
        elif kind == "deep":
            x: list = []
            for _ in range(5000):
                x = [x]
            m["deep"] = x
        elif kind == "raises":
            m["obj"] = Bad()
        return m

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with Run({"output": {"output_dir": str(tmp_path), "name": "r"}}) as run:
            for step, kind in enumerate(["cyclic", "deep", "raises"]):
                for k in range(12):
                    run.log_attempt(
                        step,
                        f"g{k // 4}",
                        "t",
                        float(k % 2),
                        policy_version=step,
                        metadata=meta(kind),
                    )
                rec = run.log_step(step)
                assert rec["reward/mean"] == 0.5, (kind, rec)
    assert not [w for w in got if "not computed" in str(w.message)]
    rows = [json.loads(x) for x in (tmp_path / "r" / "rollouts.jsonl").read_text().splitlines()]
    assert [sum(r["step"] == s for r in rows) for s in range(3)] == [12, 12, 12]


def test_a_full_disk_is_warned_once_per_kind_and_run_json_still_ends(tmp_path, monkeypatch):
    """F25 (adversarial 2026-12-03): 200 steps on a full disk gave 715 WriterWarnings and
    left run.json 'running'. Each kind of failure is warned once, close counts the rest, and
    run.json is rewritten in place (it needs no new room)."""
    import errno
    import warnings

    import rlvitals.jsonio as jsonio
    import rlvitals.writer.run as run_mod

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        run = Run({"output": {"output_dir": str(tmp_path), "name": "r", "trace": "full"}})
        monkeypatch.setattr(jsonio.LineFile, "append", full)
        monkeypatch.setattr(run_mod, "_write_json_atomic", full)
        monkeypatch.setattr(run_mod, "write_transcripts", full, raising=False)
        for step in range(50):
            for k in range(4):
                run.log_attempt(step, "g", "t", float(k % 2), policy_version=step)
            run.log_step(step)
        run.close()
    msgs = [str(w.message) for w in got]
    assert len(msgs) <= 6, msgs
    assert any("more writes failed" in m for m in msgs)
    assert json.loads((tmp_path / "r" / "run.json").read_text())["status"] == "finished"


def test_a_run_killed_while_claiming_its_name_leaves_no_empty_run_json(tmp_path, monkeypatch):
    """F26: a kill between creating run.json and filling it left a 0-byte run.json that
    refused the name for ever, and .tmp files beside it."""
    import os as _os

    real_link, real_replace = _os.link, _os.replace

    def killed(*a, **k):
        raise KeyboardInterrupt  # the process dies here

    monkeypatch.setattr(_os, "link", killed)
    monkeypatch.setattr(_os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        Run({"output": {"output_dir": str(tmp_path), "name": "r"}})
    monkeypatch.setattr(_os, "link", real_link)
    monkeypatch.setattr(_os, "replace", real_replace)
    d = tmp_path / "r"
    left = sorted(p.name for p in d.iterdir()) if d.exists() else []
    assert not [n for n in left if n.endswith(".tmp")], left
    assert "run.json" not in left or (d / "run.json").stat().st_size > 0
    if "run.json" not in left:
        Run({"output": {"output_dir": str(tmp_path), "name": "r"}}).close()


def test_an_attempts_arguments_are_declared_once():
    # Run.log_attempt's signature is the public API; the shard writer's mappings and a batch's
    # columns take the same arguments because all three read writer/args.py: a new argument
    # added to log_attempt and not to AttemptArgs (or the other way round) fails here.
    import inspect

    from rlvitals.writer.args import AttemptArgs
    from rlvitals.writer.columns import COLUMNS

    def shape(params):
        return [(p.name, p.kind, p.default, p.annotation) for p in params]

    run_params = list(inspect.signature(Run.log_attempt).parameters.values())[1:]
    declared = list(inspect.signature(AttemptArgs).parameters.values())
    assert shape(run_params) == shape(declared)
    assert tuple(p.name for p in declared) == COLUMNS
