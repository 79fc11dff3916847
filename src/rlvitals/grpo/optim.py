"""AdamW, written out: the same update as ``torch.optim.AdamW``, without its import cost.

The first ``torch.optim`` optimizer a process creates imports ``torch._dynamo`` (measured on
these 2 CPUs: 2 s idle, 7-9 s when another process holds a core), a fifth of the demo's whole
time budget. The update itself is a few lines:

    m = b1 m + (1 - b1) g            v = b2 v + (1 - b2) g²
    p = p (1 - lr wd) - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["AdamW"]


class AdamW:
    """Decoupled-weight-decay Adam (Loshchilov & Hutter), the subset the trainer uses."""

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        *,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.95),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.m = [torch.zeros_like(p) for p in self.params]  # first moment, per parameter
        self.v = [torch.zeros_like(p) for p in self.params]  # second moment
        self.t = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        bias1 = 1.0 - b1**self.t
        bias2_sqrt = (1.0 - b2**self.t) ** 0.5
        live = [(p, m, v) for p, m, v in zip(self.params, self.m, self.v) if p.grad is not None]
        if not live:
            return
        params, ms, vs = (list(x) for x in zip(*live))
        grads = [p.grad for p in params]
        # The same arithmetic as one loop over the tensors, in one kernel call per operation.
        if self.weight_decay:
            torch._foreach_mul_(params, 1.0 - self.lr * self.weight_decay)
        torch._foreach_lerp_(ms, grads, 1.0 - b1)
        torch._foreach_mul_(vs, b2)
        torch._foreach_addcmul_(vs, grads, grads, value=1.0 - b2)
        denom = torch._foreach_sqrt(vs)
        torch._foreach_div_(denom, bias2_sqrt)
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(params, ms, denom, value=-self.lr / bias1)
