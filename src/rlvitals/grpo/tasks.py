"""Tasks with verifiable answers: additions, some of them behind a tool.

Every task is an addition of two ``digits``-digit numbers, written as characters. The answer is
the sum with ``digits + 1`` digits, written units digit first (reversed), then the end token
``$``. Reversed sums are what a small transformer can learn left to right: each digit needs
only the two digits above it and the carry it has just written.

    single turn:  prompt  ^12+34=          reply  640$              (46 reversed, 3 digits)
    lookup:       prompt  ^uv+34=          reply  ?                 (a tool call: ends turn 1)
                  tool    12+34=           (the environment resolves the variable uv)
                                           reply  640$              (turn 2: the answer)

In a lookup task the first operand is a variable whose value is drawn per task, so the name
says nothing about the value: the agent has to call its tool. The tool replies with the
resolved expression, so the answer is written after the same characters as in a single-turn
task (with rotary position embeddings, the same relative layout: one skill, two contexts).

Problems are split once, with a fixed seed that does not depend on the run's seed, into
training problems and held-out problems that neither the warm start nor GRPO ever sees.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "CALL",
    "END",
    "PAD",
    "VOCAB",
    "Task",
    "TaskPool",
    "decode",
    "encode",
]

PAD, BOS, CALL, END = "_", "^", "?", "$"
VARIABLE_LETTERS = "uvwxyz"
VOCAB = PAD + BOS + "0123456789+=" + CALL + END + VARIABLE_LETTERS
_INDEX = {c: i for i, c in enumerate(VOCAB)}
PAD_ID, CALL_ID, END_ID = (_INDEX[c] for c in (PAD, CALL, END))

# The train/held-out split is the same for every run seed, so held-out scores compare.
SPLIT_SEED = 20260


def encode(text: str) -> list[int]:
    """Characters to token ids."""
    return [_INDEX[c] for c in text]


def decode(ids: list[int]) -> str:
    """Token ids to characters (padding dropped)."""
    return "".join(VOCAB[i] for i in ids if i != PAD_ID)


@dataclass(frozen=True)
class Task:
    """One task: ``a + b``, the first operand possibly hidden behind a variable."""

    a: int
    b: int
    digits: int
    variable: str | None = None  # a lookup task's variable name (``digits`` letters)

    @property
    def task_id(self) -> str:
        d = self.digits
        if self.variable is None:
            return f"add-{self.a:0{d}d}-{self.b:0{d}d}"
        return f"lookup-{self.variable}-{self.a:0{d}d}-{self.b:0{d}d}"

    @property
    def prompt(self) -> str:
        first = self.variable or f"{self.a:0{self.digits}d}"
        return f"{BOS}{first}+{self.b:0{self.digits}d}="

    @property
    def tool_reply(self) -> str:
        """What the lookup tool answers: the expression with the variable resolved."""
        return f"{self.a:0{self.digits}d}+{self.b:0{self.digits}d}="

    @property
    def answer(self) -> str:
        """The expected answer: the sum, ``digits + 1`` digits, units first."""
        return f"{self.a + self.b:0{self.digits + 1}d}"[::-1]

    def demonstration(self) -> tuple[str, str]:
        """A correct episode for supervised warm start: (prompt, everything after it)."""
        if self.variable is None:
            return self.prompt, self.answer + END
        return self.prompt, CALL + self.tool_reply + self.answer + END


class TaskPool:
    """Training and held-out problems of one difficulty, and tasks drawn from them.

    Args:
        digits: digits per operand.
        tool_fraction: share of drawn tasks that are lookups (multi-turn, with the tool).
        heldout_fraction: share of problems kept out of warm start and training.
    """

    def __init__(self, digits: int, tool_fraction: float, heldout_fraction: float) -> None:
        self.digits = digits
        self.tool_fraction = min(max(tool_fraction, 0.0), 1.0)
        n = 10**digits
        problems = np.arange(n * n, dtype=np.int64)  # problem p is (p // n) + (p % n)
        split = np.random.default_rng(SPLIT_SEED + digits).permutation(problems)
        n_held = round(len(problems) * min(max(heldout_fraction, 0.0), 0.9))
        self.heldout = np.sort(split[:n_held])
        self.train = np.sort(split[n_held:])
        self._n = n

    def _task(self, p: int, rng: np.random.Generator) -> Task:
        a, b = divmod(int(p), self._n)
        variable = None
        if rng.random() < self.tool_fraction:
            letters = rng.integers(0, len(VARIABLE_LETTERS), size=self.digits)
            variable = "".join(VARIABLE_LETTERS[i] for i in letters)
        return Task(a, b, self.digits, variable)

    def sample(self, n: int, rng: np.random.Generator) -> list[Task]:
        """``n`` training tasks, drawn with replacement."""
        return [self._task(p, rng) for p in rng.choice(self.train, size=n)]

    def heldout_tasks(self, n: int) -> list[Task]:
        """The first ``n`` held-out tasks, the same for every run (fixed seed)."""
        rng = np.random.default_rng(SPLIT_SEED)
        chosen = rng.permutation(self.heldout)[:n]
        return [self._task(p, rng) for p in chosen]
