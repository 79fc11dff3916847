"""Keys frameworks log that no canonical name holds: kept under their own names, and
``formats --explain`` says what each is."""

from __future__ import annotations

import re

# Collected in the project's field notes (shared/research/field-2026-12-03.md §2.2).
KEPT: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(rx), why)
    for rx, why in (
        (r"(?:^|/)policy_kl_error$", "NeMo-RL: KL(P_train || P_gen), the reverse of gen_kl_error"),
        (r"(?:^|/)js_divergence_error$", "NeMo-RL: Jensen-Shannon divergence, sampler vs trainer"),
        (r"(?:^|/)seq_logprob_error_", "NeMo-RL: per-sequence logprob error statistics"),
        (r"(?:^|/)sampling_importance_ratio$", "NeMo-RL: mean importance ratio trainer/sampler"),
        (
            r"(?:^|/)is_oob_ratio$",
            "NeMo-RL: share of tokens whose importance ratio is out of bounds",
        ),
        (r"(?:^|/)probs_ratio", "NeMo-RL: importance ratio statistics"),
        (r"(?:^|/)kl_ent_ratio/", "prime-rl: mismatch_kl / entropy, both read on their own"),
        (r"(?:^|/)is_timeout/", "prime-rl: share of timed-out traces"),
        (r"(?:^|/)has_error/", "prime-rl: share of errored traces"),
        (r"(?:^|/)(?:empty|errored)_rollouts", "prime-rl: rollouts empty or errored (counts)"),
        (r"^sample/dropped_stale_total$", "TRL async GRPO: stale samples dropped, a running total"),
        (r"^tools/loop_exhausted_frac$", "TRL async GRPO: share of episodes out of tool turns"),
        (r"^vespo/", "TRL: the VESPO loss' sequence weight"),
        (r"^variance_proxy/", "verl: gradient-variance proxies (actor.calculate_sum_pi_squared)"),
        (r"^rollout_corr/.*/ts_\d+$", "verl-omni: the mismatch at one diffusion timestep"),
        (r"^async/num_groups_dropped$", "SkyRL: groups dropped by zero-variance filtering (count)"),
        (r"(?:^|/)chi2_(?:token|seq)$", "ms-swift: chi-square divergence, sampler vs trainer"),
        (r"vllm_vs_local_logprob_diff_(?:max|std)$", "open-instruct: |local - vLLM| max or std"),
        (r"^stats/lag_min$", "PipelineRL: the least lag of a batch"),
        # Bookkeeping: counters, clocks and end-of-training summaries a trainer or tracker
        # writes beside the metrics; known, never offered as a metric to map.
        (
            r"^_(?:timestamp|runtime)$",
            "W&B / MLflow / trackio: the tracker's wall clock (read as the step time)",
        ),
        (r"(?:^|/)epoch$", "HF Trainer: the epoch counter (bookkeeping)"),
        (
            r"(?:^|/)(?:num_tokens|num_input_tokens_seen|total_flos)$",
            "HF Trainer / TRL: a running total of tokens or FLOPs (bookkeeping)",
        ),
        (
            r"(?:^|/)(?:train|eval)_(?:runtime|samples_per_second|steps_per_second)$",
            "HF Trainer: the end-of-training speed summary (bookkeeping)",
        ),
        (
            r"(?:^|/)completions/(?:min|max|mean)_(?:terminated_)?length$",
            "TRL: the completion lengths' extremes and the length of those that ended; the "
            "checks read the mean length and the clipped ratio",
        ),
    )
)
