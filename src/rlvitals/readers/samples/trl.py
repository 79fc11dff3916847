"""TRL ``log_completions=True``: ``<output_dir>/completions/completions_{step:05d}.parquet``.

``GRPOTrainer.log`` writes it on the main process after ``super().log()`` (so after the
callbacks' ``on_log``), from ``pandas.DataFrame(table).to_parquet(...)`` with the columns
``step, prompt, completion, <one per reward function>, <extra columns>, advantage``
(trl 1.16.0 ``trl/trainer/grpo_trainer.py:3323-3357``; the buffers are deques of
``generation_batch_size`` rows, :1088-1095, filled at :2833-2844). A reward column holds that
function's raw reward, NaN where it did not apply; the total reward is their weighted sum
(:2818, ``reward_weights``, 1 each by default). A prompt is text or chat messages.

Groups: TRL repeats each prompt ``num_generations`` times in a batch (``RepeatSampler``), so a
group is the rows of one file with the same prompt. Reward columns are told from extra columns
by the run's own ``rewards/<func>/mean`` keys where the run has them, else every numeric
column between ``completion`` and ``advantage`` is a reward function. The file has no token
counts and no sampler version (the trainer is synchronous). When one generation is trained
over several steps (``num_iterations > 1``) TRL writes the same rows again: a file equal to the
one before is counted once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ...errors import MissingExtraError
from ...model import RunData
from ...transcripts.store import TranscriptAttempt
from .base import DumpFormat, Sample, digest, file_time, register_dump, transcript

__all__ = ["CompletionRows", "TrlCompletions", "numeric_column", "read_table", "total_reward"]

_FILE = re.compile(r"^completions_(\d+)\.parquet$")
_FIXED = ("step", "prompt", "completion", "advantage")


def read_table(path: Path, warn: Any = None) -> dict[str, list[Any]]:
    """A completions parquet as columns of Python values (within ``_parquet``'s bound; what
    lies past it is left unread, with one ``warn``)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError("trl", "reading TRL completions parquet") from None
    from .._parquet import read_bounded

    table = read_bounded(pq, path, warn if warn is not None else (lambda _m: None))
    return {name: table.column(name).to_pylist() for name in table.column_names}


def numeric_column(values: list[Any]) -> bool:
    """Whether a column holds only numbers (or nothing): a reward function's, not text."""
    return all(
        v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values
    )


def total_reward(row: list[float | None], weights: list[float]) -> float | None:
    """TRL's total: the weighted sum of the functions that applied (nansum); None when none
    did (an unscorable completion)."""
    total = 0.0
    applied = False
    for v, w in zip(row, weights):
        if v is None or v != v:
            continue
        total += w * v
        applied = True
    return total if applied else None


class CompletionRows(DumpFormat):
    """TRL's completions table, one file per logged table: a group per prompt, the reward the
    weighted sum of the reward-function columns. Subclasses say where the files are and how
    one is read into columns (``_load``): TRL's parquet here, W&B's tables in ``wandb``."""

    # No reward from any function is NaN or None from every one (TRL warns "All reward
    # functions returned None"); the row's advantage is then 0.
    missing_reward_is_nan = True

    def __init__(self, reward_weights: dict[str, float] | None = None) -> None:
        self.known_rewards: set[str] = set()
        self.weights = dict(reward_weights or {})
        self._previous: str | None = None
        self._repeats: set[int] = set()

    def bind(self, run: RunData) -> None:
        for name in run.metrics.names():
            # rewards/<func>/mean as logged, or train/rewards/<func>/mean through TensorBoard
            m = re.search(r"(?:^|/)rewards/(.+)/mean$", name)
            if m:
                self.known_rewards.add(m.group(1))

    def reward_columns(self, columns: dict[str, list[Any]]) -> list[str]:
        """The reward-function columns of a file, in file order."""
        names = list(columns)
        try:
            lo, hi = names.index("completion") + 1, names.index("advantage")
        except ValueError:
            lo, hi = 0, len(names)
        middle = [c for c in names[lo:hi] if c not in _FIXED]
        if self.known_rewards:
            return [c for c in middle if c in self.known_rewards]
        return [c for c in middle if numeric_column(columns[c])]

    def _load(self, p: Path, warn: Callable[[str], None]) -> dict[str, list[Any]] | None:
        """One file's columns (``prompt`` and ``completion`` among them), or None after one
        warning naming the file."""
        raise NotImplementedError

    def _rows(
        self, step: int, cols: dict[str, list[Any]]
    ) -> Iterator[tuple[int, Any, Any, float | None, dict[str, Any]]]:
        rewards = self.reward_columns(cols)
        weights = [self.weights.get(c, 1.0) for c in rewards]
        extra = [c for c in cols if c not in _FIXED and c not in rewards]
        n = len(cols["prompt"])
        adv = cols.get("advantage")
        for i in range(n):
            parts = [cols[c][i] for c in rewards]
            meta: dict[str, Any] = {}
            for c, v in zip(rewards, parts):
                if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
                    meta[c] = float(v)
            for c in extra:
                v = cols[c][i]
                if isinstance(v, (int, float, bool)):
                    meta[c] = v
            if adv is not None and isinstance(adv[i], (int, float)):
                meta["advantage"] = float(adv[i])
            yield i, cols["prompt"][i], cols["completion"][i], total_reward(parts, weights), meta

    def read_step(
        self,
        step: int,
        files: list[Path],
        index: Callable[[Path], int],
        warn: Callable[[str], None],
    ) -> Iterator[Sample]:
        for p in files:
            cols = self._load(p, warn)
            if cols is None:
                continue
            key = digest(repr(sorted((k, v) for k, v in cols.items() if k != "step")))
            if key == self._previous:
                self._repeats.add(step)
                warn(
                    f"{p}: the same completions as the step before (one generation trained "
                    "over several steps); counted once"
                )
                continue
            self._previous = key
            t = file_time(p)
            fi = index(p)
            for i, prompt, _completion, reward, meta in self._rows(step, cols):
                g = digest(prompt)
                meta.pop("advantage", None)
                yield Sample(
                    step=step,
                    group=g,
                    task_id=g,
                    reward=reward,
                    metadata=meta,
                    file=fi,
                    offset=i,
                    time=t,
                )

    def transcripts(
        self, step: int, files: list[Path], warn: Callable[[str], None]
    ) -> Iterator[TranscriptAttempt]:
        if step in self._repeats:
            return
        for p in files:
            cols = self._load(p, warn)
            if cols is None:
                continue
            for i, prompt, completion, reward, _meta in self._rows(step, cols):
                g = digest(prompt)
                yield transcript(
                    step,
                    i,
                    group=g,
                    task_id=g,
                    reward=reward,
                    trained=None,
                    prompt=prompt,
                    completion=completion,
                )


class TrlCompletions(CompletionRows):
    name = "trl"
    priority = 10
    sample_dirs = ("completions",)
    description = "TRL log_completions (completions/completions_{step:05d}.parquet)"
    default_subdir = "completions"
    file_pattern = _FILE

    def _load(self, p: Path, warn: Callable[[str], None]) -> dict[str, list[Any]] | None:
        try:
            cols = read_table(p, warn)
        except MissingExtraError:
            raise
        except Exception as exc:  # pyarrow raises its own types for a torn or foreign file
            warn(f"{p}: not a readable parquet file ({type(exc).__name__}: {exc}); skipped")
            return None
        missing = [c for c in ("prompt", "completion") if c not in cols]
        if missing:
            warn(f"{p}: expected TRL's completions columns; missing {', '.join(missing)}; skipped")
            return None
        return cols


register_dump(TrlCompletions)
