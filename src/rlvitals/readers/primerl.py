"""prime-rl: the trainer's and orchestrator's ``metrics.jsonl`` and their console summaries.

``metrics.jsonl`` rows are ``{"step": N, "time": t, ...}``, several per step (merged); newer
versions write one ``monitors/file/metrics.jsonl`` with a ``producer`` per row and ``step: null``
rows for wall-time inference metrics. The
console prints one summary per step, ``Step N | 18m 23s | Loss -0.0003 | Entropy 0.37 | ...``
(older versions: ``Time: 5.13s | Loss: 12.25``). Console keys are kept as
``trainer/<Label>`` or ``orchestrator/<Label>`` (the orchestrator's line has a Reward), with
durations in seconds and percentages as fractions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ._format import Format, register
from .base import FileState
from .generic import JsonlMetricsReader, sniff_glob
from .mapping import MappingTable, Rule, synonym
from .printed import parse_number
from .textlog import TextLogReader, head, sniff_files

__all__ = ["PRIME_RL", "PRIME_RL_CONSOLE", "PrimeConsoleReader", "PrimeJsonlReader"]

PRIME_RL = MappingTable(
    "prime-rl",
    (
        Rule(r"^train/agg/effective/[^/]+/reward/mean$", "reward/mean", "trained traces"),
        Rule(
            r"^train/agg/all/[^/]+/reward/mean$",
            "reward/mean_with_unusable",
            "every trace, zero-advantage ones included",
        ),
        Rule("reward/mean", "reward/mean", "older versions"),
        Rule(r"^train/agg/effective/[^/]+/is_truncated/mean$", "response/truncated_rate"),
        Rule(r"^train/agg/effective/num_output_tokens/mean$", "response/length_mean"),
        Rule("mismatch_kl/all/mean", "train/mismatch_kl", "k3, trainer vs inference, no clamp"),
        Rule("mismatch_kl/mean", "train/mismatch_kl", "older versions"),
        Rule("entropy/all/mean", "train/entropy"),
        Rule("entropy/mean", "train/entropy", "older versions"),
        Rule("loss/mean", "train/loss"),
        Rule("optim/grad_norm", "train/grad_norm"),
        Rule("optim/lr", "train/lr"),
        synonym("off_policy/mean", "async: steps off policy"),
        synonym("off_policy/max"),
        synonym("time/step"),
        Rule(
            r"^train/agg/all/(?:filters|detections)/gibberish/mean$",
            "text/gibberish_rate",
            "every trace measured (filters/ from PR #1746, detections/ since PR #2734)",
        ),
        Rule(
            r"^train/agg/all/(?:filters|detections)/repetition/mean$",
            "text/repetition_rate",
            "every trace measured (filters/ from PR #1746, detections/ since PR #2734)",
        ),
    ),
    (
        ("train/agg/all/*/solved_{none,all}", "count or share not verified; kept as logged"),
        ("kl_ent_ratio/*", "mismatch_kl / entropy, both read on their own; kept as logged"),
        ("train/agg/all/*/is_timeout/*", "share of timed-out traces; kept as logged"),
        ("train/agg/all/*/has_error/*", "share of errored traces; kept as logged"),
        ("producer", "which process wrote the row (monitors/file/metrics.jsonl), not a metric"),
        ("perf/throughput", "trainer tokens per second, not generated tokens"),
        ("is_masked/*", "trust-region mask shares, no canonical name"),
    ),
    ("mismatch_kl includes off-policy lag as well as numerical mismatch (async training).",),
)

PRIME_RL_CONSOLE = MappingTable(
    "prime-rl-console",
    (
        Rule("trainer/Loss", "train/loss"),
        Rule("trainer/Entropy", "train/entropy"),
        Rule("trainer/Mismatch KL", "train/mismatch_kl", "k3, 4 decimals"),
        Rule("trainer/Grad. Norm", "train/grad_norm"),
        Rule("trainer/LR", "train/lr"),
        Rule("orchestrator/Reward", "reward/mean", "4 decimals"),
        Rule("orchestrator/Truncation", "response/truncated_rate", "printed as a percentage"),
        Rule("orchestrator/Max Off-Policy", "freshness/lag_max"),
        Rule("orchestrator/Time", "perf/step_seconds", "orchestrator step wall time"),
    ),
    (
        ("trainer/Time", "trainer wall time per step, waiting for batches included"),
        ("trainer/MFU", "utilisation, kept as a fraction under its own name"),
        ("orchestrator/Trainable", "a/b traces with signal: kept as the fraction a/b"),
    ),
    (
        "Console keys are trainer/<Label> or orchestrator/<Label> (the line with a Reward); "
        "durations become seconds and percentages fractions.",
    ),
)

STEP = re.compile(r"(?:^|\s)Step (\d+) \| (.*)$", re.M)
_DURATION = re.compile(r"^(?:(\d+)h\s*)?(?:(\d+)m\s*)?(?:(\d+(?:\.\d+)?)s)?$")
_VALUE = re.compile(
    r"^(.*?)\s*([-+]?(?:\d[\d.,]*(?:e[-+]?\d+)?|nan|inf)(?:/\d+)?%?)(?:\s.*)?$", re.I
)


def _duration(text: str) -> float | None:
    m = _DURATION.match(text.strip())
    if not m or not any(m.groups()):
        return None
    h, mi, s = m.groups()
    return int(h or 0) * 3600 + int(mi or 0) * 60 + float(s or 0)


def parse_summary(text: str) -> dict[str, float]:
    """``Loss -0.0003 | Entropy 0.37 | 18m 23s | Time: 5.13s`` -> {label: value}."""
    out: dict[str, float] = {}
    for part in text.split(" | "):
        part = part.strip()
        if not part:
            continue
        label, sep, rest = part.partition(":")
        if sep and rest.strip():
            label, raw = label.strip(), rest.strip()
        else:
            d = _duration(part)
            if d is not None:
                out["Time"] = d
                continue
            m = _VALUE.match(part)
            if not m or not m.group(1):
                continue
            label, raw = m.group(1).strip(), m.group(2)
        d = _duration(raw)
        if d is not None and raw.rstrip().endswith("s") and not raw.rstrip().endswith("/s"):
            out[label] = d
            continue
        token = raw.split()[0] if raw.split() else raw
        if "/" in token and not token.endswith("%"):
            a, _, b = token.partition("/")
            fa, fb = parse_number(a), parse_number(b)
            if fa is not None and fb:
                out[label] = fa / fb
            continue
        v = parse_number(token.replace(",", ""))
        if v is not None:
            out[label] = v
    return out


class PrimeConsoleReader(TextLogReader):
    name = "prime-rl-console"
    table = PRIME_RL_CONSOLE

    def accept(self, p: Path) -> bool:
        return _is_prime_console(p)

    def feed(self, st: FileState, text: str, p: Path, lineno: int) -> None:
        m = STEP.search(text)
        if not m:
            return
        values = parse_summary(m.group(2))
        role = "orchestrator" if ("Reward" in values or "Trainable" in values) else "trainer"
        record: dict[str, Any] = {f"{role}/{k}": v for k, v in values.items()}
        self.emit(int(m.group(1)), record)


class PrimeJsonlReader(JsonlMetricsReader):
    """Both layouts: ``outputs/{trainer,orchestrator}/metrics.jsonl`` (older) and one
    ``<run>/monitors/file/metrics.jsonl`` that every process appends to, each row naming its
    ``producer`` (``src/prime_rl/monitors/file/monitor.py``). Rows with ``"step": null`` are
    inference metrics sampled on wall time, not on a training step: left out with one note, never
    a warning per row."""

    name = "prime-rl"
    table = PRIME_RL
    glob = ("metrics.jsonl", "*.jsonl", "*/metrics.jsonl", "*/*/metrics.jsonl")

    def reset(self) -> None:
        super().reset()
        self._timed = 0

    def accept(self, p: Path) -> bool:
        return is_prime_metrics(p)

    def stream_of(self, p: Path) -> str | None:
        # Each process writes its own file (trainer/, orchestrator/); the file monitor's one
        # file interleaves them step by step.
        return str(p)

    def row(self, rec: dict[str, Any], p: Path, lineno: int) -> None:
        if "step" in rec and rec["step"] is None:
            self._timed += 1
            if self._timed == 1:
                self.run.notes.append(
                    f"{p}: rows with step null (inference metrics sampled on wall time, "
                    "prime-rl's file monitor) are not placed on training steps"
                )
            return
        super().row(rec, p, lineno)


_MARKERS = (
    '"mismatch_kl/',
    '"entropy/all/',
    '"off_policy/',
    '"train/agg/',
    '"optim/grad_norm"',
    '"inference/agg/',
)


def is_prime_metrics(p: Path) -> bool:
    """Whether ``p`` is prime-rl's own ``metrics.jsonl`` (its keys, in the first 64 kB)."""
    t = head(p, 64 << 10)
    return t.lstrip().startswith("{") and any(m in t for m in _MARKERS)


