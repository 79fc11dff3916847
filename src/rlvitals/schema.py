"""The run directory's names and the canonical metric vocabulary (docs/metrics.md): ONE declaration.

One vocabulary for every run, whatever framework wrote it: the writer emits these names, every
reader maps its framework's keys onto them by meaning, and every check and view reads only them.
Each ``MetricSpec`` below carries its meaning, a short label for the views, and the synonyms
other frameworks and peer tools log it under (``Alias``): ``readers/keys.py`` builds the
vocabulary of synonyms and normalised tokens from them, ``docs/metrics.md`` is generated from
them (``python -m rlvitals.schema > docs/metrics.md``; a test keeps the two equal), and the
views take their labels and key numbers from them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "FAMILIES",
    "FORMAT_ID",
    "METRICS",
    "PATTERNS",
    "RESERVED_STEP_KEYS",
    "Alias",
    "MetricSpec",
    "describe",
    "is_canonical",
    "key_metrics",
    "label",
    "metrics_markdown",
    "plot_members",
]

FORMAT_ID = "rlvitals-run/1"

# File names inside a run directory (docs/format.md).
RUN_JSON = "run.json"
STEPS = "steps.jsonl"
ROLLOUTS = "rollouts.jsonl"
PROGRESS = "progress.jsonl"
EVALS = "evals.jsonl"
TRANSCRIPTS = "transcripts"
CHECKPOINTS = "checkpoints"

# Keys of a step record that are not metrics.
RESERVED_STEP_KEYS = frozenset({"step", "time", "policy_version"})

# How non-finite numbers are spelled in our files (docs/format.md).
NONFINITE_STRINGS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


@dataclass(frozen=True)
class Alias:
    """A key another framework or tool logs a metric under.

    ``source`` is an exact key, or a regular expression when it starts with ``^`` (then
    ``target`` is the canonical name it expands to, ``\\g<name>`` for its groups). The canonical
    value is ``value * scale + offset``; ``note`` says who logs it and what it is.
    """

    source: str
    target: str = ""
    scale: float = 1.0
    offset: float = 0.0
    note: str = ""


@dataclass(frozen=True)
class MetricSpec:
    """One canonical metric: name, family (the check that reads it), meaning, and synonyms.

    ``label`` is the short name views show; ``key`` marks the numbers ``rlvitals watch`` shows
    for every update. ``aliases`` are the keys other frameworks and peers log it under;
    ``plot`` names the dashboard plot that draws it.
    """

    name: str
    family: str
    description: str
    label: str = ""
    key: bool = False
    aliases: tuple[Alias, ...] = field(default=(), compare=False)
    plot: str = ""  # the dashboard plot that draws it (views/dashboard.py PLOTS)
    glob: str = ""  # for a family: the names it covers as a glob (default: <...> -> *)


_Row = tuple[str, str, str, bool, tuple[Alias, ...], str]


def _m(
    name: str,
    description: str,
    *aliases: str | Alias,
    label: str = "",
    key: bool = False,
    plot: str = "",
) -> _Row:
    al = tuple(a if isinstance(a, Alias) else Alias(a) for a in aliases)
    return (name, description, label, key, al, plot)


def _specs(family: str, rows: list[_Row]) -> list[MetricSpec]:
    return [
        MetricSpec(n, family, d, lb or n.rsplit("/", 1)[-1], k, al, plot=pl)
        for n, d, lb, k, al, pl in rows
    ]


def _not(source: str, note: str) -> Alias:
    """A 1 - x synonym: a share of groups *without* signal where we count those with it."""
    return Alias(source, scale=-1.0, offset=1.0, note=note)


# Families in the seeds' reading order: (title, what the section says before its table).
FAMILIES: dict[str, tuple[str, str]] = {
    "reward": (
        "Reward and learning signal",
        "Reward components (one per reward function) and breakdowns by data source or "
        "environment are families below: `reward/component/<name>/mean`, "
        "`reward/source/<name>/mean`.",
    ),
    "groups": ("Groups and discards", ""),
    "failures": ("Failed attempts", ""),
    "episodes": (
        "Episodes (agent metadata and grader additions)",
        "`rollout/<key>`: numbers averaged, labels counted as `rollout/<key>/<label>` (count "
        'this update), booleans as rates in [0, 1]. `{"termination_reason": "max_turns", '
        '"turns": 12}` gives `rollout/turns` and `rollout/termination_reason/max_turns`. A '
        'grader that returns its reward components (`{"correctness": 1.0, "format": 0.5}`) '
        "gets each as `rollout/<component>`: every reward component is logged, not only the "
        "total. Other frameworks' per-function rewards read as `reward/component/<name>/mean`.",
    ),
    "responses": ("Responses", ""),
    "agreement": (
        "Sampler and trainer agreement",
        "Notation: for each sampled token, Δ = logp_trainer − logp_sampler (same token, same "
        "weights version as far as the run knows), w = exp(Δ). Three KLs are never lumped: "
        "KL to the reference policy (`train/ref_kl`), PPO's old-vs-new KL (`train/ppo_kl`) "
        "and this sampler/trainer mismatch (`train/mismatch_kl`). A KL-like key that fits "
        "none of them (a bare `kl`) stays unmapped under its own name.",
    ),
    "policy": ("Policy and optimisation", ""),
    "perf": (
        "Time and throughput (the system layer)",
        "Utilisation where a framework logs it (`perf/mfu`, GPU memory) keeps its name under "
        "`perf/`.",
    ),
    "heldout": ("Held-out evaluation", ""),
    "transcripts": ("Transcripts", ""),
}

_ALL = [
    *_specs(
        "reward",
        [
            _m(
                "reward/mean",
                "mean reward of the attempts this update trained on",
                "reward",
                "reward_mean",
                "rewards/mean",
                "mean_reward",
                "avg_reward",
                "reward_avg",
                "raw_reward",
                "score",
                "critic/score/mean",
                "rollout/raw_reward",
                "rollout/reward_mean",
                "reward/avg_raw_reward",
                "env/all/reward/total",
                "task_reward",
                "episode_reward_mean",
                "env/reward_mean",
                Alias("objective/scores", note="TRL PPOTrainer: reward-model score"),
                Alias("reward_score", note="DeepSpeed-Chat 'Average reward score'"),
                Alias("filtered_reward", note="NeMo-RL 'Avg Filtered Reward' (trained groups)"),
                Alias("total_rewards", note="mlx-lm-lora GRPO 'Total rewards mean'"),
                Alias("accuracy", note="a loop whose reward is right/wrong: training accuracy"),
                Alias("success_rate", note="a loop whose reward is success/failure"),
                "success",
                "solve_rate",
                "pass_rate",
                label="reward",
                key=True,
                plot="reward",
            ),
            _m(
                "reward/mean_with_unusable",
                "mean reward of trained attempts plus the graded attempts of rejected groups",
                label="reward incl. rejected",
                key=True,
                plot="reward",
            ),
            _m(
                "reward/group_std_mean",
                "mean over trained groups of the population std of rewards within the group",
                Alias("group_reward_std", note="OpenRLHF: mean within-group std"),
                Alias("group_reward_std_mean", note="rlprobe"),
                Alias("reward_std_dev", note="OpenPipe ART: mean over groups of np.std"),
                Alias("reward/std_dev", note="OpenPipe ART (newer)"),
                "within_group_reward_std",
                Alias("group_rewards_std", note="mlx-lm-lora GRPO 'Group rewards std'"),
                Alias("group_std", note="a loop's group std (MiniMind 'GrpStd')"),
                label="group std",
                key=True,
                plot="signal",
            ),
            _m(
                "reward/std",
                "std of the same rewards across the whole batch (not learning signal)",
                Alias("reward_std", note="TRL (whole batch), rlwatch"),
                "rewards/std",
                "std_reward",
                "critic/score/std",
                "rollout/reward_std",
                Alias("total_rewards_std", note="mlx-lm-lora GRPO 'Total rewards std'"),
                label="batch reward std",
                plot="signal",
            ),
            _m(
                "reward/nonfinite_count",
                "attempts of a sample dump whose reward is NaN or inf, or missing where the "
                "framework stores a NaN as missing (TRL); the logged means average them away",
                label="non-finite rewards",
                plot="failures",
            ),
        ],
    ),
    *_specs(
        "groups",
        [
            _m(
                "groups/trained",
                "groups trained on this update",
                label="trained groups",
                plot="groups",
            ),
            _m(
                "groups/rejected",
                "groups rejected this update",
                label="rejected groups",
                plot="groups",
            ),
            _m(
                "groups/all_solved",
                "completed groups whose every attempt scored the run's top reward",
                label="all solved",
                plot="groups",
            ),
            _m(
                "groups/none_solved",
                "completed groups whose every attempt scored the run's bottom reward",
                label="none solved",
                plot="groups",
            ),
            _m(
                "groups/none_solved_share",
                "share of the update's prompts whose every attempt scored the bottom reward",
                Alias(
                    "baseline_reward/pct_0",
                    scale=0.01,
                    note="NeMo-RL: percent (0-100) of prompts with mean reward 0; / 100",
                ),
                label="none solved share",
                plot="signal",
            ),
            _m(
                "groups/all_solved_share",
                "share of the update's prompts whose every attempt scored the top reward",
                Alias(
                    "baseline_reward/pct_1",
                    scale=0.01,
                    note="NeMo-RL: percent (0-100) of prompts with mean reward 1; / 100",
                ),
                label="all solved share",
                plot="signal",
            ),
            _m(
                "groups/signal_fraction",
                "share of completed groups whose rewards differ (what GRPO learns from)",
                _not("frac_reward_zero_std", "TRL: share of samples whose group std is 0"),
                _not("zero_variance_group_frac", "rlprobe"),
                _not("zero_var_group_frac", "rl-doctor"),
                _not("zero_std_frac", "share of groups with zero reward std"),
                Alias(
                    "baseline_reward/pct_mixed",
                    scale=0.01,
                    note="NeMo-RL: percent (0-100) of prompts with mixed rewards; / 100",
                ),
                _not("frac_zero_std", "share of groups with zero reward std"),
                label="signal groups",
                key=True,
                plot="signal",
            ),
            _m(
                "discard/groups/no_variance",
                "groups rejected because every attempt scored the same",
                label="no-variance groups",
                plot="groups",
            ),
            _m(
                "discard/groups/group_too_small",
                "groups rejected because more than max_group_losses attempts failed",
                label="groups too small",
                plot="groups",
            ),
        ],
    ),
    *_specs(
        "failures",
        [
            _m("rollouts/retries", "attempt retries this update", label="retries", plot="failures"),
        ],
    ),
    *_specs(
        "responses",
        [
            _m(
                "response/length_mean",
                "mean generated tokens per attempt",
                "response_length",
                "response_length_mean",
                "response_length/mean",
                "completion_length",
                "completions/mean_length",
                "completion_len_mean",
                "mean_response_length",
                "avg_response_length",
                "gen_len",
                "generate/avg_num_tokens",
                "rollout/response_length_mean",
                Alias("mean_gen_tokens_per_sample", note="NeMo-RL"),
                Alias("generation_length", note="NeMo-RL 'Mean Generation Length'"),
                "response_tokens",
                "mean_response_tokens",
                "gen_tokens",
                "output_tokens",
                label="length",
                key=True,
                plot="length",
            ),
            _m(
                "response/truncated_rate",
                "share of attempts that hit the token limit",
                "truncated_rate",
                "truncation_rate",
                "truncated_ratio",
                "truncated_fraction",
                "clipped_ratio",
                "completions/clipped_ratio",
                "response_length/clip_ratio",
                "no_eos_ratio",
                "frac_truncated",
                label="truncated",
                key=True,
                plot="truncation",
            ),
        ],
    ),
    *_specs(
        "agreement",
        [
            _m(
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
            _m(
                "train/mismatch_k1",
                "token mean of -Δ (k1; may be negative)",
                Alias("vllm_kl", note="OpenRLHF: mean(vLLM - old logp)"),
                "rollout_corr/kl",
                "mismatch_k1",
                label="mismatch k1",
                plot="mismatch",
            ),
            _m(
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
            _m(
                "train/mismatch_tme",
                "token mean of exp(|Δ|), 1 = identical (NeMo-RL's token multiplicative "
                "probability error)",
                Alias("token_mult_prob_error", note="NeMo-RL; past 1.01-1.02 is a problem"),
                label="prob. error",
                plot="mismatch_tail",
            ),
            _m(
                "train/mismatch_seq_tme_p50",
                "median over the update's sequences of each one's token mean of exp(|Δ|)",
                label="seq. ratio p50",
                plot="mismatch_tail",
            ),
            _m(
                "train/mismatch_seq_tme_p90",
                "90th percentile over the update's sequences of each one's token mean of "
                "exp(|Δ|): past the line when a tenth of the sequences are",
                label="seq. ratio p90",
                plot="mismatch_tail",
            ),
            _m(
                "train/mismatch_seq_tme_max",
                "the largest sequence's token mean of exp(|Δ|) in the update",
                label="seq. ratio max",
                plot="mismatch_tail",
            ),
            _m(
                "train/mismatch_seq_over",
                "share of the update's sequences whose token mean of exp(|Δ|) is past 1.05 "
                "(the line above which NeMo-RL plots a sample)",
                label="seqs past 1.05",
                plot="mismatch_tail",
            ),
            _m(
                "train/mismatch_ess",
                "token-level (Σw)² / (n·Σw²), in (0, 1], 1 = identical",
                "mismatch_ess",
                label="ESS",
                key=True,
                plot="ess",
            ),
            _m(
                "train/mismatch_ess_seq",
                "sequence-level ESS with one weight per attempt, w = exp(ΣΔ)",
                "mismatch_ess_seq",
                label="ESS per attempt",
                plot="ess",
            ),
            _m(
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
            _m(
                "freshness/lag_p90",
                "90th percentile of the same lag",
                label="lag p90",
                plot="freshness",
            ),
            _m(
                "freshness/lag_max",
                "largest lag of a trained attempt",
                "staleness_max",
                "max_staleness",
                "off_policy/max",
                Alias("sample/staleness_max", note="TRL 1.16 async GRPO"),
                Alias(r"^stats/lag_max$", "freshness/lag_max", note="PipelineRL (PR #152)"),
                Alias(
                    r"^stats/lag$", "freshness/lag_max", note="PipelineRL before PR #152: the max"
                ),
                Alias("buffer/sample/max_sampled_policy_age", note="torchforge"),
                label="lag max",
                plot="freshness",
            ),
        ],
    ),
    *_specs(
        "policy",
        [
            _m(
                "sampling/entropy_estimate",
                "-mean sampler logprob over sampled tokens",
                "entropy_estimate",
                label="entropy",
                key=True,
                plot="entropy",
            ),
            _m(
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
            _m(
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
            _m(
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
            _m(
                "train/lr",
                "learning rate",
                "lr",
                "learning_rate",
                "actor_lr",
                "policy_lr",
                label="lr",
                plot="loss",
            ),
            _m(
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
            _m(
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
            _m(
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
            _m(
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
    ),
    *_specs(
        "perf",
        [
            _m(
                "perf/step_seconds",
                "wall seconds of the update, from the previous step record",
                "step_time",
                "time_per_step",
                "step_seconds",
                "step_time_s",
                "time/step",
                "timing_s/step",
                Alias("time/step_wall_s", note="OpenPipe ART"),
                "perf/time_per_step",
                "sec_per_step",
                "seconds_per_step",
                label="s/step",
                key=True,
                plot="timing",
            ),
            _m(
                "perf/sampling_seconds",
                "seconds spent sampling",
                "generation_time",
                "gen_time",
                "timing_s/gen",
                "timing/generation",
                "perf/rollout_time",
                label="sampling s",
                plot="timing",
            ),
            _m(
                "perf/grading_seconds",
                "seconds spent grading",
                "timing_s/reward",
                label="grading s",
                plot="timing",
            ),
            _m(
                "perf/training_seconds",
                "seconds spent in the optimizer update",
                "train_time",
                "training_time",
                "timing_s/update_actor",
                label="training s",
                plot="timing",
            ),
            _m(
                "perf/tokens_per_second",
                "generated tokens per wall second of the update",
                "tokens_per_second",
                "tokens_per_sec",
                label="tokens/s",
                plot="throughput",
            ),
            _m(
                "perf/attempt_seconds_p50",
                "median attempt duration (start to end)",
                label="p50 s",
                plot="timing",
            ),
            _m(
                "perf/attempt_seconds_p90",
                "90th percentile attempt duration",
                label="p90 s",
                plot="timing",
            ),
            _m(
                "perf/attempt_seconds_p99",
                "99th percentile attempt duration",
                label="p99 s",
                plot="timing",
            ),
        ],
    ),
    *_specs(
        "transcripts",
        [
            _m(
                "text/gibberish_rate",
                "share of the update's samples with a sampled token of a rare id (> 100,000) "
                "at a logprob below -ln(V) - 2 (prime-rl's gibberish detector)",
                label="gibberish",
                plot="transcripts",
            ),
            _m(
                "text/repetition_rate",
                "share of the update's samples with a long run of tokens sampled at p > 0.99 "
                "(prime-rl's repetition detector: 3,000 tokens)",
                label="repetition",
                plot="transcripts",
            ),
            _m(
                "text/ngram_dup_rate",
                "share of the update's replies of 32+ tokens whose 4-gram duplicate ratio is "
                "past 0.5 (Trinity-RFT #620)",
                label="4-gram dup.",
                plot="transcripts",
            ),
        ],
    ),
]

METRICS: dict[str, MetricSpec] = {m.name: m for m in _ALL}

_NAME = r"(?P<name>[^/]+)"

# Families of names with a variable part (docs/metrics.md), with the keys they are read from.
# Keys frameworks log that no canonical name holds: kept under their own names, and
# ``formats --explain`` says what each is (shared/research/field-2026-12-03.md §2.2).
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
    )
)

PATTERNS: list[tuple[re.Pattern[str], MetricSpec]] = [
    (
        re.compile(r"^reward/component/[^/]+/(mean|std)$"),
        MetricSpec(
            "reward/component/<name>/mean",
            "reward",
            "mean (and `/std`, batch std) of one reward function's score over the update's "
            "attempts: the parts of a weighted total",
            "component",
            aliases=(
                Alias(
                    rf"^rewards/{_NAME}/(?P<stat>mean|std)$",
                    r"reward/component/\g<name>/\g<stat>",
                    note="TRL, ms-swift: rewards/<func>/mean",
                ),
                Alias(
                    r"^rewards/(?!(?:mean|std)$)(?P<name>[^/]+)$",
                    r"reward/component/\g<name>/mean",
                    note="TRL before mid-2025, Unsloth: rewards/<func> (the mean)",
                ),
                Alias(
                    rf"^reward_components?/{_NAME}$",
                    r"reward/component/\g<name>/mean",
                    note="rlprobe reward_components",
                ),
                Alias(
                    rf"^train/agg/effective/[^/]+/rewards/{_NAME}/(?P<stat>mean)$",
                    r"reward/component/\g<name>/\g<stat>",
                    note="prime-rl (orchestrator metrics.py: <prefix>/rewards/<fn>)",
                ),
            ),
            plot="components",
            glob="reward/component/*",
        ),
    ),
    (
        re.compile(r"^reward/source/[^/]+/(mean|std)$"),
        MetricSpec(
            "reward/source/<name>/mean",
            "reward",
            "mean reward (and `/std`) of the update's attempts from one data source or "
            "environment: a total that is a mix of sources can hide one of them falling",
            "source",
            aliases=(
                Alias(
                    rf"^env/(?!all/){_NAME}/reward/(?:total|mean)$",
                    r"reward/source/\g<name>/mean",
                    note="tinker-cookbook env/<tag>/reward/total (tag other than all)",
                ),
                Alias(rf"^env/(?!all/){_NAME}/reward_mean$", r"reward/source/\g<name>/mean"),
                Alias(
                    rf"^train/(?!agg/){_NAME}/effective/[^/]+/reward/mean$",
                    r"reward/source/\g<name>/mean",
                    note="prime-rl train/<env>/... (orchestrator.py: per-env pools)",
                ),
                Alias(
                    rf"^reward/source/{_NAME}/(?P<stat>mean|std)$",
                    r"reward/source/\g<name>/\g<stat>",
                ),
                Alias(
                    rf"^(?:rewards?|score)/by_source/{_NAME}(?:/mean)?$",
                    r"reward/source/\g<name>/mean",
                ),
            ),
            plot="components",
            glob="reward/source/*",
        ),
    ),
    (
        re.compile(r"^discard/groups/[^/]+$"),
        MetricSpec(
            "discard/groups/<reason>",
            "groups",
            "rejected groups this update by reason",
            plot="groups",
        ),
    ),
    (
        re.compile(r"^discard/rollouts/.+$"),
        MetricSpec(
            "discard/rollouts/<reason>",
            "failures",
            "attempts that never reached training, by reason (rollout_failed/<Exc>, "
            "grading_failed/<Exc>, unversioned, ungraded, stale, or the loop's own reason)",
            plot="failures",
        ),
    ),
    (
        re.compile(r"^rollout/.+$"),
        MetricSpec(
            "rollout/<key>",
            "episodes",
            "episode metadata: numbers averaged, labels counted as rollout/<key>/<label>, "
            "booleans as rates",
            plot="episodes",
        ),
    ),
    (
        re.compile(r"^eval/.+/score$"),
        MetricSpec(
            "eval/<suite>/score",
            "heldout",
            "held-out score of a sampler checkpoint",
            plot="reward",
        ),
    ),
    (
        re.compile(r"^eval/.+/component/[^/]+$"),
        MetricSpec(
            "eval/<suite>/component/<name>",
            "heldout",
            "held-out mean of one reward component on a suite (verl val-aux/<source>/<var>)",
            aliases=(
                Alias(
                    r"^val-aux/(?P<src>[^/]+)/(?P<var>(?!acc/|reward/)[^/]+)/mean@\d+$",
                    r"eval/\g<src>/component/\g<var>",
                    note="verl _val_metrics_update: reward extra infos per data source",
                ),
            ),
            plot="components",
        ),
    ),
    (
        re.compile(r"^perf/.+$"),
        MetricSpec(
            "perf/<name>",
            "perf",
            "other time, throughput or utilisation figures",
            plot="system",
        ),
    ),
    (
        re.compile(r"^transcripts/[a-z0-9_]+$"),
        MetricSpec(
            "transcripts/<flag>_rate",
            "transcripts",
            "share of the step's attempts raising a transcript flag (docs/transcripts.md), "
            "derived when a run is checked; also flagged_rate, repetition_rate and "
            "reward_length_spearman",
            plot="transcripts",
            glob="transcripts/*",
        ),
    ),
]


def plot_members(plot: str) -> tuple[str, ...]:
    """The names (and ``*`` globs of families) a dashboard plot draws, in declaration order."""
    fixed = [m.name for m in METRICS.values() if m.plot == plot]
    globs = [
        spec.glob or re.sub(r"<[^>]+>", "*", spec.name) for _, spec in PATTERNS if spec.plot == plot
    ]
    return tuple(dict.fromkeys([*fixed, *globs]))


def describe(name: str) -> MetricSpec | None:
    """The spec of a canonical name (fixed or patterned), or None for a non-canonical key."""
    spec = METRICS.get(name)
    if spec is not None:
        return spec
    for pattern, pspec in PATTERNS:
        if pattern.match(name):
            return pspec
    return None


def is_canonical(name: str) -> bool:
    """Whether ``name`` belongs to the canonical vocabulary."""
    return describe(name) is not None


def label(name: str) -> str:
    """The short label views show for ``name`` (its own name where none is declared)."""
    spec = METRICS.get(name)
    return spec.label if spec is not None and spec.label else name


def key_metrics() -> tuple[tuple[str, str], ...]:
    """(name, label) of the numbers ``rlvitals watch`` shows, in the declaration's order."""
    return tuple((m.name, m.label) for m in METRICS.values() if m.key)


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _alias_text(a: Alias) -> str:
    t = f"`{_md(a.source)}`"
    if a.scale == -1.0 and a.offset == 1.0:
        t += " (1 − x)"
    return t


