"""Small real run directories for the dashboard, report, server and watch tests.

Written in the run directory format (FORMAT.md) by hand, so these tests do not depend on the
trainer; values follow the shape of a healthy GRPO run (reward rising, entropy falling slowly).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from rlvitals.checks.base import Finding, Report

HOSTILE = "</script><script>window.__pwned=1</script><!-- <img src=x onerror=alert(1)> \u2028&amp;"


def step_record(step: int, t: float, **over: Any) -> dict[str, Any]:
    p = min(0.9, 0.2 + 0.012 * step)
    rec: dict[str, Any] = {
        "step": step,
        "time": t,
        "policy_version": step + 1,
        "reward/mean": round(p + 0.03 * math.sin(step), 4),
        "reward/mean_with_unusable": round(p * 0.95, 4),
        "reward/std": 0.45,
        "reward/group_std_mean": round(0.4 - 0.002 * step, 4),
        "groups/trained": 12,
        "groups/rejected": 4,
        "groups/all_solved": 1 + step // 20,
        "groups/none_solved": max(0, 3 - step // 20),
        "groups/signal_fraction": 0.75,
        "discard/groups/no_variance": 4,
        "response/length_mean": 300 - step,
        "response/truncated_rate": 0.02,
        "train/mismatch_kl": 0.0007 + 0.00001 * step,
        "train/logprob_abs_diff": 0.015,
        "train/mismatch_ess": 0.99,
        "sampling/entropy_estimate": 0.7 * math.exp(-step / 200),
        "train/loss": 0.1,
        "train/grad_norm": 1.0 + 0.1 * math.cos(step),
        "train/lr": 1e-5,
        "train/clip_frac": 0.01,
        "perf/step_seconds": 2.0,
        "perf/tokens_per_second": 900.0,
    }
    rec.update(over)
    return rec


def write_run_json(d: Path, status: str = "running", **extra: Any) -> None:
    info = {
        "format": "rlvitals-run/1",
        "run_id": d.name,
        "name": d.name,
        "created": "2026-11-29T12:00:00Z",
        "status": status,
        "stop_reason": None,
        "config": {},
        "versions": {"rlvitals": "0.1.0"},
        **extra,
    }
    tmp = d / "run.json.tmp"
    tmp.write_text(json.dumps(info))
    tmp.replace(d / "run.json")


def append_steps(d: Path, records: list[dict[str, Any]]) -> None:
    with open(d / "steps.jsonl", "a", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def write_transcript(d: Path, step: int, completion: str = HOSTILE) -> None:
    tdir = d / "transcripts"
    tdir.mkdir(exist_ok=True)
    entries = [
        {
            "attempt_id": f"{step}-a{i}",
            "group_id": f"{step}-g0",
            "task_id": "t1",
            "reward": float(i % 2),
            "trained": True,
            "generations": [
                {
                    "policy_version": step,
                    "prompt": [{"role": "user", "content": "What is 2+2? <b>bold</b>"}],
                    "completion": completion if i == 1 else "4",
                    "prompt_tokens": 9,
                    "completion_tokens": 5,
                    "finish_reason": "stop",
                    "trains": True,
                }
            ],
        }
        for i in range(4)
    ]
    (tdir / f"step-{step:06d}.json").write_text(json.dumps(entries))


def make_run(
    root: Path,
    name: str,
    n: int = 60,
    *,
    status: str = "finished",
    t0: float | None = None,
    transcripts: tuple[int, ...] = (),
    **over: Any,
) -> Path:
    d = root / name
    d.mkdir(parents=True)
    write_run_json(d, status)
    t0 = time.time() - 2 * n if t0 is None else t0
    append_steps(d, [step_record(s, t0 + 2 * s, **over) for s in range(n)])
    for s in transcripts:
        write_transcript(d, s)
    return d


def report_with(findings: list[Finding], source: str = "x", verdict: str = "learning") -> Report:
    return Report(source=source, verdict=verdict, findings=findings, last_step=None)


def sample_findings(step: int = 30) -> list[Finding]:
    return [
        Finding("liveness", "ok", "learning", "Step records arriving"),
        Finding(
            "reward",
            "warn",
            "exploration_stopped",
            f"Group spread falling {HOSTILE}",
            metric="reward/group_std_mean",
            first_step=step,
            evidence={"window": [step, step + 5], "values": [0.1, 0.05], "threshold": 0.05},
            action="Raise temperature or check the grader.",
            steps=[step],
        ),
        Finding(
            "agreement",
            "fail",
            "drift",
            "Mismatch KL rising",
            metric="train/mismatch_kl",
            first_step=step + 5,
            evidence={"threshold": 0.01},
            action="Check weight sync.",
        ),
    ]
