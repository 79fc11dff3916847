"""Each check fires on the run it is for and stays quiet on healthy ones.

Runs here are synthetic (tests/synth.py, written through the real writer) so every signal can
be placed at a known step; tests/test_checks_trainer.py runs the same checks on the reference
trainer's real runs.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import numpy as np
import pytest

from rlvitals.checks import Thresholds, run_checks
from rlvitals.checks.base import Finding, Report
from rlvitals.jsonio import encode_line, write_json_atomic
from rlvitals.readers.native import NativeReader
from rlvitals.views.check import render_json, render_markdown, render_text
from synth import synth_run


def read(path: Path):
    r = NativeReader(Path(path))
    r.poll()
    return r.run


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("synth")
    cases = {
        "healthy": dict(lr=0.04),
        "healthy_long": dict(steps=300, lr=0.005, seed=3),
        "flat": dict(lr=0.0),
        "too_easy": dict(start_pass=(0.97, 1.0)),
        "too_hard": dict(start_pass=(0.0, 0.01)),
        "fail_burst": dict(fail_rate={k: 0.6 for k in range(20, 26)}, lr=0.04),
        "stale": dict(kl_from=10, kl_growth=0.4, lr=0.04),
        "entropy": dict(entropy_decay_from=15, lr=0.0),
        "sharpening": dict(entropy_decay_from=15, lr=0.06),
        "room": dict(truncate_from=15, lr=0.0),
        "nan": dict(nan_loss_from=30, lr=0.04),
        "exploit": dict(exploit_from=10, evals_every=5, lr=0.0),
        "confirmed": dict(evals_every=5, lr=0.04),
    }
    return {name: synth_run(out, name, **kw) for name, kw in cases.items()}


def check(path: Path, **kw) -> Report:
    return run_checks(read(path), **kw)


def warn_or_worse(rep: Report) -> list[Finding]:
    return rep.at_least("warn")


@pytest.mark.parametrize("name", ["healthy", "healthy_long"])
def test_healthy_runs_raise_nothing_at_warn_or_worse(runs, name):
    rep = check(runs[name])
    assert warn_or_worse(rep) == [], [f.title for f in rep.findings]
    assert rep.verdict in ("learning", "too_early", "mastered")


def test_healthy_run_is_called_learning(runs):
    rep = check(runs["healthy"])
    assert rep.verdict == "learning"
    f = next(f for f in rep.findings if f.check == "reward")
    assert f.evidence["last_mean"] > f.evidence["first_mean"]


def test_flat_reward_with_signal_is_not_learning(runs):
    rep = check(runs["flat"])
    assert rep.verdict == "not_learning"
    f = next(f for f in rep.findings if f.verdict == "not_learning")
    assert f.severity == "warn" and f.evidence["signal_fraction"] > 0.5


def test_groups_all_solved_from_the_start_are_too_easy(runs):
    rep = check(runs["too_easy"])
    assert rep.verdict == "too_easy"
    f = next(f for f in rep.findings if f.check == "groups")
    assert f.first_step == 0 and f.evidence["share"] >= 0.6
    assert f.evidence["all_solved_share"] > f.evidence["none_solved_share"]


def test_groups_none_solved_from_the_start_are_too_hard(runs):
    rep = check(runs["too_hard"])
    assert rep.verdict == "too_hard"
    f = next(f for f in rep.findings if f.check == "groups")
    assert f.evidence["none_solved_share"] > f.evidence["all_solved_share"]
    assert f.evidence["expected_share"] is None or 0 <= f.evidence["expected_share"] <= 1


def test_groups_agreeing_later_because_mastered_is_said_not_warned(tmp_path):
    # Good news: most groups now teach nothing (science.md 3: the curriculum is exhausted).
    # The verdict says mastered; a run that learned its tasks is no failure, so nothing warns.
    p = synth_run(tmp_path, "mastered", steps=60, lr=0.2, start_pass=(0.3, 0.7))
    rep = check(p)
    assert rep.verdict == "mastered"
    f = next(f for f in rep.findings if f.check == "groups")
    assert (f.verdict, f.severity) == ("mastered", "info")
    assert f.evidence["reward_improved"] is True and f.first_step > 5
    assert "used up" in f.title and "harder tasks" in f.action
    assert warn_or_worse(rep) == []


def test_groups_unsolved_later_while_reward_rises_is_info(tmp_path):
    # Half the tasks are beyond the policy; it masters the rest, so most groups stop
    # disagreeing (solved by none more often than by all) while the reward climbs.
    p = synth_run(
        tmp_path, "beyond", steps=60, groups=48, lr=0.1, start_pass=(0.4, 0.6), stuck_share=0.5
    )
    rep = check(p)
    f = next(f for f in rep.findings if f.check == "groups")
    assert (f.verdict, f.severity) == ("too_hard", "info")
    assert f.evidence["reward_improved"] is True
    assert f.evidence["none_solved_share"] > f.evidence["all_solved_share"]
    assert "cannot do yet" in f.title


@pytest.mark.parametrize(
    "start, verdict", [((0.4, 0.9), "exploration_stopped"), ((0.05, 0.6), "collapse")]
)
def test_groups_agreeing_later_without_reward_gain_is_an_alarm(tmp_path, start, verdict):
    # Solved-by-all (too easy) or solved-by-none (too hard) after a sound start, with the
    # reward flat and the sampler's entropy falling: the policy stopped exploring, not mastered.
    p = synth_run(
        tmp_path, "collapsed", steps=40, lr=0.0, start_pass=start, collapse_from=20,
        entropy_decay_from=20,
    )  # fmt: skip
    rep = check(p)
    f = next(f for f in rep.findings if f.check == "groups")
    assert (f.verdict, f.severity) == (verdict, "warn")
    assert f.evidence["reward_improved"] is False
    assert 20 <= f.first_step <= 24


def test_groups_agreeing_while_entropy_holds_is_not_exploration_stopped(tmp_path):
    # The same agreeing groups, but every attempt still samples as widely as at the start
    # (sampling/entropy_estimate holds): the tasks split into ones every attempt solves and
    # ones none does (the reference trainer's out_of_room fault: lookups lose their only turn
    # to the tool call). "The policy became deterministic" would be false; that most groups
    # teach nothing while the reward stands still is true: no signal, a warning and a symptom
    # (issue 27: a real TRL run with 63% of groups at one reward read info).
    p = synth_run(tmp_path, "split", steps=40, lr=0.0, start_pass=(0.4, 0.9), collapse_from=20)
    rep = check(p)
    f = next(f for f in rep.findings if f.check == "groups")
    assert (f.verdict, f.severity) == ("no_signal", "warn") and f.evidence["symptom"] is True
    assert f.evidence["entropy_metric"] == "sampling/entropy_estimate"
    assert f.evidence["entropy_ratio"] >= 0.9
    assert "still explores" in f.title
    assert not [x for x in rep.findings if x.verdict == "exploration_stopped"]


def test_burst_of_failed_attempts_is_found_with_its_steps(runs):
    rep = check(runs["fail_burst"])
    assert rep.verdict == "infra_failures"
    f = next(f for f in rep.findings if f.check == "failures")
    assert 20 <= f.first_step <= 21
    assert "rollout_failed/TimeoutError" in f.evidence["reasons"]


def test_growing_mismatch_with_a_rising_lag_is_a_stale_policy(tmp_path):
    # The sampler keeps the weights of update 10: the lag grows by one per update and the
    # mismatch with it.
    p = synth_run(tmp_path, "stale", kl_from=10, kl_growth=0.4, lr=0.04, stale_from=10)
    rep = check(p)
    assert rep.verdict == "stale_policy"
    f = next(f for f in rep.findings if f.check == "agreement")
    assert f.metric == "train/mismatch_kl"
    assert f.evidence["lag_rising"] or f.evidence["stale_dropped"]
    assert 10 <= f.first_step <= 15


def test_growing_mismatch_with_a_flat_lag_is_drift_caught_by_its_trend(runs):
    # Sync run, every attempt on the trainer's weights (lag 0 throughout), mismatch x1.4 per
    # update from step 10: drift, named by its trend within five updates of the onset.
    rep = check(runs["stale"])
    assert rep.verdict == "drift"
    f = next(f for f in rep.findings if f.check == "agreement")
    assert f.metric == "train/mismatch_kl" and f.evidence["lag_rising"] is False
    assert "lag flat" in f.title and "stale" not in f.title
    assert 10 <= f.first_step <= 15


def test_a_constant_designed_lag_is_healthy():
    # A real run of examples/grpo-async.toml (the reference trainer, sampler one update ahead
    # by design: freshness/lag_mean 1 throughout; mismatch KL ~0.03, over the sync line).
    from rlvitals import read as read_any

    data = read_any(str(Path(__file__).parent / "data" / "runs" / "grpo-async"))
    lag = data.series("freshness/lag_mean")
    assert lag is not None and float(np.median(lag.values)) == 1.0
    assert float(np.median(data.series("train/mismatch_kl").values)) > 0.01
    rep = run_checks(data)
    assert not rep.at_least("warn"), [f.title for f in rep.at_least("warn")]
    assert rep.verdict == "learning"


def test_entropy_falling_relative_to_its_start_is_a_collapse(runs):
    rep = check(runs["entropy"])
    assert rep.verdict == "collapse"
    f = next(f for f in rep.findings if f.check == "policy")
    assert 15 <= f.first_step <= 25
    assert f.evidence["ratio_low"] < 0.3


def test_entropy_falling_fast_warns_before_it_reaches_the_line(tmp_path):
    # Entropy x0.8 per update from step 15: by step 19 it is at a third of its start, not yet
    # under the 0.3 line, but falling fast and significantly with a flat reward.
    rep = check(synth_run(tmp_path, "falling", steps=20, entropy_decay_from=15, lr=0.0))
    f = next(f for f in rep.findings if f.check == "policy")
    assert (f.verdict, f.severity) == ("collapse", "warn")
    assert f.first_step == 17 and f.evidence["ratio_low"] > 0.3


def test_entropy_falling_fast_in_the_last_updates_while_reward_climbs_is_sharpening(tmp_path):
    # Entropy x0.8 per update from step 35 of 40, found falling fast at 37: three updates
    # after it are too few to read the reward's trend, so it is read from the five before,
    # where the reward still climbs (the reference trainer's healthy seed 9 at 160 tasks per
    # update read "collapse ... while reward does not improve" this way, held-out rising).
    rep = check(
        synth_run(tmp_path, "late", steps=40, groups=64, lr=0.03, start_pass=(0.0, 0.05),
                  entropy_decay_from=35)
    )  # fmt: skip
    f = next(f for f in rep.findings if f.check == "policy")
    assert (f.verdict, f.severity) == ("collapse", "info") and "sharpening" in f.title
    assert f.evidence["reward_trend_z_since"] > 3
    assert rep.verdict == "learning"
    # The same fall with the reward flat is still a collapse.
    flat = check(synth_run(tmp_path, "late-flat", steps=40, groups=64, lr=0.0,
                           start_pass=(0.3, 0.5), entropy_decay_from=35))  # fmt: skip
    g = next(f for f in flat.findings if f.check == "policy")
    assert (g.verdict, g.severity) == ("collapse", "warn")


def test_entropy_falling_while_reward_climbs_is_not_an_alarm(runs):
    rep = check(runs["sharpening"])
    f = next(f for f in rep.findings if f.check == "policy")
    assert f.severity == "info" and "sharpening" in f.title
    assert rep.verdict == "learning"


def test_truncation_rising_with_flat_reward_is_out_of_room(runs):
    rep = check(runs["room"])
    assert rep.verdict == "out_of_room"
    f = next(f for f in rep.findings if f.check == "episodes")
    assert 15 <= f.first_step <= 18


def test_nan_loss_is_found_at_once(runs):
    rep = check(runs["nan"])
    assert rep.verdict == "non_finite"
    f = next(f for f in rep.findings if f.check == "nonfinite")
    assert f.first_step == 30 and f.metric == "train/loss" and f.severity == "fail"


def test_train_reward_up_heldout_down_is_exploit_suspected(runs):
    rep = check(runs["exploit"])
    assert rep.verdict == "exploit_suspected"
    f = next(f for f in rep.findings if f.check == "heldout")
    assert f.evidence["heldout_last"] < f.evidence["heldout_first"]
    assert f.first_step is not None and f.first_step <= 20


def test_heldout_rising_with_train_confirms_learning(runs):
    rep = check(runs["confirmed"])
    assert not [f for f in rep.findings if f.verdict == "exploit_suspected"]


def test_early_alarm_does_not_mute_a_later_one(tmp_path):
    p = synth_run(
        tmp_path,
        "two",
        steps=80,
        lr=0.04,
        fail_rate={**{k: 0.6 for k in range(10, 15)}, **{k: 0.6 for k in range(60, 66)}},
    )
    rep = check(p)
    bursts = [f for f in rep.findings if f.check == "failures"]
    assert [f.first_step for f in bursts] == [10, 60]


def _run_dir(
    tmp_path: Path, name: str, status: str, steps, heartbeats: list | tuple | None = None
) -> Path:
    """A run directory written by hand: run.json with ``status``, the ``steps`` records, and
    ``progress.jsonl`` when ``heartbeats`` is given."""
    d = tmp_path / name
    d.mkdir()
    write_json_atomic(
        d / "run.json",
        {
            "format": "rlvitals-run/1",
            "name": name,
            "status": status,
            "stop_reason": None,
            "config": {},
        },
    )
    with open(d / "steps.jsonl", "wb") as f:
        for record in steps:
            f.write(encode_line(record))
    if heartbeats is not None:
        with open(d / "progress.jsonl", "wb") as f:
            for hb in heartbeats:
                f.write(encode_line(hb))
    return d


def _native_run(tmp_path: Path, status: str, step_times: list[float], heartbeats=()) -> Path:
    return _run_dir(
        tmp_path,
        f"run-{status}-{len(step_times)}-{len(heartbeats)}",
        status,
        [{"step": i, "time": t, "reward/mean": 0.5} for i, t in enumerate(step_times)],
        heartbeats,
    )


def test_running_run_without_new_steps_is_stalled(tmp_path):
    t0 = 1_000_000.0
    d = _native_run(tmp_path, "running", [t0 + i for i in range(10)])
    rep = check(d, now=t0 + 9 + 120)
    f = next(f for f in rep.findings if f.check == "liveness")
    assert f.verdict == "stalled" and f.severity == "fail" and f.first_step == 10
    assert rep.verdict == "stalled"


def test_slow_phase_with_progressing_heartbeats_is_not_a_stall(tmp_path):
    t0 = 1_000_000.0
    hbs = [
        {"time": t0 + 9 + k * 10, "step": 10, "phase": "sampling", "attempts_done": k * 8}
        for k in range(1, 12)
    ]
    d = _native_run(tmp_path, "running", [t0 + i for i in range(10)], hbs)
    rep = check(d, now=t0 + 9 + 115)
    f = next(f for f in rep.findings if f.check == "liveness")
    assert f.severity == "info" and "slow phase" in f.title


def test_heartbeats_without_progress_are_a_stall(tmp_path):
    t0 = 1_000_000.0
    hbs = [
        {"time": t0 + 9 + k * 10, "step": 10, "phase": "sampling", "attempts_done": 8}
        for k in range(1, 12)
    ]
    d = _native_run(tmp_path, "running", [t0 + i for i in range(10)], hbs)
    rep = check(d, now=t0 + 9 + 115)
    assert rep.verdict == "stalled"


def test_the_time_spent_judging_a_live_run_is_not_a_stall(tmp_path, monkeypatch):
    # A long run's transcripts take minutes to scan; a step every second, the last one just
    # now, must not read as a stall because the clock moved on while it was judged.
    import rlvitals.checks as checks_pkg

    t0 = time.time() - 9
    d = _native_run(tmp_path, "running", [t0 + i for i in range(10)])
    real = checks_pkg.derive
    clock = time.time

    def slow_derive(ctx):
        out = real(ctx)
        later = clock() + 120  # two minutes spent judging
        monkeypatch.setattr(time, "time", lambda: later)
        return out

    monkeypatch.setattr(checks_pkg, "derive", slow_derive)
    rep = check(d)
    assert not [f for f in rep.findings if f.verdict == "stalled"], rep.findings


def _plateau_run(tmp_path: Path, name: str, real_keeps_rising: bool) -> Path:
    """300 updates: the trained groups' reward rises 0.3 -> 0.65 over the first 100, then holds
    (the groups left to train are the mixed ones); the reward with rejected groups counted
    goes on to 0.9 as tasks are mastered, or holds too."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(300):
        rise = 0.3 + 0.35 * min(i, 100) / 100
        real = rise + (0.25 * max(0, i - 100) / 200 if real_keeps_rising else 0.0)
        rows.append(
            {
                "step": i,
                "time": 1_000_000.0 + i,
                "reward/mean": rise + 0.02 * rng.standard_normal(),
                "reward/mean_with_unusable": real + 0.02 * rng.standard_normal(),
                "reward/group_std_mean": 0.4,
                "groups/signal_fraction": 0.5,
            }
        )
    return _run_dir(tmp_path, name, "finished", rows)


