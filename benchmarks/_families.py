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
directory) and returns the path ``rlvitals.read`` takes. Replies exist only in files: a native
run of a ``TRANSCRIPTS`` family (``repeated_replies``: 3-10% of attempts give one reply
whatever the task; ``entropy_collapse``: that reply's share rising from the onset to 30/60/90%)
is written with ``transcripts/`` (``REPEATED`` is the reply); ``make`` gives its numbers only.

Severities of one seed are the same run (the random stream is the family's and the seed's)
with the same onset, the failure mild, moderate or gross. Healthy learning families rise at
least 5 standard errors of their own logged noise (last quarter against first) by
construction; ``tests/test_families.py`` checks that and that each failure starts at its onset.
The drawing is in ``_families_curves.py``, the frameworks' key names and files in
``_families_files.py``.

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

import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from _families_curves import (
    SEVERITIES,
    base,
    bend_healthy,
    break_run,
    draw_onset,
    ensure_rise,
    logged,
    loguniform,
    numbers,
)
from _families_files import (
    RECORDS,
    REPEATED,
    TRANSCRIPTS,
    traceback_lines,
    trl_state,
    write_files,
)
from rlvitals.model import Event, RunData

__all__ = [
    "BROKEN",
    "FAMILIES",
    "HEALTHY",
    "LENGTHS",
    "REPEATED",
    "SEVERITIES",
    "TRANSCRIPTS",
    "Label",
    "grid",
    "make",
    "write",
]


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
    "component_exploit": "a shaping component climbs to its ceiling, the task one does not",
    "plateau": "reward flat within its noise with learning signal present",
    "stall": "records stop arriving while the run says it is running",
    "crash": "the run dies: a traceback after the last update",
}
FAMILIES: dict[str, str] = {**HEALTHY, **BROKEN}

# The finding verdicts that find each broken family (at warn or worse).
VERDICTS: dict[str, tuple[str, ...]] = {
    # A reward pinned at its floor with every group alike is a collapse as much as no signal.
    "no_signal": ("no_signal", "too_hard", "too_easy", "exploration_stopped", "collapse"),
    "entropy_collapse": ("collapse", "exploration_stopped"),
    "kl_drift": ("drift",),
    "exploit": ("exploit_suspected",),
    "truncation": ("out_of_room",),
    "length_collapse": ("collapse", "exploit_suspected"),
    "nan": ("non_finite",),
    "grad_spikes": ("unstable",),
    "clip_saturation": ("drift", "unstable"),
    "mismatch": ("drift", "stale_policy"),
    "component_exploit": ("exploit_suspected",),
    "plateau": ("plateau", "not_learning", "too_hard", "collapse"),
    "stall": ("stalled",),
    "crash": ("crashed",),
}

# What a family needs the run to log (so its failure can be seen at all).
NEEDS: dict[str, frozenset[str]] = {
    "sharpening": frozenset({"entropy"}),
    "repeated_replies": frozenset({"entropy", "transcripts"}),
    "transient_truncation": frozenset({"truncation"}),
    "shaping": frozenset({"components"}),
    "async_lag": frozenset({"lag"}),
    "mastered": frozenset({"groups"}),
    "no_signal": frozenset({"groups"}),
    "entropy_collapse": frozenset({"entropy"}),
    "kl_drift": frozenset({"ref_kl"}),
    "exploit": frozenset({"evals"}),
    "component_exploit": frozenset({"components"}),
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
                "transcripts",
            }
        ),
    },
}

