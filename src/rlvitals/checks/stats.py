"""Noise-aware statistics the checks share, each O(n) in the series length.

A single step is never evidence: levels are read as means over a window of at least five
steps, alarms need most points of a window past the line (3 of 5 by default), trends are tested
with a standard error corrected for autocorrelation (per-step RL metrics are autocorrelated:
overlapping prompts, smoothing), and noise is estimated from first differences so a trend does
not inflate it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..model import Series

__all__ = [
    "MAD_SIGMA",
    "MARGIN_RANGE",
    "MARGIN_SIGMAS",
    "MIN_WINDOW",
    "Trend",
    "crossing",
    "episodes",
    "first_sustained",
    "noise_sigma",
    "read_words",
    "rolling_mean",
    "short_level",
    "start_level",
    "trend",
]

# The window a level or a trend is read over, never one step.
# source: DESIGN.md ("a trend is judged over five or more steps, never one"); the Miles seed
# ("read the mean over five or more steps, not one step")
MIN_WINDOW = 5
# Points of a window past a line that make an alarm.
# source: science.md 6 takeaway 2 ("require 3 of 5 consecutive points"; RL-Insight: 3 of 5)
SUSTAINED = 3
# A trend's significance: its slope this many (autocorrelation-corrected) standard errors.
# source: science.md 6 (a 3-sigma limit; MK at |Z| > 3.09 is p < 0.001 two-sided)
TREND_Z = 3.0
# The run's own start: the median of its first this many points (at least MIN_WINDOW).
# source: science.md 2 (H_0 = median of the first 10 steps)
START_STEPS = 10
# The residuals' lag-1 autocorrelation is capped here, so a near-unit root cannot drive the
# effective sample size to nothing; and the effective sample size is at least 3.
# source: numerical guards of the AR(1) correction (science.md 6 takeaway 2)
RHO_CAP = 0.95
MIN_N_EFF = 3.0
# A change of a level (the reward, a component) beyond noise: this many step-noise sigmas of the difference of two
# five-update means ...
# source: science.md 6 (a 3-sigma limit: Shewhart's, and CUSUM/EWMA alarm near it)
MARGIN_SIGMAS = 3.0
# ... and at least this share of the its range (a change no grader can resolve is none).
# source: resolution: one attempt in fifty changes an update's mean reward by 2% of its range
MARGIN_RANGE = 0.02
# The median absolute deviation of a normal sample times this is its standard deviation.
# source: the normal distribution (1 / the 75th percentile of the standard normal)
MAD_SIGMA = 1.4826


def rolling_mean(values: np.ndarray, window: int = MIN_WINDOW) -> np.ndarray:
    """Trailing mean over ``window`` points (NaN until the window is full). NaN-free input."""
    n = len(values)
    out = np.full(n, np.nan)
    if n < window:
        return out
    c = np.cumsum(np.concatenate(([0.0], values)))
    out[window - 1 :] = (c[window:] - c[:-window]) / window
    return out


def first_sustained(mask: np.ndarray, k: int = SUSTAINED, window: int = MIN_WINDOW) -> int | None:
    """Index of the first point where ``k`` of the last ``window`` points are True (the first
    True point of that window), or None."""
    n = len(mask)
    if n == 0:
        return None
    m = mask.astype(np.int64)
    c = np.cumsum(np.concatenate(([0], m)))
    for end in np.flatnonzero(mask).tolist():
        lo = max(0, end - window + 1)
        if c[end + 1] - c[lo] >= k:
            window_idx = np.flatnonzero(mask[lo : end + 1])
            return int(lo + window_idx[0])
    return None


def crossing(
    values: np.ndarray,
    line: float,
    *,
    above: bool = True,
    window: int = MIN_WINDOW,
    points: bool = False,
) -> int | None:
    """Where a series crosses ``line`` for good, as an index, or None.

    Detection reads means over ``window`` steps and needs 3 of 5 of them past the line (noise
    never trips it on one step); the index returned is the onset, the first raw value past the
    line among the steps that made the first such mean, so the finding points at the step
    where the problem first showed, not where the mean caught up.

    With ``points``, 3 of any 5 consecutive values past the line suffice (three separate steps,
    never one): sooner, for lines far from a metric's noise (a share rising by 0.2 from its
    start, entropy under a third of its own).
    """
    if points:
        past = values >= line if above else values < line
        return first_sustained(past, window=window)
    roll = rolling_mean(values, window)
    fill = -np.inf if above else np.inf
    r = np.nan_to_num(roll, nan=fill)
    mask = r >= line if above else r < line
    idx = first_sustained(mask)
    if idx is None:
        return None
    lo = max(0, idx - window + 1)
    raw = values[lo : idx + 1]
    hits = np.flatnonzero(raw >= line if above else raw < line)
    return lo + int(hits[0]) if len(hits) else idx


def short_level(values: np.ndarray, line: float, *, above: bool = True) -> bool:
    """A level judged before five updates exist: one to four values, every one past
    ``line``. For shares over many groups or tokens and for absolute lines far from noise
    (every reply truncated, every group unsolved, a KL of 0.6 against a line of 0.5), a
    level needs no trend; what the few updates read all say is evidence at once."""
    n = len(values)
    if not 0 < n < MIN_WINDOW:
        return False
    return bool(np.all(values >= line) if above else np.all(values < line))


def read_words(n: int) -> str:
    """``in the 2 updates read`` (for findings made on fewer than five updates)."""
    return f"in the {n} update{'' if n == 1 else 's'} read"


def episodes(
    mask: np.ndarray, k: int = SUSTAINED, window: int = MIN_WINDOW, gap: int = 10
) -> list[tuple[int, int]]:
    """Separate spells where ``mask`` is sustained (``k`` of ``window``), as (start, end)
    index pairs; spells closer than ``gap`` points merge. Linear time."""
    n = len(mask)
    if n == 0:
        return []
    m = mask.astype(np.int64)
    c = np.cumsum(np.concatenate(([0], m)))
    ends = np.arange(n)
    lo = np.maximum(0, ends - window + 1)
    hot = (c[ends + 1] - c[lo]) >= k  # window ending at i is sustained
    out: list[tuple[int, int]] = []
    i = 0
    while i < n:
        if not hot[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and hot[j + 1]:
            j += 1
        start = int(lo[i] + np.flatnonzero(mask[lo[i] : i + 1])[0])
        end = int(j)
        if out and start - out[-1][1] <= gap:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
        i = j + 1
    return out


# Relative size of float64 round-off that a series' step-to-step differences can carry:
# 2**-52 (machine epsilon) times a margin for sums and means of a few dozen terms.
ROUND_OFF = 64 * float(np.finfo(np.float64).eps)


def noise_sigma(values: np.ndarray) -> float:
    """Step-to-step noise: robust std of first differences / √2 (insensitive to trends)."""
    if len(values) < 3:
        return float(np.std(values)) if len(values) else math.nan
    d = np.diff(values)
    mad = float(np.median(np.abs(d - np.median(d))))
    sigma = MAD_SIGMA * mad / math.sqrt(2)
    if sigma == 0:
        sigma = float(np.std(d)) / math.sqrt(2)
    # Differences within float round-off of the values are no noise (a noiseless line's
    # differences differ in their last bits: 1e-17, not a noise to print or divide by).
    if sigma <= ROUND_OFF * float(np.max(np.abs(values))):
        return 0.0
    return sigma


def start_level(values: np.ndarray, n: int = START_STEPS) -> float:
    """The run's own starting level: median of its first ``n`` points (at least 5)."""
    head = values[: max(MIN_WINDOW, min(n, len(values)))]
    return float(np.median(head)) if len(head) else math.nan