def test_a_plateau_is_read_on_the_reward_with_rejected_groups(tmp_path):
    # reward/mean holds while the tasks being mastered leave training: still learning.
    rising = check(_plateau_run(tmp_path, "mastering", real_keeps_rising=True))
    assert not [f for f in rising.findings if "stopped improving" in f.title], rising.findings
    # Both flat: stopped improving, named on the real level; said, not warned: a run that
    # learned and levelled off converged (the healthy families' rise saturates too).
    flat = check(_plateau_run(tmp_path, "flat", real_keeps_rising=False))
    f = next(f for f in flat.findings if "stopped improving" in f.title)
    assert f.severity == "info" and f.metric == "reward/mean_with_unusable"
    assert flat.verdict == "learning" and not flat.at_least("warn")


def _mismatch_run(tmp_path: Path, name: str, spell: range) -> Path:
    """200 updates of a bfloat16-rounding mismatch (about 5e-5), 10x higher over ``spell``,
    the freshness lag flat at 0."""
    rng = np.random.default_rng(1)
    rows = [
        {
            "step": i,
            "time": 1_000_000.0 + i,
            "reward/mean": 0.3 + 0.002 * i,
            "train/mismatch_kl": (7e-4 if i in spell else 5e-5) * (1 + 0.2 * rng.standard_normal()),
            "freshness/lag_mean": 0.0,
        }
        for i in range(200)
    ]
    return _run_dir(tmp_path, name, "finished", rows)


