"""Real runs of the reference trainer: the files it writes, determinism, and each fault's
signature in the canonical metrics. Short runs sharing one warm start (module fixture), and the
session's fault runs at the default batch (conftest's fault_run, shared with the checks' tests)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import rlvitals
from rlvitals.grpo import demo_run
from rlvitals.grpo.config import TaskConfig
from rlvitals.grpo.faults import EXPLOIT_WARM_TARGET

pytestmark = pytest.mark.slow

# A fifth of the default batch (160 tasks x 4 attempts): 32 x 4 per update keeps each update cheap.
GROUP = TaskConfig().group_size
TASKS = TaskConfig().tasks_per_step // 5
SMALL = {"task": {"tasks_per_step": TASKS, "heldout_tasks": 100}}
# The faults that take the policy's own learning to show use the session's runs at the default
# batch (conftest's trainer_run, shared with the checks' tests).


@pytest.fixture(scope="module")
def cache(trainer_cache: Path) -> Path:
    """The session's warm-start cache (conftest): the first run trains it, the rest load it."""
    return trainer_cache


def run(tmp: Path, cache: Path, name: str, *, overrides: dict[str, Any] | None = None,
        **kw: Any) -> Path:  # fmt: skip
    merged: dict[str, dict[str, Any]] = {k: dict(v) for k, v in SMALL.items()}
    for section, values in (overrides or {}).items():
        merged.setdefault(section, {}).update(values)
    return demo_run(tmp, name=name, cache=cache, overrides=merged, **kw)


def steps(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]


def series(run_dir: Path, name: str) -> list[float]:
    out = []
    for rec in steps(run_dir):
        v = rec.get(name)
        out.append(math.nan if v is None or v == "NaN" else float(v))
    return out


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def test_smoke_run_writes_every_file_and_every_metric_the_trainer_measures(
    tmp_path: Path, cache: Path
) -> None:
    d = run(
        tmp_path, cache, "smoke", steps=4,
        overrides={"output": {"sampler_checkpoint_every": 2, "progress_every_seconds": 0.05}},
    )  # fmt: skip
    meta = json.loads((d / "run.json").read_text())
    assert meta["status"] == "finished" and meta["format"] == "rlvitals-run/1"
    assert meta["fault"] is None and meta["warm_start"]["reached_target"]
    assert {"model", "task", "optim", "output", "training", "rollout"} <= set(meta["config"])
    assert meta["versions"]["torch"] and meta["versions"]["grader"]
    for name in ("steps.jsonl", "rollouts.jsonl", "evals.jsonl", "progress.jsonl"):
        assert (d / name).stat().st_size > 0, name
    assert sorted(p.name for p in (d / "transcripts").iterdir()) == [
        f"step-{s:06d}.json" for s in range(4)
    ]
    assert sorted(p.name for p in (d / "checkpoints").iterdir()) == [
        "sampler-step-000001.pt", "sampler-step-000003.pt"
    ]  # fmt: skip

    measured = set().union(*(r.keys() for r in steps(d)))
    expected = {
        "reward/mean", "reward/std", "reward/group_std_mean", "reward/mean_with_unusable",
        "groups/trained", "groups/rejected", "groups/all_solved", "groups/none_solved",
        "groups/signal_fraction", "discard/groups/no_variance", "discard/groups/group_too_small",
        "rollouts/retries", "response/length_mean", "response/truncated_rate",
        "train/mismatch_kl", "train/mismatch_k1", "train/logprob_abs_diff", "train/mismatch_ess",
        "train/mismatch_ess_seq", "freshness/lag_mean", "freshness/lag_p90", "freshness/lag_max",
        "sampling/entropy_estimate", "train/entropy", "train/loss", "train/grad_norm",
        "train/lr", "train/clip_frac", "train/ppo_kl", "train/advantage_std",
        "perf/step_seconds", "perf/sampling_seconds", "perf/grading_seconds",
        "perf/training_seconds", "perf/tokens_per_second", "perf/attempt_seconds_p50",
        "rollout/termination_reason/answer", "rollout/turns", "rollout/tool_calls",
        "rollout/answered", "rollout/answer_digits",
    }  # fmt: skip
    assert expected <= measured, sorted(expected - measured)
    # The bfloat16 sampler and float32 trainer disagree a little, never wildly.
    kl = series(d, "train/mismatch_kl")
    assert all(0 < v < 1e-2 for v in kl)

    data = rlvitals.read(d)
    held = data.series("eval/heldout/score")
    assert held is not None and list(held.steps) == [1, 3]
    rows = [json.loads(line) for line in (d / "rollouts.jsonl").read_text().splitlines()]
    assert len(rows) == 4 * TASKS * GROUP
    lookups = [r for r in rows if r["task_id"].startswith("lookup-")]
    assert lookups and any(r["metadata"]["tool_calls"] >= 1 for r in lookups)
    transcript = json.loads((d / "transcripts" / "step-000000.json").read_text())
    multi = [a for a in transcript if len(a["generations"]) > 1]
    assert multi and multi[0]["generations"][0]["finish_reason"] == "tool_call"


