"""Reading transcripts, not only curves: a run's transcripts, loaded lazily, and flags on them.

The seeds ask a person to read the transcripts of the highest-reward attempts every few
updates and look for a reward that climbs faster than the task allows, behaviour they would
reject in review, and shrinking or collapsing replies. This package does the reading with
them:

- ``store``: the ``transcripts/step-NNNNNN.json`` files of a run directory, streamed one
  attempt at a time in bounded memory; a broken file is one warning, never an exception.
- ``flags``: per-attempt and per-update flags (tampering with tests or the grader, hard-coded
  outputs, parser-pleasing formats, repetition), each explained in docs/transcripts.md.
- ``catalog``: the built-in flags, each one's family and what it saw.
- ``rules``: what the flags look for, configurable for a user's own task (TOML or JSON).
- ``scan``: per-step flag rates over a whole run, published as ``transcripts/<flag>_rate``.

Transcript text is untrusted: it is never executed (code is parsed with ``ast``, never run)
and every view shows it escaped (``text.escape``). The judgement of the rates is in
``rlvitals.checks.transcripts``.
"""

from __future__ import annotations

from .catalog import FLAGS, FlagSpec
from .flags import Hit, StepAnalyzer, flag_names
from .rules import LIMITS, Rules, load_rules, rules_from_dict
from .scan import RunScan, analyze_step, examples, publish, scan_run
from .store import Generation, TranscriptAttempt, TranscriptStore
from .text import escape, excerpt

__all__ = [
    "FLAGS",
    "LIMITS",
    "FlagSpec",
    "Generation",
    "Hit",
    "Rules",
    "RunScan",
    "StepAnalyzer",
    "TranscriptAttempt",
    "TranscriptStore",
    "analyze_step",
    "escape",
    "examples",
    "excerpt",
    "flag_names",
    "load_rules",
    "publish",
    "rules_from_dict",
    "scan_run",
]
