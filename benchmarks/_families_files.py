"""The families' runs as their frameworks log them: records in TRL's, verl's or rlvitals' own key
names (``RECORDS``), and the files they write (``write_files``: a TRL ``trainer_state.json``, a
verl console log under Ray, an rlvitals run directory with, for some families, its replies).
``_families.py`` is the API."""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path
from typing import Any

import numpy as np


def trl_record(v: dict[str, float], have: frozenset[str], prm: dict[str, Any]) -> dict[str, float]:
    rec: dict[str, float] = {}
    if "grad_norm" in have:
        rec["loss"] = v["loss"]
        rec["grad_norm"] = v["grad"]
        rec["learning_rate"] = prm["lr"]
    rec["reward"] = v["reward"]
    if "components" in have and "comp/format" in v:
        rec["rewards/correctness_reward/mean"] = v["comp/correctness"]
        rec["rewards/format_reward/mean"] = v["comp/format"]
    elif have != {"reward"}:
        rec["rewards/accuracy_reward/mean"] = v["reward"]
    if have == {"reward"}:
        return rec
    rec["reward_std"] = v["reward_std"]
    if "ref_kl" in have and prm["beta"] > 0:
        rec["kl"] = v["ref_kl"]
    if "length" in have:
        key = "completions/mean_length" if "truncation" in have else "completion_length"
        rec[key] = v["length"]
    if "truncation" in have:
        rec["completions/clipped_ratio"] = v["trunc"]
    if "groups" in have:
        rec["frac_reward_zero_std"] = v["zero_std"]
    if "entropy" in have:
        rec["entropy"] = v["entropy"]
    if "clip" in have:
        rec["clip_ratio/region_mean"] = v["clip"] if prm["iterations"] > 1 else 0.0
    if "mismatch" in have and prm["vllm"]:
        # mean |old - vLLM logp| ~ 0.57 sqrt(k3) (Miles' seed: k3 7e-4, |d| 0.015)
        rec["sampling/sampling_logp_difference/mean"] = 0.57 * math.sqrt(max(v["mismatch"], 0))
    return rec


def verl_record(v: dict[str, float], have: frozenset[str], prm: dict[str, Any]) -> dict[str, float]:
    rec = {
        "critic/score/mean": v["reward"],
        "critic/rewards/mean": v["reward"] - prm["beta"] * v["ref_kl"],
        "actor/pg_loss": v["loss"],
        "actor/grad_norm": v["grad"],
        "actor/lr": prm["lr"],
        "response_length/mean": v["length"],
        "timing_s/step": v["step_seconds"],
    }
    if "ref_kl" in have and prm["beta"] > 0:
        rec["actor/kl_loss"] = v["ref_kl"]
    if "entropy" in have:  # the full set
        rec["response_length/clip_ratio"] = v["trunc"]
        rec["actor/entropy"] = v["entropy"]
        rec["actor/pg_clipfrac"] = v["clip"]
        rec["actor/ppo_kl"] = v["clip"] * 0.05
        if prm["vllm"]:
            rec["rollout_corr/k3_kl"] = v["mismatch"]
    return rec


def native_record(
    v: dict[str, float], have: frozenset[str], prm: dict[str, Any]
) -> dict[str, float]:
    m = max(v["mismatch"], 0.0) if math.isfinite(v["mismatch"]) else v["mismatch"]
    rec = {
        "reward/mean": v["reward"],
        "reward/mean_with_unusable": v["reward"],
        "reward/std": v["reward_std"],
        "reward/group_std_mean": v["reward_std"] * 0.9,
        "groups/signal_fraction": 1 - v["zero_std"],
        "response/length_mean": v["length"],
        "response/truncated_rate": v["trunc"],
        "sampling/entropy_estimate": v["entropy"],
        "train/loss": v["loss"],
        "train/grad_norm": v["grad"],
        "train/lr": prm["lr"],
        "train/clip_frac": v["clip"],
        "train/ref_kl": v["ref_kl"],
        "train/mismatch_kl": m,
        "train/logprob_abs_diff": 0.57 * math.sqrt(m) if math.isfinite(m) else m,
        "train/mismatch_ess": 1.0 / (1.0 + 2.0 * m) if math.isfinite(m) else m,
        "freshness/lag_mean": v["lag"],
        "freshness/lag_max": math.ceil(v["lag"]) if math.isfinite(v["lag"]) else v["lag"],
        "perf/step_seconds": v["step_seconds"],
    }
    for k in ("correctness", "format"):
        if f"comp/{k}" in v:
            rec[f"rollout/{k}"] = v[f"comp/{k}"]
    return rec


RECORDS = {"trl": trl_record, "verl": verl_record, "native": native_record}


def printed(v: float) -> str:
    return repr(float(v)) if math.isfinite(v) else ("nan" if v != v else repr(v))


def traceback_lines(severity: str) -> list[str]:
    if severity == "mild":
        return ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    return [
        "Traceback (most recent call last):",
        '  File "train.py", line 212, in <module>',
        "    trainer.train()",
        '  File "trainer.py", line 88, in train',
        "    loss.backward()",
        "RuntimeError: CUDA error: an illegal memory access was encountered"
        if severity == "moderate"
        else "RuntimeError: NCCL communicator was aborted on rank 3",
    ]


