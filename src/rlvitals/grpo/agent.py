"""The agent's side of an episode: its replies, its transcript and its episode metadata.

The sampler (``sampler.py``) plays the episodes for a whole batch at once; this module reads one
row back as what an agent framework hands over per attempt:

- the transcript: one generation per model reply, ``{"prompt", "completion", "prompt_tokens",
  "completion_tokens", "finish_reason"}``, the prompt being the whole context the reply saw
  (the task, earlier replies and tool replies);
- the final reply, whose answer the grader reads;
- the episode metadata: ``termination_reason`` (``answer``, ``max_turns``, ``max_tokens``),
  ``turns`` and ``tool_calls``, which the writer turns into ``rollout/*`` metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .sampler import TERMINATIONS, Episodes
from .tasks import CALL, END, VOCAB

__all__ = ["Attempt", "read_attempts"]

_FINISH = {CALL: "tool_call", END: "stop"}


@dataclass
class Attempt:
    """One attempt as the agent reports it."""

    final_reply: str  # text of the last model reply, e.g. "640$", "?" or "64" (cut)
    transcript: list[dict[str, Any]]
    metadata: dict[str, Any]
    response_tokens: int
    truncated: bool
    logprobs: list[float]  # the sampler's logprob of each generated token, in order
    positions: int  # positions of the episode (for its share of the batch's time)


def read_attempts(ep: Episodes) -> list[Attempt]:
    """One ``Attempt`` per row of a batch of episodes."""
    tokens = ep.tokens.tolist()
    generated = ep.generated.tolist()
    logprobs = ep.logprobs.tolist()
    term = ep.termination.tolist()
    turns = ep.turns.tolist()
    calls = ep.tool_calls.tolist()
    n_gen = ep.n_generated.tolist()
    out = []
    for i in range(len(tokens)):
        row, gen, lps = tokens[i], generated[i], logprobs[i]
        text = "".join(VOCAB[t] for t in row)
        transcript: list[dict[str, Any]] = []
        reply_start = -1
        last = max((j for j, g in enumerate(gen) if g), default=ep.prompt_len - 1)
        for j in range(ep.prompt_len, last + 1):
            if gen[j] and reply_start < 0:
                reply_start = j
            ends = gen[j] and (text[j] in _FINISH or j == last)
            if reply_start >= 0 and ends:
                completion = text[reply_start : j + 1]
                transcript.append(
                    {
                        "prompt": text[:reply_start],
                        "completion": completion,
                        "prompt_tokens": reply_start,
                        "completion_tokens": j + 1 - reply_start,
                        "finish_reason": _FINISH.get(completion[-1], "length"),
                    }
                )
                reply_start = -1
        out.append(
            Attempt(
                final_reply=transcript[-1]["completion"] if transcript else "",
                transcript=transcript,
                metadata={
                    "termination_reason": TERMINATIONS[term[i]],
                    "turns": turns[i],
                    "tool_calls": calls[i],
                },
                response_tokens=n_gen[i],
                truncated=TERMINATIONS[term[i]] == "max_tokens",
                logprobs=[lp for lp, g in zip(lps, gen) if g],
                positions=last + 1,
            )
        )
    return out
