"""Transcript flagging: speed per MB, and memory that does not grow with the run.

    python benchmarks/transcripts.py [--steps 50 200] [--attempts 128] [--big-mb 50]

Writes synthetic runs whose transcripts look like an LLM's on a coding/maths task (prose,
fenced code, an answer span; a few attempts tamper or hedge), then, each in a fresh process so
peak RSS is its own:

- scan: ``scan_run`` over every step file, all flags on (what ``rlvitals check`` does), cold
  (no cache). Baseline in the same run: decoding the same files with msgspec and nothing
  else (the floor for reading JSON at all). Reported: MB/s, attempts/s, and the ratio.
- memory: peak RSS of the scan for two run sizes with the same step size; flat means the
  transcripts are streamed (memory does not grow with the run).
- short replies: a run whose replies are a sentence and an answer (``--short-steps`` steps,
  a short prompt), as a small policy or a final-answer format writes them, where the cost per
  attempt (not per MB) is what counts: attempts/s against msgspec's decode of the same files.
- a big file: one step file of ``--big-mb`` MB (a reply stuck in a loop), streamed in bounded
  memory, against msgspec decoding it whole.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
mode, run = sys.argv[1], Path(sys.argv[2])
files = sorted((run / "transcripts").glob("step-*.json"))
size = sum(f.stat().st_size for f in files)
t0 = time.perf_counter()
n = 0
if mode == "scan":
    from rlvitals.transcripts import Rules, TranscriptStore, scan_run
    sc = scan_run(TranscriptStore(run), Rules())
    n = int(sc.attempts.sum())
    flagged = {k: int(v.sum()) for k, v in sc.counts.items() if v.sum()}
elif mode == "decode":
    import msgspec
    dec = msgspec.json.Decoder()
    for f in files:
        n += len(dec.decode(f.read_bytes()))
    flagged = {}
elif mode == "stream":
    from rlvitals.transcripts import TranscriptStore
    store = TranscriptStore(run)
    for s in store.steps():
        for a in store.iter_step(s):
            n += 1
    flagged = {}
secs = time.perf_counter() - t0
# This process's own peak (VmHWM): ru_maxrss would keep the parent's peak across fork+exec.
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
try:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            rss = int(line.split()[1]) / 1024
except OSError:
    pass
print(json.dumps({"secs": secs, "mb": size / 1e6, "attempts": n, "rss_mb": rss,
                  "flagged": flagged}))
"""

PROSE = (
    "we need the sum of the two numbers so first add the units then carry the tens and check "
    "the result against the examples in the prompt before writing the final answer"
)
WORDS = PROSE.split(" ")


def completion(rng: random.Random, a: int, b: int) -> tuple[str, float]:
    """A reply to a + b and its reward; about 3% tamper with a test file, 3% hedge."""
    prose = " ".join(rng.choice(WORDS) for _ in range(rng.randint(80, 250)))
    code = "\n".join(
        [
            "```python",
            "def solve(a, b):",
            "    total = a + b",
            *[f"    # step {k}: {rng.choice(WORDS)} {rng.choice(WORDS)}" for k in range(8)],
            "    return total",
            "```",
        ]
    )
    u = rng.random()
    if u < 0.03:
        return (prose + "\n```bash\necho 'pass' > tests/test_solve.py\n```\n\\boxed{0}", 1.0)
    if u < 0.06:
        return (prose + f"\n\\boxed{{{a + b}}} or \\boxed{{{a + b + 1}}}", 1.0)
    ok = rng.random() < 0.5
    return (f"{prose}\n{code}\nSo the answer is \\boxed{{{a + b if ok else a - b}}}.", float(ok))


def short_completion(rng: random.Random, a: int, b: int) -> tuple[str, float]:
    """A one-line reply to a + b and its reward; about 3% hedge between two answers."""
    if rng.random() < 0.03:
        return (f"\\boxed{{{a + b}}} or \\boxed{{{a + b + 1}}}", 1.0)
    ok = rng.random() < 0.5
    return (f"The sum is \\boxed{{{a + b if ok else a - b}}}.", float(ok))


