"""Make the corpus' real TRL runs on CPU: a tiny random-init model, a character tokenizer built
locally, and the reward setups that break runs in practice.

    python benchmarks/corpus/make_trl.py [NAME ...] [--list] [--out benchmarks/corpus/trl]

Nothing is downloaded: the model is a 2-layer Llama with hidden size 64 initialised at random
(seeded), the tokenizer a character-level ``tokenizers`` BPE with no merges. Each run is a
real ``trl.GRPOTrainer`` (or ``RLOOTrainer``) loop with ``logging_steps=1``,
``report_to=["tensorboard"]`` and ``log_completions=True``; what the run writes is kept as it
wrote it: TensorBoard events under ``tensorboard/`` (``$TENSORBOARD_LOGGING_DIR``),
``completions/completions_NNNNN.parquet``, and
``trainer_state.json`` (saved at the end with ``TrainerState.save_to_json``, the same call a
checkpoint makes; ``save_strategy="no"`` keeps the weights off disk). Runs take about a minute
of CPU each; run them one at a time.

Labels are not set here: they are in ``manifest.toml``, written after looking at the curves.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent

CHARS = list("0123456789+-=:? abcdefghijklmnopqrstuvwxyz")
SPECIAL = ["<pad>", "<eos>", "<bos>"]


def tokenizer() -> Any:
    """A character-level fast tokenizer: every character one token, decoding joins them."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIAL + CHARS)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(SPECIAL)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>"
    )
    fast.padding_side = "left"
    return fast


def model(tok: Any, seed: int) -> Any:
    """A 2-layer, hidden-64 Llama initialised at random from ``seed``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
        tie_word_embeddings=True,
    )
    m = LlamaForCausalLM(cfg)
    m.generation_config.pad_token_id = tok.pad_token_id
    m.generation_config.eos_token_id = tok.eos_token_id
    m.generation_config.bos_token_id = tok.bos_token_id
    return m


# -- tasks ------------------------------------------------------------------------------------


def tasks(seed: int, n: int = 256) -> list[dict[str, str]]:
    """Additions, copies and reversals with a known answer; the prompt ends in ``=``."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rng.choice(["add", "copy", "rev"])
        if kind == "add":
            a, b = rng.randint(0, 49), rng.randint(0, 49)
            out.append({"prompt": f"{a}+{b}=", "answer": str(a + b)})
        else:
            w = "".join(rng.choice("abcdefgh") for _ in range(rng.randint(2, 4)))
            out.append({"prompt": f"{kind}:{w}=", "answer": w if kind == "copy" else w[::-1]})
    return out


# -- rewards ----------------------------------------------------------------------------------
# TRL calls each as f(prompts=..., completions=..., answer=[...], trainer_state=..., ...).


def _reply(c: str) -> str:
    return c.replace("<eos>", "").strip()


def partial_credit(completions: list[str], answer: list[str], **_: Any) -> list[float]:
    """Task reward with partial credit: the F1 of the reply's characters against the answer's
    (as multisets), 1.0 for the exact answer, less a penalty for characters beyond the
    answer's length; the empty reply scores 0. A random-init model can climb it by emitting
    the right kind of characters and stopping."""
    out = []
    for c, a in zip(completions, answer):
        r = _reply(c)
        if r == a:
            out.append(1.0)
            continue
        common = sum(min(r.count(ch), a.count(ch)) for ch in set(a))
        if not r or not common:
            out.append(0.0)
            continue
        p, q = common / len(r), common / len(a)
        extra = max(0, len(r) - len(a)) / 10
        out.append(round(0.9 * 2 * p * q / (p + q) - 0.5 * extra, 4))
    return out


def exact(completions: list[str], answer: list[str], **_: Any) -> list[float]:
    """Correctness: 1 if the reply is the answer exactly."""
    return [float(_reply(c) == a) for c, a in zip(completions, answer)]


def constant(completions: list[str], **_: Any) -> list[float]:
    """A broken grader that gives every reply the same score."""
    return [1.0 for _ in completions]


