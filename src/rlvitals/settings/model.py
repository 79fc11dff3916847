"""The run's own settings, typed: what the run wrote about how it sampled and trained.

Every field is None until a file the run wrote says it (``origin`` names the file and key it
came from); a field no file says stays None and ``missing()`` lists it: a setting is read,
never guessed. Values are normalised across frameworks: dtypes to ``float32``, ``bfloat16``,
``float16``, ``float8``; ``top_k`` 0 and ``top_p`` 1 are "off"; the importance-sampling
correction to a level (``token`` / ``sequence``), a mode (``truncate`` / ``mask``), its
bounds and, at sequence level, how the tokens' log-ratios are aggregated (``sum`` / ``mean``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FIELD_HELP", "RunSettings", "Setting", "norm_dtype"]


@dataclass(frozen=True)
class Setting:
    """Where one setting was read: the key (its path in the file, dots between levels), the
    file (or ``run.json``, a tracker's run config), and a note (a framework's fixed behaviour
    that the setting implies, with its source)."""

    value: Any
    key: str
    source: str
    note: str = ""


# Field -> what it means (``rlvitals metrics RUN --config`` prints it beside the value).
FIELD_HELP: dict[str, str] = {
    "framework": "the framework whose config this is",
    "framework_version": "its version, where the run recorded it",
    "model": "the policy model (name or path)",
    "temperature": "sampling temperature of the training rollouts",
    "top_p": "nucleus sampling (1: off)",
    "top_k": "top-k sampling (0: off)",
    "min_p": "min-p sampling (0: off)",
    "engine_logprobs": "the engine's log-probs: processed (after top-p/top-k, renormalised) or raw",
    "trainer_dtype": "precision the trainer computes log-probs in",
    "engine_dtype": "precision of the inference engine",
    "epochs_per_batch": "optimisation passes over each batch (num_iterations, ppo_epochs)",
    "loss_agg": "how the loss is aggregated over tokens and sequences",
    "is_correction": "whether the sampler/trainer mismatch is corrected by importance sampling",
    "is_level": "the correction's ratio: per token or per sequence",
    "is_aggregation": "a sequence ratio from its tokens' log-ratios: sum (a product) or mean",
    "is_mode": "ratios past the bounds: truncated or masked",
    "is_cap": "the correction's upper bound",
    "is_cap_min": "the correction's lower bound",
    "is_logged": "the logged ratio: raw, or corrected (after truncation/masking)",
    "kl_coef": "KL-to-reference coefficient (0: no KL term)",
    "max_prompt_length": "longest prompt, tokens",
    "max_response_length": "longest response, tokens",
    "async_lag": "updates the sampler may run behind the trainer (0: on-policy)",
    "multi_turn": "multi-turn episodes (agentic: tool calls, several model turns)",
    "liger": "Liger kernels for the loss",
}


def norm_dtype(value: Any) -> str | None:
    """A dtype as one of float32, bfloat16, float16, float8 (None: not a dtype we know;
    ``auto`` is the model's own and says nothing)."""
    if not isinstance(value, str):
        return None
    v = value.strip().lower().removeprefix("torch.")
    if v in ("fp32", "float32", "float", "32", "32-true"):
        return "float32"
    if v in ("bf16", "bfloat16", "bf16-mixed", "bf16-true"):
        return "bfloat16"
    if v in ("fp16", "float16", "half", "16", "16-mixed"):
        return "float16"
    if v.startswith(("fp8", "float8")):
        return "float8"
    return None


@dataclass
class RunSettings:
    """What the run's own files say about its sampling and training (module docstring)."""

    framework: str | None = None
    framework_version: str | None = None
    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    engine_logprobs: str | None = None
    trainer_dtype: str | None = None
    engine_dtype: str | None = None
    epochs_per_batch: int | None = None
    loss_agg: str | None = None
    is_correction: bool | None = None
    is_level: str | None = None
    is_aggregation: str | None = None
    is_mode: str | None = None
    is_cap: float | None = None
    is_cap_min: float | None = None
    is_logged: str | None = None
    kl_coef: float | None = None
    max_prompt_length: int | None = None
    max_response_length: int | None = None
    async_lag: int | None = None
    multi_turn: bool | None = None
    liger: bool | None = None
    # Where each field came from, the files read, and what could not be read (one line each).
    origin: dict[str, Setting] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    # Package versions the run recorded (a W&B run's requirements.txt, run.json's versions).
    packages: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def set(self, name: str, value: Any, key: str, source: str, note: str = "") -> bool:
        """Set ``name`` from ``key`` of ``source`` unless an earlier file already said it;
        whether it was set."""
        if value is None or self.origin.get(name) is not None:
            return False
        setattr(self, name, value)
        self.origin[name] = Setting(value, key, source, note)
        return True

    def fields(self) -> list[str]:
        return list(FIELD_HELP)

    def missing(self) -> list[str]:
        """The settings no file said."""
        return [f for f in FIELD_HELP if getattr(self, f) is None]

    def truncated_sampling(self) -> dict[str, float]:
        """The truncation of the training rollouts' sampling the run says it used: any of
        ``top_p`` < 1, ``top_k`` > 0, ``min_p`` > 0 (empty: none said)."""
        out: dict[str, float] = {}
        if self.top_p is not None and self.top_p < 1.0:
            out["top_p"] = self.top_p
        if self.top_k is not None and self.top_k > 0:
            out["top_k"] = float(self.top_k)
        if self.min_p is not None and self.min_p > 0.0:
            out["min_p"] = self.min_p
        return out

    def dtype_pair(self) -> tuple[str, str] | None:
        """(trainer, engine) where both are said."""
        if self.trainer_dtype and self.engine_dtype:
            return self.trainer_dtype, self.engine_dtype
        return None

    def to_dict(self) -> dict[str, Any]:
        """Every field (None where not said) with its origin, for ``--json``."""
        out: dict[str, Any] = {}
        for name in FIELD_HELP:
            value = getattr(self, name)
            if isinstance(value, float) and not math.isfinite(value):
                value = None
            o = self.origin.get(name)
            out[name] = {
                "value": value,
                **({"key": o.key, "source": o.source} if o else {}),
                **({"note": o.note} if o and o.note else {}),
            }
        return {"settings": out, "files": list(self.files), "problems": list(self.problems)}

    def copy(self) -> RunSettings:
        return dataclasses.replace(
            self,
            origin=dict(self.origin),
            files=list(self.files),
            problems=list(self.problems),
            packages=dict(self.packages),
        )
