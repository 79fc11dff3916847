"""Runs made by other tools: each class of miss of issue 12, on TRL-shaped logs read by the real
TRL reader (``trainer_state.json``) or on a run in memory, with a run where the check fires and
one where it stays quiet.

The runs here are synthetic in their numbers but real in their shape: TRL's own keys
(``rewards/<f>/mean``, ``frac_reward_zero_std``, ``completions/clipped_ratio``, ``kl``...), so
the TRL mapping, the reward components and the checks are exercised end to end.
"""

from __future__ import annotations

import json
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest

from rlvitals import read
from rlvitals.checks import run_checks
from rlvitals.checks.base import Report, severity_rank
from rlvitals.model import RunData

REASSURING = {"learning", "mastered", "healthy"}


def trl_run(tmp_path: Path, name: str, rows: list[dict]) -> RunData:
    """A TRL output directory whose trainer_state.json logs ``rows`` (one per step, from 1)."""
    d = tmp_path / name
    d.mkdir()
    history = [{"step": i + 1, "epoch": 0.01 * (i + 1), **r} for i, r in enumerate(rows)]
    (d / "trainer_state.json").write_text(json.dumps({"log_history": history, "global_step": 1}))
    return read(str(d))


def base_row(i: int, rng: np.random.Generator, **kw) -> dict:
    row = {
        "loss": 0.01,
        "grad_norm": 0.5 + 0.05 * rng.standard_normal(),
        "learning_rate": 3e-3,
        "reward": 0.3 + 0.01 * i + 0.02 * rng.standard_normal(),
        "reward_std": 0.2,
        "frac_reward_zero_std": 0.1,
        "completions/mean_length": 6 + 0.3 * rng.standard_normal(),
        "completions/clipped_ratio": 0.02,
        "entropy": 1.5 + 0.02 * rng.standard_normal(),
        "kl": 0.01 + 0.001 * i,
        "clip_ratio/region_mean": 0.01,
    }
    row.update(kw)
    return row


def alarms(rep: Report) -> list[str]:
    return [f"{f.check}: {f.title}" for f in rep.at_least("warn")]


# -- a short log says something ------------------------------------------------------------


@pytest.mark.parametrize(
    "n, key, value, verdict, check",
    [
        (2, "completions/clipped_ratio", 1.0, "out_of_room", "episodes"),
        (3, "frac_reward_zero_std", 1.0, "too_hard", "groups"),
        (1, "kl", 0.63, "drift", "reference"),
        (2, "clip_ratio/region_mean", 0.45, "drift", "policy"),
    ],
)
def test_a_short_log_is_judged_on_its_levels(tmp_path, n, key, value, verdict, check):
    rng = np.random.default_rng(0)
    rows = [base_row(i, rng, **{key: value, "reward": 0.0}) for i in range(n)]
    rep = run_checks(trl_run(tmp_path, "short", rows))
    assert rep.verdict == verdict, [f.title for f in rep.findings]
    f = next(f for f in rep.at_least("warn") if f.check == check)
    assert f"in the {n} update" in f.title and f.evidence["updates_read"] == n
    assert rep.findings[0] is f or rep.findings[0].verdict == verdict


def test_a_short_healthy_log_is_too_early(tmp_path):
    rng = np.random.default_rng(0)
    rep = run_checks(trl_run(tmp_path, "short-ok", [base_row(i, rng) for i in range(3)]))
    assert rep.verdict == "too_early" and not alarms(rep)


def test_a_short_log_of_mismatch_over_the_line_is_drift():
    d = RunData(source="<memory>", format="test")
    for i, v in enumerate([0.05, 0.04]):
        d.metrics.add(i, "train/mismatch_kl", v)
        d.metrics.add(i, "reward/mean", 0.5)
    rep = run_checks(d)
    assert rep.verdict == "drift" and "in the 2 updates read" in rep.findings[0].title


# -- truncation by its course ----------------------------------------------------------------