@dataclass
class Trend:
    """A linear trend over a window, with a test that survives noise and autocorrelation."""

    slope: float  # per step
    z: float  # slope / its AR(1)-corrected standard error
    change: float  # fitted change over the window
    start: float  # fitted value at the first step
    end: float  # fitted value at the last step
    n: int
    n_eff: float

    @property
    def rising(self) -> bool:
        return self.z > TREND_Z

    @property
    def falling(self) -> bool:
        return self.z < -TREND_Z


# Residuals below this share of the values' size are floating-point rounding, not noise.
# source: numerical guard: doubles carry about 16 digits (a line computed as i / 30 leaves
# residuals near 1e-17); 1e-12 leaves four orders of magnitude to any measured noise
_EXACT = 1e-12


def trend(s: Series) -> Trend | None:
    """OLS trend of the finite part of ``s``; the slope's standard error uses an effective
    sample size n·(1−ρ)/(1+ρ) from the residuals' lag-1 autocorrelation ρ."""
    fin = s.finite()
    n = len(fin)
    if n < MIN_WINDOW:
        return None
    x = fin.steps.astype(np.float64)
    y = fin.values
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    if sxx == 0:
        return None
    slope = float(((x - xm) * (y - ym)).sum() / sxx)
    resid = y - (ym + slope * (x - xm))
    var = float((resid**2).sum() / max(n - 2, 1))
    if var <= (_EXACT * float(np.abs(y).max())) ** 2:
        var = 0.0  # residuals at the floats' rounding: an exact line, z infinite (not 6.7e15)
    rho = 0.0
    if n > 3 and var > 0:
        rho = float((resid[1:] * resid[:-1]).sum() / (resid**2).sum())
        rho = min(max(rho, 0.0), RHO_CAP)
    n_eff = max(MIN_N_EFF, n * (1 - rho) / (1 + rho))
    se = math.sqrt(var / sxx * (n - 2) / max(n_eff - 2, 1)) if var > 0 else 0.0
    if se == 0:
        z = 0.0 if slope == 0 else math.copysign(math.inf, slope)
    else:
        z = slope / se
    start = ym + slope * (x[0] - xm)
    end = ym + slope * (x[-1] - xm)
    return Trend(slope, z, end - start, float(start), float(end), n, n_eff)
