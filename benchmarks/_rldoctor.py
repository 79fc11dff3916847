"""rl-doctor (PyPI ``rldoctor``) in an environment of its own, and our runs in its field names.

rl-doctor is installed into a virtual environment under the benchmark cache only, never into
rlvitals' environment. To be fair to it, each run is handed over in the field names it knows
best (``rl-doctor fields``), with everything it can use: reward, zero-variance group fraction,
entropy, held-out score, KL, clip fraction, grad norm, lengths and truncation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("RLVITALS_BENCH_CACHE", Path.home() / ".cache" / "rlvitals-bench"))
RLDOCTOR_VERSION = "0.2.0"

# Our canonical name -> rl-doctor's field name.
FIELDS = {
    # rl-doctor's reward is the batch mean over every sample (TRL's `reward`), which is ours
    # with the rejected groups' attempts included.
    "reward/mean_with_unusable": "reward_mean",
    "reward/mean": "reward_mean",
    "reward/std": "reward_std",
    "sampling/entropy_estimate": "entropy",
    "train/entropy": "entropy",
    "train/ref_kl": "kl",
    "train/clip_frac": "pg_clipfrac",
    "train/grad_norm": "grad_norm",
    "train/lr": "lr",
    "train/loss": "policy_loss",
    "response/length_mean": "response_len_mean",
    "response/truncated_rate": "response_len_clip_ratio",
    "train/advantage_std": "advantage_std",
}


def rldoctor_bin() -> Path:
    """The rl-doctor executable, installing it into its own venv on first use."""
    env = CACHE / f"rldoctor-{RLDOCTOR_VERSION}"
    exe = env / "bin" / "rl-doctor"
    if not exe.exists():
        print(f"installing rldoctor=={RLDOCTOR_VERSION} into {env} ...", file=sys.stderr)
        venv.create(env, with_pip=True)
        subprocess.run(
            [str(env / "bin" / "pip"), "install", "-q", f"rldoctor=={RLDOCTOR_VERSION}"],
            check=True,
        )
    return exe


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if v in ("NaN", "Infinity", "-Infinity"):
        return float(v.replace("Infinity", "inf"))
    return None


def to_rldoctor_jsonl(run_dir: Path, out: Path) -> Path:
    """Write ``run_dir``'s steps (and evals) as a JSONL rl-doctor reads, in its field names."""
    evals: dict[int, float] = {}
    p = run_dir / "evals.jsonl"
    if p.exists():
        for line in p.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            score = _num(rec.get("score"))
            if score is not None:
                evals[int(rec["step"])] = score
    with open(run_dir / "steps.jsonl") as src, open(out, "w") as dst:
        for line in src:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            row: dict[str, Any] = {"step": rec["step"]}
            for ours, theirs in FIELDS.items():
                v = _num(rec.get(ours))
                if v is not None and theirs not in row:
                    row[theirs] = v
            sf = _num(rec.get("groups/signal_fraction"))
            if sf is not None:
                row["zero_var_group_frac"] = 1.0 - sf
            if rec["step"] in evals:
                row["eval_score"] = evals[rec["step"]]
            dst.write(json.dumps(row) + "\n")  # NaN stays NaN, as Python writes it
    return out


def diagnose(path: Path, *, timeout: float = 600, mem_gb: float | None = None) -> dict[str, Any]:
    """Run ``rl-doctor diagnose PATH -f json``; returns its JSON, or {"error": ...}."""
    exe = rldoctor_bin()
    preexec = None
    if mem_gb:
        import resource

        limit = int(mem_gb * (1 << 30))

        def preexec() -> None:  # type: ignore[misc]
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    try:
        proc = subprocess.run(
            [str(exe), "diagnose", str(path), "-f", "json", "--no-color"],
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=preexec,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0 and not proc.stdout.strip().startswith("{"):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": f"exit {proc.returncode}: {tail[0][:200]}"}
    try:
        return json.loads(proc.stdout)
    except ValueError:
        return {"error": "no JSON on stdout"}
