"""What every check reads: the run, the thresholds, the time, an optional baseline.

Thresholds live here, in one place, each with the source it comes from (docs/checks.md
says what each check holds a run against); a user can override any of them (``check --set name=value``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..errors import UsageError
from ..model import RunData, Series
from .base import Finding
from .composition import Components, read_components
from .stats import MIN_WINDOW

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
class Thresholds:
    """Where each check draws its lines. Shares are in [0, 1]."""

    # Liveness: a stall is no step record for this many typical step intervals (p90) ...
    stall_intervals: float = 10.0
    # ... and at least this many seconds (the seeds: no step lines after ten minutes at start).
    stall_min_seconds: float = 10.0
    start_timeout_seconds: float = 600.0
    # Heartbeats reporting the same phase and attempts done for this many typical steps (and
    # at least this many seconds): stalled, without waiting for the clock.
    stuck_intervals: float = 5.0
    stuck_min_seconds: float = 2.0
    # 5xx / connection-refused lines that go on this long (seconds), with gaps of at most this
    # many between them, mean the rollout engine died; bursts of a minute or less come from a
    # healthy engine (the Miles lab guide).
    engine_dead_seconds: float = 120.0
    engine_gap_seconds: float = 60.0
    # A silence this long (and a thousand typical steps) in a log with no end state: read long
    # after its run ended, most likely; said as information, not a stall.
    old_silence_seconds: float = 3600.0

    # Rejected groups at the start: too easy / too hard (peers: 0.5 warning, 0.75 critical;
    # a healthy GRPO run with heterogeneous tasks sits at 0.1-0.4).
    rejected_warn: float = 0.6
    rejected_fail: float = 0.9
    # Group spread relative to the run's own start, below which exploration has stopped.
    group_std_floor: float = 0.25
    # Later, without an all/none-solved breakdown: a share this far over the one the pass rate
    # gives (p^G + (1-p)^G) says the rewards are more deterministic than it implies.
    rejected_excess: float = 0.3
    # Groups agreeing while the policy's entropy holds at this share of its start or more did
    # not stop exploring: the tasks split by kind (the entropy check's collapse line is 0.3).
    rejected_entropy_held: float = 0.5
    # Every group of one update agreeing is not chance from this many groups (a TRL test run
    # has 4), where no gradient norm says whether anything trained.
    rejected_min_groups: int = 16

    # Failed attempts: a burst is this share of attempts failing in 3 of 5 steps.
    failure_burst_warn: float = 0.2
    failure_burst_fail: float = 0.5

    # Running out of room: truncation / max_turns share rising by this much over its start.
    room_rise: float = 0.2
    # ... or past this share while it still climbs, and half of it over the start
    # (science.md: truncation over 5% is a warning).
    room_creep: float = 0.05
    room_level: float = 0.5

    # Sampler/trainer agreement (tinker: stable when KL < 0.01; verl: |k1| > 0.1 significant,
    # ESS < 0.3 severe).
    mismatch_kl_warn: float = 0.01
    mismatch_kl_fail: float = 0.1
    mismatch_k1_fail: float = 0.1
    # A rise relative to the run's own start, above a floor that ignores rounding noise.
    mismatch_rise: float = 10.0
    mismatch_floor: float = 1e-4
    # A rise named by its trend before a line: the five-update mean this many times its start,
    # still rising significantly (log scale) from there.
    mismatch_trend_rise: float = 3.0
    # The mismatch by its distribution (NeMo-RL docs/guides/grpo.md: token_mult_prob_error
    # "past ~1-2%" is a problem; its code plots a sample past 1.05): the share of an update's
    # sequences past mismatch_seq_line that warns when it holds (3 of 5 updates), and the
    # token mean of exp(|Δ|) that warns when it holds without the run's own start already there.
    mismatch_seq_share_warn: float = 0.05
    mismatch_tme_warn: float = 1.02
    # The sequence ratio past which a sequence counts (NeMo-RL's plotting line; the writer
    # logs the share past 1.05, recounted from the attempts' own ratios at another line).
    mismatch_seq_line: float = 1.05
    # An excursion of the tail this many updates long or shorter, back under its line after,
    # is a spike (NeMo-RL's guide tells a spiky error from one that trends up).
    mismatch_spike_updates: int = 2
    # With a lag constant by design (async), the tail share and the token mean warn at this
    # many times their own start at that lag.
    mismatch_designed_rise: float = 3.0
    # Degenerate text (checks/text.py): the share of an update's samples raising a measure
    # (gibberish, repetition, 4-gram duplication) that is said when it holds (3 of 5 updates).
    degenerate_share_warn: float = 0.05
    # A run built to be bitwise consistent (1): any nonzero mismatch is a finding
    # (checks/ratio_findings.py; vLLM blog 2025-11-10: kl_div "always equals 0.0").
    strict_agreement: int = 0
    ess_token_fail: float = 0.3
    ess_seq_warn: float = 0.5
    # Stale attempts dropped, as a share of attempts.
    stale_share_warn: float = 0.2

    # Entropy relative to its own start (never absolute): collapse below these ratios.
    entropy_ratio_warn: float = 0.3
    entropy_ratio_fail: float = 0.1
    # Early warning (science.md 2c): under this ratio and still falling faster than this
    # (log-entropy per step, a significant trend), before the warn ratio is reached.
    entropy_fast_ratio: float = 0.6
    entropy_fast_slope: float = 0.02
    # Token entropy under this many nats on most updates of a log that starts mid-run: a
    # near-deterministic policy (a healthy instruct model on GSM8K sits at 0.02-0.04; half that).
    entropy_floor: float = 0.01
    # Entropy under its warn ratio with replies at or under this share of their start: the two
    # together are not sharpening.
    entropy_length_ratio: float = 0.5
    # Under entropy_ratio_fail while paying, the reward read for a plateau over its last third,
    # at least this many updates (science.md 2b: Mann-Kendall over the last 50 steps).
    entropy_plateau_steps: int = 50
    # Replies at or under this share of their start while the reward rises: a shortcut
    # (science.md: a length drop over 30% in 10 steps is a collapse sign; a healthy run's
    # replies may shorten by a third).
    length_collapse_ratio: float = 0.2
    # Replies under this share of their start on most updates while the reward does not rise:
    # a collapse (the wild corpus's TRL run whose replies fell from 39-96 tokens to 9).
    reply_collapse_ratio: float = 0.25
    # Trust region saturated (peers: clip fraction 10/20/40%).
    clip_frac_warn: float = 0.2
    # Gradient-norm spikes (8 robust sigmas) at this share of updates are a pattern, not luck.
    grad_spike_rate: float = 0.01
    # A gradient norm this many times the median of the updates before it is an explosion (the
    # peers' spike scenario dates its onset at 10x; healthy runs peak at 2.6-4.4x) ...
    grad_explosion: float = 10.0
    # ... and this many explosions are unstable updates even on a run that learns (rl-doctor's
    # grad_spikes scenario: 7 in 300 updates).
    grad_explosion_recurring: int = 3

    # KL to the reference (rl-doctor kl_drift: 0.5 is worth a look, 2.0 is far).
    ref_kl_warn: float = 0.5
    ref_kl_fail: float = 2.0

    # Reward components: a component holding this share of the reward's rise or spread
    # dominates it (rl-doctor's reward_composition: 70% of recent variance warns) ...
    component_dominant: float = 0.7
    # ... and in a short log (3-4 updates), an auxiliary share rising this much at every update
    # while the task component falls under this share of its first value.
    component_short_rise: float = 0.2
    component_short_fall: float = 2 / 3

    # System (this project's own lines, docs/checks.md): the last five updates this many times
    # slower than the first five is said (info); this many, held (3 of 5 five-update means)
    # and still slowing over the second half, warns; updates starting under this many seconds
    # are timer noise (a synthetic or replayed run), not a system.
    system_slower_info: float = 1.5
    system_slower_warn: float = 2.0
    system_min_seconds: float = 0.05

    # Reward flat over at least this many steps while groups carry signal: not learning.
    not_learning_min_steps: int = 30
    # A plateau: the last this share of the run (at least this many updates) without a trend,
    # no higher than before, below the top of the range, while groups carry signal
    # (rl-doctor: Mann-Kendall flat over the last 35%; science.md 2b reads the last 50 steps).
    plateau_share: float = 0.35
    plateau_min_steps: int = 50
    # A reward flat over at least this many updates (its last quarter within this many standard
    # errors of its first, or below it) is a plateau whatever the groups say (issue 27; the
    # wild corpus's plateau rule).
    flat_min_steps: int = 20
    flat_z: float = 2.0
    # Where a flat reward sits: within this share of the top (bottom) of its range saturated
    # (too hard); from group statistics, this share of groups all solved (none solved).
    plateau_level_edge: float = 0.2
    plateau_groups_edge: float = 0.5

    # Transcripts (docs/transcripts.md; a flag's own lines are the rules file's): the reward
    # climbing faster than the task allows, over five steps this many early-noise errors above
    # the early rate of rise and at least this share of the reward's range.
    jump_sigmas: float = 5.0
    jump_range: float = 0.1
    # Length exploitation: within-step |Spearman(reward, length)| at least this
    # (research/science.md), moved this far from its early value.
    length_rho: float = 0.3
    length_move: float = 0.2
    # The Bernoulli CUSUM limit (log-likelihood units) on a flag's counts.
    flag_cusum_h: float = 5.0
    # Entropy falling with a repetition flag: after its onset under this share of before.
    flag_entropy_drop: float = 0.85
    # Replies at or under this share of their start while the reward rises back a relative
    # flag (policy.py calls a fifth a shortcut on its own).
    flag_length_collapse: float = 0.25

    # Held-out: at least this many evaluations to judge divergence.
    heldout_min_evals: int = 3
    # A train rise under this share of the reward's range is not held against held-out.
    heldout_min_gain: float = 0.05
    # A train gain of at least this share of the range that held-out follows by under this
    # share of it is divergence too (rl-doctor's length-hacking test: eval gain under 25%).
    heldout_lag_gain: float = 0.3
    heldout_lag_share: float = 0.25

    def with_overrides(self, pairs: dict[str, str]) -> Thresholds:
        """A copy with ``name=value`` overrides (from the CLI), each checked."""
        known = {f.name: f for f in dataclasses.fields(self)}
        values: dict[str, Any] = {}
        for name, raw in pairs.items():
            if name not in known:
                raise UsageError(
                    f"unknown threshold {name!r}; expected one of: {', '.join(sorted(known))}"
                )
            try:
                values[name] = int(raw) if known[name].type in (int, "int") else float(raw)
            except ValueError:
                raise UsageError(f"threshold {name}: expected a number (not {raw!r})") from None
        return dataclasses.replace(self, **values)


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
        st = self.data.info.get("status")
        return st if isinstance(st, str) else None

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

    def reward_margin(self, noise: float) -> float:
        """How far a mean of the reward over five updates must move from another such mean to
        count as a change: three step-noise sigmas of the difference of two such means, and
        at least 2% of the reward's range."""
        lo, hi = self.reward_bounds
        return max(3 * noise * math.sqrt(2 / MIN_WINDOW), 0.02 * (hi - lo))

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