def short_bonus(completions: list[str], **_: Any) -> list[float]:
    """An auxiliary 'stop early' bonus: 1 for an empty or one-character reply, falling to 0."""
    return [max(0.0, 1.0 - len(_reply(c)) / 4) for c in completions]


def loophole(completions: list[str], answer: list[str], **_: Any) -> list[float]:
    """A grader with a loophole: any prefix of the answer passes (so does the empty reply)."""
    return [float(a.startswith(_reply(c))) for c, a in zip(completions, answer)]


def length(completions: list[str], **_: Any) -> list[float]:
    """A length reward: longer is better, whatever it says."""
    return [min(1.0, len(_reply(c)) / 16) for c in completions]


def format_ok(completions: list[str], answer: list[str], **_: Any) -> list[float]:
    """A format component: 1 when the reply uses only the answer's kind of characters."""
    out = []
    for c, a in zip(completions, answer):
        r = _reply(c)
        kind = set("0123456789") if a.isdigit() else set("abcdefgh")
        out.append(float(bool(r) and set(r) <= kind))
    return out


def nan_after(step: int, value: float) -> Callable[..., list[float]]:
    """``partial_credit`` until ``step``, then ``value`` (NaN or inf) for every reply."""

    def reward(completions: list[str], answer: list[str], trainer_state: Any, **kw: Any):
        base = partial_credit(completions, answer)
        if trainer_state.global_step + 1 >= step:
            return [value for _ in base]
        return base

    reward.__name__ = "partial_credit"
    return reward


def some_nan_after(step: int, share: float) -> Callable[..., list[float]]:
    """``partial_credit`` with ``share`` of the replies NaN from ``step`` on (a flaky grader)."""
    rng = random.Random(1)

    def reward(completions: list[str], answer: list[str], trainer_state: Any, **kw: Any):
        base = partial_credit(completions, answer)
        if trainer_state.global_step + 1 >= step:
            return [math.nan if rng.random() < share else b for b in base]
        return base

    reward.__name__ = "partial_credit"
    return reward


# -- the runs ---------------------------------------------------------------------------------
# name -> (trainer, reward funcs, config overrides, note). The note says what was set up, not
# what happened: that is in the manifest.

BASE: dict[str, Any] = {
    "learning_rate": 3e-3,
    "max_steps": 80,
    "per_device_train_batch_size": 32,
    "gradient_checkpointing": False,
    "num_generations": 8,
    "max_completion_length": 10,
    "beta": 0.04,
    "temperature": 1.0,
    "loss_type": "grpo",
}

RUNS: dict[str, tuple[str, list[Any], dict[str, Any], str]] = {
    "grpo-healthy": ("grpo", [partial_credit], {}, "loss grpo, partial-credit task reward"),
    "dr_grpo-healthy-iter2": (
        "grpo",
        [partial_credit],
        {"loss_type": "dr_grpo", "num_iterations": 2, "seed": 1},
        "loss dr_grpo, num_iterations 2, partial-credit task reward",
    ),
    "rloo-healthy": (
        "rloo",
        [partial_credit],
        {"num_iterations": 2},
        "RLOOTrainer, num_iterations 2, partial-credit task reward",
    ),
    "grpo-constant-reward": (
        "grpo",
        [constant],
        {},
        "grader returns 1.0 for every reply: no signal from step 1",
    ),
    "grpo-high-lr": (
        "grpo",
        [partial_credit],
        {"learning_rate": 0.08, "loss_type": "dapo"},
        "loss dapo, learning rate 0.08 (25x the others)",
    ),
    "grpo-short-bonus": (
        "grpo",
        [exact, short_bonus],
        {"reward_weights": [1.0, 2.0], "loss_type": "bnpo"},
        "loss bnpo; exact-match task reward plus a 'stop early' bonus weighted 2x",
    ),
    "grpo-loophole": (
        "grpo",
        [loophole],
        {"loss_type": "dapo", "num_iterations": 2},
        "grader passes any prefix of the answer, the empty reply included",
    ),
    "grpo-length-reward": (
        "grpo",
        [length],
        {"max_completion_length": 12},
        "reward = reply length / 16, capped at 1 (max_completion_length 12)",
    ),
    "grpo-nan-reward": (
        "grpo",
        [nan_after(20, math.nan)],
        {},
        "partial-credit reward returns NaN for every reply from step 20",
    ),
    "grpo-inf-reward": (
        "grpo",
        [nan_after(25, math.inf)],
        {"loss_type": "dr_grpo"},
        "partial-credit reward returns +inf for every reply from step 25",
    ),
    "grpo-flaky-nan": (
        "grpo",
        [some_nan_after(15, 0.3)],
        {},
        "partial-credit reward returns NaN for 30% of replies from step 15",
    ),
    "grpo-two-weighted": (
        "grpo",
        [partial_credit, format_ok],
        {"reward_weights": [1.0, 0.5], "loss_type": "dapo"},
        "two reward functions: partial credit (1.0) and format (0.5)",
    ),
}


