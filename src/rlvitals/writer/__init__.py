"""Instrumentation: the run directory writer a training loop calls (docs/format.md).

The package: ``run`` (the Run a loop holds), ``attempts`` (how its attempts come in),
``args`` (an attempt's arguments, declared once), ``columns`` (a batch given as columns),
``records`` (an attempt's line, an update's transcripts), ``directory`` (creating a run
directory once), ``heartbeat`` (progress between updates), ``shard`` (attempts from other
processes: ``rlvitals.attach``).

    with Run(cfg) as run:
        aid = run.log_attempt(step=3, group_id="3-g0", task_id="t17", reward=1.0, ...)
        decision = run.decide(3)            # optional: which attempts train, before training
        run.log_step(3, trainer_logprobs={aid: [...]}, metrics={"train/loss": 0.12})

Two rules shape it. Instrumentation never breaks the training loop: a failure inside the writer
(a full disk, a value it cannot encode, a W&B outage) becomes a ``WriterWarning`` and the loop
goes on. Misuse fails loudly with ``UsageError``: logging to a closed run, a step going
backwards, an attempt for an update already written. Guards stop a run on purpose with
``RunStopped`` after writing everything, ``run.json`` saying ``stopped`` and why.

What a killed process loses. Every record is appended as whole lines with one ``write`` call
and no user-space buffer, so a process killed at any moment (SIGKILL included) leaves every
record written before it intact; at most the line being written is cut short, and readers
treat a last line without its newline as not yet written. A write that fails half way (disk
full) is truncated back to the last whole line, so a failure never glues two records together.

An attempt's record needs what only its update decides (``trained``, ``discard_reason``,
``lag``, ``mismatch``), so attempts are written when ``log_step`` closes their update, all in
one write; ``close`` writes attempts still pending as discarded (their own failure, or
``unfinished``), whether the loop ended, crashed or a guard stopped it. So the one thing a
SIGKILL (or power loss) costs beyond a torn last line is the attempts logged since the last
``log_step``: the update in progress, which no step record describes yet either. Every update
before it is whole. We chose this over journaling each attempt as it arrives, for three
reasons: a journal costs an encode and a ``write`` system call per attempt (about 2 µs here,
40% of the writer's whole budget of 5 µs per attempt, measured by benchmarks/writer.py);
it doubles the bytes written; and a record written before its update is decided would need a
second, amending record that every reader merges (a format change). ``[output]
progress_every_seconds`` writes the in-progress attempt count to ``progress.jsonl``, so a live
view still sees an update's progress before it closes.

Speed. ``log_attempt`` does the least it can: it checks the arguments and builds the
``Attempt``, which is also its record. ``log_step`` decides, computes the metrics column by
column (episode metadata transposed into columns by C-level calls) and encodes the whole
update in one ``msgspec`` call; values JSON cannot spell as they are (NaN, numpy scalars) are
found on the way and only those records cleaned.
"""

from __future__ import annotations

from .records import WriterWarning
from .run import Run
from .shard import ShardWriter, attach

__all__ = ["Run", "ShardWriter", "WriterWarning", "attach"]
