"""The sampler: its own copy of the weights, its own numerics, and the agent's episodes.

The sampler holds a separate copy of the policy in ``sampler_dtype`` (bfloat16 by default:
weights and activations rounded to it, products accumulated in float32), as an inference
engine does, and a weight version: the trainer pushes new weights after each
update with ``load(model, version)``. Generation runs on a KV cache, one position per loop turn
for the whole batch, and records the log-probability the sampler gave each token it sampled.
Because the trainer recomputes those log-probabilities in float32, the two disagree a little
(a real, small mismatch: about 2e-5 to 5e-5 of k3 with bfloat16, as measured on this trainer).

Episodes are multi-turn and batched. Every row is one attempt; at each position a row either
samples a token (the model's reply), is fed the next token of its tool's reply (forced, not
sampled, never trained on), or is finished and fed padding. The agent's rules, vectorised:

- a reply ends with ``$`` (an answer: the episode ends, ``termination_reason = "answer"``) or
  ``?`` (a tool call: the tool's reply is appended and the next turn begins);
- a tool call in the last allowed turn ends the episode (``"max_turns"``);
- reaching ``max_new_tokens`` generated tokens without an answer ends it (``"max_tokens"``,
  ``truncated``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from .model import GPT
from .tasks import CALL_ID, END_ID, PAD_ID, Task, encode

__all__ = ["TERMINATIONS", "Episodes", "Sampler", "episode_length", "truncate"]

# termination code -> termination_reason label in the agent's episode metadata.
TERMINATIONS = ("running", "answer", "max_turns", "max_tokens")
RUNNING, ANSWER, MAX_TURNS, MAX_TOKENS = range(4)
# Finished rows leave the KV cache once this share of it is still running (see rollout).
COMPACT_AT = 0.75


def truncate(logp: torch.Tensor, top_p: float, top_k: int) -> torch.Tensor:
    """``logp`` (rows, V) over the tokens top-k and top-p keep, renormalised (the others
    -inf), as an engine samples and reports them (its processed log-probs). Each row keeps its
    most likely token; top-p keeps the fewest tokens whose mass reaches ``top_p``."""
    keep = torch.ones_like(logp, dtype=torch.bool)
    if top_k > 0 and top_k < logp.shape[-1]:
        kth = logp.topk(top_k, dim=-1).values[:, -1:]  # (rows, 1)
        keep &= logp >= kth
    if top_p < 1.0:
        srt, idx = logp.sort(dim=-1, descending=True)
        p = srt.exp()
        before = p.cumsum(-1) - p  # mass of the tokens ranked above each one
        keep &= torch.zeros_like(keep).scatter(-1, idx, before < top_p)
    return torch.log_softmax(logp.masked_fill(~keep, -torch.inf), dim=-1)


def episode_length(prompt_len: int, tool_len: int, max_new_tokens: int, max_turns: int) -> int:
    """Positions an episode can fill: the prompt, every generated token, every tool reply."""
    return prompt_len + max_new_tokens + min(max_turns - 1, max_new_tokens) * tool_len


@dataclass
class Episodes:
    """A batch of finished episodes, one row per attempt."""

    tasks: list[Task]
    tokens: torch.Tensor  # (B, T) long: prompt, replies, tool replies, padding
    generated: torch.Tensor  # (B, T) bool: position holds a token the model sampled
    logprobs: torch.Tensor  # (B, T) float32: the sampler's logprob of that token, else 0
    termination: torch.Tensor  # (B,) long: index into TERMINATIONS
    turns: torch.Tensor  # (B,) long: model replies started
    tool_calls: torch.Tensor  # (B,) long
    n_generated: torch.Tensor  # (B,) long
    prompt_len: int
    version: int  # sampler weight version that produced every reply
    seconds: float = 0.0
    # Per row, where rows came from engines on different versions (``merge``); else None.
    versions: torch.Tensor | None = None

    def version_of(self, row: int) -> int:
        """The weight version that produced row ``row``'s replies."""
        return self.version if self.versions is None else int(self.versions[row])

    @classmethod
    def merge(cls, parts: list[tuple[torch.Tensor, Episodes]], tasks: list[Task]) -> Episodes:
        """One batch from episodes sampled by several engines: ``parts`` pairs the batch rows
        each part holds (ascending indices into ``tasks``) with its episodes."""
        B = len(tasks)
        T = max(ep.tokens.shape[1] for _, ep in parts)
        out = cls(
            tasks=tasks,
            tokens=torch.full((B, T), PAD_ID, dtype=torch.long),
            generated=torch.zeros((B, T), dtype=torch.bool),
            logprobs=torch.zeros((B, T), dtype=torch.float32),
            termination=torch.zeros(B, dtype=torch.long),
            turns=torch.zeros(B, dtype=torch.long),
            tool_calls=torch.zeros(B, dtype=torch.long),
            n_generated=torch.zeros(B, dtype=torch.long),
            prompt_len=parts[0][1].prompt_len,
            version=max(ep.version for _, ep in parts),
            seconds=sum(ep.seconds for _, ep in parts),
            versions=torch.zeros(B, dtype=torch.long),
        )
        for rows, ep in parts:
            t = ep.tokens.shape[1]
            out.tokens[rows, :t] = ep.tokens
            out.generated[rows, :t] = ep.generated
            out.logprobs[rows, :t] = ep.logprobs
            for name in ("termination", "turns", "tool_calls", "n_generated"):
                getattr(out, name)[rows] = getattr(ep, name)
            assert out.versions is not None
            out.versions[rows] = ep.version
        return out

    @property
    def truncated(self) -> torch.Tensor:
        return self.termination == MAX_TOKENS

    @property
    def lengths(self) -> torch.Tensor:
        """(B,) positions each row uses: up to its last sampled token."""
        T = self.generated.shape[1]
        last = T - 1 - self.generated.flip(1).int().argmax(1)  # (B,) last sampled position
        return torch.where(self.generated.any(1), last + 1, torch.full_like(last, self.prompt_len))


