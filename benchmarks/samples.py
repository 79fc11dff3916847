"""Reading huge sample dumps: speed against the raw JSON decode, and memory against the size.

    python benchmarks/samples.py [--quick]

Two dumps are written in a temporary folder, each exactly as its framework writes it:

  verl    trainer.rollout_data_dir: STEPS files of N samples with long prompts and replies
          (text-heavy, as a reasoning run's dump is)
  nemo    NeMo-RL train_data_step{N}.jsonl: N samples of T padded tokens with token ids, loss
          masks and both logprob arrays (number-heavy, as AI2's 0.58 GB/step archive is)

For each, in the same run: the baseline is msgspec decoding every line of the same files and
nothing else (the floor of any reader of them); ours is ``rlvitals.read`` of the run with the
dump attached (attempts table, every per-step aggregate, the mismatch per attempt for NeMo).
Ours reads the dump alone (``readers.samples.open_samples`` into an empty run), so the figure
is the sample path's own. Each is measured in a fresh process: CPU seconds (best of --repeat) and the peak resident
memory above the process's baseline after imports (ru_maxrss). The ratio is the baseline's
time over ours (1.0 = as fast as decoding alone); memory is held against one step's file
and the whole dump.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def write_verl(d: Path, steps: int, n: int, chars: int) -> None:
    rng = random.Random(0)
    out = d / "rollout"
    out.mkdir(parents=True)
    words = ["alpha", "beta", "gamma", "delta", "proof", "lemma", "thus", "hence", "x", "=", "+"]
    for step in range(1, steps + 1):
        prompts = [
            f"Problem {step}-{g}: " + " ".join(rng.choices(words, k=chars // 12))
            for g in range(n // 8)
        ]
        with open(out / f"{step}.jsonl", "w") as f:  # ray_trainer.py:454-477
            for i in range(n):
                entry = {
                    "input": prompts[i // 8],
                    "output": " ".join(rng.choices(words, k=chars // 6)),
                    "gts": "42",
                    "score": float(rng.random() < 0.4),
                    "step": step,
                    "acc": rng.random() < 0.4,
                }
                f.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
    with open(d / "metrics.jsonl", "wb") as f:  # tracking.py:433-435
        for step in range(1, steps + 1):
            f.write(json.dumps({"step": step, "data": {"critic/score/mean": 0.4}}).encode() + b"\n")


def write_nemo(d: Path, steps: int, n: int, tokens: int) -> None:
    rng = random.Random(0)
    d.mkdir(parents=True)
    prompt = tokens // 4
    for step in range(1, steps + 1):
        with open(d / f"train_data_step{step}.jsonl", "w") as f:  # logger.py:1071-1098
            for i in range(n):
                gen = [round(-rng.random() * 3, 6) for _ in range(tokens)]
                prev = [round(g + rng.gauss(0, 0.01), 6) for g in gen]
                mask = [0] * prompt + [1] * (tokens - prompt)
                sample = {
                    "content": [[f"prompt {i // 8}", "reply " * 50]],
                    "rewards": [float(rng.random() < 0.4)],
                    "input_lengths": [tokens],
                    "token_ids": [
                        [(i // 8) % 97] * prompt
                        + [rng.randrange(32000) for _ in range(tokens - prompt)]
                    ],
                    "token_loss_mask": [mask],
                    "sample_loss_mask": [1],
                    "advantages": [[0.0] * tokens],
                    "generation_logprobs": [gen],
                    "prev_logprobs": [prev],
                }
                f.write(json.dumps({**sample, "idx": i}, default=str) + "\n")


CHILD = r"""
import os, resource, sys, time
sys.path.insert(0, {src!r})
import msgspec, numpy
import rlvitals.readers, rlvitals.readers.samples, rlvitals.metrics
kind, path, samples = sys.argv[1], sys.argv[2], sys.argv[3]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.process_time()
if kind == "raw":
    dec = msgspec.json.Decoder()
    n = 0
    for root, _dirs, files in os.walk(samples):
        for name in sorted(files):
            with open(os.path.join(root, name), "rb") as f:
                for line in f:
                    dec.decode(line)
                    n += 1
else:
    from rlvitals.model import RunData
    run = RunData(source=samples, format="none")
    rlvitals.readers.samples.open_samples(samples, run).poll(final=True)
    n = len(run.attempts)
cpu = time.process_time() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(n, cpu, (peak - base) * 1024)
"""


def measure(kind: str, path: Path, samples: Path, repeat: int) -> tuple[int, float, int]:
    best = None
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", CHILD.format(src=str(SRC)), kind, str(path), str(samples)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        got = (int(out[0]), float(out[1]), int(out[2]))
        if best is None or got[1] < best[1]:
            best = got
    assert best is not None
    return best


def size(p: Path) -> tuple[int, int]:
    files = [f for f in p.rglob("*") if f.is_file()]
    sizes = [f.stat().st_size for f in files]
    return sum(sizes), max(sizes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small dumps (a smoke run)")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    verl = (4, 512, 2000) if a.quick else (20, 2048, 4000)
    nemo = (3, 64, 512) if a.quick else (8, 256, 2048)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        write_verl(t / "verl", *verl)
        write_nemo(t / "nemo", *nemo)
        cases = [
            ("verl", t / "verl" / "metrics.jsonl", t / "verl" / "rollout", verl),
            ("nemo", t / "nemo", t / "nemo", nemo),
        ]
        print(
            f"{'dump':6} {'size':>9} {'step file':>9} {'attempts':>9} {'raw s':>7} {'ours s':>7} "
            f"{'ratio':>6} {'raw MB':>7} {'ours MB':>8} {'ours/step file':>14}"
        )
        for name, log, dump, shape in cases:
            total, biggest = size(dump)
            n_raw, raw_s, raw_mem = measure("raw", log, dump, a.repeat)
            n, ours_s, ours_mem = measure("ours", log, dump, a.repeat)
            print(
                f"{name:6} {total / 1e6:8.1f}M {biggest / 1e6:8.1f}M {n:9d} {raw_s:7.2f} {ours_s:7.2f} "
                f"{raw_s / ours_s:6.2f} {raw_mem / 1e6:7.1f} {ours_mem / 1e6:8.1f} "
                f"{ours_mem / biggest:14.2f}"
            )
            del n_raw, shape


if __name__ == "__main__":
    main()