def test_a_transient_truncated_start_is_not_out_of_room(tmp_path):
    # A random-init model truncates every reply for its first updates, then learns to stop.
    rng = np.random.default_rng(1)
    rows = [
        base_row(i, rng, **{"completions/clipped_ratio": 1.0 if i < 4 else 0.03}) for i in range(40)
    ]
    rep = run_checks(trl_run(tmp_path, "transient", rows))
    assert not [f for f in rep.at_least("warn") if f.verdict == "out_of_room"], alarms(rep)
    f = next(f for f in rep.findings if f.check == "episodes")
    assert f.severity == "info" and "transient" in f.title


def test_a_truncated_start_that_stays_is_out_of_room(tmp_path):
    rng = np.random.default_rng(1)
    rows = [
        base_row(i, rng, **{"completions/clipped_ratio": 0.9, "reward": 0.3}) for i in range(40)
    ]
    rep = run_checks(trl_run(tmp_path, "chronic", rows))
    assert rep.verdict == "out_of_room"


def _creeping_truncation(tmp_path, name, share, rise: float = 0.004) -> RunData:
    rng = np.random.default_rng(2)
    rows = [
        base_row(
            i,
            rng,
            **{
                "completions/clipped_ratio": share(i),
                "reward": 0.3 + rise * i + 0.02 * rng.standard_normal(),
            },
        )
        for i in range(60)
    ]
    return trl_run(tmp_path, name, rows)


def creep(i: int) -> float:
    return 0.01 + 0.004 * max(0, i - 8)


def test_truncation_still_climbing_with_a_flat_reward_is_out_of_room(tmp_path):
    # The share cut off creeps from 1% up by 0.4 points an update while the reward stays flat
    # (the Loops seed: a rising truncated rate with a flat reward means running out of room),
    # past the creep line (15%, science.md 5's paging line) at step 43, still climbing.
    data = _creeping_truncation(tmp_path, "creep", creep, rise=0.0)
    rep = run_checks(data)
    f = next(f for f in rep.at_least("warn") if f.verdict == "out_of_room")
    assert "still climbing" in f.title and 42 <= f.first_step <= 44, f.title
    # Live: three updates past the line are enough; before them, nothing.
    early = run_checks(data.until(42))
    assert not [f for f in early.at_least("warn") if f.verdict == "out_of_room"], alarms(early)
    live = run_checks(data.until(47))
    assert [f.verdict for f in live.at_least("warn")] == ["out_of_room"], alarms(live)


def test_truncation_creeping_while_the_reward_rises_is_not_out_of_room(tmp_path):
    # The same creep while the reward climbs: longer replies that pay off are learning, not a
    # budget problem, until most replies are cut.
    rep = run_checks(_creeping_truncation(tmp_path, "paying", creep))
    assert not [f for f in rep.at_least("warn") if f.verdict == "out_of_room"], alarms(rep)


def test_truncation_that_rose_a_little_and_settled_is_not_out_of_room(tmp_path):
    # The same creep to 9%, then flat for 30 updates while the reward keeps rising.
    data = _creeping_truncation(tmp_path, "settled", lambda i: creep(min(i, 28)))
    rep = run_checks(data)
    assert not [f for f in rep.at_least("warn") if f.verdict == "out_of_room"], alarms(rep)


# -- reward components -----------------------------------------------------------------------


def short_bonus_rows(n: int = 40) -> list[dict]:
    """The issue's first class: a 'stop early' bonus weighted 2x outweighs exact match; the
    policy emits EOS at once, the task component stays near 0, replies fall to one token,
    entropy ends under a tenth of its start, KL to the reference passes 3."""
    rng = np.random.default_rng(2)
    rows = []
    for i in range(n):
        x = min(1.0, i / 15)
        exact = 0.02 + 0.01 * rng.standard_normal()
        bonus = 0.1 + 0.9 * x
        rows.append(
            base_row(
                i,
                rng,
                **{
                    "rewards/exact/mean": exact,
                    "rewards/exact/std": 0.1,
                    "rewards/short_bonus/mean": bonus,
                    "rewards/short_bonus/std": 0.4 * (1 - x) + 0.01,
                    "reward": exact + 2 * bonus,
                    "frac_reward_zero_std": 0.1 + 0.85 * x,
                    "completions/mean_length": 10 - 9 * x,
                    "completions/clipped_ratio": 0.9 * (1 - x),
                    "entropy": 1.5 * (1 - 0.96 * x),
                    "kl": 0.01 + 3.2 * x,
                },
            )
        )
    return rows


