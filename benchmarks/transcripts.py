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

    python benchmarks/transcripts.py --traced 10000 [--before REV] [--reference 200]

- a long traced run (``--traced UPDATES``): a run in the reference trainer's shape (64 tasks x
  4 attempts an update, replies that repeat as a small policy's do; ``_traced.py``) written
  with the writer, then the transcript scan of today's code against the scan of ``--before``
  (a git revision, extracted from this checkout: default the commit before the scan looked at
  each distinct reply once) on the same run, each in a fresh process: seconds, microseconds
  an attempt, the speed-up, and whether the flag counts are identical; then ``rlvitals check``
  of the run end to end (and with ``--check-before``, of the old code too, with its findings
  compared). ``--reference UPDATES`` does the same on a real traced run of the reference
  trainer (``rlvitals.grpo.demo_run``, needs torch), or ``--reference-dir DIR`` on one made
  before.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
# The scan before each distinct reply was looked at once (today's code is the work tree's).
BEFORE = "e65ebdb"

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
mode, run = sys.argv[1], Path(sys.argv[2])
files = sorted((run / "transcripts").glob("step-*.json"))
size = sum(f.stat().st_size for f in files)
t0 = time.perf_counter()
c0 = resource.getrusage(resource.RUSAGE_SELF)
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
c1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
# This process's own peak (VmHWM): ru_maxrss would keep the parent's peak across fork+exec.
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
try:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            rss = int(line.split()[1]) / 1024
except OSError:
    pass
print(json.dumps({"secs": secs, "cpu": cpu, "mb": size / 1e6, "attempts": n, "rss_mb": rss,
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


def child(mode: str, run: Path, src: Path | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src or ROOT / "src"))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(run)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(out.stdout)


def extract(rev: str, into: Path) -> Path | None:
    """``src/`` of git revision ``rev`` of this checkout, extracted under ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    try:
        tar = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"cannot extract {rev}: {exc}")
        return None
    return into / "src"


def check(run: Path, src: Path | None = None) -> tuple[float, float, float, list]:
    """``rlvitals check RUN --json`` in a fresh process: seconds, CPU seconds, peak RSS MB,
    findings."""
    env = dict(os.environ, PYTHONPATH=str(src or ROOT / "src"))
    t0 = time.perf_counter()
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-c", CHECK, str(run)], capture_output=True, text=True, env=env
    )
    secs = time.perf_counter() - t0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
    lines = out.stdout.strip().splitlines()
    rss = float(lines[-1]) if lines else float("nan")
    doc = json.loads("\n".join(lines[:-1]) or "{}")
    found = [
        (f.get("check"), f.get("severity"), f.get("first_step"), f.get("title"))
        for r in doc.get("runs", [])
        for f in r.get("findings", [])
    ]
    return secs, cpu, rss, found


CHECK = r"""
import contextlib, io, json, sys
from rlvitals.cli import main
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    try:
        main(["check", sys.argv[1], "--json"])
    except SystemExit:
        pass
print(buf.getvalue().strip())
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        print(int(line.split()[1]) / 1024)
"""


def long_run(run: Path, label: str, before: Path | None, check_before: bool) -> None:
    """Today's scan against ``before``'s on ``run`` (interleaved), then ``check`` of it."""
    new, old = child("scan", run), child("scan", run, before) if before else None
    n = new["attempts"]
    print(f"\n{label}: {n:,} attempts, {new['mb']:.0f} MB of transcripts")
    print("  (seconds: wall clock / CPU of the process; on a shared machine the CPU is the "
          "figure to compare)")  # fmt: skip
    print(
        f"  scan now:    {new['secs']:7.1f} / {new['cpu']:6.1f} s  "
        f"{1e6 * new['cpu'] / n:6.2f} CPU us/attempt  peak RSS {new['rss_mb']:.0f} MB"
    )
    if old is not None:
        same = old["flagged"] == new["flagged"] and old["attempts"] == n
        print(
            f"  scan before: {old['secs']:7.1f} / {old['cpu']:6.1f} s  "
            f"{1e6 * old['cpu'] / n:6.2f} CPU us/attempt  peak RSS {old['rss_mb']:.0f} MB\n"
            f"  -> {old['cpu'] / new['cpu']:.1f}x the speed of the scan before (CPU; "
            f"{old['secs'] / new['secs']:.1f}x wall); flag counts "
            f"{'identical' if same else 'DIFFER'}: {new['flagged']}"
        )
        if not same:
            print(f"     before: {old['flagged']}")
    secs, cpu, rss, found = check(run)
    print(f"  rlvitals check, end to end: {secs:.1f} / {cpu:.1f} s, peak RSS {rss:.0f} MB, "
          f"{len(found)} findings")  # fmt: skip
    if check_before and before is not None:
        secs_b, cpu_b, rss_b, found_b = check(run, before)
        print(
            f"  rlvitals check before: {secs_b:.1f} / {cpu_b:.1f} s, peak RSS {rss_b:.0f} MB "
            f"-> {cpu_b / cpu:.1f}x (CPU); findings "
            f"{'identical' if found == found_b else 'DIFFER'}"
        )
        if found != found_b:
            for f in sorted(set(found) ^ set(found_b), key=str):
                print(f"     {'now   ' if f in found else 'before'} {f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs=2, default=[50, 200], metavar=("SMALL", "LARGE"))
    ap.add_argument("--attempts", type=int, default=128, help="attempts per step (128)")
    ap.add_argument("--big-mb", type=int, default=50)
    ap.add_argument("--short-steps", type=int, default=200, help="steps of short replies (200)")
    ap.add_argument("--traced", type=int, metavar="UPDATES", help="only the long traced run")
    ap.add_argument("--traced-dir", type=Path, help="where it is (made if missing; kept)")
    ap.add_argument("--reference", type=int, metavar="UPDATES", help="a real traced run too")
    ap.add_argument("--reference-dir", type=Path, help="a real traced run made before")
    ap.add_argument("--before", default=BEFORE, help=f"git revision to compare ({BEFORE})")
    ap.add_argument("--check-before", action="store_true", help="check with the old code too")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.traced or args.reference or args.reference_dir:
            before = extract(args.before, root / "before")
            if args.traced:
                run = args.traced_dir or root / f"traced-{args.traced}"
                if not (run / "run.json").exists():
                    from _traced import write_traced

                    t0 = time.perf_counter()
                    write_traced(run.parent, args.traced, name=run.name)
                    print(f"wrote {run} in {time.perf_counter() - t0:.0f} s")
                long_run(run, f"synthetic traced run, {args.traced} updates", before,
                         args.check_before)  # fmt: skip
            ref = args.reference_dir
            if ref is None and args.reference:
                from rlvitals.grpo import demo_run

                t0 = time.perf_counter()
                ref = demo_run(root, name="reference", steps=args.reference)
                print(f"trained {ref} in {time.perf_counter() - t0:.0f} s")
            if ref is not None:
                long_run(ref, f"reference trainer's traced run ({ref.name})", before,
                         args.check_before)  # fmt: skip
            return
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