def test_weights_change_over_the_run(tmp_path: Path, cache: Path) -> None:
    import torch

    d = run(tmp_path, cache, "params", steps=4,
            overrides={"output": {"sampler_checkpoint_every": 1}})  # fmt: skip
    first = torch.load(d / "checkpoints" / "sampler-step-000000.pt", weights_only=True)
    last = torch.load(d / "checkpoints" / "sampler-step-000003.pt", weights_only=True)
    changed = [k for k in first if not torch.equal(first[k], last[k])]
    assert len(changed) == len(first)


def _comparable(d: Path) -> tuple[list[Any], list[Any]]:
    rows = [json.loads(line) for line in (d / "rollouts.jsonl").read_text().splitlines()]
    attempts = [(r["task_id"], r["reward"], r["response_tokens"], r["trained"]) for r in rows]
    recs = [
        {k: v for k, v in r.items() if not k.startswith("perf/") and k != "time"} for r in steps(d)
    ]
    return attempts, recs


def test_same_seed_gives_the_same_run(tmp_path: Path, cache: Path) -> None:
    # (Another seed would need its own warm start: too slow for a test.)
    a = run(tmp_path, cache, "a", steps=3)
    b = run(tmp_path, cache, "b", steps=3)
    assert _comparable(a) == _comparable(b)


def test_async_attempts_are_one_update_old(tmp_path: Path, cache: Path) -> None:
    d = run(tmp_path, cache, "async", steps=3, mode="async")
    assert series(d, "freshness/lag_mean") == [0.0, 1.0, 1.0]
    assert json.loads((d / "run.json").read_text())["config"]["training"]["mode"] == "async"


# -- faults: each shows its signature in the canonical metrics ------------------------------
# The session's fault runs (conftest's fault_run, shared with the checks' tests: the default
# batch, seed 0, the fault's default onset), read from their onset on.

FULL = TaskConfig().tasks_per_step  # tasks per update at the default batch


def onset_of(d: Path) -> int:
    meta = json.loads((d / "run.json").read_text())
    assert meta["fault_step"] >= 2, meta["fault_step"]  # honest updates before it
    return int(meta["fault_step"])


def test_stale_sampler_raises_lag_and_mismatch_then_drops_stale_attempts(fault_run: Any) -> None:
    d = fault_run("stale_sampler")
    o = onset_of(d)
    assert json.loads((d / "run.json").read_text())["fault"] == "stale_sampler"
    lag = series(d, "freshness/lag_max")
    assert lag[: o + 3] == [0.0] * (o + 1) + [1.0, 2.0]
    kl = series(d, "train/mismatch_kl")
    assert kl[o + 1] > 10 * kl[o - 1] and kl[o + 2] > kl[o + 1]
    stale = series(d, "discard/rollouts/stale")
    assert stale[o + 3] == stale[o + 4] == FULL * GROUP


