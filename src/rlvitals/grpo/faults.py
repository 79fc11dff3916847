"""Faults the reference trainer can inject, each with the signature the seeds describe.

``rlvitals demo --fault NAME[@STEP]`` breaks a run on purpose from update STEP (the onset;
each fault has a default that leaves a few healthy updates first, except the task faults,
which are wrong from the start). run.json records ``fault`` and ``fault_step`` so a benchmark
can score whether, and how soon, a check finds it.

What each fault does, and where it shows (canonical metric names, docs/metrics.md):

stale_sampler
    The sampler stops receiving new weights (a broken weight sync). Its attempts carry the
    version it still holds, so ``freshness/lag_*`` grows by one per update and
    ``train/mismatch_kl`` (with ``train/logprob_abs_diff``) rises from its bfloat16 floor as
    the trainer moves away; once the lag passes ``[training] max_steps_off_policy``, every
    attempt is dropped as ``discard/rollouts/stale`` and the trainer stops learning.
too_easy
    The RL task set leaked into the warm-start data (contamination): before training, the
    model is fine-tuned on the 32 tasks it will be given until it solves them in 98% of
    attempts. From update 0, most groups are rejected as ``discard/groups/no_variance``
    with ``groups/all_solved`` high and ``reward/mean_with_unusable`` near 1 (and the
    memorising costs held-out skill: the held-out score starts low and stays there).
too_hard
    The tasks have one more digit per operand than the model was warm-started on: it never
    solves one. From update 0, every group is ``no_variance`` with ``groups/none_solved``
    high, ``reward/mean_with_unusable`` at 0 and nothing trained.
grader_exploit
    The training grader has a swapped-argument bug, ``expected.startswith(answer)``: any
    prefix of the right answer passes, the empty answer included. The policy learns to stop
    early. In a transcript the shortcut looks like this: a rewarded final reply that is
    *shorter than a full answer* (which always has ``digits + 1`` digits before ``$``): ``$``
    alone, or one or two digits then ``$`` (``6$``, ``64$``), often identical across a group.
    ``reward/mean_with_unusable`` climbs towards 1 (``reward/mean`` less, as the solved
    groups are rejected) while ``rollout/answer_digits`` and ``response/length_mean`` fall,
    and the held-out score (honest exact-match grader, in evals.jsonl) falls. The policy
    finds the shortcut by itself, 5-20 updates after the onset.

    Its own run shape: the warm start stops at a sampled pass rate of ``EXPLOIT_WARM_TARGET``
    (0.25; the run's ``warm_target_pass_rate`` if that is lower), not the default 0.45, and
    run.json's config says so. A shortcut is found where it pays more than the honest answer:
    a policy that solves 45% of its attempts from the start writes ``$`` early too rarely, and
    gains too little from it, for the shortcut to take over early (seed 0: found 20 updates
    after the onset, held-out still 0.91 at update 29, on 64 tasks per update), while the
    same bug on the weaker policy is found 1-8 updates after the onset (seeds 0-2, 160 tasks
    per update; at 0.3 on 64 tasks, 6-11).
grader_crash
    The grading service fails most calls with ``ConnectionError``; retries absorb some.
    From the onset: a burst of ``discard/rollouts/grading_failed/ConnectionError``, high
    ``rollouts/retries``, groups rejected as ``group_too_small``.
rollout_crash
    The sandbox running episodes times out on most tries (``TimeoutError``). From the onset:
    a burst of ``discard/rollouts/rollout_failed/TimeoutError``, high ``rollouts/retries``,
    groups rejected as ``group_too_small``.
out_of_room
    The agent's budget shrinks to ``max_new_tokens = digits + 1`` (room for an answer's
    digits, not its end token) and ``max_turns = 1`` (a lookup's tool call uses the only
    turn). From the onset ``response/truncated_rate`` and
    ``rollout/termination_reason/max_tokens`` jump to most attempts,
    ``rollout/termination_reason/max_turns`` to the lookups, while ``reward/mean`` stops
    rising (cut answers still score when their digits are right; lookups score 0).
entropy_collapse
    An entropy term is added to the loss with the wrong sign (the loss *minimises* entropy,
    over every sampled token of the batch, coefficient 10 so it dominates the policy
    gradient), at 6x the learning rate (with the gradient-norm clip, the rate sets how fast
    it collapses: a larger coefficient changes little). ``sampling/entropy_estimate`` and
    ``train/entropy`` fall sharply relative to their start, the policy collapses onto a few
    replies (the same wrong reply, e.g. ``770$``, given to many tasks), groups become
    identical (``discard/groups/no_variance`` rises, ``groups/signal_fraction`` and
    ``reward/mean_with_unusable`` fall), until the unusable-groups guard stops the run.
stall
    At the onset update, half the attempts never come back (the rollout workers hang). No
    step record after the onset; the progress heartbeat (progress.jsonl, when
    ``[output] progress_every_seconds`` is set) keeps reporting phase ``sampling`` with the
    same ``attempts_done``. After ``stall_seconds`` the process gives up without closing the
    run, as a job killed by its scheduler: run.json still says ``running``.
nan
    The trainer's logits overflow to infinity (what an fp16 overflow does), so from the onset
    ``train/loss``, ``train/grad_norm``, ``train/entropy``, ``train/ppo_kl`` and the
    mismatch metrics (``train/mismatch_kl``...) are NaN. Like a mixed-precision grad
    scaler, the trainer skips the optimizer step on non-finite gradients, so the run goes on
    with NaN losses and unchanged weights.
bad_replica
    One inference engine replica of ten runs a broken sampling kernel: it samples from the
    logits divided by ``REPLICA_TEMPERATURE`` (1.6, hotter than the trainer's distribution) and
    reports the logprobs of that distribution. Whole groups go to one replica, so a tenth of
    the groups, every attempt in them, carry sampler logprobs far from the trainer's (each
    sequence's token mean of exp(|Δ|) far past 1.05), while the token means
    (``train/mismatch_kl`` under its 0.01 line, ``train/mismatch_tme``) move little: the
    tail shows in ``train/mismatch_seq_tme_p90`` and ``train/mismatch_seq_over`` (about 0.1)
    from the onset. Reward barely moves. The shape of NVIDIA-NeMo/RL #2100, where a mean
    hides the outlier sequences.

Where the sampler and the trainer disagree for a reason the run's own settings name (the
mismatch's cause, ``checks/mismatch_cause.py``); each writes what it changes into run.json's
config, as a run records its settings:

truncated_sampling
    The engine samples the training rollouts with top_p 0.8 (``[engine] top_p``) and reports
    the log-probs of what it sampled from, renormalised over the kept tokens, while the trainer
    scores every token over the whole vocabulary: each token's ratio pi_trainer / pi_sampler
    is the kept mass, at most 1. From update 0 ``train/is_ratio_mean`` sits near 0.96 (trl
    #6789: top_p 0.8 gives the kept mass, 0.896 on Qwen2.5-1.5B) and ``train/is_ratio_max``
    near 1; nothing corrects for it.
dtype_pair
    From the onset the engine computes in float8 (e4m3: weights and activations rounded to it,
    ``[engine] dtype``) while the trainer stays float32. Most sampled tokens are near certain
    and agree (the median token ratio stays 1.0000); the uncertain ones disagree, so the mean
    |Δ| rises about fifteen-fold (0.003 to 0.05) and a third of the sequences pass 1.05.
sum_aggregation
    Async training (the sampler one update ahead) with a sequence-level correction masked past
    2 (TRL's sequence_mask), each sequence's weight the product of its tokens' ratios,
    exp(sum) (``[correction] aggregation = "sum"``), logged after the mask: the weights of long
    sequences leave [0, 2] and are zeroed, so ``train/is_weight_min`` is 0 and the mean falls
    while the per-token mismatch stays that of the designed lag (trl PR #5815, NeMo-RL PR
    #2269).
post_clip_logging
    Async training with a token-level correction masked outside [0.5, 2] (IcePop-like),
    logged after the mask (``[correction] log = "corrected"``, as TRL logs its ratios: trl
    #5231): ``train/is_weight_min`` reads 0 and the max at most 2 on every update, whatever
    the mismatch beyond.
stale_replica
    From the onset one engine replica of ten stops receiving new weights (a failed refit on
    one node) and reports the version it holds: a tenth of the groups sample from weights one
    more update behind each step, ``freshness/lag_max`` and the mismatch tail rise together,
    and once past ``max_steps_off_policy`` its attempts are dropped as stale.

This module imports no torch: ``--list-faults`` stays cheap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .grader import Grader, grade, grade_prefix_bug

if TYPE_CHECKING:
    import numpy as np

    from .config import TaskConfig
    from .model import GPT
    from .sampler import Sampler
    from .tasks import Task, TaskPool
    from .trainer import Trainer

__all__ = ["FAULTS", "ActiveFault", "Fault", "parse_fault", "warm_targets"]


@dataclass(frozen=True)
class Fault:
    """A fault: its name, default onset update, what it does and where it shows."""

    name: str
    default_step: int
    does: str
    shows: str


# grader_exploit's warm-start target (see its entry in the docstring): 0.25 since the demo
# trains on 160 tasks per update (at 0.3 the shortcut was found 16 and 21 updates after the
# onset on seeds 0 and 1, the honest answer learnt as fast; at 0.25, 1, 8 and 6 on seeds 0-2).
EXPLOIT_WARM_TARGET = 0.25

FAULTS: dict[str, Fault] = {
    f.name: f
    for f in [
        Fault(
            "stale_sampler",
            5,
            "the sampler stops receiving new weights",
            "freshness/lag_* and train/mismatch_kl rise; then discard/rollouts/stale",
        ),
        Fault(
            "too_easy",
            0,
            "the RL tasks leaked into the warm start: the model has memorised them",
            "discard/groups/no_variance high from the start, groups/all_solved",
        ),
        Fault(
            "too_hard",
            0,
            "tasks one digit longer than the model was warm-started on",
            "discard/groups/no_variance high from the start, groups/none_solved",
        ),
        Fault(
            "grader_exploit",
            3,
            "the grader accepts any prefix of the answer (a swapped-argument bug); its own "
            f"warm start, to a pass rate of {EXPLOIT_WARM_TARGET}",
            "reward/mean_with_unusable climbs, held-out falls, answers shrink to '$' or '6$'",
        ),
        Fault(
            "grader_crash",
            5,
            "the grading service fails most calls (ConnectionError)",
            "burst of discard/rollouts/grading_failed/ConnectionError, rollouts/retries",
        ),
        Fault(
            "rollout_crash",
            5,
            "the episode sandbox times out on most tries (TimeoutError)",
            "burst of discard/rollouts/rollout_failed/TimeoutError, rollouts/retries",
        ),
        Fault(
            "out_of_room",
            5,
            "token budget cut to the answer's digits, max_turns to 1",
            "response/truncated_rate, rollout/termination_reason/max_* rise, reward flat",
        ),
        Fault(
            "entropy_collapse",
            5,
            "an entropy term with the wrong sign (the loss minimises entropy), 6x lr",
            "sampling/entropy_estimate falls sharply, groups repeat one reply",
        ),
        Fault(
            "stall",
            5,
            "the rollout workers hang: half the attempts of an update never return",
            "no step record after the onset; heartbeats stuck in 'sampling'",
        ),
        Fault(
            "bad_replica",
            5,
            "one engine replica of ten samples from a hotter distribution (a kernel bug)",
            "train/mismatch_seq_over near 0.1 and seq. ratio p90 past 1.05; means stay low",
        ),
        Fault(
            "nan",
            5,
            "the trainer's logits overflow to infinity",
            "train/loss, train/grad_norm and the mismatch metrics NaN from the onset",
        ),
        Fault(
            "truncated_sampling",
            0,
            "the engine samples with top_p 0.8 and reports renormalised log-probs",
            "train/is_ratio_mean near the kept mass (~0.96), no token's ratio above 1",
        ),
        Fault(
            "dtype_pair",
            5,
            "the engine switches to float8 while the trainer stays float32",
            "mean |Δ| up ~15x with the median token ratio at 1; a third of sequences past 1.05",
        ),
        Fault(
            "sum_aggregation",
            0,
            "async; sequence weights exp(sum of log-ratios), masked past 2, logged after",
            "train/is_weight_min 0 and its mean below 1 while the per-token mismatch is that "
            "of the designed lag",
        ),
        Fault(
            "post_clip_logging",
            0,
            "async; token weights masked outside [0.5, 2], logged after the mask",
            "train/is_weight_min at 0 and max at most 2 on every update",
        ),
        Fault(
            "stale_replica",
            5,
            "one engine replica of ten stops receiving new weights",
            "freshness/lag_max and the mismatch tail rise together; then stale attempts dropped",
        ),
    ]
}

# The settings each cause fault runs with, written into run.json's config (section -> key ->
# value; ``training`` is the writer's section).
FAULT_SETTINGS: dict[str, dict[str, dict[str, Any]]] = {
    "truncated_sampling": {"engine": {"top_p": 0.8}},
    "dtype_pair": {"engine": {"dtype": "float8"}},
    "sum_aggregation": {
        "training": {"mode": "async"},
        "correction": {
            "mode": "sequence_mask",
            "aggregation": "sum",
            "clip_max": 2.0,
            "log": "corrected",
        },
    },
    "post_clip_logging": {
        "training": {"mode": "async"},
        "correction": {"mode": "token_mask", "clip_min": 0.5, "clip_max": 2.0, "log": "corrected"},
    },
}

# Per-try failure probability of the crash faults (with 2 retries, 0.7 leaves about a third
# of the attempts failed).
CRASH_RATE = 0.7
# Coefficient of the wrongly signed entropy bonus.
COLLAPSE_COEF = 10.0
# 4x, not 3x, since the warm start to 0.45: a sharper policy starts at a lower entropy, and at
# 3x it fell to 66% of its start in 11 updates (seed 0) where it used to fall to about 30%.
# 6x since 160 tasks per update: at 4x the groups agreed 6 updates after the onset (seed 0);
# at 5x 3, 3 and 2 (seeds 0-2) but seed 0 gave no reply to many tasks in its transcripts; at
# 6x 2, 3 and 2, one wrong reply to many tasks from updates 10, 19 and 9.
COLLAPSE_LR_SCALE = 6.0
# bad_replica: replicas serving the groups (one of them broken) and the broken one's logit
# divisor.
REPLICAS = 10
REPLICA_TEMPERATURE = 1.4
# Tasks of the too_easy task set (all memorised before training).
EASY_TASKS = 32


def warm_targets(target: float) -> set[float]:
    """Every pass rate a warm start stops at, for a run whose ``warm_target_pass_rate`` is
    ``target``: its own and each fault's (``grader_exploit`` has its own)."""
    return {target} | {ActiveFault.create(f, None).warm_target(target) for f in FAULTS}