def test_a_mismatch_spell_that_ended_under_the_stable_line_is_said_not_warned(tmp_path):
    # 10x its start for 12 updates, then back, never near tinker's 0.01: information.
    rep = check(_mismatch_run(tmp_path, "spell", range(120, 132)))
    f = next(f for f in rep.findings if f.metric == "train/mismatch_kl")
    assert (f.severity, f.verdict) == ("info", "drift") and "over since" in f.title
    assert 118 <= f.first_step <= 124 and f.evidence["ended"] is True
    # The same rise still there at the end: drift, a warning.
    rep = check(_mismatch_run(tmp_path, "rising", range(120, 200)))
    f = next(f for f in rep.at_least("warn") if f.metric == "train/mismatch_kl")
    assert f.verdict == "drift" and "over since" not in f.title


def test_finished_run_is_never_stalled(tmp_path):
    d = _native_run(tmp_path, "finished", [1_000_000.0 + i for i in range(10)])
    rep = check(d, now=2_000_000.0)
    assert not [f for f in rep.findings if f.verdict == "stalled"]


def test_crashed_run_says_why(tmp_path):
    d = _native_run(tmp_path, "crashed", [1.0, 2.0])
    meta = json.loads((d / "run.json").read_text())
    meta["stop_reason"] = "RuntimeError: CUDA out of memory"
    write_json_atomic(d / "run.json", meta)
    rep = check(d)
    assert rep.verdict == "crashed"
    assert "out of memory" in rep.findings[0].title


