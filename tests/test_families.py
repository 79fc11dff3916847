"""The families generator (``benchmarks/_families.py``): deterministic, its labels where it put
them, its healthy families healthy by their own numbers, its files read back as its runs.

These test the generator, not the checks' verdicts on its runs (``benchmarks/families.py``
scores those)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import _families as fam  # noqa: E402  (the generator, shared with the benchmark)
from rlvitals import read  # noqa: E402
from rlvitals.checks.base import VERDICTS  # noqa: E402

SEEDS = range(4)

REWARD = ("reward/mean", "reward/mean_with_unusable")
ENTROPY = ("train/entropy", "sampling/entropy_estimate")


def series(data, *names):
    for n in names:
        s = data.series(n)
        if s is not None and len(s):
            return s
    raise AssertionError(f"{data.source}: none of {names}")


def noise(v: np.ndarray) -> float:
    """Per-record noise from first differences (robust to the trend and the odd jump)."""
    d = np.diff(v)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def rise_z(v: np.ndarray) -> float:
    """Last quarter's mean over the first quarter's, in standard errors of the run's own
    per-record noise (the wild corpus's label rule for a learning run, > 3)."""
    q = max(2, len(v) // 4)
    return float((v[-q:].mean() - v[:q].mean()) / (noise(v) * math.sqrt(2 / q)))


def at(s, step: int) -> int:
    """Index of the first record at or after ``step``."""
    return int(np.searchsorted(s.steps, step))


# -- deterministic ---------------------------------------------------------------------------------


@pytest.mark.parametrize("family", list(fam.FAMILIES))
def test_same_arguments_same_run(family: str) -> None:
    a, la = fam.make(family, 7)
    b, lb = fam.make(family, 7)
    assert la == lb
    assert a.names() == b.names()
    for n in a.names():
        sa, sb = a.series(n), b.series(n)
        assert np.array_equal(sa.steps, sb.steps)
        assert np.array_equal(sa.values, sb.values, equal_nan=True)
    c, _ = fam.make(family, 8)
    r7, r8 = series(a, *REWARD), series(c, *REWARD)
    assert len(r7) != len(r8) or not np.array_equal(r7.values, r8.values, equal_nan=True)


def test_grid_covers_every_family_and_severity() -> None:
    labels = [lab for _, lab in fam.grid(seeds=1, length=60)]
    assert {lab.family for lab in labels} == set(fam.FAMILIES)
    broken = {(lab.family, lab.severity) for lab in labels if not lab.healthy}
    assert broken == {(f, s) for f in fam.BROKEN for s in fam.SEVERITIES}
    assert all(lab.onset is None and not lab.verdicts for lab in labels if lab.healthy)
    assert all(lab.onset is not None and lab.verdicts for lab in labels if not lab.healthy)


def test_pinned_layout_and_length() -> None:
    data, lab = fam.make("plain", 1, length=123, cadence=1, framework="verl", metrics="full")
    assert (lab.length, lab.cadence, lab.framework) == (123, 1, "verl")
    assert data.format == "verl" and data.last_step == 123
    assert data.original["train/entropy"] == "actor/entropy"  # the framework's own key


def test_bad_arguments_name_what_was_expected() -> None:
    with pytest.raises(ValueError, match="unknown family 'nope'"):
        fam.make("nope", 0)
    with pytest.raises(ValueError, match="severity: expected one of"):
        fam.make("kl_drift", 0, severity="awful")
    with pytest.raises(ValueError, match="no layout logs"):
        fam.make("stall", 0, framework="trl")


# -- healthy by construction -----------------------------------------------------------------------

LEARNING = [f for f in fam.HEALTHY if f != "mastered"]


@pytest.mark.parametrize("family", LEARNING)
@pytest.mark.parametrize("seed", SEEDS)
def test_healthy_reward_rises_beyond_its_noise(family: str, seed: int) -> None:
    data, lab = fam.make(family, seed)
    r = series(data, *REWARD).values
    assert np.all(np.isfinite(r))
    assert rise_z(r) > 3, (lab.name, rise_z(r))


@pytest.mark.parametrize("seed", SEEDS)
def test_mastered_reaches_its_ceiling_and_stays(seed: int) -> None:
    data, lab = fam.make("mastered", seed)
    lo, hi = lab.params["scale"]
    r = (series(data, *REWARD).values - lo) / (hi - lo)
    tail = r[len(r) * 6 // 10 :]  # the last 40%: at the ceiling, no longer moving
    half = len(tail) // 2
    assert tail.mean() > 0.9 and abs(tail[half:].mean() - tail[:half].mean()) < 0.03, lab.name


@pytest.mark.parametrize("family", list(fam.HEALTHY))
@pytest.mark.parametrize("seed", SEEDS)
def test_healthy_levels_stay_in_real_ranges(family: str, seed: int) -> None:
    data, lab = fam.make(family, seed)
    g = data.series("train/grad_norm")
    if g is not None:  # heavy-tailed, not spiking: real healthy max/median 1.4-5.1
        assert g.values.max() / np.median(g.values) < 8, lab.name
    t = data.series("response/truncated_rate")
    if t is not None and family != "transient_truncation":
        assert np.median(t.values) < 0.3, lab.name
    for name in ("train/ref_kl", "train/mismatch_kl", "train/clip_frac"):
        s = data.series(name)
        if s is not None:
            line = {"train/ref_kl": 1.2, "train/mismatch_kl": 0.02, "train/clip_frac": 0.2}[name]
            assert s.values.max() < line, (lab.name, name, s.values.max())
    lag = data.series("freshness/lag_mean")
    if lag is not None:
        assert lag.values.max() <= lab.params.get("lag_cap", 0) + 1e-9, lab.name


@pytest.mark.parametrize("seed", SEEDS)
def test_sharpening_entropy_ends_at_half_to_four_fifths(seed: int) -> None:
    data, lab = fam.make("sharpening", seed)
    e = series(data, *ENTROPY).values
    k = max(2, len(e) // 10)
    ratio = np.median(e[-k:]) / np.median(e[:k])
    assert 0.45 < ratio < 0.85, (lab.name, ratio)


@pytest.mark.parametrize("seed", SEEDS)
def test_transient_truncation_falls_away(seed: int) -> None:
    data, lab = fam.make("transient_truncation", seed)
    t = series(data, "response/truncated_rate").values
    assert t[0] > 0.4 and t[len(t) // 2 :].max() < 0.25, (lab.name, t[0])


@pytest.mark.parametrize("seed", SEEDS)
def test_shaping_component_rises_with_the_task(seed: int) -> None:
    data, lab = fam.make("shaping", seed)
    comps = [
        n
        for n in data.canonical_names()
        if n.startswith(("rollout/", "reward/component/")) and not n.endswith("/std")
    ]
    assert len(comps) == 2, (lab.name, data.names())
    fmt = next(series(data, n).values for n in comps if "format" in n)
    task = next(series(data, n).values for n in comps if "correct" in n)
    assert rise_z(task) > 2 and fmt[-5:].mean() > fmt[:3].mean()


# -- labels where the generator put them -----------------------------------------------------------


def _before_after(data, name: str | tuple[str, ...], onset: int) -> tuple[np.ndarray, np.ndarray]:
    s = series(data, *((name,) if isinstance(name, str) else name))
    i = at(s, onset)
    return s.values[:i], s.values[i:]


def _signature(family: str, data, lab: fam.Label) -> tuple[bool, bool]:
    """(the failure shows after the onset, nothing of it before) for one broken run."""
    on = lab.onset
    assert on is not None
    if family == "stall":
        return data.info["status"] == "running" and data.last_step == on, True
    if family == "crash":
        crashed = data.info.get("status") == "crashed" or any(
            e.kind in ("traceback", "oom") for e in data.events
        )
        return crashed and data.last_step == on, True
    if family == "nan":
        bad = {
            n: int(s.steps[~np.isfinite(s.values)][0])
            for n in data.canonical_names()
            if (s := data.series(n)) is not None and not np.all(np.isfinite(s.values))
        }
        return bool(bad) and min(bad.values()) >= on, min(bad.values()) < on + lab.cadence
    if family == "entropy_collapse":
        b, a = _before_after(data, ENTROPY, on)
        return a[-1] < 0.45 * b[-1], b.min() > 0.6 * b[0]
    if family == "kl_drift":
        b, a = _before_after(data, "train/ref_kl", on)
        return a.max() > 2 * max(b.max(), lab.params["k1"]), True
    if family == "truncation":
        b, a = _before_after(data, "response/truncated_rate", on)
        return a[-5:].mean() > 0.25, np.median(b) < 0.3
    if family == "length_collapse":
        b, a = _before_after(data, "response/length_mean", on)
        return a[-1] < 0.6 * np.median(b[-5:]), True
    if family == "grad_spikes":
        b, a = _before_after(data, "train/grad_norm", on)
        med = np.median(b)
        return a[0] > 6 * med, b.max() < 8 * med
    if family == "clip_saturation":
        b, a = _before_after(data, "train/clip_frac", on)
        return a[-1] > 0.2, b.max() < 0.2
    if family == "mismatch":
        name = next(
            n for n in ("train/mismatch_kl", "train/logprob_abs_diff") if data.series(n) is not None
        )
        b, a = _before_after(data, name, on)
        return a[-1] > 3 * np.median(b), b.max() < 3 * np.median(b)
    if family == "no_signal":
        s = data.series("groups/signal_fraction")
        if s is None:  # TRL: frac_reward_zero_std
            s = data.series("frac_reward_zero_std")
            v = 1 - s.values
        else:
            v = s.values
        i = at(s, on)
        return v[i:].max() <= 0.36, i == 0 or v[:i].min() > 0.3
    if family == "exploit":
        ev = sorted((e["step"], e["score"]) for e in data.evals) or [
            (int(st), float(x)) for st, x in zip(*series(data, "eval/heldout/score"))
        ]
        r = series(data, *REWARD)
        lo, hi = lab.params["scale"]
        rv = (r.values - lo) / (hi - lo)
        return rv[-5:].mean() > 0.85 and len(ev) >= 2, True
    if family == "component_exploit":
        names = [
            n
            for n in data.canonical_names()
            if n.startswith(("rollout/", "reward/component/")) and not n.endswith("/std")
        ]
        fb, fa = _before_after(data, next(n for n in names if "format" in n), on)
        tb, ta = _before_after(data, next(n for n in names if "correct" in n), on)
        lo, hi = lab.params["scale"]
        third = (hi - lo) / 3  # the format component's share of the scale
        climbs = fa[-5:].mean() - fb[-5:].mean() > 0.3 * third
        task_stops = ta[-5:].mean() <= tb[-5:].mean() + 0.05 * (hi - lo)
        return climbs and task_stops, fb.max() - fb.min() < 0.3 * third
    if family == "plateau":
        return abs(rise_z(series(data, *REWARD).values)) < 4 or lab.severity == "gross", True
    raise AssertionError(f"no signature for {family}")


@pytest.mark.parametrize("family", list(fam.BROKEN))
@pytest.mark.parametrize("severity", fam.SEVERITIES)
def test_failure_starts_at_its_onset(family: str, severity: str) -> None:
    for seed in range(3):
        data, lab = fam.make(family, seed, severity=severity)
        assert lab.severity == severity and set(lab.verdicts) <= set(VERDICTS)
        assert 0 < lab.onset <= data.last_step
        shows, clean_before = _signature(family, data, lab)
        assert shows, (lab.name, "the failure does not show after its onset")
        assert clean_before, (lab.name, "the failure shows before its onset")


def test_severity_orders_the_failure() -> None:
    """Gross is further from healthy than moderate, moderate than mild (same seed)."""
    for family, name, worse in (
        ("entropy_collapse", ENTROPY, "lower"),
        ("kl_drift", ("train/ref_kl",), "higher"),
        ("clip_saturation", ("train/clip_frac",), "higher"),
    ):
        ends = []
        for sev in fam.SEVERITIES:
            data, _ = fam.make(family, 0, severity=sev, length=200)
            ends.append(float(series(data, *name).values[-1]))
        order = sorted(ends, reverse=worse == "lower")
        assert ends == order, (family, ends)


# -- files -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "framework"),
    [("sharpening", "trl"), ("kl_drift", "verl"), ("exploit", "native"), ("crash", "verl")],
)
def test_written_files_read_back_as_the_run(family: str, framework: str, tmp_path: Path) -> None:
    data, lab = fam.make(family, 2, framework=framework)
    path, lab2 = fam.write(family, 2, tmp_path, framework=framework)
    assert lab2 == lab
    got = read(path)
    assert got.format.startswith(framework if framework != "native" else "rlvitals")
    assert set(got.canonical_names()) == set(data.canonical_names())
    for n in data.canonical_names():
        a, b = data.series(n), got.series(n)
        assert np.array_equal(a.steps, b.steps), n
        assert np.allclose(a.values, b.values, equal_nan=True, rtol=1e-9), n
    assert len(got.events) == len(data.events)
    assert got.info.get("status") == data.info.get("status")


def _repeated(folder: Path) -> dict[int, float]:
    """Step -> share of attempts giving the family's one repeated reply."""
    import json

    out = {}
    for p in sorted((folder / "transcripts").glob("step-*.json")):
        atts = json.loads(p.read_text())
        same = sum(a["generations"][0]["completion"] == fam.REPEATED for a in atts)
        out[int(p.stem.split("-")[1])] = same / len(atts)
    return out


def test_repeated_replies_write_a_few_repeated_replies(tmp_path: Path) -> None:
    path, lab = fam.write("repeated_replies", 1, tmp_path)
    share = _repeated(path)
    assert len(share) == len(lab.params["times"])
    mean = float(np.mean(list(share.values())))
    assert 0.5 * lab.params["repeated_share"] < mean < 1.5 * lab.params["repeated_share"] < 0.16


def test_collapsing_replies_start_at_the_onset(tmp_path: Path) -> None:
    path, lab = fam.write("entropy_collapse", 0, tmp_path, severity="gross", framework="native")
    share = _repeated(path)
    assert max(v for s, v in share.items() if s < lab.onset) == 0
    assert np.mean([v for s, v in share.items() if s >= lab.params["last_step"] - 5]) > 0.6


@pytest.mark.parametrize("length", [20, 2000])
def test_lengths_from_20_to_2000_updates(length: int) -> None:
    for family in fam.FAMILIES:
        data, lab = fam.make(family, 0, length=length)
        assert lab.length == length and data.last_step <= length
        if lab.healthy and family != "mastered":
            assert rise_z(series(data, *REWARD).values) > 3, lab.name
        if not lab.healthy:
            assert 0 < lab.onset <= data.last_step, lab.name
    drawn = [fam.make("plain", s, length=(20, 2000))[1].length for s in range(30)]
    assert min(drawn) >= 20 and max(drawn) <= 2000 and len(set(drawn)) > 20


def test_benchmark_scores_found_delay_and_false_alarms() -> None:
    """families.py's scoring on hand-made judgements: found, delays, prefix false alarms,
    per-rule precision."""
    import families

    sick = fam.Label("kl_drift", 0, False, "mild", 50, ("drift",), 100, 1, "verl", "full")
    well = fam.Label("plain", 0, True, None, None, (), 100, 1, "verl", "full")
    res_sick = {
        "final": [("reference", "drift", 57), ("reward", "plateau", 10)],
        "prefixes": {30: [("reward", "plateau")], 60: [], 70: [("reference", "drift")]},
    }
    res_well = {"final": [], "prefixes": {30: [("reward", "plateau")], 40: []}}
    s = families.score_ours(sick, res_sick, 100)
    assert s["found"] and s["delay"] == 7 and s["live_delay"] == 20
    assert (s["prefix_alarms"], s["prefix_judged"]) == (1, 1)  # 30 is before the onset
    w = families.score_ours(well, res_well, 100)
    assert not w["alarm"] and (w["prefix_alarms"], w["prefix_judged"]) == (1, 2)
    rows = [
        {"label": sick, "ours_raw": res_sick},
        {"label": well, "ours_raw": res_well},
    ]
    table = {r["rule"]: r for r in families.rules_table(rows)}
    assert table["reference:drift"]["found"] == 1 and table["reference:drift"]["precision"] == 1
    assert (
        table["reward:plateau"]["other"] == 1 and table["reward:plateau"]["healthy_prefixes"] == 2
    )
    assert table["reward:plateau"]["prefix_precision"] == 0.0


def test_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    import json

    import families

    out = tmp_path / "f.json"
    md = tmp_path / "f.md"
    md.write_text("# x\n<!-- families.py results -->\nold\n<!-- end of results -->\ntail\n")
    argv = ["--seeds", "1", "--family", "nan", "--family", "plain", "--length", "45"]
    assert families.main([*argv, "--no-rldoctor", "--json", str(out), "--md", str(md)]) == 0
    runs = json.loads(out.read_text())["runs"]
    assert len(runs) == 4 and {r["family"] for r in runs} == {"nan", "plain"}
    text = md.read_text()
    assert "old" not in text and text.endswith("tail\n") and "| nan | gross | 1 |" in text
    assert "--seeds 1 --family nan" in text and "f.json" not in text
    bad = ["--seeds", "1", "--family", "plain", "--no-rldoctor", "--set", "nope=1"]
    assert families.main(bad) == 2
