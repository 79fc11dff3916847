"""tinygrpo: a GRPO loop written the way a person writes a quick one, in plain PyTorch.

Not TRL, not rlvitals' reference trainer: its own model, task, sampler, loss and logging. A
small autoregressive MLP (about 30k parameters), trained from scratch on CPU, learns a task it
makes itself: given three digits ``a b c``, answer ``(a+1)%10 (b+2)%10 (c+3)%10`` and stop.
A short supervised warm start on noisy answers (right 70% of the time) gives it a start, as an
SFT stage would; that policy is the KL reference. Groups of 8 answers per prompt, advantage = reward - group mean (no std division), a k3 KL
penalty to the starting policy, Adam, grad clipping at 1.0.

It logs every step to W&B (offline), trackio, MLflow (SQLite store), TensorBoard and stdout
(one console line), under short names of its own: ``rew``, ``rew_std``, ``kl``, ``ent``,
``len``, ``gn`` (before clipping), ``lr``, ``loss``, ``acc``, ``zero_adv`` (share of groups
whose answers all scored the same), ``trunc_pct`` (percent of answers cut at the length
limit, 0-100), ``heldout/acc`` (4 sampled answers to each of 200 held-out prompts, graded by the true grader, every 5
steps) and ``val_loss``, declared and never filled (null in W&B and trackio, absent where the tracker
takes numbers only).

    python tinygrpo.py --out DIR [--fault {none,flat,collapse,spikes,exploit,entropy}]
        [--steps 150]

Faults (how each run is broken):
- ``flat``: the reward function scores the prompt, not the answer: every answer of a group gets
  the same reward, so no advantage, no gradient, nothing learnt.
- ``collapse``: a length penalty 100x too strong (1.0 per token instead of 0.01): the policy
  learns to stop at once, answers shrink to nothing.
- ``spikes``: the grader now and then returns 200 (a parse bug) for one answer: gradient norm
  spikes on those steps.
- ``exploit``: a judge that pays 0.5 for an answer that says ``<ok>`` (a rare special token):
  the policy learns to append it after its digits; train reward climbs while the held-out
  accuracy (the true grade, which wants a stop after the digits) falls.
- ``entropy``: a learning rate of 3e-2 (typed for 3e-4) with the KL penalty off: the policy
  turns deterministic within 15 steps (entropy 1.0 to under 0.01) and the held-out score stops
  below the healthy run's.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

EOS, OK, BOS = 10, 11, 12  # tokens: digits 0-9, end, <ok>; BOS is only a "previous token"
VOCAB = 12
MAX_LEN = 8
SHIFT = (1, 2, 3)


class Policy(nn.Module):
    """Next token from (the prompt, the prompt digit at this position, the position, the
    previous token)."""

    def __init__(self, hidden: int = 96) -> None:
        super().__init__()
        self.digit = nn.Embedding(10, 16)
        self.cur = nn.Embedding(11, 16)  # the prompt digit at this position (10: past the end)
        self.pos = nn.Embedding(MAX_LEN, 16)
        self.prev = nn.Embedding(VOCAB + 1, 16)
        self.net = nn.Sequential(
            nn.Linear(16 * 3 + 48, hidden), nn.Tanh(), nn.Linear(hidden, VOCAB)
        )

    def forward(self, prompt: torch.Tensor, pos: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        p = self.digit(prompt).flatten(-2)  # (..., 48)
        padded = torch.cat([prompt, torch.full_like(prompt[..., :1], 10)], -1)
        cur = padded.gather(-1, pos.clamp(max=3)[..., None]).squeeze(-1)
        x = torch.cat([p, self.cur(cur), self.pos(pos), self.prev(prev)], -1)
        return self.net(x)


def sample(policy: Policy, prompts: torch.Tensor, greedy: bool = False) -> torch.Tensor:
    """Answers (B, MAX_LEN), EOS-padded after the first EOS."""
    b = prompts.shape[0]
    out = torch.full((b, MAX_LEN), EOS, dtype=torch.long)
    prev = torch.full((b,), BOS, dtype=torch.long)
    done = torch.zeros(b, dtype=torch.bool)
    with torch.no_grad():
        for t in range(MAX_LEN):
            logits = policy(prompts, torch.full((b,), t, dtype=torch.long), prev)
            tok = (
                logits.argmax(-1)
                if greedy
                else torch.distributions.Categorical(logits=logits).sample()
            )
            tok = torch.where(done, torch.full_like(tok, EOS), tok)
            out[:, t] = tok
            done |= tok == EOS
            prev = tok
    return out


def logprobs(policy: Policy, prompts: torch.Tensor, ans: torch.Tensor):
    """Per-token log-probs and entropies of ``ans``, and the mask of real tokens (up to and
    including the first EOS)."""
    b = ans.shape[0]
    prev = torch.cat([torch.full((b, 1), BOS, dtype=torch.long), ans[:, :-1]], 1)
    pos = torch.arange(MAX_LEN).expand(b, MAX_LEN)
    logits = policy(prompts[:, None, :].expand(b, MAX_LEN, 3), pos, prev)
    logp = F.log_softmax(logits, -1)
    tok_logp = logp.gather(-1, ans[..., None]).squeeze(-1)
    ent = -(logp.exp() * logp).sum(-1)
    is_eos = (ans == EOS).long()
    mask = (torch.cumsum(is_eos, 1) - is_eos) == 0  # tokens before and at the first EOS
    return tok_logp, ent, mask.float()


def answer_len(ans: torch.Tensor) -> torch.Tensor:
    """Tokens before the first EOS (MAX_LEN when there is none)."""
    is_eos = ans == EOS
    first = torch.where(is_eos.any(1), is_eos.float().argmax(1), torch.tensor(MAX_LEN))
    return first.float()


def exact(prompts: torch.Tensor, ans: torch.Tensor) -> torch.Tensor:
    """1 for the right three digits and a stop, else 0."""
    target = (prompts + torch.tensor(SHIFT)) % 10
    return ((ans[:, :3] == target).all(1) & (ans[:, 3] == EOS)).float()


def graded(prompts: torch.Tensor, ans: torch.Tensor) -> torch.Tensor:
    """The true grade: the share of the three digits right, 0 without a stop after them."""
    target = (prompts + torch.tensor(SHIFT)) % 10
    return (ans[:, :3] == target).float().mean(1) * (answer_len(ans) == 3).float()


def reward(prompts: torch.Tensor, ans: torch.Tensor, fault: str, rng: random.Random):
    target = (prompts + torch.tensor(SHIFT)) % 10
    n = answer_len(ans)
    digits_right = (ans[:, :3] == target).float().mean(1)
    stops = (n == 3).float()
    r = digits_right + 0.2 * stops
    if fault == "flat":  # the bug: the prompt is graded, not the answer
        r = (prompts == target).float().mean(1) + 0.2 * (prompts.sum(1) % 2).float()
    elif fault == "collapse":
        r = r - 1.0 * n  # meant to be 0.01 per token
    elif fault == "exploit":
        r = r + 0.5 * (ans == OK).any(1).float()
    elif fault == "spikes" and rng.random() < 0.12:
        r = r.clone()
        r[rng.randrange(len(r))] = 200.0  # the grader's parse bug
    return r


def warm_start(
    policy: Policy, train: list, rng: random.Random, noise: float = 0.3, most: int = 400
) -> int:
    """Supervised steps on answers whose digits are wrong with probability ``noise`` (3% of
    them say ``<ok>`` before stopping, as chatty SFT data does), until
    the sampled answers get 60% of their digits right (at most ``most`` steps). Returns the
    steps."""
    opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
    for i in range(1, most + 1):
        prompts = torch.tensor(rng.sample(train, 64))
        target = (prompts + torch.tensor(SHIFT)) % 10
        wrong = torch.rand(target.shape) < noise
        target = torch.where(wrong, torch.randint(0, 10, target.shape), target)
        ans = torch.cat([target, torch.full((64, MAX_LEN - 3), EOS)], 1)
        ans[torch.rand(64) < 0.03, 3] = OK  # a few chatty answers in the SFT data
        tok_logp, _, mask = logprobs(policy, prompts, ans)
        loss = -(tok_logp * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i % 10 == 0:
            got = sample(policy, prompts)
            right = (got[:, :3] == (prompts + torch.tensor(SHIFT)) % 10).float().mean()
            if right >= 0.6:
                return i
    return most


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the run's folder (made)")
    ap.add_argument(
        "--fault",
        default="none",
        choices=("none", "flat", "collapse", "spikes", "exploit", "entropy"),
    )
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prompts", type=int, default=16, help="prompts per step")
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta", type=float, default=0.05, help="KL penalty")
    ap.add_argument("--warm-steps", type=int, default=400, help="most supervised steps")
    ap.add_argument("--trackers", default="wandb,trackio,mlflow,tensorboard")
    args = ap.parse_args(argv)

    if args.fault == "entropy":  # a learning rate typed 3e-2 for 3e-4, and the KL turned off
        args.lr, args.beta = 3e-2, 0.0
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    trackers = set(args.trackers.split(",")) - {""}
    name = f"tinygrpo-{args.fault}-s{args.seed}"
    cfg = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}

    # held-out prompts: every 5th of the 1000, never trained on
    allp = [(a, b, c) for a in range(10) for b in range(10) for c in range(10)]
    held = torch.tensor(allp[::5])
    train = [p for i, p in enumerate(allp) if i % 5]

    wb = tio = tb = None
    if "wandb" in trackers:
        import wandb

        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_SILENT", "true")
        wb = wandb.init(
            project="tinygrpo",
            name=name,
            dir=str(out),
            config=cfg,
            settings=wandb.Settings(console="off", x_disable_stats=True),
        )
        wb.define_metric("val_loss")  # declared, never filled
    if "trackio" in trackers:
        os.environ["TRACKIO_DIR"] = str(out / "trackio")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import trackio

        trackio.init(project="tinygrpo", name=name, config=cfg)
        tio = trackio
    if "mlflow" in trackers:
        import mlflow

        mlflow.set_tracking_uri(f"sqlite:///{out}/mlflow.db")
        mlflow.set_experiment("tinygrpo")
        mlflow.start_run(run_name=name)
        mlflow.log_params(cfg)
    if "tensorboard" in trackers:
        from torch.utils.tensorboard import SummaryWriter

        tb = SummaryWriter(str(out / "tb"))

    policy = Policy()
    warm = warm_start(policy, train, rng, most=args.warm_steps)
    print(f"warm start: {warm} supervised steps", flush=True)
    ref = copy.deepcopy(policy).requires_grad_(False)
    opt = torch.optim.Adam(policy.parameters(), lr=args.lr)
    g = args.group
    truth = out / "truth.jsonl"  # the values as computed, to check readers against
    truth.write_text("")
    for step in range(1, args.steps + 1):
        t0 = time.time()
        prompts = torch.tensor(rng.sample(train, args.prompts)).repeat_interleave(g, 0)
        ans = sample(policy, prompts)
        r = reward(prompts, ans, args.fault, rng)
        rg = r.view(-1, g)
        adv = (rg - rg.mean(1, keepdim=True)).view(-1)
        tok_logp, ent, mask = logprobs(policy, prompts, ans)
        with torch.no_grad():
            ref_logp, _, _ = logprobs(ref, prompts, ans)
        log_ratio = ref_logp - tok_logp
        kl_tok = log_ratio.exp() - log_ratio - 1  # k3
        ntok = mask.sum(1).clamp(min=1)
        pg = -(adv[:, None] * tok_logp * mask).sum(1) / ntok
        kl = (kl_tok * mask).sum(1) / ntok
        loss = (pg + args.beta * kl).mean()
        opt.zero_grad()
        loss.backward()
        gn = float(torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0))
        opt.step()

        n = answer_len(ans)
        m = {
            "rew": float(r.mean()),
            "rew_std": float(rg.std(1).mean()),
            "kl": float(kl.detach().mean()),
            "ent": float((ent.detach() * mask).sum() / mask.sum()),
            "len": float(n.mean()),
            "gn": gn,
            "lr": args.lr,
            "loss": float(loss.detach()),
            "acc": float(exact(prompts, ans).mean()),
            "zero_adv": float((rg.std(1) == 0).float().mean()),
            "trunc_pct": 100.0 * float((n >= MAX_LEN).float().mean()),
        }
        if step % 5 == 0 or step == 1:
            hp = held.repeat_interleave(4, 0)
            m["heldout/acc"] = float(graded(hp, sample(policy, hp)).mean())
        line = (
            f"step {step}/{args.steps} | rew {m['rew']:.3f} | kl {m['kl']:.4f} | "
            f"ent {m['ent']:.3f} | len {m['len']:.2f} | gn {m['gn']:.3f} | "
            f"trunc {m['trunc_pct']:.1f}% | acc {m['acc']:.3f}"
        )
        if "heldout/acc" in m:
            line += f" | heldout acc {m['heldout/acc']:.3f}"
        print(line + f" | {time.time() - t0:.2f}s", flush=True)
        with truth.open("a") as f:
            f.write(json.dumps({"step": step, **m}) + "\n")
        if wb is not None:
            wb.log({**m, "val_loss": None}, step=step)
        if tio is not None:
            tio.log({**m, "val_loss": None}, step=step)
        if "mlflow" in trackers:
            mlflow.log_metrics(m, step=step)
        if tb is not None:
            for k, v in m.items():
                tb.add_scalar(k, v, step)
    if wb is not None:
        wb.finish()
    if tio is not None:
        tio.finish()
    if "mlflow" in trackers:
        mlflow.end_run()
    if tb is not None:
        tb.close()
    (out / "done.json").write_text(json.dumps({"name": name, **cfg}))


if __name__ == "__main__":
    sys.exit(main())
