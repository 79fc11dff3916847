"""Flag every step of a run: per-step counts in, examples on demand.

``scan_run`` reads each step file once, flags its attempts and keeps only counts (a few numbers
per step), so memory does not grow with the transcripts. The counts of a file are cached by
its path, size and modification time (and the rules), so ``watch`` and repeated checks only
read new files. ``examples`` reads a few chosen steps again to cite flagged attempts. Each distinct reply is
looked at once per scan (``counts.py``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from ..model import RunData
from .counts import Kinds, count_step
from .flags import FAMILY_KEY, FAMILY_KEYS, Hit, Memo, StepAnalyzer, StepResult, flag_names
from .rules import Rules
from .store import TranscriptAttempt, TranscriptStore

__all__ = ["RunScan", "analyze_step", "cached_counts", "examples", "publish", "scan_run"]

SERIES_PREFIX = "transcripts/"
_CACHE_MAX = 200_000
_CACHE: OrderedDict[tuple[str, int, int, str], tuple[int, int, dict[str, int]]] = OrderedDict()


@dataclass
class RunScan:
    """Flag counts per step of a run's transcripts."""

    steps: np.ndarray  # (n,) int64: steps with a transcript file
    attempts: np.ndarray  # (n,) attempts in each file
    with_text: np.ndarray  # (n,) attempts that carry text (0 with trace = "samples")
    counts: dict[str, np.ndarray] = field(default_factory=dict)  # flag -> (n,) flagged
    flags: list[str] = field(default_factory=list)  # flags that were looked for

    @property
    def has_text(self) -> bool:
        return bool(self.with_text.sum() > 0)

    def rate(self, flag: str) -> np.ndarray:
        """Share of each step's attempts raising ``flag`` (NaN for a step without text)."""
        c = self.counts.get(flag, np.zeros(len(self.steps)))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.with_text > 0, c / np.maximum(self.attempts, 1), np.nan)

    def family_rate(self, family: str) -> np.ndarray:
        """Share of each step's attempts raising at least one flag of ``family``."""
        return self.rate(FAMILY_KEY + family)


def analyze_step(
    store: TranscriptStore, step: int, rules: Rules
) -> tuple[StepResult, list[TranscriptAttempt]]:
    """Flag the attempts of one step; returns the result and the attempts that raised flags
    (text and all: for showing them)."""
    an = StepAnalyzer(step, rules)
    flagged = []
    for a in store.iter_step(step):
        if an.add(a):
            flagged.append(a)
    res = an.finish()
    keep = {a.index for a in flagged}
    missing = set(res.hits) - keep
    if missing:  # flagged by the cross-attempt pass: read them again
        for a in store.iter_step(step):
            if a.index in missing:
                flagged.append(a)
    flagged.sort(key=lambda a: a.index)
    return res, flagged


def _count_step(
    store: TranscriptStore,
    step: int,
    rules: Rules,
    memo: Memo | None = None,
    kinds: Kinds | None = None,
    fp: str | None = None,
) -> tuple[int, int, dict[str, int]]:
    path = str(store.path(step))
    fk = store.file_key(step)
    key = (path, *(fk or (-1, -1)), fp or rules.fingerprint())
    got = _CACHE.get(key)
    if got is not None and fk is not None:
        _CACHE.move_to_end(key)
        return got
    out = None
    # Files in our format (a framework's sample dump has a store of its own): distinct replies.
    if kinds is not None and fk is not None and type(store) is TranscriptStore:
        out = count_step(path, fk[0], step, kinds)
    if out is None:  # a file the distinct-reply path cannot take as it is: one by one
        an = StepAnalyzer(step, rules, memo)
        for a in store.iter_step(step):
            an.add(a)
        res = an.finish()
        out = (res.attempts, res.with_text, res.counts(rules))
        if store.had_problem(step):
            return out
    if fk is not None:
        _CACHE[key] = out
        if len(_CACHE) > _CACHE_MAX:
            _CACHE.popitem(last=False)
    return out


