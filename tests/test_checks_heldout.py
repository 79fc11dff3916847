"""The held-out check on runs built in memory: where train reward and held-out diverge."""

from __future__ import annotations

import numpy as np

from rlvitals.checks import heldout, run_checks
from rlvitals.checks.context import Context
from rlvitals.model import RunData


def run(train, evals, n=500, seed=0):
    """A run whose reward/mean follows ``train`` (plus noise), scored ``evals`` = {step:
    score}."""
    rng = np.random.default_rng(seed)
    d = RunData(source="<memory>", format="test")
    for step, v in enumerate(train):
        d.metrics.add(step, "reward/mean", float(v + rng.normal(0, 0.02)))
    for step, score in evals.items():
        d.metrics.add(step, "eval/heldout/score", score)
        d.evals.append({"step": step, "suite": "heldout", "score": score, "n": n})
    return Context(d)


def rising(n=60, a=0.3, b=0.7):
    return np.linspace(a, b, n)


def test_train_up_heldout_down_is_exploit_from_the_start():
    ctx = run(rising(), {s: 0.6 - 0.004 * s for s in range(4, 60, 5)})
    (f,) = heldout.check(ctx)
    assert f.verdict == "exploit_suspected" and f.severity == "fail"
    assert f.evidence["divergence_step"] == 4


def test_late_fall_is_dated_where_it_starts():
    # Held-out rises with train until step 30, then falls while train keeps rising.
    scores = {s: (0.4 + 0.01 * s if s < 30 else 0.7 - 0.015 * (s - 30)) for s in range(4, 60, 5)}
    (f,) = heldout.check(run(rising(), scores))
    assert f.verdict == "exploit_suspected"
    assert 24 <= f.evidence["divergence_step"] <= 34


def test_late_plateau_of_a_healthy_run_is_not_an_exploit():
    # Held-out rises, then saturates (noisily) while train still creeps up.
    rng = np.random.default_rng(1)
    scores = {s: min(0.65, 0.4 + 0.012 * s) + rng.normal(0, 0.02) for s in range(4, 60, 5)}
    found = heldout.check(run(rising(), scores))
    assert not [f for f in found if f.verdict == "exploit_suspected"]


def test_train_up_heldout_flat_is_exploit_suspected():
    (f,) = heldout.check(run(rising(), {s: 0.5 for s in range(4, 60, 5)}))
    assert f.verdict == "exploit_suspected" and f.severity == "warn"


def test_small_gain_heldout_cannot_resolve_is_not_an_exploit():
    # Train rises 0.07 (a slow healthy run); held-out on 200 tasks (se ~0.035) moves +0.03:
    # flat within its error, but not distinguishable from keeping up either.
    scores = {s: 0.45 + 0.0006 * s for s in range(4, 60, 5)}
    found = heldout.check(run(rising(60, 0.28, 0.35), scores, n=200))
    assert not [f for f in found if f.verdict == "exploit_suspected"]


def test_heldout_rising_with_train_confirms():
    (f,) = heldout.check(run(rising(), {s: 0.4 + 0.005 * s for s in range(4, 60, 5)}))
    assert f.verdict == "learning" and f.severity == "ok"


def test_flat_train_is_never_an_exploit():
    found = heldout.check(run(np.full(60, 0.5), {s: 0.5 for s in range(4, 60, 5)}))
    assert not [f for f in found if f.verdict == "exploit_suspected"]


def test_too_few_evaluations_say_so():
    (f,) = heldout.check(run(rising(), {10: 0.5, 20: 0.5}))
    assert f.verdict == "too_early" and f.severity == "info"


def test_heldout_change_since_a_step():
    ctx = run(rising(), {s: 0.4 + 0.005 * s for s in range(4, 60, 5)})
    got = heldout.heldout_change(ctx, 30)
    assert got is not None and got["from_step"] == 34 and got["change"] > 0
    assert heldout.heldout_change(run(rising(), {}), 0) is None


