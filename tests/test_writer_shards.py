"""Many writers, one run: rollout workers in other processes log attempts into shards, the
trainer's log_step closes each update over all of them; one run name, one process."""

from __future__ import annotations

import json
import multiprocessing
import random
import subprocess
import sys
import textwrap
import warnings

import pytest

import rlvitals
from rlvitals import Run
from rlvitals.errors import UsageError

STEPS, WORKERS, GROUPS, SIZE = 4, 3, 4, 4  # per worker and step: GROUPS groups of SIZE


def attempts_of(worker: int, step: int) -> list[dict]:
    """The attempts one worker samples for one update (deterministic, so two runs compare)."""
    rng = random.Random(worker * 1000 + step)
    out = []
    for g in range(GROUPS):
        p = rng.random()
        for k in range(SIZE):
            n = rng.randrange(3, 9)
            out.append(
                {
                    "step": step,
                    "attempt_id": f"w{worker}-{step}-{g}-{k}",
                    "group_id": f"w{worker}-{step}-g{g}",
                    "task_id": f"t{rng.randrange(50)}",
                    "reward": 1.0 if rng.random() < p else 0.0,
                    "policy_version": step - (1 if rng.random() < 0.2 else 0),
                    "response_tokens": n,
                    "truncated": rng.random() < 0.1,
                    "metadata": {"termination_reason": "done", "turns": rng.randrange(1, 4)},
                    "sampler_logprobs": [round(-rng.random(), 4) for _ in range(n)],
                    "transcript": [{"prompt": f"q{g}", "completion": "x" * n}],
                }
            )
    return out


def trainer_logprobs(step: int) -> dict[str, list[float]]:
    out = {}
    for w in range(WORKERS):
        for a in attempts_of(w, step):
            out[a["attempt_id"]] = [x - 0.01 for x in a["sampler_logprobs"]]
    return out


def cfg(out, name):
    return {"output": {"output_dir": str(out), "name": name, "trace": "full"}}


def _worker(run_dir: str, worker: int, barrier) -> None:
    with rlvitals.attach(run_dir, shard=f"worker-{worker}") as w:
        for step in range(STEPS):
            barrier.wait()  # the trainer starts update `step`
            w.log_attempts(attempts_of(worker, step))
            barrier.wait()  # this worker's attempts for it are in


_VOLATILE = ("time", "perf/")


