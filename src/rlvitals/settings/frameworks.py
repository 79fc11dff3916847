"""Each framework's config, read into ``RunSettings``: where it keeps each setting.

A config is taken flat (nested keys joined with dots). A framework is told by keys only it
writes (``detect``); its reader then takes each setting from the first key path present,
normalised (``model.py``). Key paths and defaults are the framework's own, with the file that
defines them beside each reader:

- verl: the Hydra config (``verl/trainer/config/_generated_ppo_trainer.yaml`` @01d4d766, the
  composed ``ppo_trainer.yaml``), as Hydra writes it to ``.hydra/config.yaml`` and as
  ``verl/trainer/main_ppo.py`` prints it resolved (``pprint`` of the config at start).
- TRL: ``GRPOConfig`` (``trl/trainer/grpo_config.py`` @f2cd5771), as HF Trainer saves it
  (``training_args.bin``, ``torch.save(self.args)``) and logs it to W&B (``args.to_dict()``).
- OpenRLHF: ``train_ppo_ray.py``'s arguments, flat (before 2026) or dotted
  (``--rollout.top_p``, @3c3be623), as ``openrlhf/utils/logging_utils.py:70-75`` logs them to
  W&B (``config=args.__dict__``).
- prime-rl: the resolved sub-configs ``rl.py`` writes to ``<output_dir>/configs/``
  (``trainer.toml``, ``orchestrator.toml``, ``inference.toml``; ``write_subconfigs``,
  ``src/prime_rl/entrypoints/rl.py`` @004274ec), and ``rl.toml`` with the three as sections.
- NeMo-RL: the resolved ``MasterConfig`` ``CheckpointManager`` writes to each checkpoint's
  ``config.yaml`` (``nemo_rl/utils/checkpoint.py:284-285`` @7ea279ab), and the example YAMLs.
- rlvitals: ``run.json``'s config (the reference trainer's ``[model]``, ``[engine]``,
  ``[correction]``, ``[optim]`` sections beside the writer's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from .model import RunSettings, norm_dtype

__all__ = ["FRAMEWORKS", "apply", "detect"]

Flat = Mapping[str, Any]


def _first(flat: Flat, *paths: str) -> tuple[str, Any] | None:
    """The first of ``paths`` present with a value (None values skipped)."""
    for p in paths:
        if p in flat and flat[p] is not None:
            return p, flat[p]
    return None


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(float(v)) else None
    if isinstance(v, str):
        try:
            f = float(v)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _int(v: Any) -> int | None:
    f = _num(v)
    return int(f) if f is not None and f == int(f) else None


def _bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    return None


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v and not v.startswith("${") else None


def _top_k(v: Any) -> int | None:
    """top_k with every "off" spelling (-1 for vLLM, 0 for HF, None) as 0."""
    if v is None:
        return None
    k = _int(v)
    return None if k is None else max(k, 0)


class _Take:
    """Sets fields of ``s`` from ``flat`` (one file), recording the key and the file."""

    def __init__(self, s: RunSettings, flat: Flat, source: str) -> None:
        self.s, self.flat, self.source = s, flat, source

    def __call__(
        self,
        name: str,
        paths: tuple[str, ...] | str,
        conv: Callable[[Any], Any],
        note: str = "",
    ) -> Any:
        got = _first(self.flat, *((paths,) if isinstance(paths, str) else paths))
        if got is None:
            return None
        value = conv(got[1])
        if value is not None:
            self.s.set(name, value, got[0], self.source, note)
        return value

    def fixed(self, name: str, value: Any, key: str, note: str) -> None:
        """A setting the framework fixes in code, implied by ``key`` (``note`` says where)."""
        self.s.set(name, value, key, self.source, note)


# -- verl ------------------------------------------------------------------------------------


def _verl(t: _Take) -> None:
    a, r = "actor_rollout_ref.actor.", "actor_rollout_ref.rollout."
    t("model", "actor_rollout_ref.model.path", _text)
    t("temperature", r + "temperature", _num)
    t("top_p", r + "top_p", _num)
    t("top_k", r + "top_k", _top_k)
    t("engine_logprobs", r + "logprobs_mode", _logprobs_mode)
    t("engine_dtype", r + "dtype", norm_dtype)
    t(
        "trainer_dtype",
        (a + "fsdp_config.dtype", a + "fsdp_config.mixed_precision.param_dtype"),
        norm_dtype,
    )
    t("epochs_per_batch", a + "ppo_epochs", _int)
    t("loss_agg", a + "loss_agg_mode", _text)
    t("liger", "actor_rollout_ref.model.use_liger", _bool)
    t("multi_turn", r + "multi_turn.enable", _bool)
    t("max_prompt_length", "data.max_prompt_length", _int)
    t("max_response_length", "data.max_response_length", _int)
    # KL: a loss term (actor.use_kl_loss, kl_loss_coef) or a reward penalty
    # (algorithm.use_kl_in_reward, kl_ctrl.kl_coef); off when neither is used.
    loss_on = _bool(t.flat.get(a + "use_kl_loss"))
    reward_on = _bool(t.flat.get("algorithm.use_kl_in_reward"))
    if loss_on:
        t("kl_coef", a + "kl_loss_coef", _num)
    elif reward_on:
        t("kl_coef", "algorithm.kl_ctrl.kl_coef", _num)
    elif loss_on is False and reward_on is False:
        t.fixed("kl_coef", 0.0, a + "use_kl_loss", "use_kl_loss and use_kl_in_reward both false")
    # Rollout correction (algorithm.rollout_correction): rollout_is null = off, "token" or
    # "sequence"; the sequence weight is the product of the token ratios
    # (rollout_corr_helper.py compute_rollout_correction_weights @20c30bf8); a threshold
    # "lower_upper" masks (IcePop), a single number truncates (TIS).
    rc = "algorithm.rollout_correction."
    if rc + "rollout_is" in t.flat:
        level = t.flat[rc + "rollout_is"]
        if level in (None, "", False):
            t.fixed("is_correction", False, rc + "rollout_is", "rollout_is: null")
        elif level in ("token", "sequence"):
            t.fixed("is_correction", True, rc + "rollout_is", "")
            t.fixed("is_level", level, rc + "rollout_is", "")
            if level == "sequence":
                t.fixed(
                    "is_aggregation",
                    "sum",
                    rc + "rollout_is",
                    "verl's sequence weight is the product of its tokens' ratios "
                    "(rollout_corr_helper.py, exp(sum of log-ratios))",
                )
            thr = t.flat.get(rc + "rollout_is_threshold")
            if isinstance(thr, str) and "_" in thr:
                lo, _, hi = thr.partition("_")
                t.fixed("is_mode", "mask", rc + "rollout_is_threshold", "lower_upper: IcePop")
                t.fixed("is_cap", _num(hi), rc + "rollout_is_threshold", "")
                t.fixed("is_cap_min", _num(lo), rc + "rollout_is_threshold", "")
            else:
                t.fixed("is_mode", "truncate", rc + "rollout_is_threshold", "one bound: TIS")
                t("is_cap", rc + "rollout_is_threshold", _num)


def _logprobs_mode(v: Any) -> str | None:
    if not isinstance(v, str):
        return None
    return "processed" if v.startswith("processed") else "raw" if v.startswith("raw") else None


# -- TRL -------------------------------------------------------------------------------------


def _trl(t: _Take) -> None:
    f = t.flat
    t("model", ("model_name_or_path", "_name_or_path", "model_name"), _text)
    t("temperature", "temperature", _num)
    t("top_p", "top_p", _num)
    t("top_k", "top_k", _top_k)
    t("min_p", "min_p", _num)
    if "min_p" in f and f["min_p"] is None:
        t.fixed("min_p", 0.0, "min_p", "None: off")
    t("epochs_per_batch", "num_iterations", _int)
    t("loss_agg", "loss_type", _text)
    t("kl_coef", "beta", _num)
    t("max_prompt_length", "max_prompt_length", _int)
    t("max_response_length", "max_completion_length", _int)
    t("liger", "use_liger_kernel", _bool)
    # The trainer's precision: the mixed-precision flag (bf16/fp16), else the model's own
    # dtype where the W&B config carries it (model.config.to_dict() merged in by
    # transformers' WandbCallback).
    if _bool(f.get("bf16")):
        t.fixed("trainer_dtype", "bfloat16", "bf16", "mixed precision on")
    elif _bool(f.get("fp16")):
        t.fixed("trainer_dtype", "float16", "fp16", "mixed precision on")
    elif _bool(f.get("bf16")) is False and _bool(f.get("fp16")) is False:
        got = _first(
            f, "dtype", "torch_dtype", "model_init_kwargs.dtype", "model_init_kwargs.torch_dtype"
        )
        d = norm_dtype(got[1]) if got else None
        if got and d:
            t.fixed("trainer_dtype", d, got[0], "bf16 and fp16 off: the model's own dtype")
    # vLLM importance-sampling correction (grpo_config.py: vllm_importance_sampling_*;
    # grpo_trainer.py:2579-2624): on only with use_vllm; a mode "<level>_<truncate|mask>";
    # a sequence ratio is exp(sum of the tokens' log-ratios) (grpo_trainer.py:2585).
    if _bool(f.get("use_vllm")) is False:
        t.fixed("is_correction", False, "use_vllm", "no vLLM: no sampler to correct")
    else:
        on = t("is_correction", "vllm_importance_sampling_correction", _bool)
        mode = f.get("vllm_importance_sampling_mode")
        if on and isinstance(mode, str) and "_" in mode:
            level, _, how = mode.partition("_")
            t.fixed("is_level", level, "vllm_importance_sampling_mode", "")
            t.fixed("is_mode", how, "vllm_importance_sampling_mode", "")
            if level == "sequence":
                t.fixed(
                    "is_aggregation",
                    "sum",
                    "vllm_importance_sampling_mode",
                    "TRL sums the tokens' log-ratios (grpo_trainer.py:2585; PR #5815 closed)",
                )
        elif on and mode is None and "vllm_importance_sampling_cap" in f:
            t.fixed("is_level", "token", "vllm_importance_sampling_cap", "before modes (< 0.26)")
            t.fixed("is_mode", "truncate", "vllm_importance_sampling_cap", "before modes")
        if on:
            t("is_cap", ("vllm_importance_sampling_clip_max", "vllm_importance_sampling_cap"), _num)
            t("is_cap_min", "vllm_importance_sampling_clip_min", _num)
            t.fixed(
                "is_logged",
                "corrected",
                "vllm_importance_sampling_correction",
                "sampling/importance_sampling_ratio/* are computed after truncation or "
                "masking (grpo_trainer.py:2790-2812; trl #5231)",
            )


# -- OpenRLHF --------------------------------------------------------------------------------


def _openrlhf(t: _Take) -> None:
    t("model", ("actor.model_name_or_path", "pretrain"), _text)
    t("temperature", ("rollout.temperature", "temperature"), _num)
    t("top_p", ("rollout.top_p", "top_p"), _num)
    t("top_k", ("rollout.top_k", "top_k"), _top_k)
    t("trainer_dtype", "ds.param_dtype", norm_dtype)
    if _bool(t.flat.get("bf16")):
        t.fixed("trainer_dtype", "bfloat16", "bf16", "DeepSpeed bf16")
    t("epochs_per_batch", ("train.max_epochs", "max_epochs"), _int)
    t("kl_coef", ("algo.kl.init_coef", "init_kl_coef"), _num)
    t("max_prompt_length", ("data.max_prompt_len", "prompt_max_len"), _int)
    t("max_response_length", ("rollout.max_new_tokens", "generate_max_len"), _int)
    t("liger", ("ds.use_liger_kernel", "use_liger_kernel"), _bool)
    async_on = _first(t.flat, "train.async_enable", "async_train")
    if async_on is not None and _bool(async_on[1]) is False:
        t.fixed("async_lag", 0, async_on[0], "synchronous training")
    # vLLM IS correction (train_ppo_ray.py:257-270): tis (token clamp), icepop (token mask),
    # seq-mask-tis (sequence, geometric mean); its logprobs are vLLM's processed ones
    # (train_ppo_ray.py:78).
    on = t(
        "is_correction", ("algo.advantage.is_correction_enable", "enable_vllm_is_correction"), _bool
    )
    if on:
        t.fixed(
            "engine_logprobs",
            "processed",
            "algo.advantage.is_correction_enable",
            "processed_logprobs when the correction is on (train_ppo_ray.py:78)",
        )
        kind = _first(t.flat, "algo.advantage.is_correction_type")
        kinds = {
            "tis": ("token", "truncate"),
            "icepop": ("token", "mask"),
            "seq-mask-tis": ("sequence", "mask"),
        }
        if kind and kind[1] in kinds:
            level, how = kinds[kind[1]]
            t.fixed("is_level", level, kind[0], "")
            t.fixed("is_mode", how, kind[0], "")
            if level == "sequence":
                t.fixed("is_aggregation", "mean", kind[0], "geometric mean (train_ppo_ray.py:270)")
        thr = _first(
            t.flat, "algo.advantage.is_correction_threshold", "vllm_is_truncated_threshold"
        )
        if thr is not None and isinstance(thr[1], list) and len(thr[1]) == 2:
            t.fixed("is_cap_min", _num(thr[1][0]), thr[0], "[low, high] (train_ppo_ray.py:258-263)")
            t.fixed("is_cap", _num(thr[1][1]), thr[0], "[low, high]")
        elif thr is not None:
            t("is_cap", thr[0], _num)


# -- prime-rl --------------------------------------------------------------------------------


def _primerl(t: _Take) -> None:
    o = "orchestrator."
    t("model", ("model.name", o + "model.name", "trainer.model.name"), _text)
    t("temperature", (o + "train.sampling.temperature", o + "sampling.temperature"), _num)
    # The training sampling args fix top_p at 1.0 (TrainSamplingConfig.to_sampling_args,
    # configs/orchestrator.py @559b4477); top_k/min_p only through extra_body.
    if _first(t.flat, o + "train.sampling.temperature") is not None:
        t.fixed(
            "top_p", 1.0, o + "train.sampling", "prime-rl samples training rollouts at top_p 1.0"
        )
    t("top_k", (o + "train.sampling.extra_body.top_k", o + "sampling.extra_body.top_k"), _top_k)
    t("min_p", (o + "train.sampling.extra_body.min_p", o + "sampling.extra_body.min_p"), _num)
    t(
        "max_response_length",
        (o + "train.sampling.max_completion_tokens", o + "sampling.max_tokens"),
        _int,
    )
    t("async_lag", (o + "max_off_policy_steps", o + "max_async_level", o + "async_level"), _int)
    t("trainer_dtype", ("trainer.model.optimization_dtype",), norm_dtype)
    t("engine_dtype", ("inference.vllm.dtype", "inference.model.dtype"), norm_dtype)


# -- NeMo-RL ---------------------------------------------------------------------------------


def _nemorl(t: _Take) -> None:
    g, lf = "policy.generation.", "loss_fn."
    t("model", "policy.model_name", _text)
    t("temperature", g + "temperature", _num)
    t("top_p", g + "top_p", _num)
    t("top_k", g + "top_k", _top_k)
    if g + "top_k" in t.flat and t.flat[g + "top_k"] is None:
        t.fixed("top_k", 0, g + "top_k", "null: off")
    t("trainer_dtype", "policy.precision", norm_dtype)
    t("engine_dtype", g + "vllm_cfg.precision", norm_dtype)
    t("epochs_per_batch", "grpo.max_num_epochs", _int)
    t("kl_coef", lf + "reference_policy_kl_penalty", _num)
    t("max_response_length", g + "max_new_tokens", _int)
    tl = _bool(t.flat.get(lf + "token_level_loss"))
    if tl is not None:
        t.fixed("loss_agg", "token-mean" if tl else "seq-mean", lf + "token_level_loss", "")
    a = _bool(t.flat.get("grpo.async_grpo.enabled"))
    if a is False:
        t.fixed("async_lag", 0, "grpo.async_grpo.enabled", "synchronous GRPO")
    elif a:
        t("async_lag", "grpo.async_grpo.max_trajectory_age_steps", _int)
    on = t("is_correction", lf + "use_importance_sampling_correction", _bool)
    if on:
        seq = _bool(t.flat.get(lf + "sequence_level_importance_ratios"))
        if seq is not None:
            t.fixed(
                "is_level",
                "sequence" if seq else "token",
                lf + "sequence_level_importance_ratios",
                "",
            )
            if seq:
                t.fixed(
                    "is_aggregation",
                    "sum",
                    lf + "sequence_level_importance_ratios",
                    "exp(sum) weight (NVIDIA-NeMo/RL PR #2269)",
                )
        kind = t.flat.get(lf + "truncated_importance_sampling_type")
        if kind is None and lf + "truncated_importance_sampling_type" in t.flat:
            t.fixed("is_mode", "none", lf + "truncated_importance_sampling_type", "no bound")
        elif isinstance(kind, str):
            t.fixed(
                "is_mode",
                "truncate" if kind == "tis" else "mask",
                lf + "truncated_importance_sampling_type",
                kind,
            )
        t("is_cap", lf + "truncated_importance_sampling_ratio", _num)
        t("is_cap_min", lf + "truncated_importance_sampling_ratio_min", _num)


# -- rlvitals (run.json) ---------------------------------------------------------------------


def _rlvitals(t: _Take) -> None:
    f = t.flat
    t("temperature", "task.temperature", _num)
    t("top_p", "engine.top_p", _num)
    t("top_k", "engine.top_k", _top_k)
    t("max_response_length", "task.max_new_tokens", _int)
    turns = _int(f.get("task.max_turns"))
    if turns is not None:
        t.fixed("multi_turn", turns > 1, "task.max_turns", "tool lookups take a turn each")
    got = _first(f, "engine.dtype")
    if got is not None and norm_dtype(got[1]):
        t("engine_dtype", "engine.dtype", norm_dtype)
    else:
        t("engine_dtype", "model.sampler_dtype", norm_dtype)
    if "model.sampler_dtype" in f:  # the reference trainer's: it recomputes in float32
        t.fixed(
            "trainer_dtype", "float32", "model", "rlvitals.grpo's trainer is float32 (trainer.py)"
        )
        t.fixed(
            "engine_logprobs",
            "processed",
            "engine",
            "the sampler's log-probs are of its "
            "own (truncated, renormalised) distribution (sampler.py)",
        )
        t.fixed("kl_coef", 0.0, "model", "rlvitals.grpo has no KL term (trainer.py)")
        t.fixed("loss_agg", "token-mean", "model", "token-level mean (trainer.py)")
    mode = f.get("training.mode")
    if mode == "sync":
        t.fixed("async_lag", 0, "training.mode", "sync")
    elif mode == "async":
        t("async_lag", "optim.async_lead", _int)
    c = f.get("correction.mode")
    if isinstance(c, str):
        if c == "none":
            t.fixed("is_correction", False, "correction.mode", "")
        elif "_" in c:
            level, _, how = c.partition("_")
            t.fixed("is_correction", True, "correction.mode", "")
            t.fixed("is_level", level, "correction.mode", "")
            t.fixed("is_mode", how, "correction.mode", "")
            if level == "sequence":
                t("is_aggregation", "correction.aggregation", _text)
            t("is_cap", "correction.clip_max", _num)
            t("is_cap_min", "correction.clip_min", lambda v: _num(v) if _num(v) else None)
            t("is_logged", "correction.log", _text)


# Framework -> (keys only it writes, its reader). ``detect`` takes the first whose marker is
# present; ``generic`` reads only what any config names plainly.
FRAMEWORKS: dict[str, tuple[tuple[str, ...], Callable[[_Take], None]]] = {
    "verl": (("actor_rollout_ref.",), _verl),
    "nemo-rl": (("loss_fn.", "policy.generation."), _nemorl),
    "prime-rl": (("orchestrator.", "trainer.loss.", "inference.vllm."), _primerl),
    "openrlhf": (("algo.kl.init_coef", "init_kl_coef", "n_samples_per_prompt"), _openrlhf),
    "trl": (("num_generations", "vllm_importance_sampling_correction", "num_iterations"), _trl),
    "rlvitals": (("rollout.max_group_losses", "training.max_steps_off_policy"), _rlvitals),
}


def detect(flat: Flat) -> str | None:
    """The framework whose config ``flat`` is, from keys only it writes; None: unknown."""
    for name, (markers, _fn) in FRAMEWORKS.items():
        for m in markers:
            if m.endswith(".") and any(k.startswith(m) for k in flat):
                return name
            if not m.endswith(".") and m in flat:
                return name
    return None


def apply(s: RunSettings, flat: Flat, source: str, framework: str | None = None) -> str | None:
    """Read ``flat`` (one file's config) into ``s``; the framework it was read as (None:
    not one we know, nothing read)."""
    name = framework or detect(flat)
    if name is None or name not in FRAMEWORKS:
        return None
    FRAMEWORKS[name][1](_Take(s, flat, source))
    s.set("framework", name, "(keys)", source)
    return name
