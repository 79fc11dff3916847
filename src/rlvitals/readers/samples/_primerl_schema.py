"""prime-rl's episode record, as both of its samples readers decode it.

A line of the old per-step ``traces.jsonl`` files (``primerl``) and of the newer chunked
stream (``primerl_traces``) is a verifiers ``Episode.to_record()``
(PrimeIntellect-ai/verifiers @a60a606e ``verifiers/v1/episode.py:86-155``: ``id, env, task,
group, run, ok, errors, traces``; a trace, ``verifiers/v1/trace.py:363-407``: ``rewards``
``{name: {score, weight}}``, ``calls`` with ``finish_reason`` and ``usage``, ``nodes`` with
``sampled``, ``token_ids``, ``mask`` and sampling ``logprobs``, ``stop_condition``), the
stream's traces stamped by the orchestrator on arrival (``info.kind``, ``info.arrival``).
Every field has a default and msgspec skips the ones not named, so each reader decodes what
it needs of either layout (``EPISODE``; the stream's reader, ``TOKEN_EPISODE``, the nodes'
token ids too); what a record's dict form gives a transcript is here too.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

from ...transcripts.store import Generation
from .base import number

__all__ = [
    "EPISODE",
    "TOKEN_EPISODE",
    "Episode",
    "Info",
    "Node",
    "Stamp",
    "TokenNode",
    "Trace",
    "generation",
    "info_of",
    "record_reward",
    "trace_reward",
]


class Stamp(msgspec.Struct, gc=False):
    step: int | None = None
    time: float | None = None


class Info(msgspec.Struct, gc=False):
    kind: str | None = None
    arrival: Stamp | None = None


class Node(msgspec.Struct, gc=False):
    sampled: bool = False
    logprobs: list[float] = []


class TokenNode(Node, gc=False):
    """A node with its tokens and its place in the trace's tree (the stream reader's: the
    old layout's reader does not decode a node's token ids)."""

    parent: int | None = None
    token_ids: list[int] = []
    mask: list[bool] = []


N = TypeVar("N", bound=Node)


class _Usage(msgspec.Struct, gc=False):
    completion_tokens: int = 0


class _Call(msgspec.Struct, gc=False):
    finish_reason: str | None = None
    usage: _Usage | None = None
    error: Any = None


class _Reward(msgspec.Struct, gc=False):
    score: float | None = None
    weight: float | None = 1.0


class _Agent(msgspec.Struct, gc=False):
    trainable: bool = True


class Trace(msgspec.Struct, Generic[N], gc=False):
    id: str = ""
    rewards: dict[str, _Reward | None] = {}
    calls: list[_Call] = []
    nodes: list[N] = []
    stop_condition: str | None = None
    agent: _Agent | None = None
    # Left undecoded here: the old layout's environments may put anything in a trace's info,
    # and an episode must not be lost for it; the stream's own stamps are read by ``info_of``.
    info: Any = None


class _Policy(msgspec.Struct, gc=False):
    start: int | None = None


class _Work(msgspec.Struct, gc=False):
    policy: _Policy | None = None


class _Run(msgspec.Struct, gc=False):
    work: _Work | None = None


class _Group(msgspec.Struct, gc=False):
    id: str = ""


class _Task(msgspec.Struct, gc=False):
    key: str | None = None
    hash: str | None = None


class _Error(msgspec.Struct, gc=False):
    type: str = "Error"


class Episode(msgspec.Struct, Generic[N], gc=False):
    id: str = ""
    group: _Group | None = None
    run: _Run | None = None
    task: _Task | None = None
    ok: bool = True
    errors: list[_Error] = []
    traces: list[Trace[N]] = []

    def trainable(self) -> list[Trace[N]]:
        """The traces of trainable agents (all of them where none is)."""
        return [t for t in self.traces if t.agent is None or t.agent.trainable] or self.traces

    def policy_version(self) -> int | None:
        """The sampler's policy version: ``run.work.policy.start``."""
        work = self.run.work if self.run is not None else None
        return work.policy.start if work is not None and work.policy is not None else None

    def error(self) -> str | None:
        """``rollout_failed/<type>`` of the last error of a failed episode."""
        return f"rollout_failed/{self.errors[-1].type}" if not self.ok and self.errors else None


EPISODE = msgspec.json.Decoder(Episode[Node])
TOKEN_EPISODE = msgspec.json.Decoder(Episode[TokenNode])


def trace_reward(t: Trace[Any]) -> float | None:
    """A trace's reward: the weighted sum of its rewards' scores (a null weight counts 1)."""
    got = [
        r.score * (1.0 if r.weight is None else r.weight)
        for r in t.rewards.values()
        if r is not None and r.score is not None
    ]
    return sum(got) if got else None


def record_reward(t: dict[str, Any]) -> float | None:
    """``trace_reward`` of a trace as a dict (a transcript's record)."""
    got = [
        s * (1.0 if r.get("weight") is None else float(r["weight"]))
        for r in (t.get("rewards") or {}).values()
        if isinstance(r, dict) and (s := number(r.get("score"))) is not None
    ]
    return sum(got) if got else None


def generation(t: dict[str, Any], trains: bool | None) -> Generation:
    """A trace as a dict as one generation: its nodes up to the first sampled one are the
    prompt, the rest the completion."""
    nodes = [n for n in t.get("nodes") or [] if isinstance(n, dict)]
    first = next((k for k, n in enumerate(nodes) if n.get("sampled")), len(nodes))
    calls = [c for c in t.get("calls") or [] if isinstance(c, dict)]
    finish = calls[-1].get("finish_reason") if calls else None
    return Generation(
        prompt=[n.get("message") for n in nodes[:first]],
        completion=[n.get("message") for n in nodes[first:]],
        completion_tokens=sum(
            int(c["usage"].get("completion_tokens", 0) or 0)
            for c in calls
            if isinstance(c.get("usage"), dict)
        ),
        finish_reason=finish if isinstance(finish, str) else None,
        trains=trains,
    )


def info_of(value: Any) -> Info | None:
    """A trace's ``info`` as the orchestrator stamps it (kind, arrival), or None where it holds
    something else."""
    if not isinstance(value, dict):
        return None
    try:
        return msgspec.convert(value, Info)
    except msgspec.ValidationError:
        return None
