"""The `policy` family of the canonical metrics: policy and optimisation.

Data only: each canonical metric with its meaning, label, plot and synonyms, and the
family's names with a variable part. ``schema.py`` reads them (and generates the docs).
"""

from __future__ import annotations

import re

from .spec import Alias, MetricSpec, metric, specs

FAMILY = "policy"
TITLE = "Policy and optimisation"
INTRO = ""

METRICS = specs(
    FAMILY,
    [
        metric(
            "sampling/entropy_estimate",
            "-mean sampler logprob over sampled tokens",
            "entropy_estimate",
            label="entropy",
            key=True,
            plot="entropy",
        ),
        metric(
            "train/entropy",
            "mean token entropy computed by the trainer",
            "entropy",
            "entropy_mean",
            "policy_entropy",
            "actor/entropy",
            "policy/entropy",
            "token_entropy",
            "mean_entropy",
            Alias("approx_entropy", note="NeMo-RL, rlwatch: approximate token entropy"),
            Alias("objective/entropy", note="TRL PPOTrainer"),
            label="trainer entropy",
            key=True,
            plot="entropy",
        ),
        metric(
            "train/loss",
            "loss as logged",
            "loss",
            "train_loss",
            "policy_loss",
            "pg_loss",
            "total_loss",
            "actor/pg_loss",
            Alias("act_loss", note="DeepSpeed-Chat, OpenRLHF progress bar: actor loss"),
            Alias("loss/policy_avg", note="TRL PPOTrainer"),
            label="loss",
            plot="loss",
        ),
        metric(
            "train/grad_norm",
            "gradient norm before clipping",
            "grad_norm",
            "gradient_norm",
            "grads/norm",
            "actor_grad_norm",
            "global_grad_norm",
            label="grad norm",
            key=True,
            plot="grad",
        ),
        metric(
            "train/lr",
            "learning rate",
            "lr",
            "learning_rate",
            "actor_lr",
            "policy_lr",
            label="lr",
            plot="loss",
        ),
        metric(
            "train/clip_frac",
            "share of tokens whose importance ratio was clipped",
            Alias("clip_fraction", note="rlwatch, rlprobe"),
            "clip_frac",
            "clipfrac",
            "pg_clipfrac",
            "clip_ratio",
            "clip_ratio/region_mean",
            "ppo_clip_ratio",
            "clipped_fraction",
            label="clip fraction",
            plot="trust",
        ),
        metric(
            "train/clip_frac_low",
            "share of tokens clipped on the lower side (ratio under 1 - eps with A < 0)",
            Alias("actor/pg_clipfrac_low", note="verl-omni"),
            label="clip low",
            plot="trust",
        ),
        metric(
            "train/clip_frac_high",
            "share of tokens clipped on the upper side (ratio over 1 + eps with A > 0)",
            Alias("actor/pg_clipfrac_higher", note="verl-omni: 0 with all clipping below"),
            label="clip high",
            plot="trust",
        ),
        metric(
            "train/ppo_ratio_mean",
            "mean PPO ratio pi_theta / pi_old over the update's tokens: exactly 1 at the "
            "first minibatch of the first update",
            Alias(r"^actor/ratio_mean$", "train/ppo_ratio_mean", note="verl-omni"),
            Alias("ppo_actor/update/importance_weight/avg", note="AReaL: exp(theta - prox)"),
            label="PPO ratio",
            plot="trust",
        ),
        metric(
            "train/ppo_kl",
            "old-vs-new policy KL within the update",
            "ppo_kl",
            Alias("approx_kl", note="PPO's approximate old-vs-new KL (CleanRL, SB3)"),
            "approxkl",
            "policy/approxkl",
            "kl_old_new",
            "old_new_kl",
            label="PPO KL",
            plot="trust",
        ),
        metric(
            "train/ref_kl",
            "KL to the reference policy",
            "ref_kl",
            "kl_ref",
            "kl_to_ref",
            "reference_kl",
            "ref_policy_kl",
            "kl_policy_ref",
            Alias("kl_loss", note="verl actor/kl_loss, Miles train/kl_loss (KL-loss term)"),
            Alias("kl_divergence", note="rlwatch: KL from the reference model"),
            Alias("objective/kl", note="TRL PPOTrainer: KL to the reference"),
            Alias("kl_penalty", note="NeMo-RL: the KL term divided by its coefficient"),
            label="KL to reference",
            plot="trust",
        ),
        metric(
            "train/advantage_std",
            "std of advantages in the batch",
            Alias("advantage_std", note="rlwatch"),
            "advantages_std",
            "adv_std",
            "advantages/std",
            "advantage/std",
            "critic/advantages/std",
            label="advantage std",
            plot="grad",
        ),
    ],
)

PATTERNS: list[tuple[re.Pattern[str], MetricSpec]] = []
