"""The checks on real runs of the reference trainer: each fault is found with the right verdict
near its onset, and healthy seeds raise nothing at warn or worse."""

from __future__ import annotations

import pytest

from rlvitals import read
from rlvitals.checks import run_checks

pytestmark = pytest.mark.slow

# fault -> (the run's verdict, how many steps after the onset the finding may first show)
EXPECTED = {
    "stale_sampler": ("stale_policy", 3),
    "too_easy": ("too_easy", 0),
    "too_hard": ("too_hard", 0),
    "grader_exploit": ("exploit_suspected", 15),
    "grader_crash": ("infra_failures", 1),
    "rollout_crash": ("infra_failures", 1),
    "out_of_room": ("out_of_room", 2),
    "entropy_collapse": ("collapse", 5),
    "stall": ("stalled", 0),
    "nan": ("non_finite", 0),
}


@pytest.mark.parametrize("fault", list(EXPECTED))
def test_each_fault_is_found_with_its_verdict_near_its_onset(fault_run, fault):
    data = read(fault_run(fault))
    rep = run_checks(data)
    verdict, slack = EXPECTED[fault]
    assert rep.verdict == verdict, [f.title for f in rep.findings]
    onset = data.info["fault_step"]
    hits = [f for f in rep.at_least("warn") if f.verdict == verdict]
    first = min(f.first_step for f in hits if f.first_step is not None)
    assert onset - 1 <= first <= onset + slack, (first, onset)
    # It explains itself: evidence and a next action on every alarm.
    assert all(f.evidence and f.action for f in hits)


@pytest.mark.parametrize("seed", [0, 1])
def test_healthy_seeds_raise_nothing_at_warn_or_worse(trainer_run, seed):
    rep = run_checks(read(trainer_run(None, seed=seed)))
    assert rep.at_least("warn") == [], [f.title for f in rep.at_least("warn")]
    assert rep.verdict == "learning"


def test_a_live_check_raises_a_crash_burst_within_a_few_steps(fault_run):
    data = read(fault_run("rollout_crash"))
    onset = data.info["fault_step"]
    times = data.series("time")
    for k in range(onset, onset + 6):
        rep = run_checks(data.until(k), now=times.at(k))
        if rep.verdict == "infra_failures":
            break
    else:
        pytest.fail("a live check never raised the burst within 5 steps of its onset")


def test_the_async_example_with_its_designed_lag_is_healthy(trainer_run):
    # examples/grpo-async.toml: the sampler one update ahead by design (lag 1 throughout).
    run = trainer_run(
        None,
        mode="async",
        overrides={"training": {"max_steps_off_policy": 2}, "optim": {"async_lead": 1}},
    )
    data = read(run)
    assert float(data.series("freshness/lag_mean").values[-10:].mean()) >= 0.9
    rep = run_checks(data)
    assert rep.at_least("warn") == [], [f.title for f in rep.at_least("warn")]
    assert not [f for f in rep.findings if f.verdict in ("drift", "stale_policy")]
