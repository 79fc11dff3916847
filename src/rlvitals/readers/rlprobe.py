"""rlprobe recordings: a run directory of ``manifest.json``, ``steps.parquet`` and
``events.jsonl`` (rlprobe 0.1 ``storage.py``), read live.

rlprobe's ``RunWriter`` writes one wide row per optimiser step (``StepRecord``: reward, KL to
the reference, entropy, clip fraction, group std, lengths, throughput, ``nan_count`` /
``inf_count``), its dict fields flattened to ``reward_component.<name>`` and ``extra.<name>``
columns. A live (or crashed) run has its rows in ``steps/part-NNNNN.parquet`` files, compacted
into ``steps.parquet`` on close; we read whichever is there, each row once (by step), so a
poll after the compaction adds nothing twice, and a compacted table means the run finished. ``events.jsonl`` (checkpoint, nan_detected,
crash, ...) is kept in ``run.info["events"]``; ``crash`` and ``nan_detected`` become error
events. ``samples/*.parquet`` (a sampled subset of completions, top-k / bottom-k by reward) is
not read as the run's attempts: it is not every attempt of a step.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..errors import MissingExtraError, ReadError
from ..model import Event, RunData
from ._format import Format, register
from ._parquet import read_bounded
from .base import open_binary
from .mapping import MappingTable, Rule, apply_table, synonym

__all__ = ["RLPROBE", "RlprobeReader"]


def _numeric(t: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


MANIFEST = "manifest.json"
STEPS = "steps.parquet"
PARTS = "steps"
EVENTS = "events.jsonl"

RLPROBE = MappingTable(
    "rlprobe",
    (
        synonym("reward_mean"),
        synonym("reward_std", "whole batch"),
        synonym("group_reward_std_mean", "mean within-group std"),
        synonym(
            "zero_variance_group_frac",
            "share of groups whose rewards are all equal",
        ),
        Rule("kl_mean", "train/ref_kl", "KL to the reference"),
        synonym("entropy_mean"),
        synonym("clip_fraction"),
        synonym("adv_std"),
        synonym("loss"),
        synonym("lr"),
        synonym("grad_norm", "before clipping"),
        synonym("completion_len_mean"),
        synonym("truncation_rate"),
        Rule("max_len_hit_frac", "response/truncated_rate", "where truncation_rate is absent"),
        synonym("step_time_s"),
        Rule("generation_time_s", "perf/sampling_seconds"),
        Rule("optimization_time_s", "perf/training_seconds"),
        Rule(r"^reward_component\.(.+)$", r"reward/component/\1/mean", "reward_components"),
    ),
    (
        ("kl_max", "the largest per-token KL, not the mean"),
        ("ratio_mean", "importance ratio trainer/old policy, not a KL"),
        ("value_loss", "PPO value head (no canonical value metrics)"),
    ),
    (
        "nan_count and inf_count stay under their own names; the non-finite check reads them.",
        "timestamp (unix seconds) is the step's time.",
    ),
)


def _parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError("fleet", "reading rlprobe's steps.parquet") from None
    return pq


def is_recording(path: Path) -> bool:
    """Whether ``path`` is an rlprobe run directory (its manifest and step rows)."""
    if not (path / MANIFEST).is_file():
        return False
    if not ((path / STEPS).is_file() or (path / PARTS).is_dir()):
        return False
    try:
        with open_binary(path / MANIFEST) as f:
            head = f.read(4096)
    except OSError:
        return False
    return b'"schema_version"' in head and b'"run_id"' in head


class RlprobeReader:
    """One rlprobe run directory, read incrementally (each step row once)."""

    name = "rlprobe"
    table = RLPROBE

    def __init__(self, path: Path, *, extra_rules: tuple[Rule, ...] = ()) -> None:
        path = Path(path)
        if not is_recording(path):
            raise ReadError(
                f"not an rlprobe run directory (expected {MANIFEST} with {STEPS} or {PARTS}/)",
                path=str(path),
            )
        self.path = path
        self.extra_rules = extra_rules
        self.run = RunData(source=str(path), format=self.name)
        self._last_step: int | None = None
        self._read: dict[Path, tuple[int, int]] = {}
        self._event_lines = 0
        self._events_at = 0
        self._manifest()

    def _manifest(self) -> None:
        try:
            doc = json.loads((self.path / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            self.run.warnings.append(f"{self.path / MANIFEST}: not read ({exc})")
            return
        if not isinstance(doc, dict):
            return
        info = self.run.info
        for k in ("run_id", "algorithm", "model_name", "created_at", "notes"):
            if doc.get(k) is not None:
                info["name" if k == "run_id" else k] = doc[k]
        if isinstance(doc.get("trainer_config"), dict):
            info["config"] = doc["trainer_config"]

    def files(self) -> list[Path]:
        """The step files to read: the compacted table, else the live parts."""
        if (self.path / STEPS).is_file():
            return [self.path / STEPS]
        return sorted((self.path / PARTS).glob("part-*.parquet"))

    def poll(self) -> bool:
        """Read the step rows and events written since the last call; True if any were."""
        pq = _parquet()
        changed = False
        for p in self.files():
            try:
                st = p.stat()
            except OSError:
                continue
            key = (st.st_size, st.st_mtime_ns)
            if self._read.get(p) == key:
                continue  # each file is written once; rows already read are skipped by step
            try:
                table = read_bounded(pq, p, self.run.warnings.append)
            except Exception as exc:  # pyarrow raises its own types for a torn file
                self.run.warnings.append(f"{p}: not a readable parquet file ({exc}); skipped")
                continue
            self._read[p] = key
            changed |= self._rows(p, table)
        changed |= self._events()
        # RunWriter.close() compacts the parts into steps.parquet: the run ended (a crash
        # event says how).
        crashed = any(e.get("kind") == "crash" for e in self.run.info.get("events", []))
        if crashed:
            self.run.info["status"] = "crashed"
        elif (self.path / STEPS).is_file():
            self.run.info["status"] = "finished"
        if changed:
            apply_table(self.run, RLPROBE, extra=self.extra_rules)
        return changed

    def _rows(self, p: Path, table: Any) -> bool:
        """The rows of ``table`` (one file's), column by column: a numeric column is handed
        to the run whole (no Python value per cell), text, flags and lists are not metrics.
        Kept: rank 0's rows (or rows without a rank), each step once and in order (a row at
        or before a step already read is passed over); a null after a column has had values
        is a NaN the sink dropped (noted in ``run.nulls``), before its first value nothing."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        names = table.column_names
        if "step" not in names:
            self.run.warnings.append(f"{p}: no step column; skipped")
            return False
        step = table.column("step")
        if table.num_rows == 0 or not pa.types.is_integer(step.type):
            return False
        ok = step.is_valid().to_numpy(zero_copy_only=False)
        if "rank" in names:
            rank = table.column("rank")
            mine = rank.is_null()
            if _numeric(rank.type):
                mine = pc.or_(mine, pc.fill_null(pc.equal(rank, 0), False))
            ok &= mine.to_numpy(zero_copy_only=False)
        steps = pc.fill_null(step, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        rows = np.flatnonzero(ok)
        at = steps[rows]
        floor = self._last_step if self._last_step is not None else np.iinfo(np.int64).min
        before = np.maximum.accumulate(np.concatenate(([floor], at)))[:-1]
        rows, at = rows[at > before], at[at > before]  # each step once, in order
        if not len(rows):
            return False
        self._last_step = int(at[-1])
        run = self.run
        every = len(rows) == table.num_rows  # the usual case: no row passed over
        taken = None if every else pa.array(rows)
        del ok, steps, before
        for k in names:
            col = table.column(k)
            if k in ("step", "rank") or not _numeric(col.type):
                continue  # lists (kl_positional), text and flags are not metrics
            cells = col if taken is None else col.take(taken)
            valid = cells.is_valid().to_numpy(zero_copy_only=False)
            values = pc.fill_null(cells.cast(pa.float64()), math.nan).to_numpy(zero_copy_only=False)
            if k == "timestamp":
                run.metrics.extend("time", at[valid], values[valid])
                continue
            if k not in run.metrics:
                first = np.flatnonzero(valid)
                if not len(first):
                    continue
                valid, values, k_at = valid[first[0] :], values[first[0] :], at[first[0] :]
            else:
                k_at = at
            if not valid.all() and k not in run.nulls:
                run.nulls[k] = int(k_at[np.argmin(valid)])  # had values, now null
            run.metrics.extend(k, k_at, values)
            run.source_keys.add(k)
        return True

    def _events(self) -> bool:
        p = self.path / EVENTS
        try:
            with open_binary(p) as f:
                f.seek(self._events_at)
                data = f.read()
        except OSError:
            return False
        end = data.rfind(b"\n") + 1
        if not end:
            return False
        self._events_at += end
        for line in data[:end].splitlines():
            self._event_lines += 1
            lineno = self._event_lines
            try:
                ev = json.loads(line)
            except (ValueError, RecursionError):
                self.run.warnings.append(f"{p}: a line that is not JSON; skipped")
                continue
            if not isinstance(ev, dict):
                continue
            self.run.info.setdefault("events", []).append(ev)
            if ev.get("kind") in ("crash", "nan_detected"):
                t = ev.get("timestamp")
                self.run.events.append(
                    Event(
                        float(t) if isinstance(t, (int, float)) else None,
                        "error",
                        f"rlprobe {ev['kind']}: {ev.get('message', '')}".strip(),
                        ev.get("step") if isinstance(ev.get("step"), int) else None,
                        str(p),
                        lineno,
                    )
                )
        return True


register(
    Format(
        "rlprobe",
        "rlprobe run directory (manifest.json, steps.parquet or steps/part-*.parquet), live",
        is_recording,
        RlprobeReader,
        priority=8,
        table=RLPROBE,
        kind="run directory",
        files="<run_dir>/",
        marks=lambda d, names: (
            "manifest.json" in names and bool(names & {"steps.parquet", "steps"})
        ),
    )
)