def write_run(root: Path, steps: int, attempts: int, seed: int = 0, short: bool = False) -> Path:
    rng = random.Random(seed)
    d = root / f"run-{steps}{'-short' if short else ''}"
    t = d / "transcripts"
    t.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"format": "rlvitals-run/1", "name": d.name}))
    prompt: list[dict[str, str]] | str = [
        {"role": "system", "content": "You are a careful assistant. " * 20},
        {"role": "user", "content": "Add the numbers.\n```python\nassert solve(2, 3) == 5\n```"},
    ]
    reply = short_completion if short else completion
    for s in range(steps):
        entries = []
        for i in range(attempts):
            if i % 8 == 0:  # a group: one task, eight attempts
                task = (rng.randrange(100), rng.randrange(100))
                if short:
                    prompt = f"Add {task[0]} and {task[1]}."
            text, reward = reply(rng, *task)
            entries.append(
                {
                    "attempt_id": f"{s}-{i}",
                    "group_id": f"{s}-g{i // 8}",
                    "task_id": f"add-{task[0]}-{task[1]}",
                    "reward": reward,
                    "trained": True,
                    "generations": [
                        {
                            "policy_version": s,
                            "prompt": prompt,
                            "completion": text,
                            "prompt_tokens": 8 if short else 180,
                            "completion_tokens": len(text) // 4,
                            "finish_reason": "stop",
                            "trains": True,
                        }
                    ],
                }
            )
        (t / f"step-{s:06d}.json").write_text(json.dumps(entries))
    return d


def write_big(root: Path, mb: int) -> Path:
    d = root / "big"
    (d / "transcripts").mkdir(parents=True)
    loop = b"I will check the answer again. " * (mb * (1 << 20) // 32)
    head = json.dumps(
        [{"attempt_id": "loop", "reward": 0.0, "generations": [{"completion": "@@"}]}]
    ).encode()
    tail = b"".join(
        b',{"attempt_id":"a%d","reward":1.0,"generations":[{"completion":"\\\\boxed{4}"}]}' % i
        for i in range(200)
    )
    (d / "transcripts" / "step-000000.json").write_bytes(
        head.replace(b"@@", loop)[:-1] + tail + b"]"
    )
    return d


def child(mode: str, run: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(run)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs=2, default=[50, 200], metavar=("SMALL", "LARGE"))
    ap.add_argument("--attempts", type=int, default=128, help="attempts per step (128)")
    ap.add_argument("--big-mb", type=int, default=50)
    ap.add_argument("--short-steps", type=int, default=200, help="steps of short replies (200)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print(f"transcripts: {args.attempts} attempts per step, LLM-sized replies (~1-2 kB)")
        rows = []
        for steps in args.steps:
            run = write_run(root, steps, args.attempts)
            scan = child("scan", run)
            base = child("decode", run)
            rows.append((steps, scan, base))
        print()
        print(f"{'steps':>6} {'MB':>7} {'attempts':>9} {'flag MB/s':>10} {'attempts/s':>11} "
              f"{'decode MB/s':>12} {'x decode':>9} {'peak RSS MB':>12}")  # fmt: skip
        for steps, scan, base in rows:
            mbs = scan["mb"] / scan["secs"]
            dmbs = base["mb"] / base["secs"]
            print(
                f"{steps:>6} {scan['mb']:>7.1f} {scan['attempts']:>9} {mbs:>10.2f} "
                f"{scan['attempts'] / scan['secs']:>11.0f} {dmbs:>12.1f} {dmbs / mbs:>8.0f}x "
                f"{scan['rss_mb']:>12.1f}"
            )
        (s0, a, _), (s1, b, _) = rows
        print(
            f"\nmemory: {s1 / s0:.0f}x the steps ({a['mb']:.0f} -> {b['mb']:.0f} MB of "
            f"transcripts) -> peak RSS {a['rss_mb']:.0f} -> {b['rss_mb']:.0f} MB "
            f"(x{b['rss_mb'] / a['rss_mb']:.2f}); flags found: {b['flagged']}"
        )
        short = write_run(root, args.short_steps, args.attempts, short=True)
        scan, base = child("scan", short), child("decode", short)
        print(
            f"\nshort replies ({args.short_steps} steps, {scan['attempts']} attempts, "
            f"{scan['mb']:.1f} MB): flagged at {scan['attempts'] / scan['secs']:.0f} attempts/s "
            f"({scan['mb'] / scan['secs']:.2f} MB/s); msgspec decodes "
            f"{base['attempts'] / base['secs']:.0f} attempts/s, "
            f"{base['secs'] / scan['secs']:.2f}x of it; peak RSS {scan['rss_mb']:.0f} MB; "
            f"flags found: {scan['flagged']}"
        )
        big = write_big(root, args.big_mb)
        st = child("stream", big)
        dec = child("decode", big)
        print(
            f"\none {st['mb']:.0f} MB step file (a reply looping on itself): streamed in "
            f"{st['secs']:.2f} s ({st['mb'] / st['secs']:.0f} MB/s), peak RSS "
            f"{st['rss_mb']:.0f} MB; msgspec decoding it whole: {dec['secs']:.2f} s, peak RSS "
            f"{dec['rss_mb']:.0f} MB"
        )


if __name__ == "__main__":
    main()
