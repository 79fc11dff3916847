"""Miles and slime console logs: ``rollout N: {...}``, ``step N: {...}``, ``perf N: {...}``.

Each rollout id N prints a ``perf N`` line from the rollout side, a ``rollout N`` line of
trainer-batch means, one ``step N`` line per optimizer step (Miles' Megatron backend prints it
twice) and a second ``perf N`` line of trainer timings. All lines of one N merge into step N,
which assumes one optimizer step per rollout (the default, global batch = rollout batch).

Derived after each read:
- ``groups/all_solved`` / ``groups/none_solved`` from ``rollout/zero_std/count_<r>``: the count
  of zero-variance groups at the run's top (bottom) reward. A step that reports some
  zero-variance bucket but not the top one had none at the top.
- Miles only: ``train/entropy`` from ``train/entropy_loss`` unless every value is exactly 0.0,
  the placeholder Miles logs when entropy is neither used nor observed.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..model import RunData
from ._format import Format, register
from .base import FileState
from .mapping import MappingTable, Rule, synonym
from .textlog import TextLogReader, head, sniff_files

__all__ = ["MILES", "SLIME", "MilesReader", "SlimeReader"]

LINE = re.compile(
    r"(?:^|(?<![Gg]lobal)\s)(critic-step|multi_turn|rollout|step|perf|eval) (\d+):\s*(\{.*)$", re.M
)
ZERO_STD = re.compile(r"^rollout/zero_std/count_(.+)$")

_COMMON = (
    synonym("rollout/raw_reward", "trainer line; before GRPO normalisation"),
    Rule("rollout/response_lengths", "response/length_mean", "trainer-batch mean"),
    Rule("rollout/response_len/mean", "response/length_mean", "perf line, loss-masked"),
    Rule("rollout/truncated", "response/truncated_rate", "trainer-batch rate"),
    Rule("rollout/truncated_ratio", "response/truncated_rate", "perf line"),
    Rule("train/train_rollout_logprob_abs_diff", "train/logprob_abs_diff"),
    Rule("train/loss", "train/loss"),
    Rule("train/grad_norm", "train/grad_norm", "before clipping"),
    Rule("train/lr-pg_0", "train/lr", "first param group"),
    Rule("train/pg_clipfrac", "train/clip_frac"),
    Rule("train/ppo_kl", "train/ppo_kl", "k1 of old vs current logp"),
    Rule("train/kl_loss", "train/ref_kl", "only with --use-kl-loss; estimator --kl-loss-type"),
    Rule("perf/step_time", "perf/step_seconds"),
    synonym("perf/rollout_time"),
    Rule("perf/actor_train_time", "perf/training_seconds"),
)

_UNMAPPED = (
    ("rollout/rewards", "post-processed reward, ≈0 after GRPO normalisation; not the reward"),
    ("train/ess_ratio", "ESS of the PPO update ratio (current vs old), not sampler vs trainer"),
    ("rollout/weight_version/*", "sampler weight versions, not lags"),
    ("perf/tokens_per_gpu_per_sec", "per GPU, not the run's tokens per second"),
    ("rollout/zero_std/all_zero_percentage", "wrong with integer rewards; counts used instead"),
)

MILES = MappingTable(
    "miles",
    (
        *_COMMON,
        Rule("train/train_rollout_kl", "train/mismatch_kl", "k3 (low_var_kl, clamped ±10)"),
        Rule("rollout/fully_async/avg_staleness", "freshness/lag_mean", "fully async mode"),
        Rule("rollout/fully_async/max_staleness", "freshness/lag_max", "fully async mode"),
        Rule("rollout/zero_std/count_<top>", "groups/all_solved", "derived: r = top reward"),
        Rule("rollout/zero_std/count_<bottom>", "groups/none_solved", "derived: r = bottom"),
        Rule(
            "train/entropy_loss",
            "train/entropy",
            "derived: only if some value is not 0.0 (0.0 is a placeholder)",
        ),
    ),
    _UNMAPPED,
    (
        "rollout N and step N lines merge into step N (one optimizer step per rollout).",
        "With --use-rollout-logprobs, train_rollout_kl and abs_diff are identically 0.",
    ),
)

SLIME = MappingTable(
    "slime",
    (
        *_COMMON,
        Rule("train/entropy_loss", "train/entropy", "slime always computes entropy"),
        Rule("rollout/zero_std/count_<top>", "groups/all_solved", "derived: r = top reward"),
        Rule("rollout/zero_std/count_<bottom>", "groups/none_solved", "derived: r = bottom"),
    ),
    (
        *_UNMAPPED,
        ("train/train_rollout_kl", "slime does not log it: train/mismatch_kl is absent"),
    ),
    ("slime's abs_diff is against the current logp when --use-rollout-logprobs is set.",),
)

# Rules listed for the docs but computed in derive(), not by the Mapper.
_DERIVED = {"rollout/zero_std/count_<top>", "rollout/zero_std/count_<bottom>"}


def _mapped(table: MappingTable, also: tuple[str, ...] = ()) -> MappingTable:
    skip = _DERIVED | set(also)
    return MappingTable(
        table.name, tuple(r for r in table.rules if r.source not in skip), table.unmapped
    )


class MilesReader(TextLogReader):
    """Miles console logs (also reads slime's; see SlimeReader for slime's mapping)."""

    name = "miles"
    table = _mapped(MILES, ("train/entropy_loss",))
    entropy_placeholder = True

    def accept(self, p: Path) -> bool:
        return _looks_like(p)

    def feed(self, st: FileState, text: str, p: Path, lineno: int) -> None:
        m = LINE.search(text)
        if m:
            self.start_dict(st, int(m.group(2)), m.group(3), p, lineno)
        else:
            self.continue_dict(st, text, p)

    def derive(self) -> None:
        derive_miles(self.run, placeholder=self.entropy_placeholder)


class SlimeReader(MilesReader):
    name = "slime"
    table = _mapped(SLIME)
    entropy_placeholder = False


def derive_miles(run: RunData, *, placeholder: bool) -> None:
    """The zero-std group counts, and (Miles) the entropy unless it is only a placeholder."""
    _derive_zero_std(run)
    if placeholder:
        ent = run.series("train/entropy_loss")
        if ent is not None and bool(np.any(ent.values != 0.0)):
            run.metrics.replace("train/entropy", ent.steps, ent.values)
            run.original["train/entropy"] = "train/entropy_loss"
        else:
            run.metrics.discard("train/entropy")
            run.original.pop("train/entropy", None)


def _derive_zero_std(run: RunData) -> None:
    buckets: dict[float, str] = {}
    for name in run.metrics.names():
        m = ZERO_STD.match(name)
        if m:
            try:
                buckets[float(m.group(1))] = name
            except ValueError:
                continue
    if not buckets:
        return
    values = sorted(buckets)
    top = values[-1] if (len(values) > 1 or values[0] >= 1) else None
    bottom = values[0] if (len(values) > 1 or values[0] <= 0) else None
    series = [run.metrics.get(n) for n in buckets.values()]
    all_steps = np.unique(np.concatenate([s.steps for s in series if s is not None]))
    for target, r in (("groups/all_solved", top), ("groups/none_solved", bottom)):
        if r is None:
            continue
        s = run.metrics.get(buckets[r])
        vals = np.zeros(len(all_steps))
        if s is not None:
            vals[np.searchsorted(all_steps, s.steps)] = s.values
        run.metrics.replace(target, all_steps, vals)
        run.original[target] = buckets[r]


_MS_TIME = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}")
_MILES_ONLY = ("train/train_rollout_kl", "rollout/weight_version", "all_zero_percentage")


def _looks_like(p: Path) -> bool:
    return bool(LINE.search(head(p)))


def _is_miles_text(text: str) -> bool:
    return bool(_MS_TIME.search(text)) or any(k in text for k in _MILES_ONLY)


def _sniff_miles(path: Path) -> bool:
    return sniff_files(
        path,
        MilesReader.patterns,
        lambda p: (t := head(p)) and LINE.search(t) and _is_miles_text(t),
    )


def _sniff_slime(path: Path) -> bool:
    return sniff_files(path, MilesReader.patterns, lambda p: bool(LINE.search(head(p))))


register(
    Format(
        "miles",
        "Miles console log (rollout N / step N / perf N dict lines)",
        _sniff_miles,
        MilesReader,
        priority=30,
        table=MILES,
        kind="console log",
        over=("slime",),
    )
)
register(
    Format(
        "slime",
        "slime console log (the parent of Miles: same lines, no ms in timestamps)",
        _sniff_slime,
        SlimeReader,
        priority=31,
        table=SLIME,
        kind="console log",
    )
)