# The labels prime-rl's summaries print (trainer and orchestrator): a ``Step N | k: v`` line
# of another loop, with its own key names, is not prime-rl's (the console reader reads it).
_LABELS = re.compile(
    r"\| (?:Loss|Entropy|Mismatch KL|Grad\. Norm|LR|Reward|Trainable|Truncation|Peak Mem\.|"
    r"Throughput|MFU|Max Off-Policy|Time)(?::? [-+\d.])"
)
# prime-rl prints its trainer's and its orchestrator's summaries on lines of their own: a line
# with a label of each (``Step 3 | Reward: 0.4 | Loss: 0.1``) is a hand-written loop's.
_TRAINER_ONLY = re.compile(r"\| (?:Loss|Entropy|Mismatch KL|Grad\. Norm|MFU)\b")
_ORCHESTRATOR_ONLY = re.compile(r"\| (?:[\w .]*?\b)?(?:Reward|Trainable|Truncation|Turns)\b")


def _is_prime_console(p: Path) -> bool:
    m = STEP.search(head(p))
    if m is None or not _LABELS.search(m.group(0)):
        return False
    line = m.group(0)
    return not (_TRAINER_ONLY.search(line) and _ORCHESTRATOR_ONLY.search(line))


def _sniff_jsonl(path: Path) -> bool:
    if path.is_dir():
        return any(
            is_prime_metrics(p) for g in PrimeJsonlReader.glob for p in sorted(path.glob(g))[:20]
        )
    return sniff_glob(path, "*.jsonl", is_prime_metrics)


