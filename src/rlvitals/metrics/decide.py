"""Which attempts of an update train, and why the others do not (``decide``).

Decisions, in the order ``decide`` applies them:

1. Per attempt: one whose agent or grader raised keeps that reason
   (``rollout_failed/<Exc>``, ``grading_failed/<Exc>``); one without a policy version is
   ``unversioned`` (cut before its first model reply); one without a reward is ``ungraded``;
   one sampled more than ``max_steps_off_policy`` updates behind the trainer is ``stale``.
   These are the group's *losses*.
2. Per group: more than ``max_group_losses`` losses, or nothing left, reject the group as
   ``group_too_small``; remaining attempts that all scored the same reject it as
   ``no_variance``. The rejected group's remaining attempts carry the group's reason.
3. A loop's own decisions (``explicit``: attempt id -> reason, None = trains) are kept as given;
   the rules decide only the other attempts, judging each group with every member counted.

``discard/groups/<reason>`` counts rejected groups (``no_variance``, ``group_too_small``);
``discard/rollouts/<reason>`` counts attempts lost for a reason of their own, so no attempt
is counted twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .stats import all_same

__all__ = [
    "GROUP_REASONS",
    "GROUP_TOO_SMALL",
    "NO_VARIANCE",
    "STALE",
    "UNFINISHED",
    "UNGRADED",
    "UNVERSIONED",
    "Attempt",
    "Decision",
    "decide",
]

NO_VARIANCE = "no_variance"
GROUP_TOO_SMALL = "group_too_small"
STALE = "stale"
UNVERSIONED = "unversioned"
UNGRADED = "ungraded"
UNFINISHED = "unfinished"
GROUP_REASONS = frozenset({NO_VARIANCE, GROUP_TOO_SMALL})


class Attempt(msgspec.Struct, gc=False, omit_defaults=True):
    """One attempt as logged, plus what the update decides about it.

    It is also the attempt's ``rollouts.jsonl`` record: the fields up to ``mismatch`` are the
    record's keys in docs/format.md order (``retries`` and ``mismatch`` only when set), and the
    writer encodes a whole update's attempts in one call. The fields after them are working
    data; the writer drops them (back to their defaults, which are not encoded) once the
    update is written, so written attempts hold no logprobs or transcripts.

    ``gc=False``: attempts hold only plain data (no reference cycles), and an update can keep
    hundreds of thousands of them alive; untracked, they cost the garbage collector nothing.
    """

    step: int
    attempt_id: str
    group_id: str
    task_id: str
    policy_version: int | None
    reward: float | None
    trained: bool
    discard_reason: str | None
    response_tokens: int
    truncated: bool
    lag: int | None
    time: float
    duration: float | None
    metadata: dict[str, Any]
    retries: int = 0
    # Set by ``step_metrics`` when both logprob arrays are known.
    mismatch: dict[str, float] | None = None
    # -- working data, not written --
    # "rollout_failed/TimeoutError" when the loop passed the exception that ended it.
    error: str | None = None
    sampler_logprobs: Any = None
    transcript: list[dict[str, Any]] | None = None
    # The loop's own discard reason given when it logged the attempt (kept across decides).
    given_reason: str | None = None

    @property
    def graded(self) -> bool:
        """It reached the grader and got a reward."""
        return self.error is None and self.reward is not None


@dataclass
class Decision:
    """What an update decided: the attempts it trains and the groups it rejected, in order."""

    step: int
    trained: list[Attempt] = field(default_factory=list)
    discarded: list[Attempt] = field(default_factory=list)
    # group id -> None (trained) or the rejection reason, in the order groups first appeared.
    groups: dict[str, str | None] = field(default_factory=dict)
    # group id -> every attempt of the group this update closes, trained or not.
    members: dict[str, list[Attempt]] = field(default_factory=dict)

    @property
    def trained_ids(self) -> list[str]:
        return [a.attempt_id for a in self.trained]

    @property
    def rejected_groups(self) -> list[str]:
        return [g for g, reason in self.groups.items() if reason is not None]

    def trained_groups(self) -> dict[str, list[Attempt]]:
        """Trained attempts by group, in the order groups first appeared (for advantages)."""
        out: dict[str, list[Attempt]] = {}
        for a in self.trained:
            out.setdefault(a.group_id, []).append(a)
        return out


def decide(
    attempts: Sequence[Attempt],
    step: int,
    *,
    max_steps_off_policy: int,
    max_group_losses: int,
    explicit: Mapping[str, str | None] | None = None,
) -> Decision:
    """Decide which attempts of update ``step`` train, and why the others are discarded.

    See the module docstring for the rules. The trainer's weight version during update ``step``
    is ``step`` (docs/format.md), so an attempt sampled with version ``v`` has lag ``step - v``.
    Deciding again (with other ``explicit`` decisions) starts afresh.
    """
    decision = Decision(step)
    by_group = decision.members
    for a in attempts:
        members = by_group.get(a.group_id)
        if members is None:
            by_group[a.group_id] = [a]
        else:
            members.append(a)
        v = a.policy_version
        reason = a.given_reason or a.error
        if v is None:
            a.lag = None
            if reason is None:
                reason = UNVERSIONED
        else:
            lag = a.lag = step - v
            if reason is None:
                if a.reward is None:
                    reason = UNGRADED
                elif lag > max_steps_off_policy:
                    reason = STALE
        a.discard_reason = reason
    if explicit:
        for a in attempts:
            if a.attempt_id in explicit:
                a.discard_reason = explicit[a.attempt_id]

    groups = decision.groups
    trained = decision.trained
    discarded = decision.discarded
    for gid, members in by_group.items():
        usable = [a for a in members if a.discard_reason is None]
        losses = len(members) - len(usable)
        if losses > max_group_losses or not usable:
            reason = GROUP_TOO_SMALL
        elif all_same([a.reward for a in usable]):
            reason = NO_VARIANCE
        else:
            reason = None
        if not losses:  # the usual group: every member judged by the group alone
            if reason is None:
                for a in members:
                    a.trained = True
                trained.extend(members)
                groups[gid] = None
                continue
            if not explicit:
                for a in members:
                    a.discard_reason = reason
                    a.trained = False
                discarded.extend(members)
                groups[gid] = reason
                continue
        if reason is not None:
            for a in usable:
                if not (explicit and a.attempt_id in explicit):
                    a.discard_reason = reason
        greason: str | None = None
        any_trained = False
        for a in members:
            if a.discard_reason is None:
                a.trained = any_trained = True
                trained.append(a)
            else:
                a.trained = False
                discarded.append(a)
        if not any_trained:
            # Nothing of this group trains: a group reason carried by a member (the loop's
            # own, or the rule's), else the group lost too much.
            greason = next(
                (a.discard_reason for a in members if a.discard_reason in GROUP_REASONS),
                reason or GROUP_TOO_SMALL,
            )
        groups[gid] = greason
    return decision