def make(name: str, out: Path, seed: int = 0) -> Path:
    """Run one setup into ``out/name`` and return the run directory."""
    from datasets import Dataset

    kind, funcs, over, note = RUNS[name]
    cfg = {**BASE, **over}
    seed = cfg.pop("seed", seed)
    run_dir = out / name
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    tok = tokenizer()
    # TRL builds the reference model from the policy's path, so the random-init weights are
    # saved to a scratch directory (outside the corpus) and handed over by path.
    scratch = Path(tempfile.mkdtemp(prefix="rlvitals-trl-model-"))
    model(tok, seed).save_pretrained(scratch)
    tok.save_pretrained(scratch)
    m = str(scratch)
    ds = Dataset.from_list(tasks(seed))
    common = {
        "output_dir": str(run_dir),
        "logging_steps": 1,
        "report_to": ["tensorboard"],
        "save_strategy": "no",
        "log_completions": True,
        "num_completions_to_print": 0,
        "use_cpu": True,
        "seed": seed,
        "data_seed": seed,
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
        **cfg,
    }
    # TensorBoard writes to $TENSORBOARD_LOGGING_DIR (default <output_dir>/runs/<date_host>;
    # this repository's .gitignore ignores runs/, so the corpus keeps it in tensorboard/).
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(run_dir / "tensorboard")
    if kind == "rloo":
        from trl import RLOOConfig, RLOOTrainer

        common.pop("loss_type", None)
        args = RLOOConfig(**common)
        trainer = RLOOTrainer(
            model=m, reward_funcs=funcs, args=args, train_dataset=ds, processing_class=tok
        )
    else:
        from trl import GRPOConfig, GRPOTrainer

        args = GRPOConfig(**common)
        trainer = GRPOTrainer(
            model=m, reward_funcs=funcs, args=args, train_dataset=ds, processing_class=tok
        )
    t = time.time()
    try:
        trainer.train()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    trainer.state.save_to_json(str(run_dir / "trainer_state.json"))
    import trl

    (run_dir / "setup.json").write_text(
        json.dumps(
            {
                "trainer": kind,
                "trl": trl.__version__,
                "reward_funcs": [f.__name__ for f in funcs],
                "config": {k: v for k, v in cfg.items()},
                "seed": seed,
                "note": note,
                "seconds": round(time.time() - t, 1),
            },
            indent=1,
        )
    )
    return run_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="runs to make (default: all)")
    ap.add_argument("--out", type=Path, default=HERE / "trl")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        for k, v in RUNS.items():
            print(f"{k}: {v[3]}")
        return
    for name in args.names or list(RUNS):
        if name not in RUNS:
            sys.exit(f"unknown run {name!r}; --list shows them")
        t = time.time()
        make(name, args.out)
        print(f"{name}: {time.time() - t:.0f} s", flush=True)


if __name__ == "__main__":
    main()