def _run_dir(d: Path, names: set[str]) -> bool:
    """One prime-rl run written by several processes: its trainer's and orchestrator's
    ``{trainer,orchestrator}/metrics.jsonl`` or console logs, or the file monitor's
    ``monitors/file/metrics.jsonl``."""
    if {"trainer", "orchestrator"} <= names:
        return all((d / n / "metrics.jsonl").is_file() for n in ("trainer", "orchestrator"))
    if {"trainer.log", "orchestrator.log"} <= names:
        return True
    return "monitors" in names and (d / "monitors" / "file" / "metrics.jsonl").is_file()


register(
    Format(
        "prime-rl",
        "prime-rl metrics.jsonl (outputs/{trainer,orchestrator}/ or monitors/file/ with a "
        "producer per row; several rows per step)",
        _sniff_jsonl,
        PrimeJsonlReader,
        priority=22,
        table=PRIME_RL,
        kind="JSONL",
        marks=_run_dir,
        sample_dirs=(r"step_\d+",),  # its checkpoints and weights, step_N each
    )
)
register(
    Format(
        "prime-rl-console",
        "prime-rl console summaries (Step N | ... | Loss x | Entropy x | ...)",
        lambda p: sniff_files(p, PrimeConsoleReader.patterns, _is_prime_console),
        PrimeConsoleReader,
        priority=36,
        table=PRIME_RL_CONSOLE,
        kind="console log",
    )
)