def parse_fault(text: str) -> tuple[str, int | None]:
    """``"NAME"`` or ``"NAME@STEP"`` -> (name, step or None); raises ConfigError if unknown."""
    name, _, step = text.partition("@")
    name = name.strip()
    if name not in FAULTS:
        raise ConfigError(f"unknown fault {name!r}; expected one of: {', '.join(FAULTS)}")
    if not step:
        return name, None
    try:
        value = int(step)
    except ValueError:
        raise ConfigError(
            f"fault {name}: expected an update number after '@' (not {step!r})"
        ) from None
    if value < 0:
        raise ConfigError(f"fault {name}: expected an update number >= 0 (not {value})")
    return name, value


class ActiveFault:
    """The hooks the training loop calls; each is a no-op unless its fault is on."""

    def __init__(self, name: str | None, step: int | None, stall_seconds: float) -> None:
        self.name = name
        self.step = step
        self.stall_seconds = stall_seconds
        self._easy_tasks: list[Task] = []

    @classmethod
    def create(
        cls, name: str | None, step: int | None, *, stall_seconds: float = 20.0
    ) -> ActiveFault:
        if name is None:
            return cls(None, None, stall_seconds)
        if "@" in name:
            name, parsed = parse_fault(name)
            step = parsed if step is None else step
        elif name not in FAULTS:
            parse_fault(name)  # raises with the list of faults
        onset = FAULTS[name].default_step if step is None else step
        return cls(name, onset, stall_seconds)

    def on(self, name: str, step: int) -> bool:
        """Whether fault ``name`` is active at update ``step``."""
        return self.name == name and self.step is not None and step >= self.step

    # -- hooks, in the order the loop calls them ------------------------------------------

    def warm_target(self, target: float) -> float:
        """The pass rate the warm start stops at, given the run's ``warm_target_pass_rate``."""
        return min(target, EXPLOIT_WARM_TARGET) if self.name == "grader_exploit" else target

    def max_len(self, task: TaskConfig) -> int:
        """Positions the model must hold for this fault's tasks."""
        if self.name != "too_hard":
            return 0
        d = task.digits + 1
        return (
            (2 * d + 3)
            + task.max_new_tokens
            + min(task.max_turns - 1, task.max_new_tokens) * (2 * d + 2)
        )

    def prepare(
        self,
        model: GPT,
        pool: TaskPool,
        sampler: Sampler,
        task: TaskConfig,
        rng: np.random.Generator,
        *,
        lr: float,
        seed: int,
    ) -> None:
        """Work a fault needs before training: ``too_easy`` memorises its task set."""
        if self.name != "too_easy":
            return
        from .warmstart import memorize

        self._easy_tasks = pool.sample(EASY_TASKS, rng)
        memorize(model, sampler, self._easy_tasks, task, lr=lr, seed=seed)

    def tasks(self, step: int, pool: TaskPool, n: int, rng: np.random.Generator) -> list[Task]:
        """The tasks of update ``step``."""
        if self.on("too_easy", step) and self._easy_tasks:
            return [
                self._easy_tasks[int(i)] for i in rng.integers(0, len(self._easy_tasks), size=n)
            ]
        if self.on("too_hard", step):
            from .tasks import TaskPool as Pool

            harder = getattr(self, "_hard_pool", None)
            if harder is None:
                harder = self._hard_pool = Pool(pool.digits + 1, pool.tool_fraction, 0.1)
            return harder.sample(n, rng)
        return pool.sample(n, rng)

    def budget(self, step: int, task: TaskConfig) -> tuple[int, int]:
        """The agent's (max_new_tokens, max_turns) at update ``step``."""
        if self.on("out_of_room", step):
            return min(task.max_new_tokens, task.digits + 1), 1
        return task.max_new_tokens, task.max_turns

    def temperature(self, step: int, temperature: float, n_rows: int, group_size: int) -> Any:
        """The sampling temperature of update ``step``: one number, or with ``bad_replica`` a
        (rows, 1) tensor whose rows of every ``REPLICAS``-th group (one replica's) run hotter."""
        if not self.on("bad_replica", step):
            return temperature
        import torch

        t = torch.full((n_rows, 1), float(temperature))
        group = torch.arange(n_rows) // group_size
        t[group % REPLICAS == 0] *= REPLICA_TEMPERATURE
        return t

    def grader(self, step: int) -> Grader:
        """The training grader at update ``step`` (held-out always uses the honest one)."""
        return grade_prefix_bug if self.on("grader_exploit", step) else grade

    def failure_rates(self, step: int) -> tuple[float, float]:
        """Per-try failure probability of (rollout, grading) at update ``step``."""
        return (
            CRASH_RATE if self.on("rollout_crash", step) else 0.0,
            CRASH_RATE if self.on("grader_crash", step) else 0.0,
        )

    def stall(self, step: int) -> float:
        """Seconds the sampling of update ``step`` hangs (0: it does not)."""
        return self.stall_seconds if self.name == "stall" and step == self.step else 0.0

    def before_update(self, step: int, trainer: Trainer) -> None:
        """Numerics faults: logits overflow (nan), wrong-signed entropy bonus."""
        trainer.logit_scale = math.inf if self.on("nan", step) else 1.0
        collapse = self.on("entropy_collapse", step)
        trainer.entropy_coef = COLLAPSE_COEF if collapse else 0.0
        trainer.set_lr(trainer.base_lr * (COLLAPSE_LR_SCALE if collapse else 1.0))

    def syncs_weights(self, step: int) -> bool:
        """Whether the sampler receives the weights of update ``step``."""
        return not self.on("stale_sampler", step)

    def settings(self) -> dict[str, dict[str, Any]]:
        """The config sections and keys this fault sets (``FAULT_SETTINGS``)."""
        return FAULT_SETTINGS.get(self.name or "", {})

    def engine_switch(self, step: int) -> str | None:
        """The engine dtype to switch to before sampling update ``step`` (``dtype_pair`` at its
        onset), else None."""
        if self.name == "dtype_pair" and step == self.step:
            return "float8"
        return None

    def stale_rows(self, step: int, n_rows: int, group_size: int) -> list[int]:
        """With ``stale_replica`` on: the batch rows the stale replica samples (whole groups,
        every ``REPLICAS``-th), else none."""
        if not self.on("stale_replica", step):
            return []
        return [i for i in range(n_rows) if (i // group_size) % REPLICAS == 0]


def describe() -> list[dict[str, Any]]:
    """Every fault with its default onset, what it does and where it shows (for the CLI)."""
    return [
        {"name": f.name, "default_step": f.default_step, "does": f.does, "shows": f.shows}
        for f in FAULTS.values()
    ]