def test_findings_come_in_the_seeds_order(runs):
    from rlvitals.checks import CHECK_ORDER

    rep = check(runs["nan"])
    order = [CHECK_ORDER.index(f.check) for f in rep.findings]
    assert order == sorted(order)


def test_thresholds_can_be_overridden(runs):
    rep = check(runs["too_easy"], thresholds=Thresholds().with_overrides({"rejected_warn": "0.95"}))
    assert not [f for f in rep.findings if f.check == "groups" and f.severity != "ok"]


def test_unknown_threshold_is_a_clear_error():
    from rlvitals.errors import UsageError

    with pytest.raises(UsageError, match="unknown threshold 'nope'"):
        Thresholds().with_overrides({"nope": "1"})


def test_text_view_shows_untrusted_text_literally(tmp_path):
    rep = Report(
        source="[bold]x[/bold] <script>",
        verdict="drift",
        findings=[Finding("agreement", "warn", "drift", "[red]boom[/red] <b>", metric="m")],
        info={"format": "rlvitals", "steps": 3},
    )
    buf = io.StringIO()
    render_text([rep], buf, width=120, color=False)
    out = buf.getvalue()
    assert "[bold]x[/bold]" in out and "[red]boom[/red] <b>" in out
    md = render_markdown([rep])
    assert "<script>" not in md and "&lt;script>" in md
    assert json.loads(render_json([rep]))["findings"][0]["title"] == "[red]boom[/red] <b>"