def _steps(run_dir):
    recs = [json.loads(x) for x in (run_dir / "steps.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(_VOLATILE)} for r in recs]


def _attempts(run_dir):
    recs = [json.loads(x) for x in (run_dir / "rollouts.jsonl").read_text().splitlines()]
    return {r["attempt_id"]: {k: v for k, v in r.items() if k != "time"} for r in recs}


@pytest.fixture(scope="module")
def sharded_and_single(tmp_path_factory):
    out = tmp_path_factory.mktemp("shards")
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(WORKERS + 1)
    with Run(cfg(out, "sharded")) as run:
        procs = [
            ctx.Process(target=_worker, args=(str(run.dir), w, barrier)) for w in range(WORKERS)
        ]
        for p in procs:
            p.start()
        for step in range(STEPS):
            barrier.wait()
            barrier.wait()
            run.log_step(step, trainer_logprobs=trainer_logprobs(step), metrics={"train/loss": 0.5})
        for p in procs:
            p.join(timeout=30)
            assert p.exitcode == 0
    with Run(cfg(out, "single")) as run:
        for step in range(STEPS):
            for w in range(WORKERS):
                for a in attempts_of(w, step):
                    run.log_attempt(**a)
            run.log_step(step, trainer_logprobs=trainer_logprobs(step), metrics={"train/loss": 0.5})
    return out / "sharded", out / "single"


def test_every_shard_attempt_is_recorded_once(sharded_and_single):
    sharded, single = sharded_and_single
    lines = (sharded / "rollouts.jsonl").read_text().splitlines()
    ids = [json.loads(x)["attempt_id"] for x in lines]
    assert len(ids) == len(set(ids)) == STEPS * WORKERS * GROUPS * SIZE
    assert _attempts(sharded) == _attempts(single)  # trained, discards, lag, mismatch alike


def test_sharded_metrics_equal_a_single_process_run(sharded_and_single):
    sharded, single = sharded_and_single
    a, b = _steps(sharded), _steps(single)
    assert len(a) == STEPS
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            assert x[k] == pytest.approx(y[k], rel=1e-9, abs=1e-12), k
    assert "train/mismatch_kl" in a[0]


def test_sharded_run_reads_and_transcripts_carry_the_text(sharded_and_single):
    sharded, _ = sharded_and_single
    data = rlvitals.read(sharded)
    assert len(data.attempts) == STEPS * WORKERS * GROUPS * SIZE
    t = json.loads((sharded / "transcripts" / "step-000002.json").read_text())
    assert len(t) == WORKERS * GROUPS * SIZE and t[0]["generations"][0]["completion"]


def test_an_attempt_after_its_update_is_written_is_kept_as_late(tmp_path):
    with Run(cfg(tmp_path, "r")) as run:
        w = rlvitals.attach(run.dir, shard="slow")
        run.log_attempt(0, "g0", "t0", 1.0, policy_version=0)
        run.log_attempt(0, "g0", "t0", 0.0, policy_version=0)
        run.log_step(0)
        w.log_attempt(0, "g9", "t9", 1.0, policy_version=0)
        run.log_step(1)
        w.close()
    recs = {
        r["attempt_id"]: r
        for r in map(json.loads, (tmp_path / "r" / "rollouts.jsonl").read_text().splitlines())
    }
    late = recs["slow-1"]
    assert late["discard_reason"] == "late" and late["trained"] is False and late["step"] == 0


def test_a_second_writer_of_one_shard_is_refused(tmp_path):
    w = rlvitals.attach(tmp_path / "r", shard="a")
    with pytest.raises(UsageError, match="another process"):
        rlvitals.attach(tmp_path / "r", shard="a")
    w.close()
    rlvitals.attach(tmp_path / "r", shard="a").close()  # free again once closed
    with pytest.raises(UsageError, match="shard"):
        rlvitals.attach(tmp_path / "r", shard="../escape")


def test_shard_ids_go_on_after_a_restart(tmp_path):
    with rlvitals.attach(tmp_path / "r", shard="w") as w:
        assert w.log_attempt(0, "g", "t", 1.0) == "w-1"
    with rlvitals.attach(tmp_path / "r", shard="w") as w:
        assert w.log_attempt(0, "g", "t", 1.0) == "w-2"


def test_a_closed_shard_refuses_and_a_bad_argument_is_usage_error(tmp_path):
    w = rlvitals.attach(tmp_path / "r", shard="w")
    with pytest.raises(UsageError):
        w.log_attempt("x", "g", "t", 1.0)
    with pytest.raises(UsageError):
        w.log_attempt(0, "g", "t", 1.0, no_such_argument=1)
    w.close()
    with pytest.raises(UsageError, match="closed"):
        w.log_attempt(0, "g", "t", 1.0)


def test_a_bad_journal_line_is_one_warning_and_the_rest_is_taken(tmp_path):
    with Run(cfg(tmp_path, "r")) as run:
        with rlvitals.attach(run.dir, shard="w") as w:
            w.log_attempt(0, "g", "t", 1.0, policy_version=0)
        with open(run.dir / "shards" / "w.attempts.jsonl", "ab") as f:
            f.write(b"{not json\n")
        with rlvitals.attach(run.dir, shard="v") as v:
            v.log_attempt(0, "g", "t", 0.0, policy_version=0)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            rec = run.log_step(0)
    assert any("w.attempts.jsonl:2" in str(x.message) for x in got)
    assert rec["groups/trained"] == 1.0


def _start(args):
    out, barrier = args
    barrier.wait()
    try:
        Run({"output": {"output_dir": out, "name": "same"}}).close()
        return "ok"
    except UsageError as exc:
        return f"refused: {exc}"


def test_two_processes_starting_one_run_name_one_is_refused(tmp_path):
    ctx = multiprocessing.get_context("fork")
    for i in range(5):
        out = str(tmp_path / f"try{i}")
        barrier = ctx.Manager().Barrier(2)
        with ctx.Pool(2) as pool:
            results = pool.map(_start, [(out, barrier)] * 2)
        assert sorted(r.split(":")[0] for r in results) == ["ok", "refused"], results
        assert "already there" in next(r for r in results if r != "ok")


def test_a_full_disk_at_run_start_is_one_clear_error(tmp_path):
    code = textwrap.dedent(
        f"""
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        from rlvitals import Run
        from rlvitals.errors import ConfigError
        try:
            Run({{"output": {{"output_dir": {str(tmp_path)!r}, "name": "r"}}}})
        except ConfigError as exc:
            print("ConfigError:", exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stdout.startswith("ConfigError: config [output.output_dir]: cannot create")
    assert not (tmp_path / "r" / "run.json").exists()  # the name is not left claimed


def test_a_journal_line_with_wrong_types_is_skipped_and_later_updates_go_on(tmp_path):
    """N08 (adversarial 2026-12-03): a line whose policy_version is a string made every later
    log_step and close raise TypeError; it is one warning now, and the run finishes."""
    with Run(cfg(tmp_path, "r")) as run:
        (run.dir / "shards").mkdir(exist_ok=True)
        bad = {"step": 0, "attempt_id": "x1", "group_id": "g0", "task_id": "t", "reward": 1.0}
        lines = [
            {**bad, "policy_version": "abc"},
            {**bad, "attempt_id": "x2", "step": "1"},
            {**bad, "attempt_id": "x3", "metadata": [1]},
            {**bad, "attempt_id": "x4", "reward": "high"},
        ]
        (run.dir / "shards" / "w.attempts.jsonl").write_text(
            "".join(json.dumps(x) + "\n" for x in lines)
        )
        with rlvitals.attach(run.dir, shard="v") as v:
            v.log_attempt(0, "g", "t", 1.0, policy_version=0)
            v.log_attempt(0, "g", "t", 0.0, policy_version=0)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            first = run.log_step(0)
            second = run.log_step(1)
    shown = [str(x.message) for x in got if "w.attempts.jsonl" in str(x.message)]
    assert len(shown) == 2 and "not an attempt" in shown[0]  # the first, then the count
    assert "3 more bad lines skipped (lines 2..4); 4 in all" in shown[1]
    assert first["groups/trained"] == 1.0 and second["step"] == 1
    assert json.loads((run.dir / "run.json").read_text())["status"] == "finished"


def test_a_restarted_shard_never_appends_to_a_torn_last_line(tmp_path):
    """N09: the predecessor died mid-line; the new writer's first attempt is kept whole and
    gets an id of its own."""
    with Run(cfg(tmp_path, "r")) as run:
        with rlvitals.attach(run.dir, shard="w0") as w:
            for k in range(4):
                w.log_attempt(0, "g", "t", float(k % 2), policy_version=0)
        with open(run.dir / "shards" / "w0.attempts.jsonl", "ab") as f:
            f.write(b'{"step":0,"attempt_id":"w0-5","group_id":"g","rew')
        with rlvitals.attach(run.dir, shard="w0") as w:
            ids = [w.log_attempt(0, "g", "t", 1.0, policy_version=0) for _ in range(4)]
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            run.log_step(0)
    assert "w0-5" not in ids
    rows = [json.loads(x) for x in (run.dir / "rollouts.jsonl").read_text().splitlines()]
    assert {r["attempt_id"] for r in rows} >= set(ids) and len(rows) == 8
