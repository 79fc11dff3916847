"""Make the corpus' runs from the peers' own simulators, installed from PyPI.

    python benchmarks/corpus/make_peers.py [--out benchmarks/corpus/peers] [--force] [--manifest]

- rl-doctor (``rldoctor`` 0.2.0): ``rl_doctor.simulate.simulate(scenario, n_steps, seed)``
  returns the records its ``demo`` and ``selftest`` diagnose, in TRL's key names. They are
  written one JSON object a line (``records.jsonl``, the JSONL that ``rl-doctor diagnose``
  reads), its config beside them (``config.json``).
- rlwatch (0.5.1): its example ``examples/simulate_grpo_run.py`` (not in the wheel; the
  function is copied below from varun1724/rlwatch @46e362b, unchanged but for the seed and
  storage arguments) logs a healthy phase and an entropy collapse through ``rlwatch.attach``
  and ``monitor.log_step``; rlwatch stores them in its SQLite ``metrics.db``, kept as written
  (its WAL checkpointed into the file) and read by rlvitals' ``rlwatch`` reader.
- rlprobe (0.1.0): ``rlprobe.testing.synth.generate_run(dir, pathology, n_steps, onset_frac,
  seed)`` writes its recording (``manifest.json``, ``steps.parquet``, ``samples/*.parquet``,
  ``events.jsonl``), kept as written and read by rlvitals' ``rlprobe`` reader.

Labels and onsets are in ``manifest.toml``; the onset rules are in ``ONSETS`` below and in the
manifest's notes.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sqlite3
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent

RLDOCTOR_SCENARIOS = (
    "healthy",
    "entropy_collapse",
    "saturated_groups",
    "too_hard",
    "reward_hacking",
    "length_hacking",
    "truncation",
    "kl_blowup",
    "clip_saturation",
    "grad_spikes",
    "plateau",
    "format_domination",
)
RLDOCTOR_SEEDS = (3, 11)
ENTRIES: list[dict[str, Any]] = []  # manifest entries of the runs made, printed by --manifest
RLDOCTOR_STEPS = 300

RLPROBE_PATHOLOGIES = (
    None,
    "entropy_collapse",
    "kl_blowup",
    "format_gaming",
    "degenerate_groups",
    "grad_pathology",
    "truncation_starve",
    "reward_std_death",
    "reward_hack_length",
    "throughput_rot",
)
RLPROBE_STEPS = 200
RLPROBE_LABELS: dict[str | None, tuple[str, tuple[str, ...]]] = {
    None: ("healthy", ()),
    "entropy_collapse": ("collapse", ()),
    "kl_blowup": ("drift", ()),  # main judges the KL to the reference as drift
    "format_gaming": ("exploit_suspected", ()),
    "degenerate_groups": ("no_signal", ("too_easy", "too_hard")),
    # grad-norm spikes x50 plus NaN gradients reported as counts (nan_count, events.jsonl),
    # never as NaN values in a metric
    "grad_pathology": ("non_finite", ("drift",)),
    "truncation_starve": ("out_of_room", ()),
    "reward_std_death": ("no_signal", ("too_easy", "too_hard")),
    "reward_hack_length": ("exploit_suspected", ()),
    "throughput_rot": ("slowing", ()),
}
RLPROBE_SEED = 5


# rl-doctor scenario -> (label: the verdict class a checker should give, accepted alternatives)
RLDOCTOR_LABELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "healthy": ("healthy", ()),
    "entropy_collapse": ("collapse", ()),
    "saturated_groups": ("too_easy", ("mastered",)),
    "too_hard": ("too_hard", ("no_signal",)),
    "reward_hacking": ("exploit_suspected", ()),
    "length_hacking": ("exploit_suspected", ()),
    "truncation": ("out_of_room", ()),
    "kl_blowup": ("drift", ()),  # main judges the KL to the reference as drift
    "clip_saturation": ("drift", ("collapse",)),
    "grad_spikes": ("drift", ()),
    "plateau": ("not_learning", ()),
    "format_domination": ("exploit_suspected", ()),
}

# How each scenario's onset is set: the first step where the (5-step rolling median of the)
# signal the scenario injects crosses the line given, or 0 where it is off from the start.
RLDOCTOR_ONSETS = {
    "entropy_collapse": "entropy below 50% of its first-10-step median",
    "saturated_groups": "frac_reward_zero_std at or above 0.5",
    "too_hard": "from step 0 (pass rate 3.5% throughout)",
    "reward_hacking": "the held-out score's peak (the generator turns it down at 33% of the run)",
    "length_hacking": "mean length at or above 1.5x its first-10-step median",
    "truncation": "completions/clipped_ratio at or above 0.05",
    "kl_blowup": "kl at or above 0.5",
    "clip_saturation": "from step 0 (clip ratio 3x healthy from the start)",
    "grad_spikes": "the first grad_norm above 10x the run's median",
    "plateau": "reward within 5% of its final level (the logistic's plateau)",
    "format_domination": "from step 0 (correctness scaled to 5% from the start)",
}


def _rolling_median(xs: list[float], k: int = 5) -> list[float]:
    out = []
    for i in range(len(xs)):
        w = sorted(xs[max(0, i - k + 1) : i + 1])
        out.append(w[len(w) // 2])
    return out


def rldoctor_onset(scenario: str, records: list[dict[str, Any]]) -> int | None:
    """The onset step of ``scenario`` in ``records`` by the rule in RLDOCTOR_ONSETS."""
    if scenario == "healthy":
        return None
    steps = [int(r["step"]) for r in records]

    def first(key: str, test: Any) -> int | None:
        vals = _rolling_median([float(r[key]) for r in records])
        start = sorted(float(r[key]) for r in records[:10])[5]
        for s, v in zip(steps, vals):
            if test(v, start):
                return s
        return None

    if scenario == "entropy_collapse":
        return first("entropy", lambda v, s0: v < 0.5 * s0)
    if scenario == "saturated_groups":
        return first("frac_reward_zero_std", lambda v, s0: v >= 0.5)
    if scenario == "reward_hacking":
        ev = [(float(r["eval/accuracy"]), int(r["step"])) for r in records if "eval/accuracy" in r]
        return max(ev)[1]
    if scenario == "length_hacking":
        return first("completions/mean_length", lambda v, s0: v >= 1.5 * s0)
    if scenario == "truncation":
        return first("completions/clipped_ratio", lambda v, s0: v >= 0.05)
    if scenario == "kl_blowup":
        return first("kl", lambda v, s0: v >= 0.5)
    if scenario == "grad_spikes":
        g = [float(r["grad_norm"]) for r in records]
        med = sorted(g)[len(g) // 2]
        return next(s for s, v in zip(steps, g) if v > 10 * med)
    if scenario == "plateau":
        final = sorted(float(r["reward"]) for r in records[-20:])[10]
        return first("reward", lambda v, s0: v >= 0.95 * final)
    return steps[0]


def rldoctor_runs(out: Path, force: bool = False) -> list[Path]:
    """rl-doctor's scenarios, each at two seeds, as the JSONL its CLI reads (files already
    there are kept unless ``force``; the simulator is deterministic anyway)."""
    from rl_doctor.simulate import simulate

    made = []
    for seed in RLDOCTOR_SEEDS:
        for sc in RLDOCTOR_SCENARIOS:
            d = out / "rldoctor" / f"{sc}-s{seed}"
            d.mkdir(parents=True, exist_ok=True)
            records, config = simulate(sc, n_steps=RLDOCTOR_STEPS, seed=seed)
            if force or not (d / "records.jsonl").exists():
                with open(d / "records.jsonl", "w") as f:
                    for r in records:
                        f.write(json.dumps(r) + "\n")
                (d / "config.json").write_text(json.dumps(config, indent=1))
            label, accept = RLDOCTOR_LABELS[sc]
            ENTRIES.append(
                {
                    "path": f"peers/rldoctor/{sc}-s{seed}/records.jsonl",
                    "tool": "rldoctor 0.2.0 simulate",
                    "label": label,
                    "accept": list(accept),
                    "onset": rldoctor_onset(sc, records),
                    "mapping": "peers/trl-keys.toml",
                    "reader_gap": "JSONL in TRL's key names is read by the generic jsonl reader, "
                    "which maps only canonical names: read with mapping trl-keys.toml",
                    "notes": f"rl-doctor scenario {sc!r}, seed {seed}, {RLDOCTOR_STEPS} steps; "
                    + (f"onset: {RLDOCTOR_ONSETS[sc]}" if sc in RLDOCTOR_ONSETS else "no fault"),
                }
            )
            made.append(d)
    return made


# rlwatch's examples/simulate_grpo_run.py, function body unchanged (prints dropped).
def simulate_grpo_run(monitor: Any, total_steps: int = 500, collapse_start: int = 280) -> None:
    import numpy as np

    initial_entropy = 2.8
    initial_kl = 0.01
    initial_reward_mean = -1.5
    initial_lr = 1e-5
    for step in range(total_steps):
        noise = random.gauss(0, 0.05)
        if step < collapse_start:
            entropy = initial_entropy - (step / total_steps) * 0.5 + noise * 0.1
        else:
            steps_since_collapse = step - collapse_start
            decay = math.exp(-steps_since_collapse / 30)
            entropy = max(0.05, initial_entropy * decay * 0.3 + noise * 0.02)
        if step < collapse_start:
            kl = initial_kl + (step / total_steps) * 0.05 + abs(noise) * 0.01
        else:
            steps_since = step - collapse_start
            kl = initial_kl + 0.05 + steps_since * 0.005 + abs(noise) * 0.02
        if step < collapse_start:
            reward_mean = initial_reward_mean + (step / total_steps) * 2.0 + noise * 0.1
            reward_std = 0.5 + noise * 0.05
        else:
            reward_mean = initial_reward_mean + 1.5 + noise * 0.3
            reward_std = 0.5 + (step - collapse_start) * 0.01 + abs(noise) * 0.1
        rewards = np.random.normal(reward_mean, max(0.1, reward_std), size=64)
        if step < collapse_start:
            advantage_std = 1.0 + noise * 0.1
        else:
            advantage_std = 1.0 + (step - collapse_start) * 0.02 + abs(noise) * 0.2
        loss = 0.5 - (step / total_steps) * 0.3 + noise * 0.02
        lr = initial_lr * (1 - step / total_steps * 0.5)
        monitor.log_step(
            step,
            entropy=entropy,
            kl_divergence=kl,
            reward_mean=reward_mean,
            reward_std=reward_std,
            rewards=rewards,
            advantage_std=advantage_std,
            loss=loss,
            learning_rate=lr,
            clip_fraction=random.uniform(0.05, 0.15),
        )
    monitor.stop()


def rlwatch_runs(out: Path, seeds: tuple[int, ...] = (0, 1), force: bool = False) -> list[Path]:
    """rlwatch's example: the whole run (collapse at 280), and its healthy phase alone. Runs
    already there are kept unless ``force`` (rlwatch stamps wall-clock times)."""
    import numpy as np
    import rlwatch

    made = []
    for seed in seeds:
        for name, steps, collapse in (("example", 500, 280), ("healthy-phase", 280, 10**9)):
            d = out / "rlwatch" / f"{name}-s{seed}"
            if force or not (d / "metrics.db").exists():
                if d.exists():
                    shutil.rmtree(d)
                d.mkdir(parents=True)
                random.seed(seed)
                np.random.seed(seed)
                monitor = rlwatch.attach(
                    framework="manual",
                    run_id=f"grpo_v3_exp12_s{seed}",
                    storage={"log_dir": str(d)},
                )
                simulate_grpo_run(monitor, total_steps=steps, collapse_start=collapse)
                _checkpoint_rlwatch(d)
            healthy = collapse > steps
            ENTRIES.append(
                {
                    "path": f"peers/rlwatch/{name}-s{seed}/metrics.db",
                    "tool": "rlwatch 0.5.1 examples/simulate_grpo_run.py",
                    "label": "healthy" if healthy else "collapse",
                    "accept": [],
                    "onset": None if healthy else collapse,
                    "notes": (
                        f"rlwatch's example, seed {seed}: its healthy phase alone ({steps} steps)"
                        if healthy
                        else f"rlwatch's example, seed {seed}: entropy 2.8 falls from step "
                        f"{collapse} to 0.05 (reward flat, KL and advantage std rising)"
                    ),
                }
            )
            made.append(d)
    return made


def _checkpoint_rlwatch(d: Path) -> None:
    """rlwatch keeps its database in WAL mode: checkpoint it so the .db holds every row, and
    leave WAL mode, so reading the corpus (even read-only) writes no -wal / -shm files."""
    dbs = list(d.glob("*.db"))
    if not dbs:
        raise SystemExit(f"{d}: rlwatch wrote no SQLite database")
    con = sqlite3.connect(str(dbs[0]))
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    for extra in d.glob("*.db-*"):
        extra.unlink()


def rlprobe_runs(out: Path, force: bool = False) -> list[Path]:
    """rlprobe's synthetic recordings: healthy and its pathologies, onset at 50%. Runs already
    there are kept unless ``force`` (rlprobe stamps wall-clock times and random run ids)."""
    from rlprobe.testing.synth import generate_run

    made = []
    for p in RLPROBE_PATHOLOGIES:
        d = out / "rlprobe" / f"{p or 'healthy'}-s{RLPROBE_SEED}"
        if force or not (d / "steps.parquet").exists():
            if d.exists():
                shutil.rmtree(d)
            generate_run(d, pathology=p, n_steps=RLPROBE_STEPS, onset_frac=0.5, seed=RLPROBE_SEED)
        label, accept = RLPROBE_LABELS[p]
        ENTRIES.append(
            {
                "path": f"peers/rlprobe/{p or 'healthy'}-s{RLPROBE_SEED}",
                "tool": "rlprobe 0.1.0 testing.synth.generate_run",
                "label": label,
                "accept": list(accept),
                "onset": None if p is None else rlprobe_onset(d, p),
                "notes": f"rlprobe pathology {p or 'none'!r}, seed {RLPROBE_SEED}, "
                f"{RLPROBE_STEPS} steps, onset_frac 0.5"
                + (
                    "; onset: the first NaN count or grad-norm spike"
                    if p == "grad_pathology"
                    else ""
                ),
            }
        )
        made.append(d)
    return made


def rlprobe_onset(d: Path, pathology: str) -> int:
    """The step the problem first shows in the recording: the generator's onset (50%), where
    its ramps start; for grad_pathology, whose spikes and NaN counts fall on random steps
    after it, the first of them (a NaN count, or a grad norm over 10x the run's median)."""
    onset = RLPROBE_STEPS // 2
    if pathology != "grad_pathology":
        return onset
    import pyarrow.parquet as pq

    cols = pq.read_table(d / "steps.parquet").to_pydict()
    med = sorted(cols["grad_norm"])[len(cols["grad_norm"]) // 2]
    for i, step in enumerate(cols["step"]):
        bad = (cols["nan_count"][i] or 0) + (cols["inf_count"][i] or 0) > 0
        if step >= onset and (bad or cols["grad_norm"][i] > 10 * med):
            return int(step)
    return onset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE / "peers")
    ap.add_argument("--only", choices=["rldoctor", "rlwatch", "rlprobe"], nargs="*")
    ap.add_argument("--force", action="store_true", help="remake runs that are already there")
    ap.add_argument(
        "--manifest",
        type=Path,
        nargs="?",
        const=HERE / "manifest.toml",
        help="write the runs' entries into the manifest's peers part (default manifest.toml)",
    )
    args = ap.parse_args()
    which = args.only or ["rldoctor", "rlwatch", "rlprobe"]
    if "rldoctor" in which:
        print(f"rl-doctor: {len(rldoctor_runs(args.out, args.force))} runs")
    if "rlwatch" in which:
        print(f"rlwatch: {len(rlwatch_runs(args.out, force=args.force))} runs")
    if "rlprobe" in which:
        print(f"rlprobe: {len(rlprobe_runs(args.out, args.force))} runs")
    if args.manifest:
        write_manifest(args.manifest, ENTRIES)
        print(f"manifest entries: {args.manifest}")


MARKER = "# -- peers: written by make_peers.py --manifest (edit the script, not this part) --"


def write_manifest(path: Path, entries: list[dict[str, Any]]) -> None:
    """Replace the peers' part of the manifest (everything after MARKER) with ``entries``."""
    text = path.read_text() if path.exists() else ""
    head = text.split(MARKER, 1)[0].rstrip("\n")
    path.write_text((head + "\n\n" if head else "") + MARKER + "\n\n" + to_toml(entries))


def to_toml(entries: list[dict[str, Any]]) -> str:
    """Manifest entries as TOML ``[[run]]`` tables (None values left out)."""
    out = []
    for e in entries:
        out.append("[[run]]")
        for k, v in e.items():
            if v is None:
                continue
            out.append(f"{k} = {json.dumps(v)}")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    main()
