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
from collections.abc import Callable, Sequence
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
    """The rl-doctor executable: $RLDOCTOR_BIN if set, else one in its own venv under the
    benchmark cache, installed there on first use."""
    if os.environ.get("RLDOCTOR_BIN"):
        return Path(os.environ["RLDOCTOR_BIN"])
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


def ensure_tensorboard() -> None:
    """rl-doctor's TensorBoard loader needs its ``tensorboard`` extra: installed into its venv
    on first use (``rldoctor[tensorboard]``), so it reads event folders itself."""
    python = rldoctor_bin().parent / "python"
    ok = subprocess.run([str(python), "-c", "import tensorboard"], capture_output=True)
    if ok.returncode != 0:
        print("installing rldoctor[tensorboard] into its venv ...", file=sys.stderr)
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                f"rldoctor[tensorboard]=={RLDOCTOR_VERSION}",
            ],
            check=True,
        )


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


def their_verdict(f: dict[str, Any]) -> str:
    """One rl-doctor finding in rlvitals' verdict classes."""
    det = f.get("detector", "")
    text = f"{f.get('title', '')} {f.get('summary', '')}".lower()
    if det == "advantage_collapse":
        regime = (f.get("metrics") or {}).get("regime")
        return {"saturated": "too_easy", "too_hard": "too_hard"}.get(regime, "no_signal")
    if det == "entropy_collapse":
        return "collapse"
    if det in ("reward_hacking", "reward_composition"):
        return "exploit_suspected"
    if det in ("length_pathology", "length_hacking"):
        return "out_of_room" if "trunc" in text else "exploit_suspected"
    if det in ("gradient_pathology", "grad_pathology"):
        # gradient spikes: rlvitals' own verdict for them is "unstable" (issue 27)
        return "non_finite" if ("nan" in text or "non-finite" in text) else "unstable"
    if det in ("kl_drift", "clip_saturation"):
        return "drift"  # rlvitals judges the KL to the reference as drift too
    if det == "plateau":
        return "not_learning"
    return det


WARN_OR_WORSE = ("WARNING", "CRITICAL")


def their_hits(res: dict[str, Any]) -> list[str]:
    """The verdicts of rl-doctor's warning-or-worse findings, worst first."""
    found = [f for f in res.get("findings", []) if f.get("severity") in WARN_OR_WORSE]
    found.sort(key=lambda f: -WARN_OR_WORSE.index(f["severity"]))
    return [their_verdict(f) for f in found]


# Canonical name -> rl-doctor's, for any run rlvitals read (a superset of FIELDS' sources).
CANONICAL = {
    **FIELDS,
    "groups/signal_fraction": None,  # handed over as zero_var_group_frac = 1 - value
    "perf/step_seconds": "step_time",
    "perf/tokens_per_second": "perf/throughput",
}


def data_to_rldoctor_jsonl(data: Any, out: Path) -> Path:
    """Write a run rlvitals has read (``RunData``) as rl-doctor JSONL in its field names:
    the canonical series it knows, reward components as ``rewards/<name>/mean``, and the
    held-out score as ``eval_score``. Used where rl-doctor cannot read the source itself."""
    rows: dict[int, dict[str, Any]] = {}

    def put(step: int, key: str, v: float) -> None:
        rows.setdefault(int(step), {"step": int(step)}).setdefault(key, v)

    for name in data.names():
        s = data.series(name)
        if name == "groups/signal_fraction":
            for k, v in zip(s.steps.tolist(), s.values.tolist()):
                put(k, "zero_var_group_frac", 1.0 - v)
            continue
        theirs = CANONICAL.get(name)
        if theirs is None and name.startswith("rollout/") and name.count("/") == 1:
            theirs = f"rewards/{name.split('/', 1)[1]}/mean"
        if theirs is None:
            continue
        for k, v in zip(s.steps.tolist(), s.values.tolist()):
            put(k, theirs, v)
    for e in data.evals:
        score = e.get("score")
        if isinstance(e.get("step"), int) and isinstance(score, (int, float)):
            put(e["step"], "eval_score", float(score))
    with open(out, "w") as f:
        for k in sorted(rows):
            f.write(json.dumps(rows[k]) + "\n")  # NaN stays NaN, as Python writes it
    return out


def prefix_file(src: Path, step: int, out: Path) -> Path:
    """``src`` cut after ``step``: a JSONL's lines, or a trainer_state.json's log_history."""
    if src.name.endswith(".json"):
        state = json.loads(src.read_text())
        state["log_history"] = [
            e for e in state.get("log_history", []) if int(e.get("step", 0)) <= step
        ]
        out.write_text(json.dumps(state))
        return out
    keep = []
    for line in src.read_text().splitlines():
        try:
            s = json.loads(line).get("step")
        except ValueError:
            continue
        if isinstance(s, int) and s <= step:
            keep.append(line)
    out.write_text("\n".join(keep) + "\n")
    return out


_WORKER = r"""
import json, sys
from rl_doctor.diagnosis import diagnose
from rl_doctor.ingest import load_run
from rl_doctor.report import render_json
out, sys.stdout = sys.stdout, sys.stderr  # anything rl-doctor prints goes to stderr
for line in sys.stdin:
    try:
        res = json.dumps(json.loads(render_json(diagnose(load_run(line.rstrip("\n"))))))
    except Exception as exc:
        res = json.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]})
    out.write(res + "\n")
    out.flush()
"""


class Worker:
    """One rl-doctor process (in its own venv) that diagnoses path after path, as
    ``rl-doctor diagnose PATH -f json`` does, without paying its start-up for each file."""

    def __init__(self) -> None:
        python = rldoctor_bin().parent / "python"
        self.proc = subprocess.Popen(
            [str(python), "-c", _WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def diagnose(self, path: Path) -> dict[str, Any]:
        """rl-doctor's JSON report for ``path``, or {"error": ...}."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            return {"error": f"rl-doctor worker exited ({self.proc.poll()})"}
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def first_raised(candidates: Sequence[int], raised: Callable[[int], bool]) -> int | None:
    """The first of ``candidates`` (sorted steps) at which ``raised`` holds, by binary search
    (a prefix that raises a verdict is taken to go on raising it), or None if the last does
    not: the live delay of a tool that only judges whole files."""
    if not candidates or not raised(candidates[-1]):
        return None
    lo, hi = 0, len(candidates) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if raised(candidates[mid]):
            hi = mid
        else:
            lo = mid + 1
    return candidates[hi]
