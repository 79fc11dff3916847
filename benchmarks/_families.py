"""Families of runs, healthy and broken, drawn from the statistics real runs show.

    import sys; sys.path.insert(0, "benchmarks")
    from _families import FAMILIES, HEALTHY, BROKEN, SEVERITIES, Label, make, grid, write

    data, label = make("entropy_collapse", seed=3, severity="moderate", length=200)
    label.onset, label.verdicts, label.healthy      # where the failure starts, what finds it
    report = rlvitals.judge.Judge()(data, now=label.now_at(data.last_step))
    for data, label in grid(seeds=20): ...          # every family x severity x seed
    path = write("kl_drift", 3, out_dir, severity="gross")   # the same run as its files

``make(family, seed, severity=None, length=None, cadence=None, framework=None, metrics=None)``
returns ``(RunData, Label)``, deterministic in its arguments. The run is built in memory from
records in the framework's own key names (TRL ``trainer_state.json`` keys, verl console keys,
or rlvitals' native names) put through the reader's own mapping table (``Mapper``), so its
canonical series, ``original`` and ``resolved`` are what reading the framework's file gives.
``write(...)`` writes the same records as the framework writes them (``trl``: a
``trainer_state.json``; ``verl``: a console log under Ray; ``native``: an rlvitals run
directory) and returns the path ``rlvitals.read`` takes.

A ``Label`` says what the generator put there: the family, healthy or not, the severity
(``mild``/``moderate``/``gross``; None for healthy families), ``onset`` (the first update whose
numbers show the failure; None for healthy), ``verdicts`` (the finding verdicts that count as
finding it, at warn or worse), and the drawn parameters (``params``). ``label.now_at(step)``
is the time to judge a prefix at (the step's own time, so a live check of a healthy run never
reads as a stall; a stalled run's final judgement comes ``params["gap"]`` seconds after its
last record).

Where the numbers come from (``benchmarks/families_measure.py``, on the development corpus,
the wild corpus and the reference trainer; ``benchmarks/families.md`` has the tables):

- lengths: real runs hold 10 to 2,522 records; logging every 1 (most), 5 or 10 updates.
- reward: per-update noise is 0.13-0.35 of the run's p5-p95 range (median ~0.25) in real
  runs, residuals close to white (lag-1 autocorrelation after a running median -0.27..0,
  the value white noise gives); healthy runs rise 4-14 standard errors (last quarter against
  first). Scales seen: 0..1, 0..2 and 0..3 (format components), -1..2, -10..11, -3.8..0.3.
- entropy: starts 0.04-3.8; healthy end/start 0.75-0.97 (peers' simulators 0.52-0.83);
  per-update noise 0.2%-4% of its level.
- KL to the reference: healthy medians 0.01-0.6, maxima up to ~1.1; drifted runs 0.75-8.
- grad norm: medians 0.25-2.6; per-update noise of log grad norm 0.13-0.30; p99/median
  1.3-4.7; healthy max/median up to ~5 (a run with 10x spikes is labelled spiky).
- length: 4-480 tokens at the start; end/start 0.45-1.35; noise 1%-20% of the level.
- truncation: healthy 0-2% (verl, peers), Miles' seeds 19-43% in their first steps; TRL's
  tiny models start at 69-78% and fall to 10-20% within ~15 updates (transient).
- clip fraction: 0 with one pass per batch (TRL), 0.03-0.10 with several, max 0.15.
- mismatch KL (sampler vs trainer): 6e-4 to 0.02; tinker calls < 0.01 stable, verl calls
  |k1| > 0.1 a significant off-policy gap.
- metric sets: reward only (4 of 76 runs), reward with a few (KL, length, grad; 9), the
  full set (63).
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals.model import Event, RunData

__all__ = [
    "BROKEN",
    "FAMILIES",
    "HEALTHY",
    "SEVERITIES",
    "Label",
    "grid",
    "make",
    "write",
]

SEVERITIES = ("mild", "moderate", "gross")
_SEV = {s: i for i, s in enumerate(SEVERITIES)}

# family -> what it is, in a line
HEALTHY: dict[str, str] = {
    "plain": "learning: reward rises beyond its noise, everything else ordinary",
    "slow_start": "flat for 30-100 updates, then rising",
    "noisy": "learning under heavy per-update noise (0.10-0.18 of the reward's scale)",
    "sharpening": "entropy falls to 50-80% of its start while reward rises",
    "transient_truncation": "50-80% of replies cut at the start, under 20% within ~5-25 updates",
    "repeated_replies": "a few replies repeated (entropy 75-90% of its start), reward rising",
    "shaping": "a format component rising to its ceiling fast beside the slower task reward",
    "async_lag": "a designed async lag (0.5-2 updates, within max_steps_off_policy)",
    "mastered": "reward reaches its ceiling and stays; groups all solved (no signal, rightly)",
}
BROKEN: dict[str, str] = {
    "no_signal": "zero-variance groups: every attempt at a task scores alike",
    "entropy_collapse": "entropy falls to a few % of its start, reward stops rising",
    "kl_drift": "KL to the reference grows without bound",
    "exploit": "train reward jumps to its ceiling while held-out falls",
    "truncation": "replies grow into the token limit (out of room), reward flat",
    "length_collapse": "replies shrink to a fraction of their start",
    "nan": "non-finite values (NaN) in the loss, grad norm or reward",
    "grad_spikes": "gradient-norm spikes of 8-100x its median, recurring",
    "clip_saturation": "the trust region saturates: 30-80% of tokens clipped",
    "mismatch": "sampler and trainer disagree: mismatch KL grows 10-1000x",
    "plateau": "reward flat within its noise with learning signal present",
    "stall": "records stop arriving while the run says it is running",
    "crash": "the run dies: a traceback after the last update",
}
FAMILIES: dict[str, str] = {**HEALTHY, **BROKEN}

# The finding verdicts that find each broken family (at warn or worse).
VERDICTS: dict[str, tuple[str, ...]] = {
    "no_signal": ("no_signal", "too_hard", "too_easy", "exploration_stopped"),
    "entropy_collapse": ("collapse", "exploration_stopped"),
    "kl_drift": ("drift",),
    "exploit": ("exploit_suspected",),
    "truncation": ("out_of_room",),
    "length_collapse": ("collapse", "exploit_suspected"),
    "nan": ("non_finite",),
    "grad_spikes": ("unstable",),
    "clip_saturation": ("drift", "unstable"),
    "mismatch": ("drift", "stale_policy"),
    "plateau": ("plateau", "not_learning", "too_hard", "collapse"),
    "stall": ("stalled",),
    "crash": ("crashed",),
}

# What a family needs the run to log (so its failure can be seen at all).
NEEDS: dict[str, frozenset[str]] = {
    "sharpening": frozenset({"entropy"}),
    "repeated_replies": frozenset({"entropy"}),
    "transient_truncation": frozenset({"truncation"}),
    "shaping": frozenset({"components"}),
    "async_lag": frozenset({"lag"}),
    "mastered": frozenset({"groups"}),
    "no_signal": frozenset({"groups"}),
    "entropy_collapse": frozenset({"entropy"}),
    "kl_drift": frozenset({"ref_kl"}),
    "exploit": frozenset({"evals"}),
    "truncation": frozenset({"truncation"}),
    "length_collapse": frozenset({"length"}),
    "grad_spikes": frozenset({"grad_norm"}),
    "clip_saturation": frozenset({"clip"}),
    "mismatch": frozenset({"mismatch"}),
    "stall": frozenset({"time"}),
    "crash": frozenset({"end"}),
}

# What each framework's metric sets log. "reward": reward only (TRL reward-function JSONL);
# "reward_kl": reward with KL, length and grad norm (early TRL, Unsloth); "full": everything
# the framework logs by default (plus evals where it writes them).
SETS: dict[str, dict[str, frozenset[str]]] = {
    "trl": {
        "reward": frozenset({"reward"}),
        "reward_kl": frozenset({"reward", "ref_kl", "length", "grad_norm"}),
        "full": frozenset(
            {
                "reward",
                "ref_kl",
                "length",
                "grad_norm",
                "truncation",
                "entropy",
                "clip",
                "groups",
                "components",
                "mismatch",
            }
        ),
    },
    "verl": {
        "reward_kl": frozenset({"reward", "ref_kl", "length", "grad_norm"}),
        "full": frozenset(
            {
                "reward",
                "ref_kl",
                "length",
                "grad_norm",
                "truncation",
                "entropy",
                "clip",
                "mismatch",
                "evals",
                "end",
            }
        ),
    },
    "native": {
        "full": frozenset(
            {
                "reward",
                "ref_kl",
                "length",
                "grad_norm",
                "truncation",
                "entropy",
                "clip",
                "groups",
                "components",
                "mismatch",
                "evals",
                "lag",
                "time",
                "end",
            }
        ),
    },
}

MIN_LENGTH = 40  # updates; a run shorter than this is not drawn (prefixes start past 20)


@dataclass(frozen=True)
class Label:
    """What the generator put in a run (see the module docstring)."""

    family: str
    seed: int
    healthy: bool
    severity: str | None
    onset: int | None
    verdicts: tuple[str, ...]
    length: int  # updates
    cadence: int  # updates per logged record
    framework: str  # trl, verl or native
    metrics: str  # reward, reward_kl or full
    params: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def name(self) -> str:
        sev = f"-{self.severity}" if self.severity else ""
        return f"{self.family}{sev}-s{self.seed}"

    def now_at(self, step: int | None) -> float | None:
        """The time to judge the run as it stood at ``step`` (its own record's time); at the
        last step of a stalled run, ``params["gap"]`` seconds later."""
        times = self.params.get("times")
        if times is None or step is None:
            return None
        i = min(int(step) // self.cadence, len(times)) - 1
        t = float(times[max(i, 0)])
        if self.family == "stall" and int(step) >= self.params["last_step"]:
            t += float(self.params["gap"])
        return t


@dataclass
class _Raw:
    """One run as its framework logs it: records in its own key names."""

    label: Label
    records: list[tuple[int, dict[str, float]]]
    evals: list[dict[str, Any]]
    info: dict[str, Any]
    crash: list[str]  # console lines after the last record (a traceback), or []


# -- drawing -----------------------------------------------------------------------------------


def _rng(family: str, seed: int) -> np.random.Generator:
    """The run's random stream: by family and seed only, so the severities of one seed are
    the same run with the failure at the same onset, mild to gross."""
    return np.random.default_rng([zlib.crc32(family.encode()), int(seed)])


def _loguniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _pick_layout(
    rng: np.random.Generator, family: str, framework: str | None, metrics: str | None
) -> tuple[str, str]:
    need = NEEDS.get(family, frozenset())
    options = [
        (fw, ms)
        for fw, sets in SETS.items()
        for ms, have in sets.items()
        if need <= have and (framework in (None, fw)) and (metrics in (None, ms))
    ]
    if not options:
        raise ValueError(f"{family}: no layout logs {sorted(need)} ({framework}, {metrics})")
    # Real runs: mostly the full set (63 of 76), some with a few metrics (9), few reward only.
    weight = {"full": 6.0, "reward_kl": 1.5, "reward": 0.5}
    w = np.array([weight[ms] for _, ms in options])
    fw, ms = options[int(rng.choice(len(options), p=w / w.sum()))]
    return fw, ms


def _draw_length(rng: np.random.Generator, family: str) -> int:
    lo = 100 if family == "slow_start" else MIN_LENGTH
    return round(_loguniform(rng, lo, 400))


def _saturating(t: np.ndarray, start: float, tau: float) -> np.ndarray:
    x = np.clip((t - start) / tau, 0.0, None)
    return 1.0 - np.exp(-x)


def _ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    """Unit-variance AR(1) noise."""
    e = rng.standard_normal(n)
    out = np.empty(n)
    prev = rng.standard_normal()
    s = math.sqrt(1 - phi * phi)
    for i in range(n):
        prev = phi * prev + s * e[i]
        out[i] = prev
    return out


@dataclass
class _Curves:
    """Per-update quantities (index 0 is update 1), in the run's own units."""

    T: int
    p: np.ndarray  # task skill in [0, 1]
    unit_noise: np.ndarray  # reward noise in unit (0..1) space
    entropy: np.ndarray
    ref_kl: np.ndarray
    grad: np.ndarray
    length: np.ndarray
    lmax: float
    clip: np.ndarray
    mismatch: np.ndarray
    fmt: np.ndarray  # a format component in [0, 1]
    lag: np.ndarray
    step_seconds: np.ndarray
    honest: np.ndarray  # the skill held-out tasks see (the task skill, unless exploited)
    nan: dict[str, np.ndarray] = field(default_factory=dict)  # key kind -> bool mask
    signal_cap: np.ndarray | None = None  # at most this share of groups differ (NaN: no cap)
    heldout_fall: np.ndarray | float = 0.0  # held-out skill lost to an exploit


def _base(rng: np.random.Generator, family: str, T: int) -> tuple[_Curves, dict[str, Any]]:
    """A healthy learning run (the plain family); families bend it after."""
    t = np.arange(1, T + 1, dtype=float)
    prm: dict[str, Any] = {}
    # Start where attempts disagree (healthy signal fraction 0.45-0.95 at the start); the
    # rise goes on to the end (tau 0.3-1.0 of the run): a run that levels off below its
    # ceiling is neither family's (a plateau after learning is a judgement, not a label).
    p0 = float(rng.uniform(0.15, 0.6))
    gain = float(rng.uniform(0.15, min(0.6, 0.97 - p0)))
    tau = float(rng.uniform(0.4, 1.2)) * T
    p = p0 + gain * _saturating(t, 0.0, tau)
    sigma = _loguniform(rng, 0.02, 0.08)  # per-update reward noise on a 0..1 scale
    phi = float(rng.uniform(0.0, 0.3))
    prm.update(p0=p0, gain=gain, tau=tau, sigma=sigma, phi=phi)
    noise = _ar1(rng, T, phi)
    # Entropy: starts anywhere real runs start, sharpens a little while the reward rises.
    h0 = _loguniform(rng, 0.05, 3.8)
    h_drop = float(rng.uniform(0.0, 0.25))
    h_noise = _loguniform(rng, 0.002, 0.04)
    entropy = (
        h0 * (1 - h_drop * _saturating(t, 0.0, tau)) * np.exp(h_noise * rng.standard_normal(T))
    )
    # KL to the reference: grows from 0 and levels off.
    k1 = _loguniform(rng, 0.005, 0.5)
    ref_kl = (
        k1
        * _saturating(t, 0.0, float(rng.uniform(0.3, 1.0)) * T)
        * np.exp(0.12 * rng.standard_normal(T))
    )
    # Grad norm: log-t noise (heavy tails, healthy max/median up to ~5).
    g0 = _loguniform(rng, 0.05, 3.0)
    g_sig = float(rng.uniform(0.1, 0.3))
    df = float(rng.uniform(4.0, 8.0))
    g_trend = _loguniform(rng, 0.6, 1.6)
    # Tails cut at 5x: a healthy run's max/median is 1.4-5.1 in the runs measured (a run with
    # 10x excursions is labelled spiky there, and is the grad_spikes family here).
    tail = np.clip(g_sig * rng.standard_t(df, T), -math.log(5), math.log(5))
    grad = g0 * g_trend ** (t / T) * np.exp(tail)
    # Length: a start, room above it, a drift the room allows.
    l0 = _loguniform(rng, 20, 1200)
    room = _loguniform(rng, 1.6, 4.0)
    drift = _loguniform(rng, 0.6, min(1.5, room / 1.5))
    l_noise = _loguniform(rng, 0.02, 0.12)
    length = l0 * drift ** _saturating(t, 0.0, tau) * np.exp(l_noise * rng.standard_normal(T))
    # Clip fraction: a level with noise (TRL with one pass per batch logs 0: see _trl).
    c0 = _loguniform(rng, 0.01, 0.1)
    clip = c0 * np.exp(0.15 * rng.standard_normal(T))
    m0 = _loguniform(rng, 2e-4, 5e-3)
    mismatch = m0 * np.exp(0.2 * rng.standard_normal(T))
    secs = _loguniform(rng, 5.0, 600.0)
    step_seconds = secs * np.exp(0.1 * rng.standard_normal(T))
    prm.update(h0=h0, k1=k1, g0=g0, l0=l0, lmax=l0 * room, c0=c0, m0=m0, step_seconds=secs)
    c = _Curves(
        T=T,
        p=p,
        unit_noise=sigma * noise,
        entropy=entropy,
        ref_kl=ref_kl,
        grad=grad,
        length=length,
        lmax=l0 * room,
        clip=clip,
        mismatch=mismatch,
        fmt=np.zeros(T),
        lag=np.zeros(T),
        step_seconds=step_seconds,
        honest=p,
    )
    return c, prm


# -- families ----------------------------------------------------------------------------------


def _healthy(rng: np.random.Generator, family: str, c: _Curves, prm: dict[str, Any]) -> None:
    T = c.T
    t = np.arange(1, T + 1, dtype=float)
    if family == "slow_start":
        flat = int(rng.uniform(30, min(100, 0.6 * T)))
        tau = float(rng.uniform(0.4, 1.2)) * (T - flat)
        c.p = prm["p0"] + prm["gain"] * _saturating(t, flat, tau)
        prm.update(flat=flat, tau=tau)
    elif family == "noisy":
        prm["sigma"] = float(rng.uniform(0.10, 0.18))
        c.unit_noise = prm["sigma"] * _ar1(rng, T, prm["phi"])
        prm["gain"] = float(rng.uniform(0.35, 0.97 - prm["p0"])) if prm["p0"] < 0.6 else 0.37
        c.p = prm["p0"] + prm["gain"] * _saturating(t, 0.0, prm["tau"])
    elif family in ("sharpening", "repeated_replies"):
        lo, hi = (0.5, 0.8) if family == "sharpening" else (0.75, 0.9)
        end = float(rng.uniform(lo, hi))
        shape = c.p - c.p[0]
        shape = shape / shape[-1] if shape[-1] > 0 else shape
        c.entropy = prm["h0"] * (1 - (1 - end) * shape) * np.exp(0.01 * rng.standard_normal(T))
        prm["entropy_end"] = end
        if family == "repeated_replies":
            prm["repeated_share"] = float(rng.uniform(0.03, 0.10))
    elif family == "transient_truncation":
        lmax = c.lmax
        start = lmax * float(rng.uniform(1.0, 1.4))
        settle = lmax / float(rng.uniform(2.0, 3.0))
        tau = float(rng.uniform(3.0, 12.0))
        c.length = (settle + (start - settle) * np.exp(-(t - 1) / tau)) * np.exp(
            0.04 * rng.standard_normal(T)
        )
        prm.update(trunc_tau=tau, start_length=start)
    elif family == "shaping":
        tau = float(rng.uniform(3.0, 25.0))
        f0 = float(rng.uniform(0.0, 0.4))
        c.fmt = np.clip(
            f0 + (1 - f0) * _saturating(t, 0.0, tau) + 0.03 * rng.standard_normal(T), 0, 1
        )
        prm.update(format_tau=tau, format_start=f0)
    elif family == "async_lag":
        cap = int(rng.integers(1, 5))
        mean = float(rng.uniform(0.5, min(2.0, cap)))
        c.lag = np.clip(mean + 0.15 * rng.standard_normal(T), 0, cap)
        c.mismatch = c.mismatch * float(rng.uniform(1.5, 3.0))
        prm.update(lag_cap=cap, lag_mean=mean)
    elif family == "mastered":
        top = float(rng.uniform(0.97, 1.0))
        tau = float(rng.uniform(0.05, 0.2)) * T
        c.p = prm["p0"] + (top - prm["p0"]) * _saturating(t, 0.0, tau)
        prm.update(ceiling=top, tau=tau)


def _onset(rng: np.random.Generator, family: str, T: int, cadence: int) -> int:
    """The update the failure starts at: anywhere, leaving room to show it."""
    if family == "plateau":
        return cadence
    lo = max(cadence, int(0.1 * T)) if family != "no_signal" else cadence
    hi = max(lo + 1, int(0.75 * T))
    return int(rng.integers(lo, hi))


def _tau(rng: np.random.Generator, lo: float, hi: float, room: int) -> float:
    """A failure's time constant, short enough to develop (95%) before the run ends."""
    return min(float(rng.uniform(lo, hi)), max(1.0, room / 3))


def _broken(
    rng: np.random.Generator,
    family: str,
    sev: str,
    c: _Curves,
    prm: dict[str, Any],
    onset: int,
) -> None:
    T = c.T
    k = _SEV[sev]
    t = np.arange(1, T + 1, dtype=float)
    after = t >= onset
    since = np.clip(t - onset, 0, None)
    frozen_p = float(c.p[min(onset, T) - 1])

    def freeze_reward(drop: float = 0.0) -> None:
        c.p = np.where(after, frozen_p - drop * _saturating(t, onset, 0.3 * T), c.p)

    if family == "no_signal":
        if frozen_p > 0.55:  # a middling reward at the onset (see below)
            c.p = c.p * (0.55 / frozen_p)
            frozen_p = 0.55
        target = (0.35, 0.1, 0.0)[k]
        c.signal_cap = np.where(after, target, np.nan)
        # Every attempt at a task scores alike at a middling reward (a grader that reads only
        # the prompt, a parser that fails every reply): not a run that has mastered its tasks.
        level = (frozen_p, frozen_p, float(rng.choice([0.0, frozen_p])))[k]
        c.p = np.where(after, level, c.p)
        c.unit_noise = np.where(after, c.unit_noise * (0.6, 0.3, 0.0)[k], c.unit_noise)
        c.grad = np.where(after, c.grad * (0.6, 0.3, 0.0)[k] + (k == 2) * 1e-9, c.grad)
        c.ref_kl = np.where(after, c.ref_kl[min(onset, T) - 1], c.ref_kl)
    elif family == "entropy_collapse":
        r = (0.3, 0.12, 0.03)[k]
        tau = _tau(rng, 5, 20, T - onset)
        h_on = c.entropy[min(onset, T) - 1]
        c.entropy = np.where(
            after, h_on * (r + (1 - r) * np.exp(-since / tau)), c.entropy
        ) * np.exp(0.01 * rng.standard_normal(T))
        freeze_reward()
        c.signal_cap = np.where(after, 0.9 - 0.6 * (1 - np.exp(-since / tau)) * (k + 1) / 3, np.nan)
        prm.update(entropy_ratio=r, collapse_tau=tau)
    elif family == "kl_drift":
        mult, add = ((4, 0.5), (10, 1.5), (40, 5.0))[k]
        final = max(prm["k1"] * mult, prm["k1"] + add)
        c.ref_kl = c.ref_kl + (final - prm["k1"]) * (since / max(1, T - onset)) ** 2 * np.exp(
            0.1 * rng.standard_normal(T)
        )
        prm["final_kl"] = final
    elif family == "exploit":
        tau = _tau(rng, 3, 15, T - onset)
        top = float(rng.uniform(0.93, 1.0))
        c.p = np.where(after, frozen_p + (top - frozen_p) * (1 - np.exp(-since / tau)), c.p)
        fall = (0.08, 0.18, 0.35)[k]
        c.heldout_fall = fall * _saturating(t, onset, tau * 2)
        prm.update(heldout_fall=fall, exploit_tau=tau)
    elif family == "truncation":
        want = (0.35, 0.65, 0.95)[k]
        # length whose share above lmax is `want` (log-normal spread 0.45)
        target = c.lmax * math.exp(0.45 * _ndtri(want))
        l_on = c.length[min(onset, T) - 1]
        tau = _tau(rng, 5, 25, T - onset)
        grow = 1 - np.exp(-since / tau)
        c.length = np.where(after, (l_on + (target - l_on) * grow), c.length) * np.exp(
            0.03 * rng.standard_normal(T)
        )
        freeze_reward()
        prm.update(truncated_share=want, grow_tau=tau)
    elif family == "length_collapse":
        r = (0.4, 0.2, 0.05)[k]
        tau = _tau(rng, 3, 15, T - onset)
        l_on = c.length[min(onset, T) - 1]
        c.length = np.where(after, l_on * (r + (1 - r) * np.exp(-since / tau)), c.length) * np.exp(
            0.03 * rng.standard_normal(T)
        )
        c.entropy = np.where(after, c.entropy * (1 - 0.3 * (1 - np.exp(-since / tau))), c.entropy)
        prm.update(length_ratio=r, collapse_tau=tau)
    elif family == "nan":
        span = (1, int(rng.integers(3, 10)), T)[k]
        mask = (t >= onset) & (t < onset + span)
        kinds = (("loss",), ("loss", "grad"), ("loss", "grad", "reward"))[k]
        c.nan = {kind: mask for kind in kinds}
        prm.update(nan_span=span, nan_kinds=list(kinds))
    elif family == "grad_spikes":
        n, mult = ((2, 8.0), (4, 20.0), (8, 100.0))[k]
        n = min(n, max(1, T - onset))
        at = onset + np.sort(rng.choice(max(1, T - onset), size=n, replace=False))
        at[0] = onset
        med = float(np.median(c.grad))
        for a in at:
            c.grad[int(a) - 1] = med * mult * float(rng.uniform(1.0, 1.5))
        prm.update(spikes=[int(a) for a in at], spike_mult=mult)
    elif family == "clip_saturation":
        level = (0.3, 0.5, 0.8)[k]
        tau = _tau(rng, 3, 15, T - onset)
        c.clip = np.where(
            after, c.clip + (level - c.clip) * (1 - np.exp(-since / tau)), c.clip
        ) * np.exp(0.05 * rng.standard_normal(T))
        prm.update(clip_level=level)
    elif family == "mismatch":
        final = (0.03, 0.1, 1.0)[k]
        grow = (since / max(1, T - onset)) ** 1.5
        c.mismatch = np.where(after, c.mismatch * (final / prm["m0"]) ** grow, c.mismatch)
        c.grad = c.grad * (1 + 3 * c.mismatch)
        prm["final_mismatch"] = final
    elif family == "plateau":
        # No learning: a rise of 1.5 standard errors (inside the noise), flat, or a fall of
        # 3 (last quarter against first, the noise of the run's own records).
        n = T // prm["cadence"]
        q = max(2, n // 4)
        se = float(np.std(c.unit_noise)) / math.sqrt(prm["cadence"]) * math.sqrt(2.0 / q)
        move = (1.5, 0.0, -3.0)[k] * se / 0.75  # a linear course: quarters 0.75 T apart
        c.p = prm["p0"] + move * t / T
    # stall and crash: cut in _cut (the records stop at the onset)


def _ndtri(q: float) -> float:
    """Inverse standard normal CDF (Acklam's rational approximation; enough here)."""
    q = min(max(q, 1e-9), 1 - 1e-9)
    a = (-39.696830, 220.946098, -275.928510, 138.357751, -30.664798, 2.506628)
    b = (-54.476098, 161.585836, -155.698979, 66.801311, -13.280681)
    cc = (-0.007784894, -0.32239645, -2.4007583, -2.5497325, 4.3746641, 2.938164)
    d = (0.007784695709, 0.32246712, 2.445134, 3.7544086)
    if q < 0.02425:
        r = math.sqrt(-2 * math.log(q))
        return (((((cc[0] * r + cc[1]) * r + cc[2]) * r + cc[3]) * r + cc[4]) * r + cc[5]) / (
            (((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1
        )
    if q > 1 - 0.02425:
        return -_ndtri(1 - q)
    r = q - 0.5
    s = r * r
    return (
        (((((a[0] * s + a[1]) * s + a[2]) * s + a[3]) * s + a[4]) * s + a[5])
        * r
        / (((((b[0] * s + b[1]) * s + b[2]) * s + b[3]) * s + b[4]) * s + 1)
    )


def _ndtr(x: np.ndarray) -> np.ndarray:
    from math import erf

    return 0.5 * (1 + np.vectorize(erf)(x / math.sqrt(2)))


# -- from curves to logged numbers ---------------------------------------------------------------


def _ensure_rise(c: _Curves, prm: dict[str, Any], cadence: int, z_min: float) -> None:
    """Healthy learning families rise beyond their own noise by construction: the expected
    rise of the last quarter of records over the first is at least ``z_min`` standard errors
    of the logged reward (noise shrunk where it is not)."""
    n = c.T // cadence
    q = max(2, n // 4)
    logged = c.p[: n * cadence].reshape(n, cadence).mean(axis=1)
    rise = float(logged[-q:].mean() - logged[:q].mean())
    sd = float(np.std(c.unit_noise)) / math.sqrt(cadence)
    se = sd * math.sqrt(2.0 / q)
    if rise > 0 and se > 0 and rise < z_min * se:
        c.unit_noise = c.unit_noise * rise / (z_min * se)
        prm["sigma_shrunk_to"] = prm["sigma"] * rise / (z_min * se)


def _signal(c: _Curves, group: int) -> np.ndarray:
    """Share of groups whose rewards differ: 1 - E[p^G + (1-p)^G] over tasks whose pass
    rates spread around the skill (Beta with concentration 4)."""
    out = np.empty(c.T)
    xs = (np.arange(16) + 0.5) / 16
    for i, p in enumerate(np.clip(c.p, 0.001, 0.999)):
        a, b = 4 * p, 4 * (1 - p)
        w = xs ** (a - 1) * (1 - xs) ** (b - 1)
        w /= w.sum()
        out[i] = 1 - float(np.sum(w * (xs**group + (1 - xs) ** group)))
    return out


def _numbers(
    rng: np.random.Generator, c: _Curves, prm: dict[str, Any], scale: tuple[float, float]
) -> dict[str, np.ndarray]:
    """Per-update values of each quantity (canonical meaning, run's units)."""
    lo, hi = scale
    group = int(prm["group"])
    # Reward noise shrinks near 0 and 1, as a mean of pass/fail attempts does.
    bern = 0.3 + 0.7 * 2 * np.sqrt(np.clip(c.p * (1 - c.p), 0, 0.25))
    unit = np.clip(c.p + c.unit_noise * bern, 0.0, 1.0)
    sig = _signal(c, group)
    if c.signal_cap is not None:
        sig = np.where(np.isnan(c.signal_cap), sig, np.minimum(sig, c.signal_cap))
    if not np.any(c.fmt):
        reward = lo + (hi - lo) * unit
        comps: dict[str, np.ndarray] = {}
    else:  # a format component worth a third of the scale beside the task
        task = lo + (hi - lo) * (2 / 3) * unit
        fmt = (hi - lo) / 3 * c.fmt
        reward = task + fmt
        comps = {"correctness": task, "format": fmt}
    trunc = 1 - _ndtr((math.log(c.lmax) - np.log(np.maximum(c.length, 1e-6))) / 0.45)
    length = np.minimum(c.length, c.lmax * (1 - 0.25 * trunc))
    heldout = np.clip(c.honest * 0.85 - c.heldout_fall, 0, 1)
    out = {
        "reward": reward,
        "reward_std": (hi - lo) * np.sqrt(np.clip(unit * (1 - unit), 0, None)) * np.sqrt(sig),
        "zero_std": 1 - sig,
        "entropy": c.entropy,
        "ref_kl": c.ref_kl,
        "grad": c.grad,
        "length": length,
        "trunc": trunc,
        "clip": c.clip,
        "mismatch": c.mismatch,
        "lag": c.lag,
        "loss": 0.05 * rng.standard_normal(c.T) * np.sqrt(sig) + 0.01,
        "step_seconds": c.step_seconds,
        "heldout": heldout,
        **{f"comp/{k}": v for k, v in comps.items()},
    }
    for kind, mask in c.nan.items():
        key = {"loss": "loss", "grad": "grad", "reward": "reward"}[kind]
        out[key] = np.where(mask, np.nan, out[key])
    return out


def _logged(values: dict[str, np.ndarray], cadence: int, n: int) -> dict[str, np.ndarray]:
    """Each quantity as logged every ``cadence`` updates: the mean over the window (as TRL's
    logging_steps averages), NaN where any update of the window was NaN."""
    return {k: v[: n * cadence].reshape(n, cadence).mean(axis=1) for k, v in values.items()}


# -- frameworks' key names ------------------------------------------------------------------------


def _trl(v: dict[str, float], have: frozenset[str], prm: dict[str, Any]) -> dict[str, float]:
    rec: dict[str, float] = {}
    if "grad_norm" in have:
        rec["loss"] = v["loss"]
        rec["grad_norm"] = v["grad"]
        rec["learning_rate"] = prm["lr"]
    rec["reward"] = v["reward"]
    if "components" in have and "comp/format" in v:
        rec["rewards/correctness_reward/mean"] = v["comp/correctness"]
        rec["rewards/format_reward/mean"] = v["comp/format"]
    elif have != {"reward"}:
        rec["rewards/accuracy_reward/mean"] = v["reward"]
    if have == {"reward"}:
        return rec
    rec["reward_std"] = v["reward_std"]
    if "ref_kl" in have and prm["beta"] > 0:
        rec["kl"] = v["ref_kl"]
    if "length" in have:
        key = "completions/mean_length" if "truncation" in have else "completion_length"
        rec[key] = v["length"]
    if "truncation" in have:
        rec["completions/clipped_ratio"] = v["trunc"]
    if "groups" in have:
        rec["frac_reward_zero_std"] = v["zero_std"]
    if "entropy" in have:
        rec["entropy"] = v["entropy"]
    if "clip" in have:
        rec["clip_ratio/region_mean"] = v["clip"] if prm["iterations"] > 1 else 0.0
    if "mismatch" in have and prm["vllm"]:
        # mean |old - vLLM logp| ~ 0.57 sqrt(k3) (Miles' seed: k3 7e-4, |d| 0.015)
        rec["sampling/sampling_logp_difference/mean"] = 0.57 * math.sqrt(max(v["mismatch"], 0))
    return rec


def _verl(v: dict[str, float], have: frozenset[str], prm: dict[str, Any]) -> dict[str, float]:
    rec = {
        "critic/score/mean": v["reward"],
        "critic/rewards/mean": v["reward"] - prm["beta"] * v["ref_kl"],
        "actor/pg_loss": v["loss"],
        "actor/grad_norm": v["grad"],
        "actor/lr": prm["lr"],
        "response_length/mean": v["length"],
        "timing_s/step": v["step_seconds"],
    }
    if "ref_kl" in have and prm["beta"] > 0:
        rec["actor/kl_loss"] = v["ref_kl"]
    if have == SETS["verl"]["full"]:
        rec["response_length/clip_ratio"] = v["trunc"]
        rec["actor/entropy"] = v["entropy"]
        rec["actor/pg_clipfrac"] = v["clip"]
        rec["actor/ppo_kl"] = v["clip"] * 0.05
        if prm["vllm"]:
            rec["rollout_corr/k3_kl"] = v["mismatch"]
    return rec


def _native(v: dict[str, float], have: frozenset[str], prm: dict[str, Any]) -> dict[str, float]:
    m = max(v["mismatch"], 0.0) if math.isfinite(v["mismatch"]) else v["mismatch"]
    rec = {
        "reward/mean": v["reward"],
        "reward/mean_with_unusable": v["reward"],
        "reward/std": v["reward_std"],
        "reward/group_std_mean": v["reward_std"] * 0.9,
        "groups/signal_fraction": 1 - v["zero_std"],
        "response/length_mean": v["length"],
        "response/truncated_rate": v["trunc"],
        "sampling/entropy_estimate": v["entropy"],
        "train/loss": v["loss"],
        "train/grad_norm": v["grad"],
        "train/lr": prm["lr"],
        "train/clip_frac": v["clip"],
        "train/ref_kl": v["ref_kl"],
        "train/mismatch_kl": m,
        "train/logprob_abs_diff": 0.57 * math.sqrt(m) if math.isfinite(m) else m,
        "train/mismatch_ess": 1.0 / (1.0 + 2.0 * m) if math.isfinite(m) else m,
        "freshness/lag_mean": v["lag"],
        "freshness/lag_max": math.ceil(v["lag"]) if math.isfinite(v["lag"]) else v["lag"],
        "perf/step_seconds": v["step_seconds"],
    }
    for k in ("correctness", "format"):
        if f"comp/{k}" in v:
            rec[f"rollout/{k}"] = v[f"comp/{k}"]
    return rec


NAMES = {"trl": _trl, "verl": _verl, "native": _native}


# -- one run ---------------------------------------------------------------------------------------


def _raw(
    family: str,
    seed: int,
    severity: str | None = None,
    length: int | None = None,
    cadence: int | None = None,
    framework: str | None = None,
    metrics: str | None = None,
) -> _Raw:
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r} (one of {', '.join(FAMILIES)})")
    healthy = family in HEALTHY
    if healthy:
        severity = None
    elif severity is None:
        severity = "moderate"
    elif severity not in SEVERITIES:
        raise ValueError(f"severity: expected one of {SEVERITIES} (not {severity!r})")
    rng = _rng(family, seed)
    fw, ms = _pick_layout(rng, family, framework, metrics)
    have = SETS[fw][ms]
    T = int(length) if length else _draw_length(rng, family)
    if T < MIN_LENGTH:
        raise ValueError(f"length: at least {MIN_LENGTH} updates (not {T})")
    if cadence is None:
        cadence = int(rng.choice([1, 1, 1, 1, 2, 5, 10])) if fw == "trl" else 1
        cadence = min(cadence, max(1, T // 40))
    c, prm = _base(rng, family, T)
    prm.update(
        cadence=cadence,
        group=int(rng.choice([4, 8, 8, 16])),
        lr=_loguniform(rng, 1e-7, 3e-5),
        beta=float(rng.choice([0.0, 0.001, 0.04, 0.04])) if fw == "trl" else 0.001,
        iterations=int(rng.choice([1, 1, 2])),
        vllm=bool(rng.random() < 0.7) or "mismatch" in NEEDS.get(family, ()),
    )
    if "ref_kl" in NEEDS.get(family, ()) and prm["beta"] == 0:
        prm["beta"] = 0.04
    if family == "clip_saturation":
        prm["iterations"] = 2
    scale = [(0.0, 1.0), (0.0, 1.0), (0.0, 2.0), (-1.0, 1.0), (0.0, 3.0), (-10.0, 10.0)][
        int(rng.integers(0, 6))
    ]
    onset = None
    if healthy:
        _healthy(rng, family, c, prm)
        c.honest = c.p
        if family not in ("mastered",):
            _ensure_rise(c, prm, cadence, z_min=5.0)
    else:
        onset = _onset(rng, family, T, cadence)
        c.honest = c.p.copy()
        _broken(rng, family, str(severity), c, prm, onset)
        if family != "exploit":
            c.honest = c.p
    vals = _numbers(rng, c, prm, scale)
    n = T // cadence
    logged = _logged(vals, cadence, n)
    steps = [cadence * (i + 1) for i in range(n)]
    t0 = 1.7964e9 + float(rng.uniform(0, 1e6))
    times = t0 + np.cumsum(vals["step_seconds"])[cadence - 1 :: cadence][:n]
    records = []
    names = NAMES[fw]
    for i, s in enumerate(steps):
        v = {k: float(a[i]) for k, a in logged.items()}
        records.append((s, names(v, have, prm)))
    evals = []
    if "evals" in have and (family == "exploit" or rng.random() < 0.5):
        every = int(rng.choice([5, 10, 20]))
        nev = int(rng.choice([100, 200, 500]))
        for s in range(every, T + 1, every):
            q = float(vals["heldout"][s - 1])
            score = float(rng.binomial(nev, min(max(q, 0), 1)) / nev)
            evals.append({"step": s, "suite": "heldout", "score": score, "n": nev})
    # Only rlvitals' own run.json records a status; TRL's state and verl's console do not.
    info: dict[str, Any] = {"status": "finished"} if fw == "native" else {}
    crash: list[str] = []
    if family in ("stall", "crash"):
        assert onset is not None
        cut = max(1, onset // cadence)
        records, times = records[:cut], times[:cut]
        evals = [e for e in evals if e["step"] <= records[-1][0]]
        gap = float(np.median(vals["step_seconds"])) * cadence * (15, 50, 500)[_SEV[severity]]
        prm["gap"] = gap
        if family == "stall":
            info["status"] = "running"
        else:
            crash = _traceback(str(severity))
            info = {"status": "crashed", "stop_reason": crash[-1]} if fw == "native" else {}
        onset = records[-1][0]
    prm["times"] = [float(x) for x in times]
    prm["last_step"] = records[-1][0]
    prm["scale"] = scale
    label = Label(
        family=family,
        seed=int(seed),
        healthy=healthy,
        severity=severity,
        onset=onset,
        verdicts=() if healthy else VERDICTS[family],
        length=T,
        cadence=cadence,
        framework=fw,
        metrics=ms,
        params=prm,
    )
    if fw == "native":
        info["config"] = {
            "training": {
                "mode": "async" if family == "async_lag" else "sync",
                "max_steps_off_policy": int(prm.get("lag_cap", 2)),
            },
            "rollout": {"reward_range": list(scale)},
        }
        info["name"] = label.name
    return _Raw(label, records, evals, info, crash)


def _traceback(severity: str) -> list[str]:
    if severity == "mild":
        return ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    return [
        "Traceback (most recent call last):",
        '  File "train.py", line 212, in <module>',
        "    trainer.train()",
        '  File "trainer.py", line 88, in train',
        "    loss.backward()",
        "RuntimeError: CUDA error: an illegal memory access was encountered"
        if severity == "moderate"
        else "RuntimeError: NCCL communicator was aborted on rank 3",
    ]


def _to_data(raw: _Raw) -> RunData:
    """The run in memory, mapped as the framework's reader maps it."""
    from rlvitals.readers.generic import GENERIC
    from rlvitals.readers.mapping import Mapper
    from rlvitals.readers.trl import TRL
    from rlvitals.readers.verl import VERL

    lab = raw.label
    data = RunData(source=f"families://{lab.name}", format=lab.framework)
    data.info = dict(raw.info)
    if lab.framework == "native":
        times = lab.params["times"]
        for (s, rec), tm in zip(raw.records, times):
            data.metrics.add(s, "time", tm)
            for k, v in rec.items():
                data.metrics.add(s, k, v)
        for e in raw.evals:
            data.evals.append(dict(e))
            data.metrics.add(e["step"], f"eval/{e['suite']}/score", e["score"])
    else:
        table = {"trl": TRL, "verl": VERL}.get(lab.framework, GENERIC)
        mapper = Mapper(table, data)
        by_step = {e["step"]: e for e in raw.evals}
        for s, rec in raw.records:
            if lab.framework == "verl" and s in by_step:
                rec = {**rec, "val-core/heldout/acc/mean@1": by_step[s]["score"]}
            mapper.add(s, rec)
    if raw.crash and lab.framework != "native":  # native: run.json's status says it
        last = raw.records[-1][0]
        data.events.append(
            Event(
                time=None,
                kind="oom" if len(raw.crash) == 1 else "traceback",
                text="\n".join(raw.crash),
                step=last,
                source=data.source,
                line=len(raw.records) + 1,
            )
        )
    return data


def make(
    family: str,
    seed: int,
    severity: str | None = None,
    length: int | None = None,
    cadence: int | None = None,
    framework: str | None = None,
    metrics: str | None = None,
) -> tuple[RunData, Label]:
    """One run of ``family`` (see ``FAMILIES``), deterministic in its arguments.

    ``severity`` (broken families; default ``moderate``), ``length`` in updates (default
    drawn, 40-400), ``cadence`` (updates per record; default drawn: TRL logs every 1, 2, 5 or
    10), ``framework`` (``trl``, ``verl``, ``native``) and ``metrics`` (``reward``,
    ``reward_kl``, ``full``) pin what would otherwise be drawn."""
    raw = _raw(family, seed, severity, length, cadence, framework, metrics)
    return _to_data(raw), raw.label


def grid(
    seeds: int = 20,
    families: list[str] | None = None,
    severities: tuple[str, ...] = SEVERITIES,
    length: int | None = None,
) -> Iterator[tuple[RunData, Label]]:
    """Every family (healthy ones once, broken ones at each severity) for seeds 0..seeds-1."""
    for fam in families or list(FAMILIES):
        sevs: tuple[str | None, ...] = (None,) if fam in HEALTHY else severities
        for sev in sevs:
            for seed in range(seeds):
                yield make(fam, seed, severity=sev, length=length)


# -- files -----------------------------------------------------------------------------------------


def _num(v: float) -> str:
    return repr(float(v)) if math.isfinite(v) else ("nan" if v != v else repr(v))


def write(
    family: str,
    seed: int,
    out: Path,
    *,
    severity: str | None = None,
    length: int | None = None,
    cadence: int | None = None,
    framework: str | None = None,
    metrics: str | None = None,
) -> tuple[Path, Label]:
    """Write the run ``make`` gives for the same arguments as its framework writes it, under
    ``out``; returns the path to read and the label."""
    raw = _raw(family, seed, severity, length, cadence, framework, metrics)
    lab = raw.label
    folder = Path(out) / lab.name
    folder.mkdir(parents=True, exist_ok=True)
    if lab.framework == "trl":
        hist = [{**rec, "epoch": round(s / lab.length, 4), "step": s} for s, rec in raw.records]
        state = {
            "global_step": raw.records[-1][0],
            "max_steps": lab.length,
            "logging_steps": lab.cadence,
            "log_history": hist,
        }
        path = folder / "trainer_state.json"
        path.write_text(json.dumps(state, indent=2))  # NaN written as NaN, as TRL's json does
        return path, lab
    if lab.framework == "verl":
        by_step = {e["step"]: e for e in raw.evals}
        lines = []
        for s, rec in raw.records:
            if s in by_step:
                rec = {**rec, "val-core/heldout/acc/mean@1": by_step[s]["score"]}
            body = " - ".join(f"{k}:{_num(v)}" for k, v in rec.items())
            lines.append(f"(TaskRunner pid=4242) step:{s} - {body}")
        lines += [f"(TaskRunner pid=4242) {x}" for x in raw.crash]
        path = folder / "train.log"
        path.write_text("\n".join(lines) + "\n")
        return path, lab
    times = lab.params["times"]
    with open(folder / "steps.jsonl", "w") as f:
        for (s, rec), tm in zip(raw.records, times):
            f.write(json.dumps({"step": s, "time": tm, **rec}) + "\n")
    if raw.evals:
        with open(folder / "evals.jsonl", "w") as f:
            for e in raw.evals:
                f.write(json.dumps({**e, "time": times[min(len(times), e["step"]) - 1]}) + "\n")
    run = {
        "format": "rlvitals-run/1",
        "run_id": f"{zlib.crc32(lab.name.encode()):08x}",
        "name": lab.name,
        "created": "2026-12-07T00:00:00Z",
        "stop_reason": None,
        **raw.info,
    }
    (folder / "run.json").write_text(json.dumps(run, indent=2))
    return folder, lab