def test_too_easy_rejects_all_solved_groups_from_the_start(fault_run: Any) -> None:
    d = fault_run("too_easy")
    assert json.loads((d / "run.json").read_text())["fault_step"] == 0
    assert min(series(d, "groups/all_solved")) >= 0.6 * FULL
    assert min(series(d, "discard/groups/no_variance")) >= 0.6 * FULL
    assert max(series(d, "groups/none_solved")) <= 0.1 * FULL
    assert min(series(d, "reward/mean_with_unusable")) > 0.85


def test_too_hard_rejects_none_solved_groups_from_the_start(fault_run: Any) -> None:
    d = fault_run("too_hard")
    n = len(steps(d))
    assert n >= 3  # (a guard stops the run once nothing can be learned)
    assert series(d, "groups/none_solved") == [float(FULL)] * n
    assert series(d, "discard/groups/no_variance") == [float(FULL)] * n
    assert series(d, "reward/mean_with_unusable") == [0.0] * n


def test_grader_exploit_climbs_on_train_reward_while_held_out_falls(trainer_run: Any) -> None:
    # The session's 40-update exploit run at the default batch (shared with the transcript
    # checks' tests): its onset at update 5 leaves the first updates honest.
    d = trainer_run("grader_exploit")
    # The fault's own warm start: it stops at its lower target, and run.json says so.
    meta = json.loads((d / "run.json").read_text())
    assert meta["config"]["optim"]["warm_target_pass_rate"] == EXPLOIT_WARM_TARGET
    assert EXPLOIT_WARM_TARGET <= meta["warm_start"]["pass_rate"] < 0.45
    reward = series(d, "reward/mean_with_unusable")
    assert mean(reward[-3:]) > mean(reward[:3]) + 0.15
    digits = series(d, "rollout/answer_digits")
    assert digits[0] > 2.8 and mean(digits[-3:]) < 2.5  # full answers have 3 digits
    held = [json.loads(line)["score"] for line in (d / "evals.jsonl").read_text().splitlines()]
    assert held[-1] < held[0] - 0.1
    # The shortcut in the transcripts: rewarded answers shorter than any full answer.
    last = json.loads((d / "transcripts" / f"step-{len(steps(d)) - 1:06d}.json").read_text())
    rewarded = [a["generations"][-1]["completion"] for a in last if a["reward"] == 1.0]
    short = [c for c in rewarded if c.endswith("$") and len(c) - 1 < 3]
    assert len(short) > 0.3 * len(rewarded)


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("grader_crash", "discard/rollouts/grading_failed/ConnectionError"),
        ("rollout_crash", "discard/rollouts/rollout_failed/TimeoutError"),
    ],
)
def test_crashes_show_a_burst_of_failed_attempts(fault_run: Any, fault: str, reason: str) -> None:
    d = fault_run(fault)
    o = onset_of(d)
    failed = series(d, reason)
    assert all(math.isnan(x) or x <= 1 for x in failed[:o])
    assert min(failed[o:]) >= 0.15 * FULL * GROUP
    assert min(series(d, "rollouts/retries")[o:]) >= 0.75 * FULL * GROUP
    assert min(series(d, "discard/groups/group_too_small")[o:]) >= 0.25 * FULL


def test_out_of_room_truncates_attempts_and_ends_lookups_at_max_turns(fault_run: Any) -> None:
    d = fault_run("out_of_room")
    o = onset_of(d)
    truncated = series(d, "response/truncated_rate")
    assert max(truncated[:o]) < 0.05 and min(truncated[o:]) > 0.5
    max_turns = series(d, "rollout/termination_reason/max_turns")
    assert all(math.isnan(x) or x == 0 for x in max_turns[:o]) and min(max_turns[o:]) > 0


