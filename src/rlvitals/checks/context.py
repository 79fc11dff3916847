"""What every check reads: the run, the thresholds, the time, an optional baseline.

Each check declares its own thresholds beside its rules, every one with its source
(``checks/thresholds.py``); ``Thresholds`` holds them all, and a user can override any of them
(``check --set name=value``). docs/checks.md lists them.
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..model import RunData, Series
from .base import Finding
from .composition import Components, read_components
from .stats import MARGIN_RANGE, MARGIN_SIGMAS, MIN_WINDOW
from .thresholds import Thresholds

if TYPE_CHECKING:
    from ..transcripts.rules import Rules
    from ..transcripts.scan import RunScan
    from ..transcripts.store import TranscriptStore

__all__ = ["ENTROPY", "Context", "Thresholds"]

# A rules file for the run's transcripts: this environment variable, else one of these in the
# run directory.
RULES_ENV = "RLVITALS_TRANSCRIPT_RULES"
RULES_FILES = ("transcript-rules.toml", "transcript-rules.json")
# The policy's entropy, as the checks read it: the sampler's estimate where logged (the policy
# that made the attempts), else the trainer's.
ENTROPY = ("sampling/entropy_estimate", "train/entropy")


@dataclass
class Context:
    """The run under judgement and what the checks share about it.

    What several checks need is computed once, on first use, as a typed cached property
    (reward bounds, the transcript scan, the reward components...); series derived while
    judging live in ``derived`` (filled by ``derive.derive`` before the checks run) and are
    read through ``series``/``finite`` like the run's own, never written into the run.
    """

    data: RunData
    thresholds: Thresholds = field(default_factory=Thresholds)
    now: float | None = None
    stall_after: float | None = None
    baseline: dict[str, Any] | None = None
    transcript_rules: str | None = None
    derived: dict[str, Series] = field(default_factory=dict)
    # What a check concluded that other checks read, each computed once (``fact``).
    facts: dict[Callable[[Context], Any], Any] = field(
        default_factory=dict, repr=False, compare=False
    )

    def _get(self, name: str) -> Series | None:
        got = self.derived.get(name)
        return got if got is not None else self.data.series(name)

    def series(self, *names: str) -> tuple[str, Series] | tuple[None, None]:
        """The first of ``names`` the run measured finitely at least once, as (name, series)
        of its finite values; (None, None) if none."""
        for name in names:
            s = self._get(name)
            if s is not None:
                fin = s.finite()
                if len(fin):
                    return name, fin
        return None, None

    def finite(self, name: str) -> Series | None:
        s = self._get(name)
        if s is None:
            return None
        fin = s.finite()
        return fin if len(fin) else None

    def current_time(self) -> float:
        return self.now if self.now is not None else time.time()

    @property
    def status(self) -> str | None:
        """The run's end state as recorded (``info["status"]``). An HF Trainer state records
        none, but its ``global_step`` reaching ``max_steps`` (transformers' TrainerState: the
        update steps training was asked to run) is a run trained to its end: ``finished``. A
        checkpoint saved mid-run is behind it; a live replay's prefix is ``running``."""
        st = self.data.info.get("status")
        if isinstance(st, str):
            return st
        done, asked = self.data.info.get("global_step"), self.data.info.get("max_steps")
        if (
            isinstance(done, int)
            and isinstance(asked, int)
            and not isinstance(done, bool)
            and not isinstance(asked, bool)
            and asked > 0
            and done >= asked
        ):
            return "finished"
        return None

    @property
    def config(self) -> dict[str, Any]:
        cfg = self.data.info.get("config")
        return cfg if isinstance(cfg, dict) else {}

    def config_value(self, section: str, key: str, default: Any = None) -> Any:
        sec = self.config.get(section)
        if isinstance(sec, dict) and key in sec:
            return sec[key]
        return default

    def config_find(self, *keys: str) -> tuple[str, Any] | None:
        """The first of ``keys`` anywhere in the run's config (any depth), as (key, value)."""
        todo: list[Any] = [self.config]
        found: dict[str, Any] = {}
        while todo:
            node = todo.pop()
            if isinstance(node, dict):
                for k, v in node.items():
                    if k in keys and k not in found and not isinstance(v, (dict, list)):
                        found[k] = v
                    elif isinstance(v, dict):
                        todo.append(v)
        for k in keys:
            if k in found:
                return k, found[k]
        return None

    @cached_property
    def step_count(self) -> int:
        """Number of step records (updates) seen."""
        return len(self.data.steps())

    def last_write_time(self) -> float | None:
        """When the source last changed on disk (newest file of a run directory)."""
        path = self.data.source
        try:
            if os.path.isdir(path):
                times = [
                    e.stat().st_mtime for e in os.scandir(path) if e.is_file(follow_symlinks=False)
                ]
                return max(times) if times else None
            return os.path.getmtime(path)
        except OSError:
            return None

    def attempts_per_step(self, steps: np.ndarray) -> np.ndarray | None:
        """Attempts per update at ``steps`` (NaN where unknown), or None if the run never
        says: from the attempts table."""
        a = self.data.attempts
        if a is not None and len(a) and len(steps):
            lo = int(min(steps.min(), a.step.min()))
            counts = np.bincount(a.step - lo)
            idx = steps - lo
            ok = (idx >= 0) & (idx < len(counts))
            out = np.full(len(steps), np.nan)
            out[ok] = counts[idx[ok]]
            return out
        return None

    @cached_property
    def reward_bounds(self) -> tuple[float, float]:
        """The reward's bottom and top: configured range, else observed, else [0, 1]. Read
        once per check of a run (several checks scale by it; the attempts table can be
        large)."""
        rr = self.config_value("rollout", "reward_range")
        if isinstance(rr, list) and len(rr) == 2:
            return float(rr[0]), float(rr[1])
        lo, hi = math.inf, -math.inf
        for name in ("reward/mean_with_unusable", "reward/mean"):
            s = self.finite(name)
            if s is not None:
                lo, hi = min(lo, float(s.values.min())), max(hi, float(s.values.max()))
        if self.data.attempts is not None and len(self.data.attempts):
            r = self.data.attempts.reward[~self.data.attempts.reward_missing]
            r = r[np.isfinite(r)]
            if len(r):
                lo, hi = min(lo, float(r.min())), max(hi, float(r.max()))
        lo, hi = min(lo, 0.0), max(hi, 1.0)
        return lo, hi

    @cached_property
    def reward_top_known(self) -> bool:
        """Whether the reward's top is known: a configured range (``rollout.reward_range``),
        or a score in [0, 1] (every value within it: a pass rate, by convention). A reward
        that leaves [0, 1] with no configured range (summed components, a shaped reward) has
        only its observed range, whose top is the run's own best: a reward that stopped
        rising always sits near it, so "high" is not read off it."""
        if isinstance(self.config_value("rollout", "reward_range"), list):
            return True
        lo, hi = self.reward_bounds
        return lo >= 0 and hi <= 1

    def reward_margin(self, noise: float) -> float:
        """How far a mean of the reward over five updates must move from another such mean to
        count as a change: three step-noise sigmas of the difference of two such means, and
        at least 2% of the reward's range."""
        lo, hi = self.reward_bounds
        return max(MARGIN_SIGMAS * noise * math.sqrt(2 / MIN_WINDOW), MARGIN_RANGE * (hi - lo))

    # -- transcripts -------------------------------------------------------------------------

    @cached_property
    def rules(self) -> Rules:
        """The transcript rules: the file ``transcript_rules`` names (``rlvitals.judge``
        chose it: ``--rules``, $RLVITALS_TRANSCRIPT_RULES or transcript-rules.toml in the run
        directory), else the defaults. A bad file raises ConfigError naming the key."""
        from ..transcripts.rules import Rules, load_rules

        path = self.transcript_rules
        return load_rules(path) if path else Rules()

    @cached_property
    def transcript_store(self) -> TranscriptStore | None:
        """The run's transcripts, where ``rlvitals.source`` says they are."""
        from ..source import transcript_store

        return transcript_store(self.data)

    def judging_warnings(self) -> list[str]:
        """What reading the transcripts while judging found wrong with their files, one line
        each (for ``Report.warnings``; never written into the run)."""
        store = self.__dict__.get("transcript_store")
        return list(store.warnings) if store is not None else []

    @cached_property
    def transcript_scan(self) -> RunScan | None:
        """Flag counts of the run's transcripts, over the steps the run has reached (a replay
        through RunData.until, or step files written ahead of their step records); None when
        the run has none."""
        from ..transcripts.scan import scan_run

        store = self.transcript_store
        if store is None:
            return None
        last = self.data.last_step
        todo = [s for s in store.steps() if last is None or s <= last]
        sc = scan_run(store, self.rules, steps=todo)
        return sc if len(sc.steps) else None

    @cached_property
    def components(self) -> Components:
        """The reward's components, read once (checks/composition.py)."""
        return read_components(self)