def test_check_time_grows_linearly(tmp_path):
    # 100x more steps must not cost 1000x more: the checks are O(n). Not a timing test of
    # absolute speed (benchmarks/check_speed.py does that), a guard against O(n^2).
    from rlvitals.model import RunData

    def fake(n: int) -> RunData:
        import numpy as np

        data = RunData(source=str(tmp_path), format="test")
        rng = np.random.default_rng(0)
        for name in (
            "reward/mean",
            "train/mismatch_kl",
            "sampling/entropy_estimate",
            "response/truncated_rate",
            "reward/group_std_mean",
        ):
            for i, v in enumerate(rng.random(n)):
                data.metrics.add(i, name, float(v))
        return data

    small, big = fake(1000), fake(100_000)
    run_checks(fake(100))  # imports and first-call costs out of the timing
    t = time.perf_counter()
    run_checks(small)
    t_small = time.perf_counter() - t
    t = time.perf_counter()
    run_checks(big)
    t_big = time.perf_counter() - t
    assert t_big < 300 * max(t_small, 1e-3)  # linear is 100x; O(n^2) would be 10,000x


def test_stuck_heartbeats_are_a_stall_before_the_clock_says_so(tmp_path):
    t0 = 1_000_000.0
    hbs = [
        {"time": t0 + 9.5 + k, "step": 10, "phase": "sampling", "attempts_done": 128}
        for k in range(8)
    ]
    d = _native_run(tmp_path, "running", [t0 + i for i in range(10)], hbs)
    rep = check(d, now=t0 + 17)  # 8 s since the last step: under the clock's 10 s floor
    f = next(f for f in rep.findings if f.check == "liveness")
    assert f.verdict == "stalled" and f.severity == "fail" and "no progress" in f.title


