"""The sampler/trainer mismatch judged by its distribution over sequences, not its mean: the
share of an update's sequences whose ratio (token mean of exp(|Δ|)) is past 1.05, told as
held, creeping or spiky; found on the reference trainer's bad_replica fault within five
updates of its onset, quiet on healthy seeds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rlvitals import read
from rlvitals.checks import run_checks
from rlvitals.checks.context import Thresholds


def _run(
    tmp_path: Path,
    shares: list[float],
    kl: float = 3e-5,
    mx: float = 1.03,
    lags: list[float] | None = None,
) -> Path:
    d = tmp_path / "run"
    d.mkdir(parents=True)
    with open(d / "steps.jsonl", "w") as f:
        for i, s in enumerate(shares):
            rec: dict[str, float] = {
                "step": i,
                "time": 1000.0 + 10 * i,
                "train/mismatch_kl": kl,
                "train/mismatch_tme": 1.0 + 0.3 * s,
                "train/mismatch_seq_over": s,
                "train/mismatch_seq_tme_p90": 1.02,
                "train/mismatch_seq_tme_max": mx if s == 0 else 40.0,
            }
            if lags is not None:
                rec["freshness/lag_mean"] = lags[i]
            f.write(json.dumps(rec) + "\n")
    return d


def _tail(rep):
    return [f for f in rep.findings if f.metric == "train/mismatch_seq_over"]


def test_a_tenth_of_the_sequences_off_is_found_while_the_mean_kl_is_low(tmp_path):
    rep = run_checks(read(_run(tmp_path, [0.0] * 10 + [0.1] * 10)))
    (f,) = _tail(rep)
    assert f.severity == "warn" and f.verdict == "drift" and f.first_step == 10
    assert f.evidence["shape"] == "held"
    assert f.evidence["share_since"] == pytest.approx(0.1)
    assert f.evidence["seq_ratio_max"] == 40.0
    assert "under its line" in f.title  # the mean KL (3e-5) is far under 0.01


def test_a_creeping_tail_is_told_from_a_held_one(tmp_path):
    shares = [0.0] * 10 + [0.06 + 0.02 * k for k in range(10)]
    (f,) = _tail(run_checks(read(_run(tmp_path, shares))))
    assert f.evidence["shape"] == "creeping" and "still rising" in f.title
    assert "how the weights are updated" in f.action


def test_spikes_are_said_never_warned(tmp_path):
    shares = [0.0] * 20
    for i in (5, 11, 16):
        shares[i] = 0.2
    (f,) = _tail(run_checks(read(_run(tmp_path, shares))))
    assert f.severity == "info" and f.evidence["shape"] == "spiky"
    assert f.steps == [5, 11, 16]


def test_a_healthy_tail_is_quiet(tmp_path):
    shares = [0.0, 0.01, 0.0, 0.02, 0.0] * 4  # a few sequences now and then: noise
    assert _tail(run_checks(read(_run(tmp_path, shares)))) == []


def test_the_share_line_is_overridable(tmp_path):
    data = read(_run(tmp_path, [0.0] * 10 + [0.1] * 10))
    th = Thresholds().with_overrides({"mismatch_seq_share_warn": "0.2"})
    assert _tail(run_checks(data, thresholds=th)) == []


def test_a_tail_rising_with_the_lag_is_a_stale_policy_not_drift(tmp_path):
    # The cause comes from the freshness lag, as for the mean: rising with the lag is stale.
    shares = [0.0] * 10 + [0.1 * k for k in range(1, 8)]
    (f,) = _tail(run_checks(read(_run(tmp_path, shares, lags=[0.0] * 10 + list(range(1, 8))))))
    assert f.verdict == "stale_policy" and f.evidence["lag_rising"]
    assert "stale policy" in f.title and "weight sync" in f.action


def test_a_tail_with_the_lag_flat_stays_drift(tmp_path):
    (f,) = _tail(run_checks(read(_run(tmp_path, [0.0] * 10 + [0.1] * 10, lags=[0.0] * 20))))
    assert f.verdict == "drift" and not f.evidence["lag_rising"]


def test_a_tail_at_a_designed_lag_is_judged_against_its_own_start(tmp_path):
    # Async by design (the sampler one update behind from update 1): a quarter of the
    # sequences past 1.05 measure the designed staleness, not a broken engine.
    lags = [0.0] + [1.0] * 29
    steady = [0.0] + [0.3, 0.25, 0.2, 0.28, 0.22] * 5 + [0.25] * 4
    rep = run_checks(read(_run(tmp_path / "a", steady, kl=3e-3, lags=lags)))
    assert not [x for x in rep.findings if x.check == "agreement"], rep.findings
    # ... while the same run's share tripling from that start is still found.
    tripled = steady[:16] + [0.8] * 14
    (f,) = _tail(run_checks(read(_run(tmp_path / "b", tripled, kl=3e-3, lags=lags))))
    assert f.severity == "warn" and f.first_step == 16
    assert f.evidence["designed_lag"] == 1.0
    assert f.evidence["share_start_at_designed_lag"] == pytest.approx(0.25)


# -- the reference trainer -----------------------------------------------------------------


@pytest.mark.slow
def test_bad_replica_is_found_live_within_five_updates_with_the_tails_numbers(trainer_run):
    data = read(trainer_run("bad_replica"))
    onset = data.info["fault_step"]
    kl = data.series("train/mismatch_kl").finite()
    # The mean stays under the drift line of a stable run the whole time...
    assert float(kl.values.max()) < Thresholds().mismatch_kl_warn
    times = data.series("time")
    for k in range(onset, onset + 6):
        rep = run_checks(data.until(k), now=times.at(k))
        tail = [f for f in _tail(rep) if f.severity == "warn"]
        if tail:
            break
    else:
        pytest.fail("the tail was not found within 5 updates of the onset")
    (f,) = tail
    assert rep.verdict == "drift" and f.first_step == onset
    # ... while about a tenth of the sequences are past 1.05, some several times over.
    assert 0.07 <= f.evidence["share_since"] <= 0.12
    assert f.evidence["seq_ratio_max"] > 2.0
    # It cites the attempts furthest off, and the report offers them at the onset, flagged.
    cited = f.evidence["examples"]
    assert cited and all(e["seq_ratio"] > 1.05 and e["step"] >= onset for e in cited)
    from rlvitals.views.report import report_payload

    full = run_checks(data)
    payload = report_payload([(data, full)])["runs"][0]
    at_onset = payload["transcripts"][str(onset)]  # JSON object keys
    flagged = {a["attempt_id"] for a in at_onset if a.get("flagged")}
    assert flagged and flagged <= set(f.evidence["attempt_ids"])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_healthy_seeds_keep_their_sequences_under_the_line(trainer_run, seed):
    data = read(trainer_run(None, seed=seed))
    over = data.series("train/mismatch_seq_over").finite()
    assert len(over) and float(over.values.max()) < Thresholds().mismatch_seq_share_warn
    assert math.isfinite(float(data.series("train/mismatch_seq_tme_max").finite().values.max()))
    assert _tail(run_checks(data)) == []


def test_the_mean_ratio_past_nemo_rls_line_warns_when_nothing_else_does(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    with open(d / "steps.jsonl", "w") as f:
        for i in range(20):
            tme = 1.004 if i < 8 else 1.004 + 0.004 * (i - 7)
            f.write(json.dumps({"step": i, "train/mismatch_tme": tme}) + "\n")
    (f,) = [x for x in run_checks(read(d)).findings if x.metric == "train/mismatch_tme"]
    assert (
        f.severity == "warn" and f.first_step == 11 and f.evidence["growing"]
    )  # 1.004 + 4 x 0.004
    th = Thresholds().with_overrides({"mismatch_tme_warn": "1.1"})
    assert not [x for x in run_checks(read(d), thresholds=th).findings if x.check == "agreement"]


# -- the sequence line (issue 28): mismatch_seq_line ------------------------------------------


def _written(tmp_path: Path, far: float | None = 0.1, near: float = 0.035) -> Path:
    """A run written by rlvitals' writer: 20 updates of 16 attempts (4 tokens each), every
    sequence's trainer logprobs off by |Δ| = 0.01 per token (ratio exp(0.01) = 1.01); from
    update 10 two sequences off by ``far`` (1.105 at 0.1) and two by ``near`` (1.036)."""
    from rlvitals import Run

    cfg = {"output": {"output_dir": str(tmp_path), "name": "tail"}}
    with Run(cfg) as run:
        for step in range(20):
            trainer = {}
            for k in range(16):
                delta = 0.01
                if step >= 10 and k < 2 and far is not None:
                    delta = far
                elif step >= 10 and k < 4:
                    delta = near
                lp = [-1.0, -0.5, -2.0, -0.25]
                aid = run.log_attempt(
                    step,
                    f"{step}-g{k // 4}",
                    f"t{k // 4}",
                    float(k % 2),
                    policy_version=step,
                    response_tokens=4,
                    sampler_logprobs=lp,
                )
                trainer[aid] = [x + delta for x in lp]
            run.log_step(step, trainer_logprobs=trainer)
    return run.dir


def _at(line: str) -> Thresholds:
    return Thresholds().with_overrides({"mismatch_seq_line": line})


def test_the_sequence_line_is_settable_and_recounts_from_the_attempts(tmp_path):
    data = read(_written(tmp_path))
    # At the default the logged share is read, as before: two sequences of 16 past 1.05.
    (f,) = _tail(run_checks(data))
    assert f.severity == "warn" and f.first_step == 10
    assert f.evidence["share_since"] == pytest.approx(2 / 16) and f.evidence["seq_line"] == 1.05
    assert "seq_share_from" not in f.evidence and "past 1.05" in f.title
    # A stricter line counts the sequences at 1.036 too, from the attempts' own ratios.
    (g,) = _tail(run_checks(data, thresholds=_at("1.03")))
    assert g.severity == "warn" and g.first_step == 10 and "past 1.03" in g.title
    assert g.evidence["share_since"] == pytest.approx(4 / 16) and g.evidence["seq_line"] == 1.03
    assert g.evidence["seq_share_from"] == "attempts" and g.evidence["attempts_counted"] == 320
    assert all(e["seq_ratio"] > 1.03 for e in g.evidence["examples"])
    # A looser one than every sequence: quiet.
    assert _tail(run_checks(data, thresholds=_at("1.2"))) == []
    # No note: the run keeps its per-attempt ratios.
    assert not [x for x in run_checks(data, thresholds=_at("1.03")).findings if "asked" in x.title]


def test_the_recount_reads_what_the_writer_counted(tmp_path):
    # Just above the writer's line, the recount gives the logged share at every update.
    from rlvitals.checks.context import Context
    from rlvitals.checks.sequences import seq_shares

    data = read(_written(tmp_path))
    got = seq_shares(Context(data, thresholds=_at("1.0500001")))
    logged = data.series("train/mismatch_seq_over").finite()
    assert got.recounted == 320 and got.series is not None
    assert got.series.steps.tolist() == logged.steps.tolist()
    assert got.series.values.tolist() == pytest.approx(logged.values.tolist())


def test_a_stricter_line_finds_what_the_default_does_not(tmp_path):
    data = read(_written(tmp_path, far=None))  # four sequences at 1.036, none past 1.05
    assert _tail(run_checks(data)) == []
    (f,) = _tail(run_checks(data, thresholds=_at("1.03")))
    assert f.first_step == 10 and f.evidence["share_since"] == pytest.approx(4 / 16)


def test_a_line_the_run_cannot_count_is_said_once(tmp_path, capsys):
    # Only the logged share, no attempts: the line cannot be applied, and the report says so.
    d = _run(tmp_path, [0.0] * 10 + [0.1] * 10)
    rep = run_checks(read(d), thresholds=_at("1.03"))
    notes = [x for x in rep.findings if "mismatch_seq_line 1.03 asked" in x.title]
    assert len(notes) == 1 and notes[0].severity == "info"
    assert "logged train/mismatch_seq_over, past 1.05" in notes[0].title
    (f,) = [x for x in _tail(rep) if x.severity == "warn"]
    assert (
        f.evidence["seq_share_from"] == "train/mismatch_seq_over" and f.evidence["seq_line"] == 1.05
    )
    # The same through the command line's --set.
    from rlvitals.cli import main

    assert main(["check", str(d), "--set", "mismatch_seq_line=1.03", "--json"]) in (0, 1)
    out = json.loads(capsys.readouterr().out)
    titles = [x["title"] for x in out["runs"][0]["findings"]]
    assert sum("mismatch_seq_line 1.03 asked" in t for t in titles) == 1


@pytest.mark.slow
def test_bad_replica_at_a_stricter_and_a_looser_sequence_line(trainer_run):
    data = read(trainer_run("bad_replica"))
    onset = data.info["fault_step"]
    (f,) = [x for x in _tail(run_checks(data)) if x.severity == "warn"]
    # Stricter: found from the same onset, on a share at least as large, recounted.
    (g,) = [x for x in _tail(run_checks(data, thresholds=_at("1.02"))) if x.severity == "warn"]
    assert g.first_step == onset and g.evidence["seq_share_from"] == "attempts"
    assert g.evidence["share_since"] >= f.evidence["share_since"]
    # Looser than the worst sequence of the run: quiet.
    worst = float(data.series("train/mismatch_seq_tme_max").finite().values.max())
    assert _tail(run_checks(data, thresholds=_at(f"{worst * 1.01:.6g}"))) == []