T = TypeVar("T")


def fact(conclude: Callable[[Context], T]) -> Callable[[Context], T]:
    """``conclude(ctx)`` computed once per judging: a check's conclusion that other checks
    read (is the run learning, were its groups rejected from the start), kept on the Context
    (``Context.facts``), never on the run. A check module declares its facts with this; a
    check that reads one imports it from there, so the dependence runs one way."""

    @functools.wraps(conclude)
    def once(ctx: Context) -> T:
        if conclude not in ctx.facts:
            ctx.facts[conclude] = conclude(ctx)
        return ctx.facts[conclude]

    return once


def finding(
    check: str,
    severity: str,
    verdict: str,
    title: str,
    *,
    metric: str | None = None,
    first_step: int | None = None,
    action: str = "",
    detail: str = "",
    steps: list[int] | None = None,
    **evidence: Any,
) -> Finding:
    """A Finding with its evidence given as keyword arguments (plain numbers and lists)."""
    clean: dict[str, Any] = {}
    for k, v in evidence.items():
        if isinstance(v, np.generic):
            v = v.item()
        elif isinstance(v, np.ndarray):
            v = v.tolist()
        clean[k] = v
    marks = list(steps or [])
    if first_step is not None and first_step not in marks:
        marks.insert(0, int(first_step))
    return Finding(
        check=check,
        severity=severity,
        verdict=verdict,
        title=title,
        metric=metric,
        first_step=None if first_step is None else int(first_step),
        evidence=clean,
        action=action,
        detail=detail,
        steps=[int(x) for x in marks],
    )


def round_sig(x: float, digits: int = 4) -> float:
    """``x`` to ``digits`` significant digits, for evidence a person reads."""
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, -math.floor(math.log10(abs(x))) + digits - 1)
