"""prime-rl ``FileMonitor`` episodes: ``rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl``.

``FileMonitor.log_episodes`` appends ``orjson.dumps(episode.to_record())`` lines to
``<output_dir>/rollouts/step_{step}/{kind}/{subset}/traces.jsonl`` (prime-rl @559b4477
``src/prime_rl/monitors/file.py:43-57``): ``all`` grows one episode at a time as they finish
(``orchestrator.py:592``), ``effective`` is the trained cohort, written at once (:684). A
record is a verifiers ``Episode`` (PrimeIntellect-ai/verifiers @a60a606e
``verifiers/v1/episode.py:86-155``: ``id, env, task, group, run, ok, errors, traces``); each
trace (``verifiers/v1/trace.py:363-407``) carries ``rewards`` (``{name: {score, weight}}``,
its reward is the weighted sum, :413-415), ``calls`` (``finish_reason``, ``usage``),
``nodes`` (messages, ``sampled``, sampling ``logprobs``) and ``stop_condition``.

A group is ``group.id``; the sampler version is ``run.work.policy.start``; tokens are the
calls' ``usage.completion_tokens``; truncated means a call finished for ``length``. With both
subsets present, ``all`` is read and an episode trains when it is also in ``effective``;
otherwise ``effective`` alone. Eval episodes are not attempts (they are held out).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from ...jsonio import MAX_LINE_BYTES
from ...transcripts.store import TranscriptAttempt
from ..base import open_binary
from ._primerl_schema import EPISODE, Episode, generation, record_reward, trace_reward
from .base import DumpFormat, Sample, file_time, register_dump

__all__ = ["PrimeRlTraces"]

_STEP = re.compile(r"^step_(\d+)$")


class _Id(msgspec.Struct, gc=False):
    id: str = ""


_ID = msgspec.json.Decoder(_Id)
_ANY = msgspec.json.Decoder()


def _lines(p: Path, warn: Callable[[str], None]) -> Iterator[tuple[int, int, bytes]]:
    """(line number, start offset, line) of each complete line; a torn last line is left."""
    offset = 0
    with open_binary(p) as f:
        for lineno, line in enumerate(f, 1):
            start = offset
            offset += len(line)
            if not line.endswith(b"\n"):
                return  # still being written
            if len(line) > MAX_LINE_BYTES:
                warn(f"{p}:{lineno}: line too long; skipped")
                continue
            if line.strip():
                yield lineno, start, line


class PrimeRlTraces(DumpFormat):
    name = "prime-rl"
    priority = 20
    sample_dirs = ("rollouts?",)
    description = "prime-rl rollouts (rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl)"
    default_subdir = "rollouts"
    versioned = True
    has_tokens = True
    has_truncation = True

    dir_pattern = _STEP

    def files_in(self, step_dir: Path) -> list[Path]:
        files = [step_dir / "train" / s / "traces.jsonl" for s in ("all", "effective")]
        return [p for p in files if p.is_file()]

    def _episodes(
        self, files: list[Path], warn: Callable[[str], None], decoder: Any
    ) -> Iterator[tuple[Path, int, Any, bool | None]]:
        """(file, offset, decoded episode, trained) for the episodes of a step."""
        source = files[0]
        effective: set[str] | None = None
        if len(files) > 1:  # all + effective: trained = in effective
            effective = set()
            for _n, _o, line in _lines(files[1], warn):
                try:
                    effective.add(_ID.decode(line).id)
                except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                    continue
        for lineno, offset, line in _lines(source, warn):
            try:
                ep = decoder.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
                warn(f"{source}:{lineno}: not an episode record ({exc}); skipped")
                continue
            eid = (
                ep.id
                if isinstance(ep, Episode)
                else (ep.get("id") if isinstance(ep, dict) else None)
            )
            trained = None if effective is None else eid in effective
            if effective is None and source.parent.name == "effective":
                trained = True
            yield source, offset, ep, trained

    def read_step(
        self,
        step: int,
        files: list[Path],
        index: Callable[[Path], int],
        warn: Callable[[str], None],
    ) -> Iterator[Sample]:
        for p, offset, ep, trained in self._episodes(files, warn, EPISODE):
            traces = ep.trainable()
            rewards = [r for t in traces if (r := trace_reward(t)) is not None]
            reward = sum(rewards) / len(rewards) if rewards else None
            tokens = 0
            truncated = False
            logprobs: list[float] = []
            for t in traces:
                for c in t.calls:
                    if c.usage is not None:
                        tokens += c.usage.completion_tokens
                    truncated |= c.finish_reason == "length"
                truncated |= bool(t.stop_condition and "truncat" in t.stop_condition)
                for n in t.nodes:
                    if n.sampled:
                        logprobs.extend(n.logprobs)
            if not tokens:
                tokens = len(logprobs)
            task = (ep.task.key or ep.task.hash) if ep.task is not None else None
            group = ep.group.id if ep.group is not None and ep.group.id else (task or ep.id)
            yield Sample(
                step=step,
                group=group,
                task_id=str(task or group),
                reward=reward,
                policy_version=ep.policy_version(),
                response_tokens=tokens,
                truncated=truncated,
                trained=trained,
                discard_reason=None if trained is not False else "filtered",
                sampler_logprobs=logprobs or None,
                file=index(p),
                offset=offset,
                time=file_time(p),
                error=ep.error(),
            )

    def transcripts(
        self, step: int, files: list[Path], warn: Callable[[str], None]
    ) -> Iterator[TranscriptAttempt]:
        for i, (_p, _offset, ep, trained) in enumerate(self._episodes(files, warn, _ANY)):
            if not isinstance(ep, dict):
                continue
            traces = [t for t in ep.get("traces") or [] if isinstance(t, dict)]
            gens = [generation(t, trained) for t in traces]
            rewards = [r for t in traces if (r := record_reward(t)) is not None]
            group = ep.get("group") or {}
            yield TranscriptAttempt(
                step=step,
                index=i,
                attempt_id=f"{step}-{i}",
                group_id=f"{step}/{group.get('id')}" if isinstance(group, dict) else None,
                task_id=None,
                reward=sum(rewards) / len(rewards) if rewards else None,
                trained=trained,
                generations=gens,
            )


register_dump(PrimeRlTraces)