def test_train_reward_with_unusable_groups_is_preferred():
    # reward/mean stays flat (all-solved groups rejected) while the real reward climbs.
    ctx = run(np.full(60, 0.5), {s: 0.6 - 0.004 * s for s in range(4, 60, 5)})
    for step, v in enumerate(rising(60, 0.3, 0.95)):
        ctx.data.metrics.add(step, "reward/mean_with_unusable", float(v))
    (f,) = heldout.check(ctx)
    assert f.verdict == "exploit_suspected"
    assert f.evidence["train_metric"] == "reward/mean_with_unusable"


def test_train_pass_rate_rising_towards_a_flat_heldout_score_is_sharpening_not_an_exploit():
    # The healthy async example on a slow seed: sampled train pass rate 0.31 -> 0.42 while
    # greedy held-out stays near 0.55 (above it all along): the skill is there, sampling
    # sharpens onto it.
    flat = {s: 0.55 + 0.001 * s for s in range(4, 40, 5)}
    found = heldout.check(run(rising(40, 0.31, 0.42), flat, n=200))
    assert not [f for f in found if f.verdict == "exploit_suspected"]
    # The same rise past a held-out score that stays lower is still the exploit signature.
    low = {s: 0.25 for s in range(4, 40, 5)}
    (f,) = heldout.check(run(rising(40, 0.31, 0.42), low, n=2000))
    assert f.verdict == "exploit_suspected"


def test_sharpening_is_judged_only_on_shares_of_one():
    # A reward on another scale cannot be held against a held-out share.
    (f,) = heldout.check(run(rising(60, 0.3, 0.9) * 10, {s: 5.5 for s in range(4, 60, 5)}))
    assert f.verdict == "exploit_suspected"


def test_heldout_rising_beyond_its_error_makes_a_quiet_run_learning():
    # The train reward creeps up within its noise (reward/mean of the trained groups holds
    # still as tasks are mastered), while held-out rises well beyond its error: learning, not
    # "too early" nor a plateau. Held-out flat with the same train reward, over 40 updates, is
    # a plateau (DESIGN.md: past 20 updates "too early to tell" is no answer), said at info:
    # 40 updates is a young run, and a healthy run's slow start stays flat that long.
    train = rising(40, 0.50, 0.53)
    rising_scores = {s: 0.80 + 0.004 * s for s in range(4, 40, 5)}
    flat_scores = {s: 0.80 for s in range(4, 40, 5)}
    learning = run_checks(run(train, rising_scores, n=200, seed=3).data)
    assert [f.verdict for f in learning.findings if f.check == "reward"] == ["too_early"]
    assert learning.verdict == "learning"
    assert not learning.at_least("warn")
    flat = run_checks(run(train, flat_scores, n=200, seed=3).data)
    (f,) = [f for f in flat.findings if f.check == "reward"]
    assert flat.verdict == "plateau" and (f.verdict, f.severity) == ("plateau", "info")
    assert f.evidence["plateau_level"] and not flat.at_least("warn")


def test_a_reward_that_jumps_to_a_new_level_while_heldout_falls_is_an_exploit():
    # The train reward jumps from 0.2 to 0.9 at update 20 and stays there (a saturating
    # course: a line fits it badly, so its trend reads weak), while held-out falls 0.5 ->
    # 0.25. The quarters' two-sample test says the reward rose: an exploit, not nothing.
    t = np.arange(120)
    train = 0.2 + 0.7 * (1 - np.exp(-np.clip(t - 20, 0, None) / 3.0))
    rng = np.random.default_rng(4)
    train = train + rng.normal(0, 0.05, len(t))
    scores = {s: 0.5 - 0.25 * min(1.0, max(0.0, (s - 20) / 20)) for s in range(20, 120, 20)}
    (f,) = heldout.check(run(train, scores, n=100))
    assert f.verdict == "exploit_suspected" and f.severity in ("warn", "fail")
