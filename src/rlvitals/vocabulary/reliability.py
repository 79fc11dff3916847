"""Numbers you can trust: what each framework's keys mean, and where they are known to mislead.

Data only: one row per fact, by framework and version range, each with the issue or pull
request (or the framework file) that establishes it. Kinds:

- ``unit``: what the number is (probabilities, not log-probs; a sum, not a mean);
- ``normalisation``: what it is averaged over (per token, per sequence, per a flag);
- ``structural_zero``: zero (or absent) by construction under a setting, not a signal;
- ``post_correction``: logged after a correction's truncation or masking;
- ``defect``: known wrong in those versions;
- ``removed``: dropped by that version (a dashboard built on it breaks);
- ``skipped_update``: an update the framework skips by design (not a lack of signal).

A finding that rests on a key a row matches (its framework, its version where the run records
one, its condition on the run's settings) is ``qualified`` (it says the fact beside it) or
``withheld`` (made information, with the reason): ``checks/reliability.py``. The table in
``docs/reliability.md`` is generated from these rows (``python -m
rlvitals.vocabulary.reliability > docs/reliability.md``; a test keeps the two equal).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model import RunData
    from ..settings import RunSettings

__all__ = ["FACTS", "KINDS", "KeyFact", "framework_of", "key_facts", "markdown", "version_in"]

KINDS = (
    "unit",
    "normalisation",
    "structural_zero",
    "post_correction",
    "defect",
    "removed",
    "skipped_update",
)


@dataclass(frozen=True)
class KeyFact:
    """One fact about a framework's key (module docstring).

    ``key`` is the key as the framework logs it, a glob (``*`` within a path); ``versions`` a
    range (``>=0.23,<0.29``; ``*``: every version); ``when`` a condition on the run's settings
    (``liger``, ``is_level=sequence``, ``kl_coef=0``, ``epochs_per_batch=1``; empty: always);
    ``effect`` what a finding resting on the key gets: ``qualify`` or ``withhold``.
    """

    framework: str
    key: str
    kind: str
    versions: str
    says: str
    effect: str
    source: str
    when: str = ""


FACTS: tuple[KeyFact, ...] = (
    KeyFact(
        "trl",
        "sampling/importance_sampling_ratio/*",
        "post_correction",
        ">=0.23",
        "computed after the vLLM correction's truncation or masking: min 0 where masked, max "
        "at most the cap; it cannot show the mismatch past the bounds",
        "qualify",
        "huggingface/trl #5231 (open 2026-07-24); grpo_trainer.py:2790-2812 @f2cd5771",
    ),
    KeyFact(
        "trl",
        "sampling/importance_sampling_ratio/*",
        "unit",
        ">=0.26",
        "in the sequence_* modes one weight per sequence, exp(sum of its tokens' log-ratios): "
        "it scales with the completion's length",
        "qualify",
        "huggingface/trl PR #5815 (closed), #4772; grpo_trainer.py:2585 @f2cd5771",
        "is_level=sequence",
    ),
    KeyFact(
        "trl",
        "sampling/importance_sampling_ratio/*",
        "defect",
        ">=0.23,<0.29",
        "with use_liger_kernel the correction is computed and logged but the Liger loss "
        "ignores it (~100x grad_norm)",
        "qualify",
        "linkedin/Liger-Kernel PR #1088, huggingface/trl PR #5031 (first in 0.29.0)",
        "liger",
    ),
    KeyFact(
        "trl",
        "kl",
        "structural_zero",
        "*",
        "logged only when beta != 0: with beta 0 the policy is not held to the reference",
        "withhold",
        "huggingface/trl grpo_trainer.py:3071-3076 @f2cd5771 (the KL term only with beta)",
        "kl_coef=0",
    ),
    KeyFact(
        "trl",
        "clip_ratio/*",
        "structural_zero",
        "*",
        "0 by construction with one iteration per batch: the ratio is exactly 1 on-policy",
        "withhold",
        "huggingface/trl grpo_trainer.py @f2cd5771 (old log-probs are the current ones when "
        "num_iterations is 1)",
        "epochs_per_batch=1",
    ),
    KeyFact(
        "trl",
        "reward_std",
        "normalisation",
        "*",
        "the whole batch's std, not the spread within groups",
        "qualify",
        "huggingface/trl docs/source/grpo_trainer.md:186; grpo_trainer.py:2749 @f2cd5771",
    ),
    KeyFact(
        "verl",
        "response_length/clip_ratio",
        "defect",
        "*",
        "on the V1 engine it can never read 0, and reads 0 when max_model_len binds first",
        "qualify",
        "verl-project/verl #7821, #7823",
    ),
    KeyFact(
        "verl",
        "training/rollout_probs_diff_*",
        "unit",
        "*",
        "|Δ| of probabilities, not of log-probs (despite the name)",
        "qualify",
        "verl/utils/debug/metrics.py:98-110 @b178a3cd",
    ),
    KeyFact(
        "verl",
        "actor/pg_clipfrac_lower",
        "unit",
        "*",
        "the dual-clip fraction (A < 0 with the ratio past clip_ratio_c), not lower-side clipping",
        "qualify",
        "verl/trainer/ppo/core_algos.py:1160-1249 @b178a3cd",
    ),
    KeyFact(
        "verl",
        "rollout_corr/rollout_is_max",
        "post_correction",
        "*",
        "per token: the largest weight after truncation (at most the threshold); per "
        "sequence: the raw largest",
        "qualify",
        "verl/trainer/ppo/rollout_corr_helper.py compute_is_metrics @20c30bf8",
    ),
    KeyFact(
        "nemo-rl",
        "*token_mult_prob_error",
        "normalisation",
        "*",
        "token-normalised always (as probs_ratio, gen_kl_error, policy_kl_error, "
        "js_divergence_error, approx_entropy); loss and kl_penalty follow token_level_loss: "
        "never averaged across the two classes",
        "qualify",
        "NVIDIA-NeMo/RL docs/guides/grpo.md (normalisation table)",
    ),
    KeyFact(
        "nemo-rl",
        "*seq_logprob_error_valid_*",
        "unit",
        "*",
        "counts of tokens and sequences, not normalised: they grow with the batch",
        "qualify",
        "NVIDIA-NeMo/RL PR #4171",
    ),
    KeyFact(
        "prime-rl",
        "*inference_probs*",
        "removed",
        "*",
        "removed with trainer_probs*, off_policy_level min, is_truncated min, non-mean entropy "
        "and non-{mean,max} mismatch_kl / is_masked: gone by design, not a broken logger",
        "withhold",
        "PrimeIntellect-ai/prime-rl PR #2163 (2026-04-01)",
    ),
    KeyFact(
        "prime-rl",
        "*trainer_probs*",
        "removed",
        "*",
        "removed by prime-rl PR #2163 with the other inference/trainer probability keys",
        "withhold",
        "PrimeIntellect-ai/prime-rl PR #2163 (2026-04-01)",
    ),
    KeyFact(
        "miles",
        "train/entropy_loss",
        "structural_zero",
        "*",
        "0.0 unless entropy_coef != 0 or --observe-training-entropy",
        "withhold",
        "radixark/miles miles/backends/training_utils/loss_hub/losses.py:303-312 @31f1ca96",
    ),
    KeyFact(
        "miles",
        "train/train_rollout_*",
        "structural_zero",
        "*",
        "identically 0 with --use-rollout-logprobs (the old log-probs are the rollout's)",
        "qualify",
        "radixark/miles miles/backends/training_utils/loss_hub/losses.py:133-136 @31f1ca96",
    ),
    KeyFact(
        "miles",
        "rollout/zero_std/all_*_percentage",
        "defect",
        "*",
        "looks up float buckets only: with integer rewards it stays 0 while count_0 is not",
        "withhold",
        "radixark/miles PR #3216 (its log: count_0 8, all_zero_percentage 0.0); "
        "miles/ray/rollout/metrics.py:171-196",
    ),
    KeyFact(
        "tinker",
        "env/all/stop/*",
        "normalisation",
        "*",
        "averaged only over the transitions that carry the key: reads about 1.0, not a rate",
        "withhold",
        "thinking-machines-lab/tinker-cookbook tinker_cookbook/utils/misc_utils.py:57-72",
    ),
    KeyFact(
        "tinker",
        "optim/entropy",
        "unit",
        "*",
        "the negative log-likelihood of the sampled tokens, not the distribution's entropy",
        "qualify",
        "thinking-machines-lab/tinker-cookbook tinker_cookbook/rl/metrics.py:18-68",
    ),
    KeyFact(
        "openrlhf",
        "vllm_kl",
        "unit",
        "*",
        "k1 (a mean of log-ratios): it can be negative and is not a KL's size",
        "qualify",
        "OpenRLHF openrlhf/models/loss.py:196-229 @3c3be623",
    ),
    KeyFact(
        "art",
        "data/step_num_groups_trainable",
        "skipped_update",
        ">=0.5.21",
        "0 trainable groups: the update is skipped by design (zero-variance GRPO groups), "
        "not a lack of signal",
        "qualify",
        "OpenPipe/ART release v0.5.21 (#1118)",
    ),
    KeyFact(
        "open-instruct",
        "grad_norm",
        "skipped_update",
        "*",
        "a non-finite gradient norm is logged as is and its step skipped: an isolated one is "
        "not a broken run",
        "withhold",
        "allenai/open-instruct PR #1540",
    ),
    KeyFact(
        "verl-omni",
        "actor/grad_norm",
        "skipped_update",
        "*",
        'a non-finite step is skipped by design ("an occasional isolated non-finite step is '
        'normal"); only a streak aborts',
        "withhold",
        "verl-project/verl-omni PR #539",
    ),
)


# A reader's format -> the framework whose key table it reads (others: their own name).
_FORMATS = {"primerl": "prime-rl", "slime": "miles", "trl-notebook": "trl"}


def framework_of(data: RunData) -> str | None:
    """The framework whose keys ``data`` holds: its settings' (a config says it), else the
    reader's format."""
    s = data.settings
    if s is not None and s.framework:
        return s.framework
    return _FORMATS.get(data.format, data.format) if data.format else None