def test_a_dominating_auxiliary_reward_is_an_exploit_not_mastered(tmp_path):
    rep = run_checks(trl_run(tmp_path, "short-bonus", short_bonus_rows()))
    assert rep.verdict == "exploit_suspected", [f.title for f in rep.findings]
    top = rep.findings[0]
    assert top.check == "components" and top.severity == "fail"
    assert top.evidence["component"] == "short_bonus" and "exact" in top.title
    assert not [f for f in rep.findings if f.verdict in ("learning", "mastered")]
    # Entropy under a tenth of its start with collapsing replies is an alarm, not sharpening.
    ent = next(f for f in rep.findings if f.check == "policy" and f.metric == "train/entropy")
    assert ent.severity in ("warn", "fail") and "not sharpening" in ent.title
    assert ent.verdict == "exploit_suspected"
    assert next(f for f in rep.findings if f.check == "reference").severity in ("warn", "fail")
    # The evidence for the verdict first; nothing reassuring before an alarm.
    ranks = [severity_rank(f.severity) for f in rep.findings]
    assert ranks == sorted(ranks, reverse=True)


def test_two_components_rising_together_raise_nothing(tmp_path):
    rng = np.random.default_rng(3)
    rows = []
    for i in range(40):
        task = 0.2 + 0.012 * i + 0.02 * rng.standard_normal()
        fmt = min(1.0, 0.5 + 0.02 * i) + 0.01 * rng.standard_normal()
        rows.append(
            base_row(
                i,
                rng,
                **{
                    "rewards/partial_credit/mean": task,
                    "rewards/format_ok/mean": fmt,
                    "reward": task + 0.5 * fmt,
                },
            )
        )
    rep = run_checks(trl_run(tmp_path, "two-weighted", rows))
    assert not alarms(rep), alarms(rep)
    assert rep.verdict == "learning"


def test_a_constant_component_is_dead(tmp_path):
    rng = np.random.default_rng(4)
    rows = []
    for i in range(30):
        task = 0.2 + 0.01 * i + 0.02 * rng.standard_normal()
        rows.append(
            base_row(
                i,
                rng,
                **{
                    "rewards/correctness/mean": task,
                    "rewards/format/mean": 1.0,
                    "rewards/format/std": 0.0,
                    "reward": task + 1.0,
                },
            )
        )
    rep = run_checks(trl_run(tmp_path, "dead", rows))
    f = next(f for f in rep.findings if f.check == "components")
    assert f.severity == "info" and "dead" in f.title and f.evidence["component"] == "format"
    assert not alarms(rep)


# -- length and entropy together -------------------------------------------------------------


def test_replies_collapsing_while_reward_rises_are_a_shortcut(tmp_path):
    # One reward function (a grader that passes any prefix of the answer, "" included).
    rng = np.random.default_rng(5)
    rows = [
        base_row(
            i,
            rng,
            reward=0.1 + 0.8 * min(1.0, i / 15) + 0.02 * rng.standard_normal(),
            **{"completions/mean_length": max(1.0, 10 - 0.6 * i)},
        )
        for i in range(40)
    ]
    rep = run_checks(trl_run(tmp_path, "loophole", rows))
    assert rep.verdict == "exploit_suspected", [f.title for f in rep.findings]
    f = rep.findings[0]
    assert f.check == "policy" and "stopping early" in f.title


