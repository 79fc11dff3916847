"""Degenerate text measured on every sample that carries its sampled token ids and logprobs.

Three measures, each with its source, counted per update as the share of samples that raise it
(``text/gibberish_rate``, ``text/repetition_rate``, ``text/ngram_dup_rate``). Every sample is
measured: "a rate is only a rate if nothing decided in advance which traces to look at"
(prime-rl ``src/prime_rl/orchestrator/degeneracy.py``).

gibberish
    a sampled token of a rare id (``> GIBBERISH_MIN_ID``) at a logprob below
    ``-ln(V) - GIBBERISH_MARGIN``: far less likely than a uniform guess over the vocabulary
    (prime-rl, from arXiv 2510.02387 §5.2). Needs the vocabulary size; without it, not measured.
repetition
    a run of at least ``REPETITION_RUN`` consecutive tokens each sampled at a probability above
    ``REPETITION_P`` (prime-rl, from arXiv 2506.13585 §3.2): the model looping on itself.
ngram duplication
    in a reply of at least ``NGRAM_MIN_TOKENS`` tokens, the share of its 4-grams that repeat
    an earlier one, past ``NGRAM_DUP_LINE`` (agentscope-ai/Trinity-RFT #620).

This module measures only; the checks decide what a rate means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "DegenerateCounts",
    "gibberish",
    "ngram_dup_ratio",
    "repetition_run",
]

GIBBERISH_MIN_ID = 100_000
GIBBERISH_MARGIN = 2.0
REPETITION_RUN = 3_000
REPETITION_P = 0.99
NGRAM = 4
NGRAM_MIN_TOKENS = 32
NGRAM_DUP_LINE = 0.5


def gibberish(ids: np.ndarray, logprobs: np.ndarray, vocab_size: int) -> bool:
    """Whether any sampled token of a rare id has a logprob far below uniform."""
    if vocab_size <= GIBBERISH_MIN_ID or len(ids) != len(logprobs):
        return False
    line = -math.log(vocab_size) - GIBBERISH_MARGIN
    return bool(np.any((ids > GIBBERISH_MIN_ID) & (logprobs < line)))


def repetition_run(logprobs: np.ndarray, p: float = REPETITION_P) -> int:
    """The longest run of consecutive tokens sampled at probability above ``p``."""
    hot = np.asarray(logprobs) > math.log(p)
    if not hot.any():
        return 0
    edges = np.flatnonzero(np.diff(np.concatenate(([0], hot.astype(np.int8), [0]))))
    return int((edges[1::2] - edges[::2]).max())


def ngram_dup_ratio(ids: np.ndarray, n: int = NGRAM) -> float | None:
    """Share of a reply's n-grams that repeat an earlier one; None under NGRAM_MIN_TOKENS."""
    ids = np.asarray(ids)
    if len(ids) < max(NGRAM_MIN_TOKENS, n):
        return None
    grams = np.lib.stride_tricks.sliding_window_view(ids, n)
    distinct = len(np.unique(grams, axis=0))
    return 1.0 - distinct / len(grams)


@dataclass
class DegenerateCounts:
    """One update's samples measured; ``rates()`` gives the step metrics, ``flagged`` the
    sample indices behind each, so a flag can cite its attempts."""

    vocab_size: int | None = None
    measured: int = 0  # samples with token ids
    with_logprobs: int = 0  # samples with sampled logprobs (and ids, where they have both)
    with_both: int = 0  # samples with ids and their logprobs (what gibberish needs)
    long_replies: int = 0
    flagged: dict[str, list[int]] = field(
        default_factory=lambda: {"gibberish": [], "repetition": [], "ngram_dup": []}
    )

    def add(self, i: int, ids: Any, logprobs: Any) -> None:
        """Measure sample ``i``: its generated token ids (duplication; gibberish with the
        logprobs) and their sampled logprobs (repetition needs only these)."""
        if ids is not None:
            ids = np.asarray(ids, dtype=np.int64)
            self.measured += 1
            dup = ngram_dup_ratio(ids)
            if dup is not None:
                self.long_replies += 1
                if dup > NGRAM_DUP_LINE:
                    self.flagged["ngram_dup"].append(i)
        if logprobs is None:
            return
        lp = np.asarray(logprobs, dtype=np.float64)
        if ids is not None and len(lp) != len(ids):
            return
        self.with_logprobs += 1
        if repetition_run(lp) >= REPETITION_RUN:
            self.flagged["repetition"].append(i)
        if ids is not None:
            self.with_both += 1
            if self.vocab_size and gibberish(ids, lp, self.vocab_size):
                self.flagged["gibberish"].append(i)

    def rates(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.with_logprobs:
            out["text/repetition_rate"] = len(self.flagged["repetition"]) / self.with_logprobs
        if self.with_both and self.vocab_size:
            out["text/gibberish_rate"] = len(self.flagged["gibberish"]) / self.with_both
        if self.long_replies:
            out["text/ngram_dup_rate"] = len(self.flagged["ngram_dup"]) / self.long_replies
        return out
