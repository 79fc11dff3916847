"""The reward check on runs built in memory: which reward it reads, and what a rise is."""

from __future__ import annotations

import numpy as np

from rlvitals.checks import reward, run_checks
from rlvitals.checks.context import Context
from rlvitals.model import RunData


def run(trained, every=None, seed=0):
    """``reward/mean`` (the trained groups) follows ``trained``, ``reward/mean_with_unusable``
    (every graded attempt) ``every``, each with a little noise."""
    rng = np.random.default_rng(seed)
    d = RunData(source="<memory>", format="test")
    for step, v in enumerate(trained):
        d.metrics.add(step, "reward/mean", float(v + rng.normal(0, 0.02)))
        d.metrics.add(step, "groups/signal_fraction", 0.7)
    for step, v in enumerate(every if every is not None else []):
        d.metrics.add(step, "reward/mean_with_unusable", float(v + rng.normal(0, 0.02)))
    return d


def test_every_graded_attempt_is_read_where_logged():
    # Tasks are mastered and leave training: the trained groups' mean holds near 0.55 while
    # every graded attempt climbs 0.54 -> 0.72 (the reference trainer's healthy seed 0 on a
    # newer CPU). The reward check reads the climb.
    d = run(np.linspace(0.55, 0.57, 40), np.linspace(0.54, 0.72, 40))
    (f,) = [f for f in reward.check(Context(d)) if f.check == "reward"]
    assert f.verdict == "learning" and f.metric == "reward/mean_with_unusable"
    assert run_checks(d).verdict == "learning"
    # Without it, the same trained-groups reward is not beyond its noise.
    (g,) = reward.check(Context(run(np.linspace(0.55, 0.57, 40))))
    assert g.verdict in ("too_early", "not_learning") and g.metric == "reward/mean"


def test_a_rise_every_attempt_gave_back_is_not_learning():
    # Every graded attempt rose 0.46 -> 0.57 and came back to 0.47: rejected groups cannot
    # explain that away (they would on reward/mean), so it is not called learning.
    up_down = np.concatenate([np.linspace(0.46, 0.57, 25), np.linspace(0.57, 0.47, 15)])
    d = run(np.full(40, 0.5), up_down)
    (f,) = [f for f in reward.check(Context(d)) if f.check == "reward"]
    assert f.metric == "reward/mean_with_unusable"
    assert f.verdict != "learning"


def test_flat_min_steps_is_a_threshold_set_reaches():
    # Fifteen flat updates at half the range, groups carrying signal: under the default 20
    # updates too early to call a plateau; `--set flat_min_steps=10` calls it one.
    from rlvitals.checks import Thresholds

    d = run(np.full(15, 0.5))
    (f,) = [f for f in run_checks(d).findings if f.check == "reward"]
    assert f.verdict == "too_early"
    tuned = Thresholds().with_overrides({"flat_min_steps": "10"})
    (g,) = [f for f in run_checks(d, thresholds=tuned).findings if f.check == "reward"]
    assert g.verdict == "plateau" and g.evidence["updates"] == 15