def test_replies_shortening_as_a_model_learns_to_stop_are_fine(tmp_path):
    rng = np.random.default_rng(5)
    rows = [
        base_row(i, rng, **{"completions/mean_length": max(3.5, 10 - 0.6 * i)}) for i in range(40)
    ]
    rep = run_checks(trl_run(tmp_path, "stops", rows))
    assert not alarms(rep), alarms(rep)


# -- KL to the reference ---------------------------------------------------------------------


def test_kl_to_the_reference_over_its_line_with_the_coefficient(tmp_path):
    rng = np.random.default_rng(6)
    rows = [base_row(i, rng, kl=0.02 * 1.12**i) for i in range(40)]
    data = trl_run(tmp_path, "kl", rows)
    data.info["config"] = {"beta": 0.04}
    rep = run_checks(data)
    f = next(f for f in rep.findings if f.check == "reference")
    # 0.02 x 1.12^i passes 0.5 at i = 29 (TRL step 30) and ends at 1.7, under the 2 line.
    assert f.verdict == "drift" and f.severity == "warn"
    assert 30 <= f.first_step <= 32 and f.evidence["line"] == 0.5
    assert "coefficient 0.04" in f.title and f.evidence["kl_coef"] == 0.04


def test_kl_rising_below_its_line_is_named_before_it_crosses():
    d = RunData(source="<memory>", format="test")
    for i in range(40):
        d.metrics.add(i, "train/ref_kl", 0.01 + 0.008 * i)
        d.metrics.add(i, "reward/mean", 0.5)
    rep = run_checks(d)
    f = next(f for f in rep.findings if f.check == "reference")
    assert f.severity == "info" and "rising" in f.title and f.evidence["projected_step"] > 39


def test_only_the_kl_to_the_reference_is_read():
    # The old-vs-new KL and the mismatch are other quantities: never judged as ref KL.
    d = RunData(source="<memory>", format="test")
    for i in range(20):
        d.metrics.add(i, "train/ppo_kl", 3.0)
        d.metrics.add(i, "train/ref_kl", 0.02)
        d.metrics.add(i, "reward/mean", 0.5)
    rep = run_checks(d)
    assert not [f for f in rep.findings if f.check == "reference"]


# -- missing values --------------------------------------------------------------------------


def test_a_reward_turned_null_is_named_non_finite_not_too_hard(tmp_path):
    # TRL logs a reward function's NaN as null rewards, with frac_reward_zero_std 0.
    rng = np.random.default_rng(8)
    rows = []
    for i in range(30):
        row = base_row(i, rng, **{"rewards/partial_credit/mean": 0.3 + 0.005 * i})
        if i >= 19:
            row.update({"reward": None, "reward_std": None, "rewards/partial_credit/mean": None})
            row["frac_reward_zero_std"] = 0.0
        rows.append(row)
    rep = run_checks(trl_run(tmp_path, "nan-reward", rows))
    assert rep.verdict == "non_finite", [f.title for f in rep.findings]
    f = rep.findings[0]
    assert f.metric == "reward/mean" and f.first_step == 20 and "missing from step 20" in f.title
    assert "reward/std" in f.evidence["also"]
    assert not [g for g in rep.findings if g.verdict == "too_hard"]


def test_a_reward_that_vanished_from_later_records_is_missing(tmp_path):
    # prime-rl drops a NaN key from its metrics.jsonl rows.
    p = tmp_path / "gone.jsonl"
    with open(p, "w") as fh:
        for s in range(30):
            row = {"step": s, "loss": 0.1, **({"reward": 0.5} if s < 18 else {})}
            fh.write(json.dumps(row) + "\n")
    rep = run_checks(read(str(p)))
    f = next(f for f in rep.findings if f.check == "nonfinite")
    assert f.severity == "fail" and "missing from step 18" in f.title
    assert rep.verdict == "non_finite"