def scan_run(
    store: TranscriptStore,
    rules: Rules,
    *,
    steps: Iterable[int] | None = None,
    progress: Callable[[int, int], None] | None = None,
    distinct: bool = True,
) -> RunScan:
    """Flag counts for every step file of the run (or ``steps``).

    Each distinct reply is analysed once (``counts.py``); ``distinct=False`` reads every
    attempt one by one instead (the same counts, slower: for comparing the two)."""
    todo = list(store.steps() if steps is None else steps)
    names = flag_names(rules)
    n = len(todo)
    attempts = np.zeros(n, dtype=np.int64)
    with_text = np.zeros(n, dtype=np.int64)
    counts = {f: np.zeros(n, dtype=np.int64) for f in [*names, *FAMILY_KEYS]}
    # One run, one set of rules: replies seen in earlier steps are not looked at again.
    memo: Memo = {}
    kinds = Kinds(rules) if distinct else None
    fp = rules.fingerprint()
    for i, s in enumerate(todo):
        a, t, c = _count_step(store, s, rules, memo, kinds, fp)
        attempts[i], with_text[i] = a, t
        for f, k in c.items():
            if f in counts:
                counts[f][i] = k
        if progress is not None:
            progress(i + 1, n)
    return RunScan(np.asarray(todo, dtype=np.int64), attempts, with_text, counts, names)


def cached_counts(
    run_dir: str, rules: Rules
) -> list[tuple[tuple[str, int, int, str], tuple[int, int, dict[str, int]]]]:
    """The counts of every step file of the run in our format, as entries of this module's
    cache: what another process (``fleet.judging``'s pre-scan) computes so that the process
    judging the run finds its files counted. An entry is only used for the same file, size,
    modification time and rules fingerprint, so a stale or foreign one is never read."""
    store = TranscriptStore(run_dir)
    if not store.exists:
        return []
    scan_run(store, rules)
    prefix = str(store.dir)
    return [(k, v) for k, v in _CACHE.items() if k[0].startswith(prefix)]


def take_counts(
    entries: list[tuple[tuple[str, int, int, str], tuple[int, int, dict[str, int]]]],
) -> None:
    """Add ``cached_counts``' entries to this process's cache."""
    for k, v in entries:
        _CACHE[k] = v
    while len(_CACHE) > _CACHE_MAX:
        _CACHE.popitem(last=False)


def examples(
    store: TranscriptStore,
    rules: Rules,
    steps: Iterable[int],
    flags: Iterable[str],
    *,
    limit: int = 3,
    rewarded_first: bool = True,
) -> list[tuple[TranscriptAttempt, list[Hit]]]:
    """Up to ``limit`` attempts from ``steps`` that raised any of ``flags`` (rewarded ones
    first unless ``rewarded_first`` is False, one per flag before a second of any), each with
    its hits among ``flags``."""
    want = list(flags)
    pool: list[tuple[TranscriptAttempt, list[Hit]]] = []
    for s in steps:
        res, flagged = analyze_step(store, s, rules)
        for a in flagged:
            hits = [h for h in res.hits.get(a.index, []) if h.flag in want]
            if hits:
                pool.append((a, hits))
        if len(pool) >= 8 * limit:
            break
    if rewarded_first:
        pool.sort(key=lambda p: (-(p[0].reward or 0.0), p[0].step, p[0].index))
    chosen: list[tuple[TranscriptAttempt, list[Hit]]] = []
    seen: set[str] = set()
    for a, hits in pool:  # one per flag first
        if len(chosen) >= limit:
            break
        if any(h.flag not in seen for h in hits):
            chosen.append((a, hits))
            seen.update(h.flag for h in hits)
    for p in pool:
        if len(chosen) >= limit:
            break
        if p not in chosen:
            chosen.append(p)
    return chosen


def publish(data: RunData, scan: RunScan) -> list[str]:
    """Add the per-step rates to ``data.metrics`` as ``transcripts/<flag>_rate`` (and
    ``transcripts/repetition_rate``, ``transcripts/flagged_rate``); returns the names."""
    if not len(scan.steps) or not scan.has_text:
        return []
    names = []
    ok = scan.with_text > 0
    steps = scan.steps[ok]
    for f in scan.flags:
        name = f"{SERIES_PREFIX}{f}_rate"
        data.metrics.replace(name, steps, scan.rate(f)[ok])
        names.append(name)
    for name, family in (("flagged_rate", "exploit"), ("repetition_rate", "collapse")):
        data.metrics.replace(SERIES_PREFIX + name, steps, scan.family_rate(family)[ok])
        names.append(SERIES_PREFIX + name)
    return names
