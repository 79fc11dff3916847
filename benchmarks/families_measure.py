"""What real runs look like, measured: the statistics the families' generator (``_families.py``)
draws its runs from.

    python benchmarks/families_measure.py [--wild DIR] [--ref DIR ...] [--json FILE]

Reads every run of ``benchmarks/corpus/`` (its manifest), the wild corpus in place
(``../shared/corpus/wild/manifest.json``; never copied) and reference-trainer run directories
(``--ref``, any number; ``tests/data/runs/*`` always), and prints per run and per source:

- records, first/last step and the logging cadence (median step gap);
- reward: level at the start and the end (first/last fifth), range (p95 - p5), per-update
  noise (robust: 1.4826 * MAD of first differences / sqrt 2), noise relative to the range,
  the lag-1 autocorrelation of what is left after a running median (5), and the rise in
  standard errors (last quarter against first, noise from the differences);
- entropy: start level, end/start, per-update noise relative to the level;
- KL to the reference: median and max; mismatch KL: median;
- grad norm: median, p90/median, p99/median, max/median (heavy tails);
- length: start level, end/start, noise relative to level; truncation: first, median, max;
- clip fraction: median, max; signal fraction: median;
- which metrics exist (reward only; reward and KL; the full set).

The figures it printed on 2026-12-07 are summarised in ``benchmarks/families.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

REWARD = ("reward/mean_with_unusable", "reward/mean")
ENTROPY = ("train/entropy", "sampling/entropy_estimate")


def _first(data: Any, names: tuple[str, ...]) -> np.ndarray | None:
    for n in names:
        s = data.series(n)
        if s is not None and len(s.finite()) >= 3:
            return s.finite().values
    return None


def noise(v: np.ndarray) -> float:
    """Per-update noise: 1.4826 * MAD of first differences / sqrt 2 (robust to a trend and
    to the odd jump)."""
    d = np.diff(v)
    if len(d) < 2:
        return float("nan")
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def lag1(v: np.ndarray) -> float:
    """Lag-1 autocorrelation of what is left after a running median of 5."""
    if len(v) < 12:
        return float("nan")
    pad = np.pad(v, 2, mode="edge")
    med = np.median(np.lib.stride_tricks.sliding_window_view(pad, 5), axis=1)
    r = v - med
    r = r - r.mean()
    den = float(np.sum(r * r))
    return float(np.sum(r[1:] * r[:-1]) / den) if den > 0 else float("nan")


def reward_stats(v: np.ndarray) -> dict[str, float]:
    n = len(v)
    k = max(1, n // 5)
    q = max(2, n // 4)
    sig = noise(v)
    rng = float(np.percentile(v, 95) - np.percentile(v, 5))
    rise = float(v[-q:].mean() - v[:q].mean())
    se = sig * math.sqrt(2 / q) if sig > 0 else float("nan")
    return {
        "start": float(v[:k].mean()),
        "end": float(v[-k:].mean()),
        "min": float(v.min()),
        "max": float(v.max()),
        "range": rng,
        "noise": sig,
        "noise_rel_range": sig / rng if rng > 0 else float("nan"),
        "lag1": lag1(v),
        "rise_z": rise / se if se and se > 0 else float("nan"),
    }


def level_stats(v: np.ndarray) -> dict[str, float]:
    n = len(v)
    k = max(1, min(10, n // 5))
    start, end = float(np.median(v[:k])), float(np.median(v[-k:]))
    lev = float(np.median(np.abs(v))) or float("nan")
    return {
        "start": start,
        "end_over_start": end / start if start else float("nan"),
        "noise_rel": noise(v) / lev,
    }


def measure(data: Any) -> dict[str, Any]:
    """The statistics of one run (see the module docstring)."""
    steps = data.steps()
    out: dict[str, Any] = {"records": len(steps)}
    if len(steps) >= 2:
        out["first_step"], out["last_step"] = int(steps[0]), int(steps[-1])
        out["cadence"] = float(np.median(np.diff(steps)))
    have = set(data.canonical_names())
    out["has"] = sorted(
        k
        for k, names in {
            "reward": REWARD,
            "entropy": ENTROPY,
            "ref_kl": ("train/ref_kl",),
            "mismatch": ("train/mismatch_kl", "train/logprob_abs_diff", "train/mismatch_k1"),
            "grad_norm": ("train/grad_norm",),
            "length": ("response/length_mean",),
            "truncation": ("response/truncated_rate",),
            "clip": ("train/clip_frac",),
            "groups": ("groups/signal_fraction", "reward/group_std_mean"),
            "components": tuple(n for n in have if n.startswith("rollout/")),
        }.items()
        if any(n in have for n in names)
    )
    r = _first(data, REWARD)
    if r is not None:
        out["reward"] = reward_stats(r)
    e = _first(data, ENTROPY)
    if e is not None and np.median(np.abs(e)) > 0:
        out["entropy"] = level_stats(e)
    ln = _first(data, ("response/length_mean",))
    if ln is not None and np.median(ln) > 0:
        out["length"] = level_stats(ln)
    for key, name in (
        ("ref_kl", "train/ref_kl"),
        ("mismatch_kl", "train/mismatch_kl"),
        ("truncation", "response/truncated_rate"),
        ("clip", "train/clip_frac"),
        ("signal_fraction", "groups/signal_fraction"),
    ):
        v = _first(data, (name,))
        if v is not None:
            out[key] = {
                "first": float(v[0]),
                "median": float(np.median(v)),
                "max": float(v.max()),
            }
    g = _first(data, ("train/grad_norm",))
    if g is not None:
        g = g[g > 0]
        if len(g) >= 5:
            med = float(np.median(g))
            out["grad_norm"] = {
                "median": med,
                "p90_over_median": float(np.percentile(g, 90)) / med,
                "p99_over_median": float(np.percentile(g, 99)) / med,
                "max_over_median": float(g.max()) / med,
                "noise_rel": noise(np.log(g)),  # per-update noise of log grad norm
            }
    return out


def corpus_runs() -> list[tuple[str, str, str, Any]]:
    """(source, name, label, RunData) for the development corpus."""
    import _corpus

    out = []
    for e in _corpus.load_manifest():
        try:
            data = _corpus.read_entry(e)
        except Exception as exc:  # a run we cannot read is reported, not fatal
            print(f"skip {e['path']}: {exc}", file=sys.stderr)
            continue
        out.append((f"corpus/{_corpus.source(e)}", e["path"], e["label"], data))
    return out


def wild_runs(root: Path) -> list[tuple[str, str, str, Any]]:
    """(source, name, labels, RunData) for the wild corpus, read in place."""
    from rlvitals import read

    man = root / "manifest.json"
    if not man.exists():
        return []
    out = []
    for e in json.loads(man.read_text())["files"]:
        labels = ",".join(lab["label"] for lab in e["labels"])
        try:
            data = read(root / e["path"])
        except Exception as exc:  # a file we cannot read is reported, not fatal
            print(f"skip {e['path']}: {exc}", file=sys.stderr)
            continue
        out.append(("wild", e["path"], labels, data))
    return out


def ref_runs(dirs: list[Path]) -> list[tuple[str, str, str, Any]]:
    from rlvitals import read

    out = []
    for d in dirs:
        for run in sorted(p.parent for p in d.rglob("steps.jsonl")):
            data = read(run)
            out.append(("reference", run.name, str(data.info.get("fault") or "healthy"), data))
    return out


def _q(xs: list[float]) -> str:
    xs = sorted(x for x in xs if isinstance(x, float) and math.isfinite(x))
    if not xs:
        return "-"
    if len(xs) < 3:
        return " / ".join(f"{x:.3g}" for x in xs)
    p = np.percentile(xs, [10, 50, 90])
    return f"{p[0]:.3g} / {p[1]:.3g} / {p[2]:.3g} (n={len(xs)})"


SUMMARY = [
    ("records", ("records",)),
    ("cadence", ("cadence",)),
    ("reward start", ("reward", "start")),
    ("reward range", ("reward", "range")),
    ("reward noise/range", ("reward", "noise_rel_range")),
    ("reward lag-1 autocorr", ("reward", "lag1")),
    ("reward rise z", ("reward", "rise_z")),
    ("entropy start", ("entropy", "start")),
    ("entropy end/start", ("entropy", "end_over_start")),
    ("entropy noise/level", ("entropy", "noise_rel")),
    ("ref KL median", ("ref_kl", "median")),
    ("ref KL max", ("ref_kl", "max")),
    ("mismatch KL median", ("mismatch_kl", "median")),
    ("grad norm median", ("grad_norm", "median")),
    ("grad p99/median", ("grad_norm", "p99_over_median")),
    ("grad max/median", ("grad_norm", "max_over_median")),
    ("log grad noise", ("grad_norm", "noise_rel")),
    ("length start", ("length", "start")),
    ("length end/start", ("length", "end_over_start")),
    ("length noise/level", ("length", "noise_rel")),
    ("truncation first", ("truncation", "first")),
    ("truncation median", ("truncation", "median")),
    ("clip median", ("clip", "median")),
    ("clip max", ("clip", "max")),
    ("signal fraction median", ("signal_fraction", "median")),
]


def _get(m: dict[str, Any], path: tuple[str, ...]) -> Any:
    for p in path:
        if not isinstance(m, dict) or p not in m:
            return None
        m = m[p]
    return float(m) if isinstance(m, (int, float)) else None


def summary(rows: list[dict[str, Any]], healthy_only: bool) -> str:
    """p10 / median / p90 of each statistic per source (healthy-labelled runs only, or all)."""
    sources = sorted({r["source"] for r in rows})
    lines = ["| statistic | " + " | ".join(sources) + " |", "|---" * (len(sources) + 1) + "|"]
    for title, path in SUMMARY:
        cells = []
        for src in sources:
            rs = [r for r in rows if r["source"] == src]
            if healthy_only:
                rs = [r for r in rs if "healthy" in r["label"]]
            cells.append(_q([_get(r["stats"], path) for r in rs]))
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def presence(rows: list[dict[str, Any]]) -> str:
    """How many runs carry which metric sets."""
    sets: dict[str, int] = {}
    for r in rows:
        has = set(r["stats"]["has"]) - {"components"}
        if has <= {"reward"}:
            k = "reward only"
        elif has <= {"reward", "ref_kl", "length", "grad_norm"}:
            k = "reward + KL/length/grad (a few)"
        else:
            k = "the full set (entropy, KL, grad, length, clip, ...)"
        sets[k] = sets.get(k, 0) + 1
    return "\n".join(f"- {k}: {v} runs" for k, v in sorted(sets.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wild", type=Path, default=HERE.parent.parent / "shared/corpus/wild")
    ap.add_argument("--ref", type=Path, action="append", default=[])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--all", action="store_true", help="summarise every run, not only healthy")
    args = ap.parse_args(argv)
    runs = corpus_runs() + wild_runs(args.wild)
    runs += ref_runs([HERE.parent / "tests/data/runs", *args.ref])
    rows = [
        {"source": src, "name": name, "label": label, "stats": measure(data)}
        for src, name, label, data in runs
    ]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(f"{len(rows)} runs\n")
    print(summary(rows, healthy_only=not args.all))
    print("\nmetric sets:\n" + presence(rows))
    print(
        "\nrecords: "
        + _q([float(r["stats"]["records"]) for r in rows])
        + "; reward ranges (all runs): "
        + ", ".join(
            f"{r['stats']['reward']['min']:.2g}..{r['stats']['reward']['max']:.2g}"
            for r in rows
            if "reward" in r["stats"] and r["source"] in ("wild", "corpus/public")
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