def test_a_sparse_metric_is_not_missing(tmp_path):
    p = tmp_path / "sparse.jsonl"
    with open(p, "w") as fh:
        for s in range(30):
            row = {
                "step": s,
                "loss": 0.1,
                "reward": 0.5,
                **({"eval_acc": 0.4} if s % 10 == 0 else {}),
            }
            fh.write(json.dumps(row) + "\n")
    rep = run_checks(read(str(p)))
    assert not [f for f in rep.findings if f.check == "nonfinite"]


# -- events between the step lines -----------------------------------------------------------

Ev = namedtuple("Ev", "time kind text step source line")


def _log_run(steps: int, events: list[Ev], t0: float = 1_000_000.0) -> RunData:
    d = RunData(source="<memory>", format="test")
    for i in range(steps):
        d.metrics.add(i, "reward/mean", 0.5)
        d.metrics.add(i, "time", t0 + 10 * i)
    d.info["status"] = "finished"
    d.events = events  # type: ignore[attr-defined]
    return d


def test_a_traceback_after_the_last_step_is_a_crash():
    tb = "Traceback (most recent call last):\n  File x\nRuntimeError: CUDA error: illegal memory"
    rep = run_checks(_log_run(10, [Ev(1_000_095.0, "traceback", tb, 9, "log.txt", 120)]))
    assert rep.verdict == "crashed" and "illegal memory" in rep.findings[0].title


def test_a_traceback_the_run_survived_is_not_a_crash():
    tb = "Traceback (most recent call last):\nValueError: retrying"
    rep = run_checks(_log_run(10, [Ev(1_000_035.0, "traceback", tb, 3, "log.txt", 40)]))
    assert rep.verdict != "crashed"


def test_503s_that_do_not_stop_for_minutes_mean_the_engine_died():
    t = 1_000_095.0
    evs = [
        Ev(t + 15 * k, "http_5xx", "503 Service Unavailable", 9, "log.txt", 100 + k)
        for k in range(20)
    ]
    rep = run_checks(_log_run(10, evs))
    f = rep.findings[0]
    assert f.check == "liveness" and "engine died" in f.title and f.severity == "fail"


def test_a_burst_of_503s_under_a_minute_is_healthy():
    t = 1_000_035.0
    evs = [
        Ev(t + 5 * k, "http_5xx", "503 Service Unavailable", 3, "log.txt", 40 + k)
        for k in range(10)
    ]
    rep = run_checks(_log_run(10, evs))
    assert not [f for f in rep.findings if f.check == "liveness"]


def test_no_step_line_ten_minutes_after_the_log_began_is_never_started():
    evs = [
        Ev(1_000_000.0 + 60 * k, "error", "ERROR waiting for engine", None, "log.txt", k)
        for k in range(12)
    ]
    d = RunData(source="<memory>", format="test")
    d.events = evs  # type: ignore[attr-defined]
    rep = run_checks(d)
    assert rep.verdict == "stalled" and "did not start" in rep.findings[0].title


# -- the system layer ------------------------------------------------------------------------


def test_step_time_growing_update_after_update_is_a_finding():
    d = RunData(source="<memory>", format="test")
    rng = np.random.default_rng(7)
    for i in range(40):
        d.metrics.add(i, "perf/step_seconds", 10 * (1 + 0.05 * i) + rng.normal(0, 0.5))
        d.metrics.add(i, "reward/mean", 0.5)
    rep = run_checks(d)
    f = next(f for f in rep.findings if f.check == "system")
    assert f.severity == "warn" and f.verdict == "slowing" and f.evidence["slower_by"] > 2


def test_noisy_step_time_and_a_slow_first_update_are_not():
    d = RunData(source="<memory>", format="test")
    rng = np.random.default_rng(7)
    for i in range(40):
        d.metrics.add(i, "perf/step_seconds", (60 if i == 0 else 10) + rng.normal(0, 2))
        d.metrics.add(i, "reward/mean", 0.5)
    assert not [f for f in run_checks(d).findings if f.check == "system"]