def _version_tuple(text: str) -> tuple[int, ...] | None:
    out: list[int] = []
    for part in text.strip().split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        if digits == "":
            break
        out.append(int(digits))
    return tuple(out) if out else None


def version_in(version: str | None, spec: str) -> bool | None:
    """Whether ``version`` is in ``spec`` (``>=0.23,<0.29``, ``*``); None where the version
    is unknown or unreadable and the spec is not ``*``."""
    if spec.strip() == "*":
        return True
    v = _version_tuple(version) if version else None
    if v is None:
        return None
    for cond in spec.split(","):
        cond = cond.strip()
        op = cond[:2] if cond[:2] in (">=", "<=", "==") else cond[:1]
        bound = _version_tuple(cond[len(op) :])
        if bound is None:
            return None
        ok = {
            ">=": v >= bound,
            "<=": v <= bound,
            "==": v == bound,
            ">": v > bound,
            "<": v < bound,
        }.get(op)
        if not ok:
            return False
    return True


def _holds(when: str, s: RunSettings | None) -> bool | None:
    """Whether the run's settings meet ``when`` (None: the settings do not say)."""
    if not when:
        return True
    if s is None:
        return None
    name, _, want = when.partition("=")
    got: Any = getattr(s, name, None)
    if got is None:
        return None
    if not want:
        return bool(got)
    try:
        return float(got) == float(want)
    except (TypeError, ValueError):
        return str(got) == want


