"""The reward's composition: its components as the run logs them, read once per judging.

Per component, its mean per update (TRL ``rewards/<f>/mean``, the canonical
``reward/component/<name>/mean``) and, where logged, its batch std; its weight in the total
from fitting ``reward/mean`` on the components (least squares; TRL logs them unweighted), else
1; its levels over the first and last updates. The task component is the one whose name says
correctness and not format, length, brevity, style, bonus or penalty; or else the only
component that does not say the latter. Read by ``Context.components`` for every check that
asks whether the task itself moved (components, groups, reward, policy, transcripts).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..model import Series
from .stats import MARGIN_RANGE, MARGIN_SIGMAS, MIN_WINDOW, noise_sigma
from .thresholds import line, lines

if TYPE_CHECKING:
    from .context import Context

__all__ = [
    "AUX",
    "MEAN",
    "TASK",
    "Component",
    "Components",
    "find_metrics",
    "read_components",
    "task_of",
]

MEAN = (
    re.compile(r"^reward/components?/(?P<name>[^/]+?)(?:/mean)?$"),
    re.compile(r"^rewards/(?P<name>[^/]+)/mean$"),
    re.compile(r"^reward_components?[./](?P<name>[^/.]+)(?:[./]mean)?$"),
    re.compile(r"^rewards/(?P<name>[^/]+)$"),  # TRL before 0.15: no /mean
)
STD = (
    re.compile(r"^reward/components?/(?P<name>[^/]+)/std$"),
    re.compile(r"^rewards/(?P<name>[^/]+)/std$"),
)
# A component whose range is under this share of its scale has not moved: its noise margin
# stands; one that moved has its margin capped at half its range (so a rise counts).
# source: MARGIN_SIGMAS' noise test alone for a component that never left its noise band
SPAN_MOVED = 0.1
AUX = re.compile(
    r"format|length|(?:^|_)len(?:$|_)|short|brev|concise|bonus|penal|style|tag|xml|think|"
    r"overlong|repetit|cosine|language|lang_|fluency|kl",
    re.I,
)
TASK = re.compile(
    r"correct|accura|exact|match|answer|solve|pass|verif|task|score|partial|credit|(?:^|_)acc"
    r"(?:$|_)|math|code|test|judge|reward_fn",
    re.I,
)


@lines
@dataclass(frozen=True)
class CompositionLines:
    """How the reward's components are read."""

    component_fit_r2: float = line(
        0.98,
        "the components explain the reward (weights fitted by least squares) when R² is at "
        "least this",
        "numerical guard: a sum of logged components reproduces its total up to rounding and the odd update "
        "logged apart; 0.98 leaves 2% for that",
    )
    component_ceiling: float = line(
        0.05,
        "a component over its last five updates within this share of its highest is at its ceiling",
        "numerical guard: stats.MARGIN_RANGE's resolution, with the noise of a five-update mean",
    )


@dataclass
class Component:
    name: str
    metric: str
    mean: Series
    std: Series | None
    weight: float = 1.0
    head: float = 0.0
    tail: float = 0.0
    margin: float = 0.0
    top: float = 0.0
    ceiling_share: float = CompositionLines.component_ceiling

    @property
    def gain(self) -> float:
        return self.weight * (self.tail - self.head)

    @property
    def rose(self) -> bool:
        return self.tail - self.head > self.margin

    @property
    def flat(self) -> bool:
        return abs(self.tail - self.head) <= self.margin

    @property
    def fell(self) -> bool:
        return self.head - self.tail > self.margin

    @property
    def at_ceiling(self) -> bool:
        """Over its last five updates within 5% of the highest it reached, having risen."""
        return self.rose and self.tail >= self.top - self.ceiling_share * max(abs(self.top), 1e-9)


@dataclass
class Components:
    """The components of a run's reward (empty when the run logs no breakdown)."""

    items: list[Component] = field(default_factory=list)
    task: Component | None = None
    fitted: bool = False

    @property
    def aux(self) -> list[Component]:
        return [c for c in self.items if c is not self.task]

    def shortcut(self) -> Component | None:
        """The component other than the task's that rose (at its ceiling first) while the
        task component stayed flat or fell; None if none did or no task component is known."""
        if self.task is None or self.task.rose:
            return None
        rising = [c for c in self.aux if c.rose and c.gain > 0]
        if not rising:
            return None
        return max(rising, key=lambda c: (c.at_ceiling, c.gain))