def _throughput_run(step_seconds: float, slow_from: int) -> RunData:
    # Tokens per second a third of what it was over the last updates: the machine got busy.
    d = RunData(source="<memory>", format="test")
    rng = np.random.default_rng(3)
    for i in range(300):
        busy = 3.0 if i >= slow_from else 1.0
        secs = step_seconds * busy * (1 + 0.1 * rng.random())
        d.metrics.add(i, "perf/step_seconds", secs)
        d.metrics.add(i, "perf/tokens_per_second", 2000 / secs)
        d.metrics.add(i, "reward/mean", 0.5)
    return d


def test_throughput_of_millisecond_updates_is_not_a_system_finding():
    # A synthetic run's 5 ms updates, slowed by a busy machine at the end: timer noise.
    rep = run_checks(_throughput_run(0.005, slow_from=200))
    assert not [f for f in rep.findings if f.check == "system"]


def test_throughput_falling_on_second_long_updates_is_a_finding():
    rep = run_checks(_throughput_run(2.0, slow_from=200))
    found = [f for f in rep.findings if f.check == "system"]
    assert "perf/tokens_per_second" in {f.metric for f in found}


# -- judging has no side effects -------------------------------------------------------------


def test_run_checks_returns_the_same_report_however_often_it_runs(tmp_path):
    from transcripts_synth import transcript_run

    p = transcript_run(tmp_path, "tw", steps=24, groups=8, hack="test_edit", hack_from=12)
    data = read(str(p))
    names = data.names()
    first = run_checks(data)
    again = [run_checks(data) for _ in range(2)]
    for rep in again:
        assert rep.to_dict() == first.to_dict()
        assert sorted(rep.series) == sorted(first.series)
    assert data.names() == names  # nothing written into the run
    assert first.series  # and the derived series came back with the report


def test_a_rewarded_empty_answer_is_flagged():
    from rlvitals.transcripts import Rules
    from rlvitals.transcripts.flags import StepAnalyzer
    from rlvitals.transcripts.store import Generation, TranscriptAttempt

    def flags(completion: str, reward: float) -> set[str]:
        an = StepAnalyzer(0, Rules())
        an.add(
            TranscriptAttempt(
                0,
                0,
                "a0",
                "g0",
                "t0",
                reward,
                True,
                [Generation(prompt="1+1=", completion=completion)],
            )
        )
        return {h.flag for h in an.finish().hits.get(0, [])}

    assert "empty_answer" in flags("", 1.0)
    assert "empty_answer" not in flags("", 0.0)
    assert "empty_answer" not in flags("2", 1.0)


# -- gradient-norm explosions ------------------------------------------------------------------


def _spiky_rows(n: int, spikes: dict[int, float]) -> list[dict]:
    rng = np.random.default_rng(4)
    rows = []
    for i in range(n):
        row = base_row(i, rng, reward=0.6 + 0.02 * rng.standard_normal(), kl=0.05)
        if i in spikes:
            row["grad_norm"] = spikes[i]
        rows.append(row)
    return rows


def test_a_rare_explosion_in_a_long_run_is_said_not_warned(tmp_path):
    # Three norms at 30-60x the median in 2,000 updates (a sharpened policy's tail: a rare
    # sample of a token it had all but ruled out): information with the rate, no alarm.
    data = trl_run(tmp_path, "tail", _spiky_rows(2000, {700: 20.0, 1300: 30.0, 1800: 15.0}))
    rep = run_checks(data)
    f = next(f for f in rep.findings if "exploded" in f.title)
    assert f.severity == "info" and f.first_step == 701 and "tail of a long run" in f.title
    assert f.evidence["explosions"] == 3 and not [
        x for x in rep.at_least("warn") if x.metric == "train/grad_norm"
    ]


