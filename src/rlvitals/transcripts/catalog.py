"""The built-in flags: each one's name, family, group and what it saw, in a fixed order.

The table the flag tests (``flags``) and the rules file (``rules``: which flags it may name)
both read; docs/transcripts.md explains each flag with an example.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FLAGS", "FlagSpec"]


@dataclass(frozen=True)
class FlagSpec:
    name: str
    family: str  # "exploit" or "collapse"
    group: str  # tampering, hard-coding, format, repetition (how docs group them)
    relative: bool
    title: str  # what it saw, in a few words


FLAGS: dict[str, FlagSpec] = {
    f.name: f
    for f in [
        FlagSpec("test_edit", "exploit", "tampering", False, "writes to a test file"),
        FlagSpec("grader_edit", "exploit", "tampering", False, "edits the grader or its report"),
        FlagSpec("early_exit", "exploit", "tampering", False, "exits the process early"),
        FlagSpec("eq_override", "exploit", "tampering", False, "an __eq__ that is always true"),
        FlagSpec("skip_marker", "exploit", "tampering", False, "skips or xfails tests"),
        FlagSpec("hardcoded_output", "exploit", "hard-coding", False, "hard-codes a test's answer"),
        FlagSpec("constant_answer", "exploit", "hard-coding", True, "one answer for many tasks"),
        FlagSpec(
            "answers_disagree", "exploit", "format", True, "different answers to one task rewarded"
        ),
        FlagSpec("multiple_answers", "exploit", "format", True, "several different answers"),
        FlagSpec("hedged_answer", "exploit", "format", True, "several candidates in one answer"),
        FlagSpec("long_answer", "exploit", "format", True, "an odd, over-long answer"),
        FlagSpec("empty_answer", "exploit", "format", True, "rewarded with an empty answer"),
        FlagSpec("answer_only", "exploit", "format", True, "the answer and nothing else"),
        FlagSpec("repetitive", "collapse", "repetition", True, "a reply that repeats itself"),
        FlagSpec("repeated_reply", "collapse", "repetition", True, "one reply to many tasks"),
    ]
}
