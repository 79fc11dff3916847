"""Miles and slime: a rollout log function that writes each rollout's samples as attempts.

    --custom-rollout-log-function-path rlvitals.integrations.miles.log_rollout

Miles calls ``fn(rollout_id, args, samples, rollout_extra_metrics, rollout_time)`` in the
rollout actor after every rollout and skips its own logging when it returns True
(radixark/miles @31f1ca96 ``miles/ray/rollout/metrics.py:72-76``; the flag,
``miles/utils/arguments.py:739-747``); slime does the same
(THUDM/slime @624b824a ``slime/observability/rollout_metrics.py:256-260``). ``log_rollout``
returns False, so their own logging goes on.

Each call is one update of an rlvitals run (the rollout id is the step): every ``Sample``
(``miles/utils/types.py:26-70``) becomes an attempt, its ``group_index`` the group, its
reward (``args.reward_key`` of a dict reward) the reward, the first of ``weight_versions`` the
sampler version, ``rollout_log_probs`` the sampler logprobs, ``status`` truncated / aborted /
failed, ``remove_sample`` a discard, prompt and response the transcript;
``rollout_extra_metrics`` and ``rollout_time`` (``perf/sampling_seconds``) join the step
record. The trainer's own ``train/*`` metrics are not seen here (they live in the training
actors): read them from Miles' TensorBoard or console log beside it.

The run directory is ``$RLVITALS_OUTPUT_DIR/$RLVITALS_RUN_NAME``; by default
``<--dump-details>/rlvitals`` (or ``runs``) and the W&B group or run name (or ``miles``). A
failure here is one warning; it never stops the rollout.
"""

from __future__ import annotations

import atexit
import math
import os
import threading
import warnings
from collections.abc import Mapping
from typing import Any

# The framework decides what trains and when to stop: the writer's own guards and discard
# rules (stale, too many losses) are off, so every sample it trained is recorded as trained.
FRAMEWORK_DECIDES = {
    "training": {"max_steps_off_policy": 1_000_000, "max_consecutive_unusable_groups": 0},
    "rollout": {"max_group_losses": 1_000_000, "max_consecutive_rollout_failures": 0},
}

__all__ = ["close", "log_rollout", "run_for"]

_RUNS: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()
_WARNED: set[str] = set()


class RLVitalsWarning(UserWarning):
    """The rollout log function failed; the rollout goes on."""


def _warn(what: str, exc: BaseException | str) -> None:
    if what in _WARNED:
        return
    _WARNED.add(what)
    detail = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    warnings.warn(f"rlvitals: {what}: {detail}", RLVitalsWarning, stacklevel=3)


def _place(args: Any) -> tuple[str, str]:
    out = os.environ.get("RLVITALS_OUTPUT_DIR")
    if not out:
        dump = getattr(args, "dump_details", None)
        out = os.path.join(str(dump), "rlvitals") if dump else "runs"
    name = os.environ.get("RLVITALS_RUN_NAME")
    if not name:
        for attr in ("wandb_group", "wandb_run_name", "wandb_project"):
            v = getattr(args, attr, None)
            if isinstance(v, str) and v:
                name = v
                break
    return out, name or "miles"


def run_for(args: Any) -> Any:
    """The rlvitals ``Run`` this process writes for ``args`` (made on the first call)."""
    from .. import Run

    key = _place(args)
    with _LOCK:
        run = _RUNS.get(key)
        if run is None or run.closed:
            out, base = key
            for k in range(1, 1000):
                name = base if k == 1 else f"{base}-{k}"
                if not os.path.exists(os.path.join(out, name, "run.json")):
                    break
            cfg = {
                **FRAMEWORK_DECIDES,
                "output": {"output_dir": out, "name": name, "trace": "full"},
            }
            run = Run(cfg, versions={"framework": "miles"}, info={"source": "miles"})
            _RUNS[key] = run
        return run


def close() -> None:
    """Close every run this process writes (also done at exit)."""
    with _LOCK:
        runs = list(_RUNS.values())
        _RUNS.clear()
    for run in runs:
        try:
            if not run.closed:
                run.close("finished")
        except Exception as exc:
            _warn("closing the run", exc)


atexit.register(close)


def _metrics(extra: Any, rollout_time: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    if isinstance(extra, Mapping):
        for k, v in extra.items():
            item = getattr(v, "item", None)
            if callable(item):
                try:
                    v = item()
                except (TypeError, ValueError, RuntimeError):
                    continue
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[str(k)] = float(v)
    if isinstance(rollout_time, (int, float)) and math.isfinite(rollout_time):
        out["perf/sampling_seconds"] = float(rollout_time)
    return out


def log_rollout(
    rollout_id: int, args: Any, samples: Any, rollout_extra_metrics: Any, rollout_time: Any
) -> bool:
    """Miles/slime's custom rollout log function: the rollout's samples as one update of an
    rlvitals run. Returns False, so Miles' own logging goes on."""
    try:
        _log(int(rollout_id), args, samples, rollout_extra_metrics, rollout_time)
    except Exception as exc:  # never break the rollout over our own failure
        _warn("a rollout was not recorded", exc)
    return False


def _log(step: int, args: Any, samples: Any, extra: Any, rollout_time: Any) -> None:
    from ..readers.samples.miles import field, sample_fields

    run = run_for(args)
    if run.last_step is not None and step <= run.last_step:
        _warn(f"rollout {step}", f"update {run.last_step} is already written; skipped")
        return
    reward_key = getattr(args, "reward_key", None)
    for s in _flat(samples):
        f = sample_fields(s, reward_key if isinstance(reward_key, str) else None)
        completion = field(s, "response", "")
        run.log_attempt(
            step,
            f"{step}/{f['group']}",
            f["task_id"],
            f["reward"],
            # without weight versions, a synchronous rollout: the weights of this update
            policy_version=f["policy_version"] if f["policy_version"] is not None else step,
            response_tokens=f["tokens"],
            truncated=f["truncated"],
            metadata={"status": f["status"]},
            sampler_logprobs=f["logprobs"],
            transcript=[
                {
                    "prompt": field(s, "prompt"),
                    "completion": completion,
                    "completion_tokens": f["tokens"],
                    "finish_reason": "length" if f["truncated"] else None,
                }
            ],
            error=f["status"] if f["error"] else None,
            discard_reason="removed" if f["removed"] else None,
        )
    run.log_step(step, metrics=_metrics(extra, rollout_time))


def _flat(samples: Any) -> list[Any]:
    """Samples as a flat list (Miles passes a list; a list of groups is flattened)."""
    out: list[Any] = []
    for s in samples or ():
        if isinstance(s, (list, tuple)):
            out.extend(s)
        else:
            out.append(s)
    return out
