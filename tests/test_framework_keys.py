"""The keys of shared/research/field-2026-12-03.md §2.2, read by meaning: mapped where a
canonical name holds them (units converted), else kept as logged with what they are."""

from __future__ import annotations

import json

import pytest

from rlvitals import read
from rlvitals.readers.keys import unmapped_reason

MAPPED = {
    "debug/vllm_vs_local_logprob_diff_mean": ("train/logprob_abs_diff", 0.006),
    "sample/staleness_mean": ("freshness/lag_mean", 1.5),
    "sample/staleness_max": ("freshness/lag_max", 3.0),
    "baseline_reward/pct_mixed": ("groups/signal_fraction", 0.625),  # percent / 100
    "token_mult_prob_error": ("train/mismatch_tme", 1.02),
}
KEPT = [
    "train/policy_kl_error",
    "train/js_divergence_error",
    "train/seq_logprob_error_mean",
    "train/sampling_importance_ratio",
    "train/is_oob_ratio",
    "kl_ent_ratio/mean",
    "train/agg/all/env/is_timeout/mean",
    "train/agg/all/env/has_error/mean",
    "sample/dropped_stale_total",
    "tools/loop_exhausted_frac",
    "vespo/phi_seq_mean",
    "variance_proxy/proxy1_signal_strength",
    "rollout_corr/logprob_abs_diff/ts_3",
    "async/num_groups_dropped",
    "chi2_token",
    "chi2_seq",
    "stats/lag_min",
]


def test_each_new_key_maps_by_meaning(tmp_path):
    raw = {"baseline_reward/pct_mixed": 62.5, "token_mult_prob_error": 1.02}
    raw |= {k: v for k, (_, v) in MAPPED.items() if k not in raw}
    p = tmp_path / "m.jsonl"
    with open(p, "w") as f:
        for s in range(3):
            f.write(json.dumps({"step": s, **raw}) + "\n")
    run = read(p)
    for key, (canonical, value) in MAPPED.items():
        assert run.series(canonical).at(1) == pytest.approx(value), key
        assert run.resolved[key][0] == canonical


@pytest.mark.parametrize("key", KEPT)
def test_each_kept_key_says_what_it_is(key):
    why = unmapped_reason(key)
    assert "kept as logged" in why and ":" in why.split(";")[0], why