def metrics_markdown() -> str:
    """docs/metrics.md, generated from this module's declaration."""
    lines = [
        "# Canonical metrics",
        "",
        "Generated from `src/rlvitals/schema.py` by `python -m rlvitals.schema`; a test keeps",
        "this page equal to the code.",
        "",
        "One vocabulary for every run, whatever framework wrote it. Lowercase, slash-namespaced.",
        "The writer emits these names; each reader maps its framework's keys onto them by",
        "meaning and keeps the original keys too. Where a framework measures a different",
        "quantity (k1 where we want k3, |Δp| where we want |Δlogp|, batch std where we want",
        "within-group std), the reader maps it to the name of what it really is, never to a",
        "look-alike.",
        "",
        "## How a source key finds its name",
        "",
        "Every reader resolves each key through one chain (`readers/keys.py`), and records",
        "which step mapped it (`rlvitals formats --explain FILE` prints it):",
        "",
        "1. **user mapping**: `--mapping FILE` rules, ahead of everything;",
        "2. **table**: the framework's own table (docs/formats.md); a key the table lists as",
        "   not mapped stays under its own name, whatever the steps below would say;",
        "3. **synonym**: the keys other frameworks and peer tools log a metric under (the",
        '   "also read from" column below), exact;',
        "4. **tokens**: the same synonyms after normalising case, separators (`/ . - _`,",
        "   spaces, camelCase), split prefixes (`train/`, `training/`, `actor/`, `policy/`,",
        "   `optim/`...) and mean suffixes (`_mean`, `/mean`, `_avg`): `Train/Reward_Mean`",
        "   reads as `reward/mean`;",
        "5. **canonical**: a key that already is a canonical name (generic JSONL/CSV).",
        "",
        "Tokens are normalised through abbreviations too (`rew`/`rwd` reward, `ent` entropy,",
        "`gn` grad norm, `len` length, `resp` response, `adv` advantage, `acc` accuracy,",
        "`trunc` truncated, `grp` group, plurals such as `lengths`, a whole key `R` the reward),",
        "phrases (`non_stop_rate` is the truncated rate) and word order (`reward_total` is",
        "`total_reward`): `KL_ref`, `Avg Response Len`, `GrpStd` and `Adv Std` find their names.",
        "A split word may come last (`success_rate/train`) or be part of the name",
        "(`loss/total`). A key that says it is a percent (`_pct`, `%`) of a fraction metric, or",
        "of an accuracy or success rate read as the reward, is divided by 100; a time in",
        "milliseconds (`step_time_ms`) is divided by 1,000. A loop's `<what>_reward`,",
        "`<what>_penalty` or `<what>_bonus` that names nothing else (not `episode_reward`,",
        "`kl_penalty`), alone or under split prefixes and a group of parts",
        "(`train/reward_metrics/format_reward`), is one part of its reward:",
        "`reward/component/<name>/mean`.",
        "",
        "Keys of held-out splits (`eval`, `val`, `test`, `validation`, `heldout`, `dev`",
        "prefixes, or named last: `success_rate/eval`, `reward_test`) never fall back to a",
        "training metric: one that names a score (`eval_reward`, `val/acc`, `test/score`,",
        "`acc/val`) reads as `eval/<suite>/score`, the suite from its other segments or the",
        "split's word. A KL-like key that no step maps (a bare `kl`, `kl_div`) stays",
        "unmapped under its own name: which of the three KLs it is cannot be guessed. Names",
        "that look like a metric and are not (a value loss, a coefficient, a return, an",
        "advantage mean, an episode's length, `reward_<what>`, a time of an unnamed part) stay",
        "unmapped too, and `formats --explain` says why.",
        "",
        "Sinks store NaN differently (verl's file logger writes `null`, prime-rl drops the key,",
        'TRL logs `None`, trackio and W&B JSON write `"NaN"`): `null`, `None`, `"NaN"`,',
        '`nan` and `"Infinity"` read as the floats they stand for, and a metric that was a',
        "number and then turns null or vanishes from later records is kept as missing from",
        "that step (`RunData.missing`).",
    ]
    for fam, (title, intro) in FAMILIES.items():
        fixed = [m for m in METRICS.values() if m.family == fam]
        pats = [spec for _, spec in PATTERNS if spec.family == fam]
        if not fixed and not pats:
            continue
        lines += ["", f"## {title}"]
        if intro:
            lines += ["", intro]
        lines += ["", "| name | definition | also read from |", "|---|---|---|"]
        for m in fixed:
            also = ", ".join(_alias_text(a) for a in m.aliases)
            lines.append(f"| `{m.name}` | {_md(m.description)} | {also} |")
        for spec in pats:
            also = "; ".join(
                f"`{_md(a.source)}`" + (f" ({_md(a.note)})" if a.note else "") for a in spec.aliases
            )
            lines.append(f"| `{spec.name}` | {_md(spec.description)} | {also} |")
    lines += [
        "",
        "## What this implementation adds",
        "",
        "- `discard/rollouts/ungraded` and `discard/rollouts/unfinished` (see docs/format.md).",
        "- `response/length_mean` and `response/truncated_rate` count the attempts that",
        "  produced a response (failed and unversioned attempts are left out, so a burst of",
        "  failures does not read as shorter replies).",
        "- Original keys of other frameworks stay under their own names (`rlvitals metrics",
        "  --all`); `rlvitals formats NAME` shows how each maps (docs/formats.md).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - regenerates docs/metrics.md
    import sys

    sys.stdout.write(metrics_markdown())