def test_learning_title_never_says_rose_to_a_lower_value():
    # Reward rises mid-run, then settles back near its start (solved groups rejected): still
    # learning, but the title must not read "rose from 0.45 to 0.44".
    import numpy as np

    from rlvitals.checks import reward
    from rlvitals.checks.context import Context
    from rlvitals.model import RunData

    rng = np.random.default_rng(0)
    d = RunData(source="<memory>", format="test")
    level = [0.45] * 20 + [0.7] * 40 + [0.44] * 10
    for step, v in enumerate(level):
        d.metrics.add(step, "reward/mean", float(v + rng.normal(0, 0.02)))
    (f,) = reward.check(Context(d))
    assert f.verdict == "learning"
    first, last = f.evidence["first_mean"], f.evidence["last_mean"]
    assert last < first and f"to {last:.3g}" not in f.title and "rose above" in f.title


def _trl_state(path: Path, every: int, records: int) -> Path:
    # A TRL trainer_state.json as Trainer writes it: one log_history entry per logging_steps.
    rng = np.random.default_rng(0)
    last = every * records
    hist = [
        {
            "step": every * k,
            "epoch": every * k / last,
            "reward": 0.3 + 0.4 * every * k / last + float(rng.normal(0, 0.02)),
            "reward_std": 0.3,
            "loss": 0.01,
            "learning_rate": 1e-6,
        }
        for k in range(1, records + 1)
    ]
    state = {"global_step": last, "max_steps": last, "logging_steps": every, "log_history": hist}
    write_json_atomic(path / "trainer_state.json", state)
    return path / "trainer_state.json"


def _titles(path: Path, capsys) -> tuple[str, str]:
    from rlvitals.cli import main

    main(["check", str(path)])
    head = capsys.readouterr().out.splitlines()[0]
    main(["check", str(path), "--json"])
    rep = json.loads(capsys.readouterr().out)["runs"][0]
    return head, " | ".join(f["title"] for f in rep["findings"] if f["check"] == "reward")


def test_a_log_every_5_steps_counts_records_not_steps(tmp_path, capsys) -> None:
    # TRL logging_steps=5 over 500 updates: 100 records. The reward's first window is the
    # first 10 records (steps 5-50), not "first 10 steps"; the header does not say 100 steps.
    from rlvitals.cli import main

    head, titles = _titles(_trl_state(tmp_path, 5, 100), capsys)
    assert "100 records to step 500" in head and "100 steps" not in head
    assert "(first 10 records, steps 5-50)" in titles and "first 10 steps" not in titles
    main(["check", str(tmp_path / "trainer_state.json"), "--format", "markdown"])
    assert "100 records to step 500." in capsys.readouterr().out


def test_a_log_of_every_step_still_counts_steps(tmp_path, capsys) -> None:
    head, titles = _titles(_trl_state(tmp_path, 1, 100), capsys)
    assert "100 steps" in head and "(first 10 steps)" in titles and "records" not in titles