def key_facts(data: RunData, source_key: str) -> list[KeyFact]:
    """The facts about ``source_key`` for ``data``'s framework whose version range and
    condition the run meets or does not say (a version or setting the run does not record
    is not held against a fact)."""
    fw = framework_of(data)
    if fw is None:
        return []
    s = data.settings
    version = s.framework_version if s is not None else None
    out = []
    for f in FACTS:
        if f.framework != fw or not fnmatch.fnmatchcase(source_key, f.key):
            continue
        if version_in(version, f.versions) is False or _holds(f.when, s) is False:
            continue
        out.append(f)
    return out


def markdown() -> str:
    """docs/reliability.md: the table, grouped by framework."""
    lines = [
        "# Numbers you can trust",
        "",
        "Generated from `src/rlvitals/vocabulary/reliability.py` by `python -m "
        "rlvitals.vocabulary.reliability`; a test keeps this file and the table equal.",
        "",
        "What each framework's keys mean and where they are known to mislead, by version, "
        "each with its source. A finding that rests on a key a row matches (its framework, "
        "its version where the run records one, its condition on the run's settings, read "
        "by `rlvitals metrics RUN --config`) says the fact beside it (*qualify*) or is made "
        "information with the reason (*withhold*).",
        "",
        "| framework | key | kind | versions | when | what it means | effect | source |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in FACTS:
        cells = [
            f.framework,
            f"`{f.key}`",
            f.kind,
            f.versions,
            f.when or "-",
            f.says,
            f.effect,
            f.source,
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - regenerates docs/reliability.md
    print(markdown(), end="")
