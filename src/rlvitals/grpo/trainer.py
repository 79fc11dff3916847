"""The GRPO update: group-relative advantages, a clipped importance ratio, full precision.

One update, given a batch of episodes from the sampler and the attempts the writer decided
to train on (``Run.decide``):

1. Recompute, with the trainer's float32 weights and before any change, the log-probability
   of every sampled token: ``logp_old`` (B, T). These are the trainer's logprobs the writer
   holds against the sampler's (the mismatch metrics: k3, |Δ|, ESS).
2. Advantages per attempt, relative to its group (GRPO): A_i = (r_i - mean_g) / (std_g + 1e-4),
   over the attempts of the group that train. Every generated token of attempt i gets A_i.
3. ``minibatches`` optimizer steps over the trained attempts, each minimising the clipped
   surrogate, averaged over the minibatch's generated tokens (a token-level mean):

       ratio = exp(logp_new - logp_old)
       loss  = -mean_tokens( min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A) )

   The first minibatch is exactly on-policy (ratio = 1); later ones follow an optimizer step,
   so the ratio moves and the clip can act (``train/clip_frac``).

Where this departs from the GRPO paper (Shao et al., 2024), as nanochat's chat_rl.py lists its own:

- No KL penalty to a reference model (as DAPO and nanochat drop it), so ``train/ref_kl`` is not
  measured. The PPO ``train/ppo_kl`` (old vs new within the update) is.
- The loss is a token-level mean over the minibatch (DAPO), not a mean of per-sequence means.
- In sync mode ``logp_old`` is the trainer's own recomputation, not the sampler's logprobs:
  the ratio starts at exactly 1, and the sampler/trainer mismatch is measured, not corrected
  (no truncated importance sampling).
- In async mode (``clip_to_sampler``) the ratio is taken against the sampler's logprobs, the
  policy that sampled the batch updates ago, as PPO's old policy is the behaviour policy: the
  clip then stops pushing a token the updates since have already pushed. Anchored on the
  trainer's recomputation instead, as one-step-off-policy trainers often are, every batch
  pushed again from where the last one left the policy: the held-out score swung by 0.1-0.2
  between checkpoints and seeds 0-2 rose 0.04-0.15 in 40 updates, against 0.19-0.22 anchored
  on the sampler (held-out steady, as in sync mode). ``logp_old`` is still the trainer's,
  returned for the mismatch metrics.
- With ``[correction]`` on, each token's clipped surrogate is also weighted by the sampler
  correction w = pi_trainer / pi_sampler (``logp_old`` against the sampler's logprobs): per
  token, or one weight per sequence, exp(mean) or exp(sum) of its tokens' log-ratios,
  truncated to or masked outside [clip_min, clip_max] (TRL's vllm_importance_sampling_mode,
  verl's rollout_is). The PPO ratio is then taken against ``logp_old`` (decoupled PPO), and
  the weights are logged as ``train/is_weight_{mean,min,max}``, before or after the bounds.
- A non-finite loss or gradient skips the optimizer step (as a mixed-precision grad scaler
  does); the update is still counted and its metrics are logged as they are (NaN).
- Tool replies are inputs, never trained on: only tokens the model sampled carry a loss.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .model import GPT
from .optim import AdamW
from .sampler import Episodes

__all__ = ["Trainer", "group_advantages"]


def _buckets(
    rows: torch.Tensor, lengths: torch.Tensor, width: int = 4
) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """Rows grouped by length, rounded up to a multiple of ``width``.

    Returns (positions in ``rows``, the rows, the bucket's length) per bucket, so each forward
    pass runs over its longest member only, not the batch's longest episode.
    """
    lens = lengths[rows]
    keys = (lens + width - 1) // width
    out = []
    for key in torch.unique(keys).tolist():
        pos = (keys == key).nonzero().squeeze(1)
        out.append((pos, rows[pos], int(lens[pos].max())))
    return out


def group_advantages(rewards: Sequence[float], groups: Sequence[str]) -> list[float]:
    """(r - mean of its group) / (population std of its group + 1e-4), per attempt."""
    by_group: dict[str, list[float]] = {}
    for r, g in zip(rewards, groups):
        by_group.setdefault(g, []).append(r)
    stats = {}
    for g, rs in by_group.items():
        mean = sum(rs) / len(rs)
        std = math.sqrt(sum((r - mean) ** 2 for r in rs) / len(rs))
        stats[g] = (mean, std)
    return [(r - stats[g][0]) / (stats[g][1] + 1e-4) for r, g in zip(rewards, groups)]


@dataclass(frozen=True)
class Correction:
    """The sampler correction (``[correction]``): level, bound mode, aggregation, bounds, and
    whether the weights are logged before (raw) or after (corrected) the bounds."""

    level: str  # "token" | "sequence"
    bound: str  # "truncate" | "mask"
    aggregation: str = "mean"  # a sequence weight: exp(mean) or exp(sum) of log-ratios
    clip_max: float = 2.0
    clip_min: float = 0.0
    log: str = "raw"

    @classmethod
    def of(cls, mode: str, **kw: object) -> Correction | None:
        """From ``[correction] mode`` ("none": None) and its other keys."""
        if mode == "none":
            return None
        level, _, bound = mode.partition("_")
        return cls(level, bound, **kw)  # type: ignore[arg-type]

    def weights(self, log_ratio: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(weights applied, weights as logged, one entry per weight: its mask) for a bucket:
        ``log_ratio`` (b, L-1) = logp_old - logp_sampler, ``mask`` (b, L-1) of sampled
        tokens."""
        if self.level == "sequence":
            n = mask.sum(1).clamp(min=1.0)  # (b,)
            total = (log_ratio * mask).sum(1)
            agg = total if self.aggregation == "sum" else total / n
            raw = agg.clamp(-20.0, 20.0).exp()[:, None].expand_as(log_ratio)  # (b, L-1)
            counted = mask.sum(1) > 0  # (b,) one weight per sequence
        else:
            raw = log_ratio.clamp(-20.0, 20.0).exp()
            counted = mask > 0
        lo = self.clip_min if self.clip_min > 0 else 0.0
        if self.bound == "mask":
            out = (raw >= lo) & (raw <= self.clip_max)
            applied = torch.where(out, raw, torch.zeros_like(raw))
        else:
            applied = raw.clamp(min=lo, max=self.clip_max)
        logged_full = raw if self.log == "raw" else applied
        logged = logged_full[:, 0] if self.level == "sequence" else logged_full
        return applied * mask, logged, counted


@dataclass
class UpdateStats:
    """What one update measured, under canonical metric names (docs/metrics.md)."""

    metrics: dict[str, float]
    stepped: int  # optimizer steps taken (a non-finite one is skipped)
    logp_old: torch.Tensor  # (B, T-1): every row's token logprobs before the update


class Trainer:
    """The full-precision policy and its optimizer."""

    def __init__(
        self,
        model: GPT,
        *,
        lr: float,
        clip_eps: float,
        minibatches: int,
        grad_clip: float,
        weight_decay: float,
        temperature: float,
        seed: int,
        warmup: int = 0,
        clip_to_sampler: bool = False,
        correction: Correction | None = None,
    ) -> None:
        self.model = model
        # The sampler correction (None: off); with it on, the ratio is against logp_old.
        self.correction = correction
        # Clip the ratio to the sampler's logprobs (the policy that sampled the batch) rather
        # than the trainer's own recomputation: async mode, where a batch is updates old.
        self.clip_to_sampler = clip_to_sampler
        self.lr = self.base_lr = lr
        # The learning rate rises linearly over the first ``warmup`` updates: a fresh Adam's
        # first steps move every weight by the full rate (m / sqrt(v) = sign(g) at t = 1),
        # several times what later, noisier steps move it.
        self.warmup = warmup
        self.updates = 0
        self.clip_eps = clip_eps
        self.minibatches = minibatches
        self.grad_clip = grad_clip
        self.temperature = temperature
        self.opt = AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
        self.generator = torch.Generator().manual_seed(seed * 1000 + 7)
        # Fault hooks (faults.py): a logit scale (inf makes the loss NaN) and an entropy
        # coefficient added to the loss (positive: an entropy bonus with the wrong sign).
        self.logit_scale = 1.0
        self.entropy_coef = 0.0

    def set_lr(self, lr: float) -> None:
        """Change the learning rate from the next update on (scaled while warming up)."""
        self.lr = lr

    def _logits(self, tokens: torch.Tensor) -> torch.Tensor:
        # (B, T) -> (B, T-1, V): position t predicts token t+1, at the sampling temperature so
        # that trainer and sampler logprobs describe the same distribution.
        logits = self.model(tokens[:, :-1]) / self.temperature
        if self.logit_scale != 1.0:
            logits = logits * self.logit_scale
        return logits

    @torch.no_grad()
    def logprobs(self, ep: Episodes, rows: Sequence[int] | None = None) -> torch.Tensor:
        """float32 logprob of each token of batch rows ``rows`` (default all): (len, T-1).

        Entry (i, t) is the logprob of token t+1 of the row; read it where the row's
        ``ep.generated[:, 1:]`` is set (0 past the row's last sampled token).
        """
        self.model.eval()
        idx = torch.arange(ep.tokens.shape[0]) if rows is None else torch.as_tensor(list(rows))
        out = torch.zeros((len(idx), ep.tokens.shape[1] - 1), dtype=torch.float32)
        for pos, r, L in _buckets(idx, ep.lengths):
            tokens = ep.tokens[r, :L]  # (b, L)
            logp = torch.log_softmax(self._logits(tokens), dim=-1)  # (b, L-1, V)
            out[pos, : L - 1] = logp.gather(2, tokens[:, 1:, None]).squeeze(2)
        return out

    def update(self, ep: Episodes, rows: Sequence[int], advantages: Sequence[float]) -> UpdateStats:
        """One GRPO update on batch rows ``rows`` with their advantages.

        Also returns ``logp_old`` for every row of the batch (trained or not): the trainer's
        logprobs before the update, which the writer holds against the sampler's.

        Args:
            ep: the batch of episodes (every row, trained or not).
            rows: indices of the rows that train (may be empty: then only ``logp_old``).
            advantages: one advantage per row of ``rows``.
        """
        # The rate of this update's optimizer steps: lr, scaled while warming up.
        self.updates += 1
        warm = min(1.0, self.updates / self.warmup) if self.warmup > 0 else 1.0
        self.opt.lr = self.lr * warm
        idx = torch.as_tensor(list(rows), dtype=torch.long)
        adv = torch.as_tensor(list(advantages), dtype=torch.float32)  # (N,)
        # Shuffle the trained rows, then cut them into minibatches of near-equal size.
        order = torch.randperm(len(idx), generator=self.generator)
        chunks = [c for c in torch.tensor_split(order, self.minibatches) if len(c)]
        logp_old = self._logp_old(ep, idx[chunks[0]] if chunks else None)
        self.model.train()

        sums = dict.fromkeys(("loss", "grad_norm", "clipped", "tokens", "entropy", "ppo_kl"), 0.0)
        self._weights: list[torch.Tensor] = []  # the logged correction weights
        stepped = 0
        for k, chunk in enumerate(chunks):
            stepped += self._minibatch(ep, idx[chunk], adv[chunk], logp_old, k == 0, sums)
        if not chunks:
            return UpdateStats(metrics={}, stepped=0, logp_old=logp_old)
        n = sums["tokens"] or math.nan
        adv_std = float(adv.std(unbiased=False)) if len(adv) else math.nan
        weights = torch.cat(self._weights) if self._weights else None
        is_metrics = {}
        if weights is not None and len(weights):
            is_metrics = {
                "train/is_weight_mean": float(weights.mean()),
                "train/is_weight_min": float(weights.min()),
                "train/is_weight_max": float(weights.max()),
            }
        return UpdateStats(
            metrics={
                **is_metrics,
                "train/loss": sums["loss"] / n,
                "train/grad_norm": sums["grad_norm"] / n,
                "train/lr": self.opt.lr,
                "train/clip_frac": sums["clipped"] / n,
                "train/entropy": sums["entropy"] / n,
                "train/ppo_kl": sums["ppo_kl"] / n,
                "train/advantage_std": adv_std,
            },
            stepped=stepped,
            logp_old=logp_old,
        )

    def _logp_old(self, ep: Episodes, first: torch.Tensor | None) -> torch.Tensor:
        """logp_old, (B, T-1), from the weights before any step. The first minibatch (rows
        ``first``) is on-policy, so its forward pass gives its own logp_old (detached, in
        ``_bucket``); every other row needs one no-grad forward now, before the first optimizer
        step changes the weights."""
        B, T = ep.tokens.shape
        logp_old = torch.zeros((B, T - 1), dtype=torch.float32)
        on_policy = set(first.tolist()) if first is not None else set()
        others = [i for i in range(B) if i not in on_policy]
        if others:
            logp_old[others] = self.logprobs(ep, others)
        return logp_old

    def _minibatch(
        self,
        ep: Episodes,
        rows: torch.Tensor,
        adv: torch.Tensor,
        logp_old: torch.Tensor,
        on_policy: bool,
        sums: dict[str, float],
    ) -> int:
        """One optimizer step on batch rows ``rows`` with their advantages ``adv``; adds its
        token-weighted numbers to ``sums``. Returns 1, or 0 where a non-finite loss or gradient
        skipped the step."""
        n_tok = float(ep.generated[rows, 1:].sum()) or 1.0  # tokens of the minibatch
        # Sums over the minibatch's sampled tokens, run length-bucket by length-bucket
        # (a single-turn episode is half as long as a lookup; padding costs compute).
        surrogate = entropy_sum = torch.zeros(())
        clipped = ppo_kl = 0.0
        for pos, r, L in _buckets(rows, ep.lengths):
            a = adv[pos][:, None]  # (b, 1): one advantage for every token of an attempt
            surr, ent, clip, kl = self._bucket(ep, r, L, a, logp_old, on_policy)
            surrogate = surrogate + surr
            entropy_sum = entropy_sum + ent
            clipped += clip
            ppo_kl += kl

        loss = -surrogate / n_tok  # token-level mean over the minibatch
        if self.entropy_coef:
            loss = loss + self.entropy_coef * entropy_sum / n_tok

        self.opt.zero_grad()
        loss.backward()
        # Norm before clipping (what train/grad_norm means); clips in place.
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        stepped = 0
        if torch.isfinite(loss) and torch.isfinite(grad_norm):
            self.opt.step()
            stepped = 1

        sums["tokens"] += n_tok
        sums["loss"] += loss.item() * n_tok
        sums["grad_norm"] += float(grad_norm) * n_tok
        sums["clipped"] += clipped
        sums["entropy"] += entropy_sum.item()
        sums["ppo_kl"] += ppo_kl
        return stepped

    def _bucket(
        self,
        ep: Episodes,
        r: torch.Tensor,
        L: int,
        a: torch.Tensor,
        logp_old: torch.Tensor,
        on_policy: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, float, float]:
        """One length bucket (rows ``r``, ``L`` positions) of a minibatch: the sums of its
        clipped surrogate and of its entropy over the sampled tokens (in the graph), its
        clipped tokens and its k1 KL sum."""
        eps = self.clip_eps
        tokens = ep.tokens[r, :L]  # (b, L)
        mask = ep.generated[r, 1:L].float()  # (b, L-1): 1 where token t+1 was sampled

        logits = self._logits(tokens)  # (b, L-1, V)
        logp_all = torch.log_softmax(logits, dim=-1)  # (b, L-1, V)
        logp = logp_all.gather(2, tokens[:, 1:, None]).squeeze(2)  # (b, L-1)
        if on_policy:  # the first minibatch: its own logprobs are logp_old
            logp_old[r, : L - 1] = logp.detach()
        if self.clip_to_sampler and self.correction is None:  # the behaviour policy's own
            old = ep.logprobs[r, 1:L]  # (b, L-1); 0 where not sampled (masked)
        else:
            old = logp_old[r, : L - 1]  # (b, L-1)
        weight = mask
        if self.correction is not None:
            # pi_trainer / pi_sampler of each sampled token (b, L-1), before the update.
            applied, logged, counted = self.correction.weights(
                (logp_old[r, : L - 1] - ep.logprobs[r, 1:L]) * mask, mask
            )
            weight = applied
            self._weights.append(logged[counted].detach())

        # The clipped surrogate, per token.
        log_ratio = logp - old  # (b, L-1)
        ratio = log_ratio.exp()
        surr1 = ratio * a
        surr2 = ratio.clamp(1.0 - eps, 1.0 + eps) * a
        surrogate = (torch.minimum(surr1, surr2) * weight).sum()
        # Token entropy of the trainer's distribution, H = -Σ p log p over the vocab.
        entropy = -(logp_all.exp() * logp_all).sum(-1)  # (b, L-1)
        with torch.no_grad():
            # The clip is active where min() picked the clamped term: the ratio left
            # [1-eps, 1+eps] in the direction the advantage pushes.
            hit = ((ratio > 1.0 + eps) & (a > 0)) | ((ratio < 1.0 - eps) & (a < 0))
            clipped = float((hit.float() * mask).sum())
            # k1 estimate of KL(old || new) over the sampled tokens.
            kl = float((-log_ratio * mask).sum())
        return surrogate, (entropy * mask).sum(), clipped, kl