class Sampler:
    """A separate, reduced-precision copy of the policy that generates episodes."""

    def __init__(self, model: GPT, dtype: torch.dtype) -> None:
        self.dtype = dtype
        # The copy computes in float32 with weights and activations rounded to ``dtype``
        # (GPT.round_to): the numbers of a bfloat16 engine that accumulates in float32, at
        # float32 speed on a CPU without bfloat16 units.
        self.model = copy.deepcopy(model).eval()
        if dtype != torch.float32:
            self.model.round_to(dtype)
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.version = 0

    def clone(self) -> Sampler:
        """Another engine replica holding the same weights and version, updated separately."""
        return copy.deepcopy(self)

    def set_dtype(self, dtype: torch.dtype) -> None:
        """Compute in ``dtype`` from now on: the weights held rounded to it now, each later
        ``load`` too (an engine switched to another precision)."""
        self.dtype = dtype
        self.model.round_to(None if dtype == torch.float32 else dtype)

    @torch.no_grad()
    def load(self, model: GPT, version: int) -> None:
        """Receive the trainer's weights (rounded to the sampler's dtype) as ``version``."""
        for dst, src in zip(self.model.parameters(), model.parameters()):
            dst.copy_(src.detach().to(self.dtype))
        self.version = version

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The weights as the sampler holds them, in its dtype (exactly: they are rounded)."""
        return {k: v.to(self.dtype) for k, v in self.model.state_dict().items()}

    @torch.no_grad()
    def rollout(
        self,
        tasks: list[Task],
        *,
        max_new_tokens: int,
        max_turns: int,
        temperature: float | torch.Tensor = 1.0,
        greedy: bool = False,
        generator: torch.Generator | None = None,
        top_p: float = 1.0,
        top_k: int = 0,
    ) -> Episodes:
        """Run one episode per task (repeat a task in ``tasks`` for a group). ``temperature``:
        a number or a (rows, 1) tensor; ``top_p``/``top_k``: the truncation (``truncate``)."""
        B = len(tasks)
        prompts = torch.tensor([encode(t.prompt) for t in tasks])  # (B, P)
        replies = torch.tensor([encode(t.tool_reply) for t in tasks])  # (B, L)
        P, L = prompts.shape[1], replies.shape[1]
        T = episode_length(P, L, max_new_tokens, max_turns)
        if self.model.max_len < T:
            raise ValueError(f"episodes of {T} positions exceed the model's {self.model.max_len}")

        tokens = torch.full((B, T), PAD_ID, dtype=torch.long)
        tokens[:, :P] = prompts
        generated = torch.zeros((B, T), dtype=torch.bool)
        logprobs = torch.zeros((B, T), dtype=torch.float32)
        done = torch.zeros(B, dtype=torch.bool)
        in_reply = torch.zeros(B, dtype=torch.bool)  # the last token was the model's
        tool_pos = torch.full((B,), -1, dtype=torch.long)  # next tool-reply token, -1: none
        termination = torch.full((B,), RUNNING, dtype=torch.long)
        turns = torch.zeros(B, dtype=torch.long)
        tool_calls = torch.zeros(B, dtype=torch.long)
        n_gen = torch.zeros(B, dtype=torch.long)

        # Each distinct prompt is prefilled once (a group's attempts share theirs), then its
        # cache rows and logits are copied out to every attempt: a quarter of the prefill at
        # 4 attempts per task, and the same numbers as prefilling every row.
        distinct, owner = torch.unique(prompts, dim=0, return_inverse=True)
        cache = self.model.new_cache(len(distinct), T)
        logits = self.model.prefill(distinct, cache).float()[owner]  # (B, V): predicts position P
        if not torch.equal(owner, torch.arange(B)):  # (distinct comes sorted)
            cache.keep(owner)
        cached = torch.arange(B)  # the batch rows the cache holds, in order
        for t in range(P, T):
            # Sampling distribution in float32, whatever the weights' dtype (as engines do).
            logp = torch.log_softmax(logits.float() / temperature, dim=-1)  # (B, V)
            logp = truncate(logp, top_p, top_k) if top_p < 1.0 or top_k > 0 else logp
            if greedy:
                sampled = logp.argmax(dim=-1)
            else:
                sampled = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)
            forcing = (tool_pos >= 0) & ~done
            gen = ~done & ~forcing
            forced = replies.gather(1, tool_pos.clamp(min=0)[:, None]).squeeze(1)
            tok = torch.where(forcing, forced, sampled)
            tok = torch.where(done, torch.full_like(tok, PAD_ID), tok)
            tokens[:, t] = tok
            generated[:, t] = gen
            logprobs[:, t] = torch.where(gen, logp.gather(1, tok[:, None]).squeeze(1), 0.0)

            # The tool's reply advances by one token; a finished reply hands the turn back.
            tool_pos = torch.where(forcing, tool_pos + 1, tool_pos)
            tool_pos = torch.where(tool_pos >= L, torch.full_like(tool_pos, -1), tool_pos)
            # The agent's rules (module docstring).
            turns += gen & ~in_reply
            n_gen += gen
            is_end = gen & (tok == END_ID)
            is_call = gen & (tok == CALL_ID)
            tool_calls += is_call
            in_reply = gen & ~is_end & ~is_call
            out_of_turns = is_call & (turns >= max_turns)
            out_of_tokens = gen & ~is_end & ~out_of_turns & (n_gen >= max_new_tokens)
            termination = torch.where(is_end, ANSWER, termination)
            termination = torch.where(out_of_turns, MAX_TURNS, termination)
            termination = torch.where(out_of_tokens, MAX_TOKENS, termination)
            done = done | is_end | out_of_turns | out_of_tokens
            tool_pos = torch.where(is_call & ~done, torch.zeros_like(tool_pos), tool_pos)
            if bool(done.all()) or t == T - 1:
                break
            # Finished episodes leave the cache once a quarter of it has finished, so the
            # decode runs on running episodes only (single-turn ones end long before lookups).
            running = ~done[cached]
            if int(running.sum()) <= COMPACT_AT * len(cached):
                cache.keep(running)
                cached = cached[running]
            logits = torch.zeros((B, logits.shape[1]))  # finished rows: ignored
            logits[cached] = self.model.decode_one(tok[cached], cache).float()
        used = int(generated.any(0).nonzero().max()) + 1 if bool(generated.any()) else P
        return Episodes(
            tasks=tasks,
            tokens=tokens[:, :used],
            generated=generated[:, :used],
            logprobs=logprobs[:, :used],
            termination=torch.where(done, termination, torch.full_like(termination, MAX_TOKENS)),
            turns=turns,
            tool_calls=tool_calls,
            n_generated=n_gen,
            prompt_len=P,
            version=self.version,
        )
