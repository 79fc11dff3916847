"""How the families' runs are drawn: per-update curves of a healthy learning run (``base``),
bent into each healthy family (``bend_healthy``) or broken at an onset (``break_run``), then
turned into the numbers a run logs (``numbers``, ``logged``). ``_families.py`` is the API and
says where each range comes from."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SEVERITIES = ("mild", "moderate", "gross")


def loguniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def saturating(t: np.ndarray, start: float, tau: float) -> np.ndarray:
    x = np.clip((t - start) / tau, 0.0, None)
    return 1.0 - np.exp(-x)


def ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
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
class Curves:
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


def base(rng: np.random.Generator, family: str, T: int) -> tuple[Curves, dict[str, Any]]:
    """A healthy learning run (the plain family); families bend it after."""
    t = np.arange(1, T + 1, dtype=float)
    prm: dict[str, Any] = {}
    # Start where attempts disagree (healthy signal fraction 0.45-0.95 at the start); the
    # rise goes on to the end (tau 0.3-1.0 of the run): a run that levels off below its
    # ceiling is neither family's (a plateau after learning is a judgement, not a label).
    p0 = float(rng.uniform(0.15, 0.6))
    gain = float(rng.uniform(0.15, min(0.6, 0.97 - p0)))
    tau = float(rng.uniform(0.4, 1.2)) * T
    p = p0 + gain * saturating(t, 0.0, tau)
    sigma = loguniform(rng, 0.02, 0.08)  # per-update reward noise on a 0..1 scale
    phi = float(rng.uniform(0.0, 0.3))
    prm.update(p0=p0, gain=gain, tau=tau, sigma=sigma, phi=phi)
    noise = ar1(rng, T, phi)
    # Entropy: starts anywhere real runs start, sharpens a little while the reward rises.
    h0 = loguniform(rng, 0.05, 3.8)
    h_drop = float(rng.uniform(0.0, 0.25))
    h_noise = loguniform(rng, 0.002, 0.04)
    h_wiggle = np.exp(h_noise * rng.standard_normal(T))
    entropy = h0 * (1 - h_drop * saturating(t, 0.0, tau)) * h_wiggle
    # KL to the reference: grows from 0 and levels off.
    k1 = loguniform(rng, 0.005, 0.5)
    ref_kl = (
        k1
        * saturating(t, 0.0, float(rng.uniform(0.3, 1.0)) * T)
        * np.exp(0.12 * rng.standard_normal(T))
    )
    # Grad norm: log-t noise (heavy tails, healthy max/median up to ~5).
    g0 = loguniform(rng, 0.05, 3.0)
    g_sig = float(rng.uniform(0.1, 0.3))
    df = float(rng.uniform(4.0, 8.0))
    g_trend = loguniform(rng, 0.6, 1.6)
    # Tails cut at 5x: a healthy run's max/median is 1.4-5.1 in the runs measured (a run with
    # 10x excursions is labelled spiky there, and is the grad_spikes family here).
    tail = np.clip(g_sig * rng.standard_t(df, T), -math.log(5), math.log(5))
    grad = g0 * g_trend ** (t / T) * np.exp(tail)
    # Length: a start, room above it, a drift the room allows.
    l0 = loguniform(rng, 20, 1200)
    room = loguniform(rng, 1.6, 4.0)
    # Longer only where there is room (truncation stays under ~20%; with little room replies
    # shorten, as Miles' seeds' did).
    drift = loguniform(rng, 0.6, min(1.5, room / 2))
    l_noise = loguniform(rng, 0.02, 0.12)
    l_wiggle = np.exp(l_noise * rng.standard_normal(T))
    length = l0 * drift ** saturating(t, 0.0, tau) * l_wiggle
    # Clip fraction: a level with noise (TRL with one pass per batch logs 0: see _trl).
    c0 = loguniform(rng, 0.01, 0.1)
    clip = c0 * np.exp(0.15 * rng.standard_normal(T))
    m0 = loguniform(rng, 2e-4, 5e-3)
    mismatch = m0 * np.exp(0.2 * rng.standard_normal(T))
    secs = loguniform(rng, 5.0, 600.0)
    step_seconds = secs * np.exp(0.1 * rng.standard_normal(T))
    prm.update(h0=h0, k1=k1, g0=g0, l0=l0, lmax=l0 * room, c0=c0, m0=m0, step_seconds=secs)
    prm.update(h_drop=h_drop, drift=drift, h_wiggle=h_wiggle, l_wiggle=l_wiggle)
    c = Curves(
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


def progress(p: np.ndarray) -> np.ndarray:
    """How far the learning has come, 0 at the start to 1 at the end."""
    span = float(p[-1] - p[0])
    return np.clip((p - p[0]) / span, 0, 1) if span > 0 else np.zeros_like(p)


def follow(c: Curves, prm: dict[str, Any]) -> None:
    """Entropy and length move with the learning (a flat start leaves them flat)."""
    f = progress(c.p)
    c.entropy = prm["h0"] * (1 - prm["h_drop"] * f) * prm["h_wiggle"]
    c.length = prm["l0"] * prm["drift"] ** f * prm["l_wiggle"]


def bend_healthy(rng: np.random.Generator, family: str, c: Curves, prm: dict[str, Any]) -> None:
    T = c.T
    t = np.arange(1, T + 1, dtype=float)
    if family == "slow_start":
        flat = int(min(rng.uniform(30, 100), 0.6 * T))
        tau = float(rng.uniform(0.4, 1.2)) * (T - flat)
        c.p = prm["p0"] + prm["gain"] * saturating(t, flat, tau)
        prm.update(flat=flat, tau=tau)
        follow(c, prm)
    elif family == "noisy":
        prm["sigma"] = float(rng.uniform(0.10, 0.18))
        c.unit_noise = prm["sigma"] * ar1(rng, T, prm["phi"])
        prm["gain"] = float(rng.uniform(0.35, 0.97 - prm["p0"])) if prm["p0"] < 0.6 else 0.37
        c.p = prm["p0"] + prm["gain"] * saturating(t, 0.0, prm["tau"])
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
            f0 + (1 - f0) * saturating(t, 0.0, tau) + 0.03 * rng.standard_normal(T), 0, 1
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
        c.p = prm["p0"] + (top - prm["p0"]) * saturating(t, 0.0, tau)
        # Entropy falls further on the way to mastery: the reference trainer's healthy runs
        # reach 33-43% of their start at 91-94% reward in 120 updates.
        prm.update(ceiling=top, tau=tau, h_drop=float(rng.uniform(0.4, 0.7)))
        follow(c, prm)


def draw_onset(rng: np.random.Generator, family: str, T: int, cadence: int) -> int:
    """The update the failure starts at: anywhere, leaving room to show it."""
    if family == "plateau":
        return cadence
    lo = max(cadence, int(0.1 * T)) if family != "no_signal" else cadence
    hi = max(lo + 1, int(0.75 * T))
    return int(rng.integers(lo, hi))


def failure_tau(rng: np.random.Generator, lo: float, hi: float, room: int) -> float:
    """A failure's time constant, short enough to develop (95%) before the run ends."""
    return min(float(rng.uniform(lo, hi)), max(1.0, room / 3))