def test_one_explosion_early_in_a_run_is_said_recurring_ones_warn(tmp_path):
    # One norm at 40x the median at update 60: a single spike is a hypothesis until the
    # numbers corroborate it (DESIGN.md), said at its step, live too. Three in the first
    # hundred updates recur (science.md 6: three points, never one): unstable updates.
    data = trl_run(tmp_path, "early", _spiky_rows(300, {60: 20.0}))
    for rep in (run_checks(data), run_checks(data.until(61))):
        f = next(f for f in rep.findings if "exploded" in f.title)
        assert (f.verdict, f.severity, f.first_step) == ("unstable", "info", 61)
        assert not [x for x in rep.at_least("warn") if x.metric == "train/grad_norm"]
    data = trl_run(tmp_path, "recurring", _spiky_rows(300, {60: 20.0, 75: 25.0, 90: 20.0}))
    for rep in (run_checks(data), run_checks(data.until(91))):
        f = next(f for f in rep.at_least("warn") if "exploded" in f.title)
        assert (f.verdict, f.first_step) == ("unstable", 61) and "recurring" in f.title


# -- entropy falling late while the reward has risen: sharpening on any CPU -----------------


def _late_fall_rows(rise: float, seed: int = 1) -> list[dict]:
    # 40 updates: the reward climbs by ``rise`` over the first 30 then holds; entropy holds,
    # then falls fast over the last 10 to about half its start (seed 1 of the demo on a Xeon:
    # reward 0.53 -> 0.73, trend z 9, entropy at 53% of its start from update 31).
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(40):
        level = 0.53 + rise * min(i, 30) / 30
        ent = 1.5 * (0.93 ** max(0, i - 29))
        rows.append(
            base_row(
                i,
                rng,
                reward=level + 0.02 * rng.standard_normal(),
                entropy=ent * (1 + 0.01 * rng.standard_normal()),
            )
        )
    return rows


def test_entropy_falling_late_while_the_reward_rose_beyond_noise_is_sharpening(tmp_path):
    rep = run_checks(trl_run(tmp_path, "sharp", _late_fall_rows(0.2)))
    f = next(f for f in rep.findings if f.check == "policy" and f.verdict == "collapse")
    assert f.severity == "info" and "sharpening" in f.title, f.title
    assert rep.verdict == "learning" and not rep.at_least("warn"), alarms(rep)
    # The same fall with a reward that never rose is a collapse.
    flat = run_checks(trl_run(tmp_path, "flat", _late_fall_rows(0.0)))
    f = next(f for f in flat.at_least("warn") if f.check == "policy")
    assert f.verdict == "collapse" and "does not improve" in f.title


def _graded_run(explained: bool) -> RunData:
    # rlvitals' own format: a grader's components logged as rollout/<component> (METRICS.md)
    # beside episode metadata (rollout/turns). The format term climbs to its ceiling from
    # step 40 while the task term stops: the reward is their sum, or (not explained) not.
    d = RunData(source="<memory>", format="rlvitals")
    d.info = {"status": "finished"}
    rng = np.random.default_rng(5)
    for i in range(120):
        task = 0.3 + 0.2 * min(i, 40) / 40 + 0.01 * rng.standard_normal()
        fmt = 0.1 + 0.8 * max(0, min(1, (i - 40) / 10)) + 0.01 * rng.standard_normal()
        d.metrics.add(i, "rollout/correctness", task)
        d.metrics.add(i, "rollout/format", fmt)
        d.metrics.add(i, "rollout/turns", 3 + rng.integers(0, 3))
        total = task + 0.5 * fmt if explained else 0.5 + 0.01 * rng.standard_normal()
        d.metrics.add(i, "reward/mean", total)
    return d


def test_a_graders_components_in_rollout_keys_are_read_where_they_make_the_reward():
    rep = run_checks(_graded_run(explained=True))
    f = next(f for f in rep.findings if f.check == "components" and f.severity != "info")
    assert f.verdict == "exploit_suspected" and f.evidence["component"] == "format"
    assert f.evidence["task_component"] == "correctness" and "turns" not in f.evidence["components"]
    # Keys under rollout/ that do not make up the reward are metadata, not components.
    assert not [
        f for f in run_checks(_graded_run(explained=False)).findings if f.check == "components"
    ]
