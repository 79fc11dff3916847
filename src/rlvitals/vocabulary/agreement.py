"""The `agreement` family of the canonical metrics: sampler and trainer agreement.

Data only: each canonical metric with its meaning, label, plot and synonyms, and the
family's names with a variable part. ``schema.py`` reads them (and generates the docs).
"""

from __future__ import annotations

import re

from .spec import Alias, MetricSpec, metric, specs

FAMILY = "agreement"
TITLE = "Sampler and trainer agreement"
INTRO = (
    "Notation: for each sampled token, Δ = logp_trainer − logp_sampler (same token, same "
    "weights version as far as the run knows), w = exp(Δ). Three KLs are never lumped: "
    "KL to the reference policy (`train/ref_kl`), PPO's old-vs-new KL (`train/ppo_kl`) "
    "and this sampler/trainer mismatch (`train/mismatch_kl`). A KL-like key that fits "
    "none of them (a bare `kl`) stays unmapped under its own name."
)

METRICS = specs(
    FAMILY,
    [
        metric(
            "train/mismatch_kl",
            "token mean of k3 = w - 1 - Δ, KL(sampler || trainer) estimate, never negative",
            "mismatch_kl",
            Alias("train_rollout_kl", note="Miles (k3, clamped)"),
            "rollout_corr/k3_kl",
            "sampler_kl",
            "inference_kl",
            "train_inference_kl",
            "rollout_train_kl",
            Alias("gen_kl_error", note="NeMo-RL: KL(P_gen || P_train), kl_type estimator"),
            Alias("generation_kl_error", note="NeMo-RL console 'Generation KL Error'"),
            label="mismatch KL",
            key=True,
            plot="mismatch",
        ),
        metric(
            "train/mismatch_k1",
            "token mean of -Δ (k1; may be negative)",
            Alias("vllm_kl", note="OpenRLHF: mean(vLLM - old logp)"),
            "rollout_corr/kl",
            "mismatch_k1",
            label="mismatch k1",
            plot="mismatch",
        ),
        metric(
            "train/logprob_abs_diff",
            "token mean of |Δ| (log space, not probability space)",
            "logprob_abs_diff",
            "train_rollout_logprob_abs_diff",
            "sampling/sampling_logp_difference/mean",
            "logp_abs_diff",
            Alias(
                "debug/vllm_vs_local_logprob_diff_mean",
                note="open-instruct: token mean of |local - vLLM| (grpo_fast.py)",
            ),
            label="|Δ logp|",
            plot="mismatch",
        ),
        metric(
            "train/mismatch_tme",
            "token mean of exp(|Δ|), 1 = identical (NeMo-RL's token multiplicative "
            "probability error)",
            Alias("token_mult_prob_error", note="NeMo-RL; past 1.01-1.02 is a problem"),
            label="prob. error",
            plot="mismatch_tail",
        ),
        metric(
            "train/mismatch_seq_tme_p50",
            "median over the update's sequences of each one's token mean of exp(|Δ|)",
            label="seq. ratio p50",
            plot="mismatch_tail",
        ),
        metric(
            "train/mismatch_seq_tme_p90",
            "90th percentile over the update's sequences of each one's token mean of "
            "exp(|Δ|): past the line when a tenth of the sequences are",
            label="seq. ratio p90",
            plot="mismatch_tail",
        ),
        metric(
            "train/mismatch_seq_tme_max",
            "the largest sequence's token mean of exp(|Δ|) in the update",
            label="seq. ratio max",
            plot="mismatch_tail",
        ),
        metric(
            "train/mismatch_seq_over",
            "share of the update's sequences whose token mean of exp(|Δ|) is past 1.05 "
            "(the line above which NeMo-RL plots a sample)",
            label="seqs past 1.05",
            plot="mismatch_tail",
        ),
        metric(
            "train/logprob_abs_diff_p50",
            "median over sampled tokens of |Δ|: a mean |Δ| far above it is a tail of a few "
            "tokens, not every token moved",
            label="|Δ logp| p50",
            plot="mismatch",
        ),
        metric(
            "train/is_ratio_mean",
            "token mean of w = pi_trainer / pi_sampler, raw (before any correction's bounds): 1 "
            "when the two agree; the kept probability mass when the sampler truncates (top-p, "
            "top-k, min-p)",
            Alias(
                "sampling/raw_importance_sampling_ratio/mean",
                note="TRL PR #5243: the ratio before truncation or masking",
            ),
            label="ratio mean",
            plot="ratio",
        ),
        metric(
            "train/is_ratio_median",
            "token median of w, raw",
            label="ratio median",
            plot="ratio",
        ),
        metric(
            "train/is_ratio_min",
            "smallest token w of the update, raw",
            Alias("sampling/raw_importance_sampling_ratio/min", note="TRL PR #5243"),
            label="ratio min",
            plot="ratio",
        ),
        metric(
            "train/is_ratio_max",
            "largest token w of the update, raw",
            Alias("sampling/raw_importance_sampling_ratio/max", note="TRL PR #5243"),
            label="ratio max",
            plot="ratio",
        ),
        metric(
            "train/is_weight_mean",
            "the sampler-correction weight (pi_trainer / pi_sampler) as the trainer logs it: per "
            "token or per sequence, before or after its truncation or masking as the framework "
            "does (the reliability table says which)",
            Alias(
                "sampling/importance_sampling_ratio/mean",
                note="TRL: after truncation or masking (trl #5231)",
            ),
            Alias("rollout_corr/rollout_is_mean", note="verl: the truncated weights"),
            Alias("policy/loss_metrics/is_ratio_mean", note="SkyRL: exp(old - rollout)"),
            Alias("sampling_importance_ratio", note="NeMo-RL: the correction weight"),
            label="IS weight mean",
            plot="ratio",
        ),
        metric(
            "train/is_weight_min",
            "smallest correction weight of the update, as logged",
            Alias("sampling/importance_sampling_ratio/min", note="TRL: 0 where masked"),
            Alias("rollout_corr/rollout_is_min", note="verl"),
            Alias("policy/loss_metrics/is_ratio_min", note="SkyRL"),
            label="IS weight min",
            plot="ratio",
        ),
        metric(
            "train/is_weight_max",
            "largest correction weight of the update, as logged",
            Alias("sampling/importance_sampling_ratio/max", note="TRL: at most the cap"),
            Alias("rollout_corr/rollout_is_max", note="verl"),
            Alias("policy/loss_metrics/is_ratio_max", note="SkyRL"),
            label="IS weight max",
            plot="ratio",
        ),
        metric(
            "train/mismatch_ess",
            "token-level (Σw)² / (n·Σw²), in (0, 1], 1 = identical",
            "mismatch_ess",
            label="ESS",
            key=True,
            plot="ess",
        ),
        metric(
            "train/mismatch_ess_seq",
            "sequence-level ESS with one weight per attempt, w = exp(ΣΔ)",
            "mismatch_ess_seq",
            label="ESS per attempt",
            plot="ess",
        ),
        metric(
            "freshness/lag_mean",
            "mean updates between the sampler version of a trained attempt and its trainer",
            "staleness_mean",
            "avg_staleness",
            "mean_staleness",
            "off_policy/mean",
            "policy_lag_mean",
            Alias("sample/staleness_mean", note="TRL 1.16 async GRPO"),
            Alias(r"^stats/lag_mean$", "freshness/lag_mean", note="PipelineRL (PR #152)"),
            Alias("buffer/sample/avg_sampled_policy_age", note="torchforge"),
            label="lag",
            key=True,
            plot="freshness",
        ),
        metric(
            "freshness/lag_p90",
            "90th percentile of the same lag",
            label="lag p90",
            plot="freshness",
        ),
        metric(
            "freshness/lag_max",
            "largest lag of a trained attempt",
            "staleness_max",
            "max_staleness",
            "off_policy/max",
            Alias("sample/staleness_max", note="TRL 1.16 async GRPO"),
            Alias(r"^stats/lag_max$", "freshness/lag_max", note="PipelineRL (PR #152)"),
            Alias(r"^stats/lag$", "freshness/lag_max", note="PipelineRL before PR #152: the max"),
            Alias("buffer/sample/max_sampled_policy_age", note="torchforge"),
            label="lag max",
            plot="freshness",
        ),
    ],
)

PATTERNS: list[tuple[re.Pattern[str], MetricSpec]] = []