def break_run(
    rng: np.random.Generator,
    family: str,
    sev: str,
    c: Curves,
    prm: dict[str, Any],
    onset: int,
) -> None:
    T = c.T
    k = SEVERITIES.index(sev)
    t = np.arange(1, T + 1, dtype=float)
    after = t >= onset
    since = np.clip(t - onset, 0, None)
    frozen_p = float(c.p[min(onset, T) - 1])

    def freeze_reward(drop: float = 0.0) -> None:
        c.p = np.where(after, frozen_p - drop * saturating(t, onset, 0.3 * T), c.p)

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
        tau = failure_tau(rng, 5, 20, T - onset)
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
        tau = failure_tau(rng, 3, 15, T - onset)
        top = float(rng.uniform(0.93, 1.0))
        c.p = np.where(after, frozen_p + (top - frozen_p) * (1 - np.exp(-since / tau)), c.p)
        fall = (0.08, 0.18, 0.35)[k]
        c.heldout_fall = fall * saturating(t, onset, tau * 2)
        prm.update(heldout_fall=fall, exploit_tau=tau)
    elif family == "truncation":
        want = (0.35, 0.65, 0.95)[k]
        # length whose share above lmax is `want` (log-normal spread 0.45)
        target = c.lmax * math.exp(0.45 * ndtri(want))
        l_on = c.length[min(onset, T) - 1]
        tau = failure_tau(rng, 5, 25, T - onset)
        grow = 1 - np.exp(-since / tau)
        c.length = np.where(after, (l_on + (target - l_on) * grow), c.length) * np.exp(
            0.03 * rng.standard_normal(T)
        )
        freeze_reward()
        prm.update(truncated_share=want, grow_tau=tau)
    elif family == "length_collapse":
        r = (0.4, 0.2, 0.05)[k]
        tau = failure_tau(rng, 3, 15, T - onset)
        l_on = c.length[min(onset, T) - 1]
        c.length = np.where(after, l_on * (r + (1 - r) * np.exp(-since / tau)), c.length) * np.exp(
            0.03 * rng.standard_normal(T)
        )
        c.entropy = np.where(after, c.entropy * (1 - 0.3 * (1 - np.exp(-since / tau))), c.entropy)
        prm.update(length_ratio=r, collapse_tau=tau)
    elif family == "nan":
        span = (1, int(rng.integers(3, 10)), T)[k]
        mask = (t >= onset) & (t < onset + span)
        # The loss first, then the grad norm, then the reward: of what the run logs.
        logged = ("loss", "grad", "reward") if "grad_norm" in prm["have"] else ("reward",)
        kinds = logged[: k + 1]
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
        tau = failure_tau(rng, 3, 15, T - onset)
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
    elif family == "component_exploit":
        # A shaping (format) component the run had at a low level climbs to its ceiling from
        # the onset while the task component stops: flat (mild), or falling by 15% / 40% of
        # its level at the onset (moderate / gross). The total reward rises with the format
        # (a third of the scale); held-out is the task, so it follows it. The healthy
        # `shaping` family has the same component rising fast from the start with the task.
        f0 = float(rng.uniform(0.05, 0.4))
        tau = failure_tau(rng, 3, 15, T - onset)
        rise = saturating(t, onset, tau)
        c.fmt = np.clip(f0 + (1 - f0) * rise + 0.03 * rng.standard_normal(T), 0, 1)
        drop = (0.0, 0.15, 0.4)[k] * frozen_p
        c.p = np.where(after, frozen_p - drop * saturating(t, onset, 2 * tau), c.p)
        prm.update(format_start=f0, format_tau=tau, task_drop=drop)
    elif family == "plateau":
        # No learning: a rise of 1.5 standard errors (inside the noise), flat, or a fall of
        # 3 (last quarter against first, the noise of the run's own records).
        n = T // prm["cadence"]
        q = max(2, n // 4)
        se = float(np.std(c.unit_noise)) / math.sqrt(prm["cadence"]) * math.sqrt(2.0 / q)
        move = (1.5, 0.0, -3.0)[k] * se / 0.75  # a linear course: quarters 0.75 T apart
        c.p = prm["p0"] + move * t / T
    # stall and crash: cut in _cut (the records stop at the onset)


def ndtri(q: float) -> float:
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
        return -ndtri(1 - q)
    r = q - 0.5
    s = r * r
    return (
        (((((a[0] * s + a[1]) * s + a[2]) * s + a[3]) * s + a[4]) * s + a[5])
        * r
        / (((((b[0] * s + b[1]) * s + b[2]) * s + b[3]) * s + b[4]) * s + 1)
    )


def ndtr(x: np.ndarray) -> np.ndarray:
    from math import erf

    return 0.5 * (1 + np.vectorize(erf)(x / math.sqrt(2)))


# -- from curves to logged numbers ---------------------------------------------------------------


def ensure_rise(c: Curves, prm: dict[str, Any], cadence: int, z_min: float) -> None:
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


def signal_fraction(c: Curves, group: int) -> np.ndarray:
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


def numbers(
    rng: np.random.Generator, c: Curves, prm: dict[str, Any], scale: tuple[float, float]
) -> dict[str, np.ndarray]:
    """Per-update values of each quantity (canonical meaning, run's units)."""
    lo, hi = scale
    group = int(prm["group"])
    # Reward noise shrinks near 0 and 1, as a mean of pass/fail attempts does.
    bern = 0.3 + 0.7 * 2 * np.sqrt(np.clip(c.p * (1 - c.p), 0, 0.25))
    unit = np.clip(c.p + c.unit_noise * bern, 0.0, 1.0)
    sig = signal_fraction(c, group)
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
    trunc = 1 - ndtr((math.log(c.lmax) - np.log(np.maximum(c.length, 1e-6))) / 0.45)
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


def logged(values: dict[str, np.ndarray], cadence: int, n: int) -> dict[str, np.ndarray]:
    """Each quantity as logged every ``cadence`` updates: the mean over the window (as TRL's
    logging_steps averages), NaN where any update of the window was NaN."""
    return {k: v[: n * cadence].reshape(n, cadence).mean(axis=1) for k, v in values.items()}