def trl_state(raw: Any) -> dict[str, int]:
    """The fields of HF Trainer's ``trainer_state.json`` beside its log history: a run that
    trained to its end saved ``global_step`` = ``max_steps`` (the updates asked for); one
    that stalled or crashed saved its state last at its last record."""
    lab = raw.label
    cut = lab.family in ("stall", "crash")
    return {
        "global_step": raw.records[-1][0] if cut else lab.length,
        "max_steps": lab.length,
        "logging_steps": lab.cadence,
    }


def write_files(raw: Any, out: Path, transcripts: bool | None) -> Path:
    """Write ``raw`` (a ``_families._Raw``) as its framework writes it, under ``out``; returns
    the path ``rlvitals.read`` takes. A native run also gets its replies (``transcripts/``)
    where ``transcripts`` is true (None: for ``TRANSCRIPTS`` families)."""
    lab = raw.label
    folder = Path(out) / lab.name
    folder.mkdir(parents=True, exist_ok=True)
    if lab.framework == "trl":
        hist = [{**rec, "epoch": round(s / lab.length, 4), "step": s} for s, rec in raw.records]
        state = {**trl_state(raw), "log_history": hist}
        path = folder / "trainer_state.json"
        path.write_text(json.dumps(state, indent=2))  # NaN written as NaN, as TRL's json does
        return path
    if lab.framework == "verl":
        by_step = {e["step"]: e for e in raw.evals}
        lines = []
        for s, rec in raw.records:
            if s in by_step:
                rec = {**rec, "val-core/heldout/acc/mean@1": by_step[s]["score"]}
            body = " - ".join(f"{k}:{printed(v)}" for k, v in rec.items())
            lines.append(f"(TaskRunner pid=4242) step:{s} - {body}")
        lines += [f"(TaskRunner pid=4242) {x}" for x in raw.crash]
        path = folder / "train.log"
        path.write_text("\n".join(lines) + "\n")
        return path
    times = lab.params["times"]
    with open(folder / "steps.jsonl", "w") as f:
        for (s, rec), tm in zip(raw.records, times):
            f.write(json.dumps({"step": s, "time": tm, **rec}) + "\n")
    if raw.evals:
        with open(folder / "evals.jsonl", "w") as f:
            for e in raw.evals:
                i = min(len(times), e["step"] // lab.cadence) - 1
                f.write(json.dumps({**e, "time": times[max(i, 0)]}) + "\n")
    run = {
        "format": "rlvitals-run/1",
        "run_id": f"{zlib.crc32(lab.name.encode()):08x}",
        "name": lab.name,
        "created": "2026-12-07T00:00:00Z",
        "stop_reason": None,
        **raw.info,
    }
    (folder / "run.json").write_text(json.dumps(run, indent=2))
    if transcripts or (transcripts is None and lab.family in TRANSCRIPTS):
        write_transcripts(raw, folder / "transcripts")
    return folder


# Families whose native files carry their replies by default (``write``).
TRANSCRIPTS = ("repeated_replies", "entropy_collapse")

REPEATED = "I am not sure how to solve this. The answer is 0."


def repeated_share(lab: Any, step: int) -> float:
    """The share of attempts that give the one repeated reply at ``step``."""
    if lab.family == "repeated_replies":
        return float(lab.params["repeated_share"])
    if lab.family == "entropy_collapse" and lab.onset is not None and step >= lab.onset:
        top = {"mild": 0.3, "moderate": 0.6, "gross": 0.9}[str(lab.severity)]
        tau = float(lab.params["collapse_tau"])
        return top * (1 - math.exp(-(step - lab.onset) / tau))
    return 0.0


def write_transcripts(raw: Any, folder: Path, groups: int = 8, size: int = 4) -> None:
    """``transcripts/step-NNNNNN.json`` (docs/format.md) for each logged update: ``groups``
    tasks (additions) of ``size`` attempts each; an attempt solves its task with the run's
    skill, and a share of them give the same reply whatever the task."""
    lab = raw.label
    lo, hi = lab.params["scale"]
    rng = np.random.default_rng([zlib.crc32(lab.name.encode()), 1])
    folder.mkdir(exist_ok=True)
    for s, rec in raw.records:
        reward = rec.get("reward/mean", lo)
        p = min(max((reward - lo) / (hi - lo), 0.0), 1.0) if math.isfinite(reward) else 0.5
        share = repeated_share(lab, s)
        attempts = []
        for g in range(groups):
            a, b = (int(x) for x in rng.integers(10, 99, size=2))
            task = f"t{int(rng.integers(0, 500))}"
            for i in range(size):
                if rng.random() < share:
                    text, ok = REPEATED, False
                else:
                    ok = bool(rng.random() < p)
                    ans = a + b if ok else a + b + int(rng.integers(1, 9))
                    text = (
                        f"Add the ones: {a % 10} + {b % 10}, carry what is over ten, "
                        f"then the tens. {a} + {b} = {ans}. The answer is {ans}."
                    )
                attempts.append(
                    {
                        "attempt_id": f"{s}-{g}-{i}",
                        "group_id": f"{s}-{g}",
                        "task_id": task,
                        "reward": hi if ok else lo,
                        "trained": True,
                        "generations": [
                            {
                                "policy_version": s,
                                "prompt": f"What is {a} + {b}?",
                                "completion": text,
                                "prompt_tokens": 8,
                                "completion_tokens": len(text) // 4,
                                "finish_reason": "stop",
                                "trains": True,
                            }
                        ],
                    }
                )
        (folder / f"step-{s:06d}.json").write_text(json.dumps(attempts))