def find_metrics(ctx: Context, patterns: tuple[re.Pattern[str], ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for metric in ctx.data.names():
        for pat in patterns:
            m = pat.match(metric)
            if m and metric not in ("reward/mean", "reward/std"):
                out.setdefault(m.group("name"), metric)
                break
    return out


def task_of(items: list[Component]) -> Component | None:
    named = [c for c in items if TASK.search(c.name) and not AUX.search(c.name)]
    if len(named) == 1:
        return named[0]
    plain = [c for c in items if not AUX.search(c.name)]
    return plain[0] if len(plain) == 1 and not named else None


def _weights(ctx: Context, items: list[Component]) -> bool:
    """Fit reward/mean = Σ w·component over the common steps; keep the weights when the fit
    explains the reward (R² ≥ ``component_fit_r2``, weights ≥ 0)."""
    r = ctx.finite("reward/mean")
    if r is None:
        return False
    steps = r.steps
    for c in items:
        steps = np.intersect1d(steps, c.mean.steps)
    if len(steps) < max(MIN_WINDOW, len(items) + 2):
        return False
    X = np.column_stack([c.mean.values[np.searchsorted(c.mean.steps, steps)] for c in items])
    y = r.values[np.searchsorted(r.steps, steps)]
    w, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ w
    var = float(((y - y.mean()) ** 2).sum())
    if var <= 0 or not np.all(np.isfinite(w)) or np.any(w < -1e-6):
        return False
    if 1 - float((resid**2).sum()) / var < ctx.thresholds.of(CompositionLines).component_fit_r2:
        return False
    for c, wi in zip(items, w.tolist()):
        c.weight = float(wi)
    return True


# rlvitals' own runs log a grader's components as ``rollout/<component>`` (METRICS.md), beside
# episode metadata under the same prefix (turns, a termination reason).
GRADER = (re.compile(r"^rollout/(?P<name>[^/]+)$"),)


def read_components(ctx: Context) -> Components:
    """The run's reward components with their levels over the first and last updates. Where
    the run logs none under a reward's name, a grader's ``rollout/<component>`` ones: a
    ``rollout/<key>`` whose name says a task or an auxiliary term, kept only where together
    they explain the reward (the weights' fit), since metadata shares the prefix."""
    items = _items(ctx, find_metrics(ctx, MEAN), find_metrics(ctx, STD))
    if len(items) >= 2:
        return Components(items, task_of(items), _weights(ctx, items))
    graded = {n: m for n, m in find_metrics(ctx, GRADER).items() if TASK.search(n) or AUX.search(n)}
    items = _items(ctx, graded, {})
    if len(items) < 2 or not _weights(ctx, items):
        return Components()
    return Components(items, task_of(items), True)


def _items(ctx: Context, means: dict[str, str], stds: dict[str, str]) -> list[Component]:
    """A Component per mean metric logged over at least five updates."""
    th = ctx.thresholds.of(CompositionLines)
    items = []
    for name, metric in sorted(means.items()):
        s = ctx.finite(metric)
        if s is None or len(s) < MIN_WINDOW:
            continue
        std = ctx.finite(stds[name]) if name in stds else None
        v = s.values
        head_n = max(MIN_WINDOW, min(10, len(v) // 4))
        span = max(float(v.max() - v.min()), 1e-12)
        lo_hi = max(1.0, abs(float(v.max())), abs(float(v.min())))
        margin = max(
            MARGIN_SIGMAS * noise_sigma(v) * math.sqrt(2 / MIN_WINDOW), MARGIN_RANGE * lo_hi
        )
        items.append(
            Component(
                name,
                metric,
                s,
                std,
                head=float(v[:head_n].mean()),
                tail=float(v[-MIN_WINDOW:].mean()),
                margin=min(margin, 0.5 * span) if span > SPAN_MOVED * lo_hi else margin,
                top=float(v.max()),
                ceiling_share=th.component_ceiling,
            )
        )
    return items