MIN_LENGTH = 20  # updates: the shortest run a family can have
LENGTHS = (40, 400)  # updates: drawn log-uniformly between these by default (real: 10-2,522)


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
        last step of a stalled run, ``params["gap"]`` seconds later. None for a run whose
        records carry no time (TRL's state, verl's console): judge it at the clock, as the
        files it was read from were just written."""
        times = self.params.get("times")
        if times is None or step is None or "time" not in self.params.get("have", ()):
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


def _draw_length(rng: np.random.Generator, family: str, span: tuple[int, int]) -> int:
    lo, hi = span
    if family == "slow_start":  # room for 30-100 flat updates and the rise after them
        lo, hi = max(lo, 100), max(hi, 100)
    return round(loguniform(rng, lo, hi))


# -- one run ---------------------------------------------------------------------------------------


def _raw(
    family: str,
    seed: int,
    severity: str | None = None,
    length: int | tuple[int, int] | None = None,
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
    if isinstance(length, tuple):
        T = _draw_length(rng, family, length)
    else:
        T = int(length) if length else _draw_length(rng, family, LENGTHS)
    if T < MIN_LENGTH:
        raise ValueError(f"length: at least {MIN_LENGTH} updates (not {T})")
    if cadence is None:
        cadence = int(rng.choice([1, 1, 1, 1, 2, 5, 10])) if fw == "trl" else 1
        cadence = min(cadence, max(1, T // 40))
    c, prm = base(rng, family, T)
    prm.update(
        have=sorted(have),
        cadence=cadence,
        group=int(rng.choice([4, 8, 8, 16])),
        lr=loguniform(rng, 1e-7, 3e-5),
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
        bend_healthy(rng, family, c, prm)
        c.honest = c.p
        if family not in ("mastered",):
            ensure_rise(c, prm, cadence, z_min=5.0)
    else:
        onset = draw_onset(rng, family, T, cadence)
        c.honest = c.p.copy()
        break_run(rng, family, str(severity), c, prm, onset)
        if family != "exploit":
            c.honest = c.p
    vals = numbers(rng, c, prm, scale)
    n = T // cadence
    per_record = logged(vals, cadence, n)
    steps = [cadence * (i + 1) for i in range(n)]
    t0 = 1.7964e9 + float(rng.uniform(0, 1e6))
    times = t0 + np.cumsum(vals["step_seconds"])[cadence - 1 :: cadence][:n]
    records = []
    names = RECORDS[fw]
    for i, s in enumerate(steps):
        v = {k: float(a[i]) for k, a in per_record.items()}
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
        gap = (
            float(np.median(vals["step_seconds"]))
            * cadence
            * (15, 50, 500)[SEVERITIES.index(str(severity))]
        )
        prm["gap"] = gap
        if family == "stall":
            info["status"] = "running"
        else:
            crash = traceback_lines(str(severity))
            info = {"status": "crashed", "stop_reason": crash[-1]} if fw == "native" else {}
        onset = records[-1][0]
    for k in ("h_wiggle", "l_wiggle"):  # noise arrays: not parameters
        prm.pop(k)
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
        if lab.framework == "trl":  # as the TRL reader keeps its trainer_state.json's
            data.info.update(trl_state(raw))
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
    length: int | tuple[int, int] | None = None,
    cadence: int | None = None,
    framework: str | None = None,
    metrics: str | None = None,
) -> tuple[RunData, Label]:
    """One run of ``family`` (see ``FAMILIES``), deterministic in its arguments.

    ``severity`` (broken families; default ``moderate``), ``length`` in updates (a number,
    or ``(lo, hi)`` to draw it log-uniformly between; default ``LENGTHS``), ``cadence`` (updates per record; default drawn: TRL logs every 1, 2, 5 or
    10), ``framework`` (``trl``, ``verl``, ``native``) and ``metrics`` (``reward``,
    ``reward_kl``, ``full``) pin what would otherwise be drawn."""
    raw = _raw(family, seed, severity, length, cadence, framework, metrics)
    return _to_data(raw), raw.label


def grid(
    seeds: int = 20,
    families: list[str] | None = None,
    severities: tuple[str, ...] = SEVERITIES,
    length: int | tuple[int, int] | None = None,
) -> Iterator[tuple[RunData, Label]]:
    """Every family (healthy ones once, broken ones at each severity) for seeds 0..seeds-1."""
    for fam in families or list(FAMILIES):
        sevs: tuple[str | None, ...] = (None,) if fam in HEALTHY else severities
        for sev in sevs:
            for seed in range(seeds):
                yield make(fam, seed, severity=sev, length=length)


# -- files -----------------------------------------------------------------------------------------


def write(
    family: str,
    seed: int,
    out: Path,
    *,
    severity: str | None = None,
    length: int | tuple[int, int] | None = None,
    cadence: int | None = None,
    framework: str | None = None,
    metrics: str | None = None,
    transcripts: bool | None = None,
) -> tuple[Path, Label]:
    """Write the run ``make`` gives for the same arguments as its framework writes it, under
    ``out``; returns the path to read and the label. A native run also gets its replies
    (``transcripts/``) where ``transcripts`` is true (default: for ``TRANSCRIPTS`` families):
    the reply a few attempts repeat across tasks (``params["repeated_share"]``), or the one
    reply a collapsing policy gives more and more."""
    raw = _raw(family, seed, severity, length, cadence, framework, metrics)
    return write_files(raw, Path(out), transcripts), raw.label
