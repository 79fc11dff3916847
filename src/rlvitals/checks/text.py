"""Degenerate text: the share of each update's samples that raise prime-rl's gibberish or
repetition detector or Trinity-RFT's 4-gram duplication test (``text/*_rate``: logged by the
framework, or measured by rlvitals on every sample with token ids, ``transcripts.degenerate``).

A rate past ``degenerate_share_warn`` in 3 of 5 updates is said (info) with the samples that
raised it where they are known. It warns only with a number that says the same from the
policy's side: repetition or duplication with the reply length growing or the entropy falling
to under ``text_entropy_fall`` of its start; gibberish with the entropy rising past
``text_entropy_rise`` times its start or the
sequences' mismatch tail past its line (a sampler far from the trainer writes gibberish).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .agreement import AgreementLines
from .base import Finding
from .context import ENTROPY, Context, finding, round_sig
from .sequences import seq_shares
from .stats import MIN_WINDOW, crossing, start_level, trend
from .thresholds import line, lines

NAME = "text"


@lines
@dataclass(frozen=True)
class TextLines:
    """Where the text check draws its lines."""

    degenerate_share_warn: float = line(
        0.05,
        "share of an update's samples raising a degenerate-text measure (gibberish, "
        "repetition, 4-gram duplication) said when it holds (3 of 5 updates)",
        "prime-rl's and Trinity-RFT's detectors flag single samples; a twentieth of an "
        "update, as mismatch_seq_share_warn",
    )
    text_entropy_fall: float = line(
        0.6,
        "repetition or duplication warns with the entropy under this share of its start",
        "science.md 2 (c): the early-warning ratio (entropy_fast_ratio)",
    )
    text_entropy_rise: float = line(
        1.5,
        "gibberish warns with the entropy past this many times its start",
        "a sampler far from the trainer writes near-uniform tokens: entropy rising by half, "
        "where RL only lowers it (science.md 2)",
    )


RATES = {
    "text/gibberish_rate": "gibberish (a rare token far below a uniform guess)",
    "text/repetition_rate": "repetition (a long run of near-certain tokens)",
    "text/ngram_dup_rate": "4-gram duplication past 0.5 (replies of 32+ tokens)",
}
# Where the sample readers keep the samples each measure flagged (step -> measure -> ids).
FLAGS_INFO = "text_flags"


def _entropy_ratio(ctx: Context, step: int) -> float | None:
    _n, s = ctx.series(*ENTROPY)
    if s is None or len(s) < MIN_WINDOW:
        return None
    h0 = start_level(s.values, MIN_WINDOW)
    after = s.since(step)
    if h0 <= 0 or not len(after):
        return None
    return float(after.values[-min(3, len(after)) :].mean()) / h0


def _length_growing(ctx: Context, step: int) -> bool:
    s = ctx.finite("response/length_mean")
    if s is None or len(s.since(step)) < MIN_WINDOW:
        return False
    tr = trend(s.since(step))
    return tr is not None and tr.rising


def _corroboration(ctx: Context, name: str, step: int) -> dict[str, Any]:
    """The numbers that say the same thing, by name (empty: none)."""
    out: dict[str, Any] = {}
    th = ctx.thresholds.of(TextLines)
    ratio = _entropy_ratio(ctx, step)
    if name == "text/gibberish_rate":
        if ratio is not None and ratio >= th.text_entropy_rise:
            out["entropy_ratio"] = round_sig(ratio)
        tail = seq_shares(ctx).series  # the tail past ``mismatch_seq_line``
        if tail is not None and len(tail.since(step)):
            share = float(tail.since(step).values.max())
            if share >= ctx.thresholds.of(AgreementLines).mismatch_seq_share_warn:
                out["mismatch_seq_over"] = round_sig(share)
    else:
        if ratio is not None and ratio < th.text_entropy_fall:
            out["entropy_ratio"] = round_sig(ratio)
        if _length_growing(ctx, step):
            out["length_growing"] = True
    return out


def _cited(ctx: Context, name: str, steps: list[int]) -> list[str]:
    flags = ctx.data.info.get(FLAGS_INFO)
    if not isinstance(flags, dict):
        return []
    kind = name.split("/")[1].rsplit("_rate", 1)[0]
    ids: list[str] = []
    for s in steps:
        got = flags.get(s, {})
        ids.extend(str(a) for a in got.get(kind, []) if isinstance(got, dict))
    return ids[:8]


def check(ctx: Context) -> list[Finding]:
    line = ctx.thresholds.of(TextLines).degenerate_share_warn
    out: list[Finding] = []
    for name, what in RATES.items():
        s = ctx.finite(name)
        if s is None or len(s) < 3:
            continue
        idx = crossing(s.values, line, points=True)
        if idx is None:
            continue
        step = int(s.steps[idx])
        seg = s.since(step)
        level = float(np.median(seg.values))
        peak = float(seg.values.max())
        backing = _corroboration(ctx, name, step)
        steps = [int(x) for x in seg.steps[:MIN_WINDOW]]
        ids = _cited(ctx, name, steps)
        title = f"{what}: {level:.0%} of the samples from step {step} (up to {peak:.0%})"
        if backing:
            title += ", with " + ", ".join(
                f"{k.replace('_', ' ')} {v}" if v is not True else k.replace("_", " ")
                for k, v in backing.items()
            )
        out.append(
            finding(
                NAME,
                "warn" if backing else "info",
                "drift" if name == "text/gibberish_rate" else "collapse",
                title,
                metric=name,
                first_step=step,
                steps=steps,
                line=line,
                level=round_sig(level),
                peak=round_sig(peak),
                corroborated_by=backing or None,
                attempt_ids=ids or None,
                action="Read the flagged samples: looping or garbled text that the reward "
                "still pays for trains the policy to write more of it. Check the sampling "
                "numerics (precision, the engine's kernels) for gibberish, the length limit "
                "and an entropy or repetition penalty for loops.",
            )
        )
    return out