def test_entropy_collapse_sharpens_the_policy_onto_repeated_replies(trainer_run: Any) -> None:
    d = trainer_run("entropy_collapse")  # the session's run, at the default batch
    entropy = series(d, "sampling/entropy_estimate")
    assert mean(entropy[-3:]) < 0.6 * entropy[0]

    def identical_groups(step: int) -> int:
        attempts = json.loads((d / "transcripts" / f"step-{step:06d}.json").read_text())
        replies: dict[str, set[str]] = {}
        for a in attempts:
            replies.setdefault(a["group_id"], set()).add(a["generations"][-1]["completion"])
        return sum(len(r) == 1 for r in replies.values())

    # A fast collapse can trip the unusable-groups guard early (how fast depends on the CPU's
    # math kernels): judge the last update the run wrote.
    last = len(steps(d)) - 1
    assert last >= 5
    assert identical_groups(last) > identical_groups(0) + 5


def test_stall_stops_step_records_and_leaves_the_run_running(fault_run: Any) -> None:
    d = fault_run("stall")  # (its hang outlasts the checks' stall line: 13 s or more)
    o = onset_of(d)
    assert [r["step"] for r in steps(d)] == list(range(o))
    assert json.loads((d / "run.json").read_text())["status"] == "running"
    beats = [json.loads(line) for line in (d / "progress.jsonl").read_text().splitlines()]
    stuck = [b for b in beats if b["step"] == o][-3:]  # the hang: same phase, same count
    assert len(stuck) == 3 and {b["phase"] for b in stuck} == {"sampling"}
    assert len({b["attempts_done"] for b in stuck}) == 1 and stuck[0]["attempts_done"] > 0


def test_nan_makes_the_loss_non_finite_from_the_onset(fault_run: Any) -> None:
    d = fault_run("nan")
    o = onset_of(d)
    loss = series(d, "train/loss")
    assert all(math.isfinite(v) for v in loss[:o]) and all(math.isnan(v) for v in loss[o:])
    assert all(math.isnan(v) for v in series(d, "train/mismatch_kl")[o:])
    assert all(math.isnan(v) for v in series(d, "train/grad_norm")[o:])


def test_demo_command_runs_and_reports_json(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlvitals.cli import main

    monkeypatch.setenv("RLVITALS_CACHE", str(cache))
    code = main(["demo", "--steps", "2", "--output-dir", str(tmp_path), "--name", "cli", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["run"] == str(tmp_path / "cli") and out["updates"] == 2
    assert json.loads((tmp_path / "cli" / "run.json").read_text())["status"] == "finished"
    # the judgement too (newcomer 2026-12-03: `demo --json` had no verdict)
    assert out["verdict"] and out["worst"] and isinstance(out["findings"], list)


def test_demo_serve_shows_the_run_on_the_live_dashboard(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    import urllib.request

    from rlvitals.cli import main
    from rlvitals.follow import hub as server

    monkeypatch.setenv("RLVITALS_CACHE", str(cache))
    urls: list[str] = []
    real = server.serve_in_background

    def spy(*a: Any, **kw: Any) -> Any:
        url, stop = real(*a, **kw)
        urls.append(url)
        return url, stop

    monkeypatch.setattr(server, "serve_in_background", spy)
    argv = ["demo", "--steps", "2", "--output-dir", str(tmp_path), "--name", "srv", "--quiet",
            "--serve", "--port", "0", "--linger", "5"]  # fmt: skip
    done: list[int] = []
    t = threading.Thread(target=lambda: done.append(main(argv)), daemon=True)
    t.start()
    deadline = time.time() + 120
    listed = ""
    while time.time() < deadline and not done:
        finished = (tmp_path / "srv" / "run.json").exists() and json.loads(
            (tmp_path / "srv" / "run.json").read_text()
        )["status"] == "finished"
        if urls and finished:
            with urllib.request.urlopen(urls[0] + "api/runs", timeout=5) as r:
                listed = r.read().decode()
            if "srv" in listed:
                break
        time.sleep(0.2)
    t.join(timeout=60)  # the dashboard lingers 5 s after the run, then the command ends
    assert urls and urls[0].startswith("http://127.0.0.1:")
    assert "srv" in listed
    assert done == [0] and not t.is_alive()
