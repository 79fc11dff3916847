"""The dashboard both HTML views share: the plots, the data they draw, the page around them.

The HTML report (``report.py``) and the live page (``server.py``) are one page: the same
inline JavaScript (``assets/``) draws the same plots from the same JSON. The report embeds the
JSON; the live page receives it over server-sent events. This module says which plots exist
(the plots a GRPO run is usually read by, on the canonical metrics of docs/metrics.md)
and turns a run, its Report and a baseline into that JSON.

Run text is untrusted: it travels only as JSON, embedded with ``<``, ``>``, ``&`` and
U+2028/U+2029 escaped, and the page puts it in the DOM with ``textContent``, never as HTML.
The page's Content-Security-Policy allows only its own inline scripts (by hash) and no
network access at all for the report.
"""

from __future__ import annotations

import base64
import bisect
import fnmatch
import hashlib
import heapq
import json
import math
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from .. import __version__
from ..checks.base import VERDICTS, Report
from ..errors import ReadError
from ..jsonio import clean
from ..model import RunData
from ..safe import json_for_html, unsurrogate
from ..safe import line as safe_line
from ..schema import is_canonical, plot_members
from ..source import transcript_store

__all__ = [
    "PLOTS",
    "Plot",
    "load_baseline",
    "load_transcripts",
    "page_html",
    "page_json",
    "run_payload",
    "safe_json",
    "series_payload",
    "transcript_steps",
]


RETRIES = "rollouts/retries"
REWARD_LENGTH = "transcripts/reward_length_spearman"
# Derived transcript series drawn whatever their values (the rest only once a flag was raised).
_FLAG_TOTALS = ("transcripts/flagged_rate", "transcripts/repetition_rate")


@dataclass(frozen=True)
class Plot:
    """One dashboard plot: the metrics it draws (exact names or ``*`` patterns) and how."""

    id: str
    title: str
    metrics: tuple[str, ...]
    help: str
    log: bool = False
    refs: tuple[tuple[float, str], ...] = field(default_factory=tuple)

    def matches(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, m) if "*" in m else name == m for m in self.metrics)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "metrics": list(self.metrics),
            "help": self.help,
            "log": self.log,
            "refs": [{"y": y, "label": label} for y, label in self.refs],
        }


# In the seeds' reading order: reward and learning signal first, then rejected groups,
# failures, episodes, sampler/trainer agreement, policy, and the system layer last.
PLOTS: tuple[Plot, ...] = (
    Plot(
        "reward",
        "Reward and held-out score",
        plot_members("reward"),
        "reward/mean: attempts the update trained on; mean_with_unusable adds rejected groups "
        "(the full picture once whole groups are solved or failed). Held-out scores are dots: "
        "train reward rising while held-out stays flat is the exploit signature.",
    ),
    Plot(
        "signal",
        "Learning signal",
        plot_members("signal"),
        "GRPO learns only from spread within a group (group_std_mean) and from groups whose "
        "attempts disagree (signal_fraction). reward/std is batch spread, not learning signal.",
    ),
    Plot(
        "components",
        "Reward components and sources",
        plot_members("components"),
        "Each reward function's mean (TRL rewards/<f>/mean, ...) and the reward per data "
        "source or environment: a total can stay flat while one part rises and another "
        "falls, or one source collapses under a healthy mix.",
    ),
    Plot(
        "groups",
        "Rejected groups",
        plot_members("groups"),
        "Groups per update. Many rejected at the start: tasks too easy (all solved) or too hard "
        "(none solved). Rising later: mastered or collapsed; read it with "
        "reward/mean_with_unusable.",
    ),
    Plot(
        "failures",
        "Failed attempts",
        tuple(m for m in plot_members("failures") if m != RETRIES),
        "Attempts that never reached training, by reason. A trickle is normal; a burst means "
        "the environment or grader is broken.",
    ),
    Plot(
        "retries",
        "Attempt retries",
        (RETRIES,),
        "Tries an attempt needed beyond its first (a grader or sandbox call repeated). A "
        "retried attempt that then succeeded trained as usual: these are not failures.",
    ),
    Plot(
        "episode_counts",
        "Episode endings (count per update)",
        ("rollout/*/*",),
        "How many of the update's episodes ended each way (rollout/<key>/<label>, a count): "
        "max_turns or another limit rising with a flat reward means the agent is running out "
        "of room. Counts, drawn apart from the rates and means below.",
    ),
    Plot(
        "episodes",
        "Episodes (agent and grader metadata)",
        plot_members("episodes"),
        "Episode metadata as means and rates (turns, booleans as rates in [0, 1]) and every "
        "reward component the grader returns.",
    ),
    Plot(
        "length",
        "Response length",
        plot_members("length"),
        "Mean generated tokens per attempt. A sudden drop with falling entropy is collapse; "
        "steady growth with flat held-out score can be length exploitation.",
    ),
    Plot(
        "truncation",
        "Truncation",
        plot_members("truncation"),
        "Share of attempts that hit the token limit.",
        refs=((0.05, "5%"), (0.15, "15%")),
    ),
    Plot(
        "mismatch",
        "Sampler/trainer mismatch",
        plot_members("mismatch"),
        "KL(sampler ‖ trainer) should stay near 0 and flat; a rising KL means stale weights "
        "or a numerics mismatch (log scale; values ≤ 0 are not drawn).",
        log=True,
        refs=((0.01, "0.01"), (0.1, "0.1")),
    ),
    Plot(
        "mismatch_tail",
        "Mismatch per sequence (the tail)",
        plot_members("mismatch_tail"),
        "Each sequence's token mean of exp(|Δ|) (1 = identical): its median, 90th percentile "
        "and maximum per update, and the share of sequences past 1.05. A mean under its "
        "line can hide a tenth of the sequences far off; the p90 shows them.",
        log=True,
        refs=((1.02, "1.02"), (1.05, "1.05")),
    ),
    Plot(
        "ratio",
        "Importance ratio (sampler correction)",
        plot_members("ratio"),
        "pi_trainer / pi_sampler per token (raw: mean, median, extremes) and the correction "
        "weight as the trainer logs it. Near 1 when the two agree; the kept mass (below 1, "
        "max 1) when the sampler truncates; a weight pinned at its cap or at 0 was logged "
        "after the correction's bounds.",
        refs=((1.0, "1"),),
    ),
    Plot(
        "ess",
        "Importance weights (ESS)",
        plot_members("ess"),
        "Effective sample size of the sampler→trainer weights: 1 means identical. The "
        "sequence-level ESS is far more sensitive than the token-level one.",
        refs=((0.5, "0.5"), (0.3, "0.3")),
    ),
    Plot(
        "freshness",
        "Freshness (lag in updates)",
        plot_members("freshness"),
        "How many updates behind the trainer each trained attempt's sampler was (async mode).",
    ),
    Plot(
        "entropy",
        "Entropy",
        plot_members("entropy"),
        "Judged relative to the run's own start, never against an absolute threshold. Falling "
        "sharply with repetitive transcripts means collapse (log scale).",
        log=True,
    ),
    Plot(
        "trust",
        "Trust region",
        plot_members("trust"),
        "Share of clipped tokens and the old-vs-new policy KL within each update; ref_kl is "
        "the KL to the reference policy.",
    ),
    Plot(
        "flag_corr",
        "Reward-length correlation",
        (REWARD_LENGTH,),
        "Spearman correlation of reward with reply length within each update (-1 to 1): "
        "strongly positive while replies grow and held-out does not is length exploitation.",
        refs=((0.0, "0"),),
    ),
    Plot(
        "transcripts",
        "Transcript flags",
        plot_members("transcripts"),
        "Share of each update's episodes whose transcripts raise a flag (rewarded empty "
        "answers, one reply to many tasks...), for the flags raised at least once: read the "
        "flagged attempts below.",
    ),
    Plot(
        "grad",
        "Gradient norm",
        plot_members("grad"),
        "Gradient norm before clipping (log scale). Collapses often arrive as grad-norm "
        "explosions together with a rising mismatch.",
        log=True,
    ),
    Plot(
        "loss",
        "Loss and learning rate",
        plot_members("loss"),
        "As logged by the trainer.",
    ),
    Plot(
        "timing",
        "Time per update and per attempt",
        plot_members("timing"),
        "Seconds per update by phase, and the attempt latency distribution, so a system "
        "regression is not mistaken for a learning problem.",
    ),
    Plot(
        "throughput",
        "Throughput",
        plot_members("throughput"),
        "Generated tokens per wall second of the update.",
    ),
    Plot(
        "system",
        "Other system metrics",
        plot_members("system"),
        "Utilisation and other figures a framework logs under perf/ (MFU, GPU memory...).",
    ),
)


def plot_metrics(names: list[str]) -> dict[str, list[str]]:
    """Plot id -> the run's metric names it draws."""
    out: dict[str, list[str]] = {p.id: [] for p in PLOTS}
    for name in names:
        for p in PLOTS:
            if p.matches(name):
                out[p.id].append(name)
                break
    return out


# -- JSON ----------------------------------------------------------------------------------

_ENC = msgspec.json.Encoder()
_NONFINITE = {"NaN", "Infinity", "-Infinity"}


def _values(values: np.ndarray) -> list[float | str]:
    out: list[float | str] = values.tolist()
    bad = np.flatnonzero(~np.isfinite(values))
    for i in bad.tolist():
        v = out[i]
        assert isinstance(v, float)
        out[i] = "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return out


def thin(steps: np.ndarray, values: np.ndarray, max_points: int) -> tuple[np.ndarray, ...]:
    """At most about ``max_points`` points that draw like all of them: per bucket of steps its
    lowest and highest value, plus the first and last point and every non-finite one."""
    n = len(steps)
    if n <= max_points:
        return steps, values
    buckets = max(1, max_points // 2)
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    finite = np.isfinite(values)
    keep = [0, n - 1, *np.flatnonzero(~finite).tolist()]
    fv = np.where(finite, values, np.nan)
    for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist()):
        seg = fv[lo:hi]
        if hi > lo and not np.isnan(seg).all():
            keep.append(lo + int(np.nanargmin(seg)))
            keep.append(lo + int(np.nanargmax(seg)))
    idx = np.unique(np.array(keep, dtype=np.int64))
    return steps[idx], values[idx]


def series_payload(
    data: RunData,
    names: list[str],
    since: dict[str, int] | None = None,
    *,
    max_points: int | None = None,
    derived: dict[str, Any] | None = None,
) -> Any:
    """``{name: {"s": steps, "v": values}}``; non-finite values as their strings.

    With ``since`` (name -> how many points the receiver already has), only the new points of
    each series, plus ``"r": true`` where the receiver must replace the series (steps arrived
    out of order, so the old prefix changed). With ``max_points`` (the report), long series
    are thinned to their extremes per bucket (``thin``).
    """
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        s = data.series(name)
        if s is None and derived:
            s = derived.get(name)  # what the checks derived (Report.series)
        if s is None:
            continue
        start = 0
        if since is not None:
            start = since.get(name, 0)
            if start >= len(s):
                continue
        st, va = s.steps[start:], s.values[start:]
        if max_points is not None:
            st, va = thin(st, va, max_points)
        out[name] = {"s": st.tolist(), "v": _values(va)}
    return out


def _escape_surrogates(json_text: str) -> str:
    """JSON text with each lone surrogate (a byte of a name that is not UTF-8) as the text
    ``\\xNN`` (or ``\\uXXXX``), so the page shows it and the JSON stays valid UTF-8."""
    return re.sub(
        "[\ud800-\udfff]",
        lambda m: (
            f"\\\\x{ord(m.group()) - 0xDC00:02x}"
            if 0xDC80 <= ord(m.group()) <= 0xDCFF
            else f"\\\\u{ord(m.group()):04x}"
        ),
        json_text,
    )


def safe_json(value: Any) -> str:
    """JSON that can sit inside ``<script type="application/json">`` whatever the text holds.

    ``<``, ``>`` and ``&`` become ``\\u003c``/``\\u003e``/``\\u0026`` (so neither ``</script>``
    nor ``<!--`` can end or bend the element) and U+2028/U+2029 are escaped too; direction
    overrides, isolates and C1 controls in the text arrive as visible ``\\u202e``
    (``safe.json_for_html``), so they cannot reorder what the page shows.
    """
    try:
        raw = json_for_html(_ENC.encode(value).decode("utf-8"))
    except UnicodeEncodeError:  # a file name that is not UTF-8: its bytes shown as \xNN
        raw = json_for_html(_escape_surrogates(json.dumps(value, ensure_ascii=False)))
    return (
        raw.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def page_json(data: Any) -> bytes:
    """JSON for the live page (its events and API answers): bidi, C1 and separator characters
    in run text arrive as visible ``\\u202e`` text (``safe.json_for_html``), never as characters
    that reorder the page; a file name that is not UTF-8 arrives with its odd bytes as
    ``\\xff`` text."""
    try:
        raw = _ENC.encode(data)
    except UnicodeEncodeError:
        raw = _ENC.encode(unsurrogate(data))
    if raw.isascii():
        return raw
    return json_for_html(raw.decode("utf-8")).encode("utf-8")


def dashboard_metrics(data: RunData, report: Report | None = None) -> list[str]:
    """The metrics the page needs: canonical ones, plus any a finding names."""
    names = [n for n in data.names() if is_canonical(n)]
    if report is not None:
        named = {f.metric for f in report.findings if f.metric}
        names += [
            n
            for n in sorted(report.series)
            if n not in names and (_raised(n, report.series[n]) or n in named)
        ]
        for f in report.findings:
            if f.metric and f.metric not in names and data.has(f.metric):
                names.append(f.metric)
    return names


def _raised(name: str, series: Any) -> bool:
    """Whether a derived series is worth a line: a transcript flag's rate only where the flag
    was raised at least once (19 flat lines at 0 hid the one that mattered)."""
    if not name.startswith("transcripts/") or name in _FLAG_TOTALS or name == REWARD_LENGTH:
        return True
    values = np.asarray(getattr(series, "values", ()), dtype=float)
    return bool(np.any(values[np.isfinite(values)] != 0))


_INFO_SKIP = {"config"}


def run_summary(run_id: str, data: RunData, report: Report | None) -> dict[str, Any]:
    """What the runs list shows: name, status, verdict, last step, times."""
    info = data.info or {}
    t = data.series("time")
    last_time = float(t.values[-1]) if t is not None and len(t) else None
    hb = data.heartbeats[-1] if data.heartbeats else None
    return clean(
        {
            "id": run_id,
            "name": str(info.get("name") or Path(data.source).name or data.source),
            "source": data.source,
            "format": data.format,
            "status": info.get("status"),
            "stop_reason": info.get("stop_reason"),
            "created": info.get("created"),
            "last_step": data.last_step,
            "last_time": last_time,
            "heartbeat": hb,
            "verdict": report.verdict if report else None,
            "verdict_text": VERDICTS.get(report.verdict) if report else None,
            "worst": report.worst if report else None,
            "findings": len(report.findings) if report else 0,
        }
    )


def _report_dict(report: Report, source: str) -> dict[str, Any]:
    """The report as the page shows it: each next step with ``RUN`` replaced by the run's
    path, as the terminal prints it."""
    from .check import action_for

    out = clean(report.to_dict())
    for fd, f in zip(out.get("findings") or [], report.findings):
        if isinstance(fd, dict) and fd.get("action"):
            fd["action"] = action_for(f, source)
    return out


def run_payload(
    run_id: str,
    data: RunData,
    report: Report | None,
    *,
    transcripts: dict[int, list[dict[str, Any]]] | None = None,
    transcript_steps: list[dict[str, Any]] | None = None,
    max_points: int | None = None,
) -> dict[str, Any]:
    """Everything the page draws for one run.

    ``transcripts`` (step -> attempts) are embedded (the report); ``transcript_steps`` lists
    the steps the viewer offers (the live page fetches them on demand); ``max_points`` thins
    long series (the report: a file that stays small for runs of any length).
    """
    names = dashboard_metrics(data, report)
    info = {k: v for k, v in (data.info or {}).items() if k not in _INFO_SKIP}
    return {
        **run_summary(run_id, data, report),
        "info": clean(info),
        "series": series_payload(
            data, names, max_points=max_points, derived=report.series if report else None
        ),
        "report": _report_dict(report, data.source) if report else None,
        "transcripts": {str(k): v for k, v in (transcripts or {}).items()},
        "transcript_steps": sorted(transcripts or {})
        if transcript_steps is None
        else transcript_steps,
        "warnings": run_warnings(data, report)[:50],
        "n_warnings": len(run_warnings(data, report)),
    }


def run_warnings(data: RunData, report: Report | None) -> list[str]:
    """The reader's warnings, then what judging found wrong with the run's files (each once)."""
    if report is None or not report.warnings:
        return data.warnings
    return data.warnings + [w for w in report.warnings if w not in data.warnings]


# -- baseline ------------------------------------------------------------------------------

_RANGE_KEYS = (("early_min", "early_max"), ("min", "max"), ("lo", "hi"), ("low", "high"))


def load_baseline(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Healthy ranges from a baseline file (``rlvitals baseline``), ready to shade."""
    from ..baseline import load

    return baseline_ranges(load(path), os.fspath(path))


def baseline_ranges(raw: Any, where: str = "baseline") -> dict[str, Any]:
    """``{metric: {"lo", "hi", "mean_lo", "mean_hi", "until"}}`` from a decoded baseline.

    Reads ``rlvitals.baseline`` files (``{"first_steps": N, "metrics": {name: {"early_min",
    "early_max", "early_mean_min", "early_mean_max", ...}}}``) and tolerates close shapes:
    ``{name: {...}}`` without ``metrics``, ranges under ``min``/``max`` or ``lo``/``hi``, a
    single ``early_mean``. ``until`` is the last step the range holds for (None: the whole
    run). Metrics without a usable range are left out.
    """
    if not isinstance(raw, dict):
        raise ReadError("expected a JSON object with per-metric ranges", path=where)
    metrics = raw.get("metrics", raw)
    if not isinstance(metrics, dict):
        raise ReadError("expected 'metrics' to be an object", path=where)
    window = _num(raw.get("first_steps")) or _num(raw.get("early_steps"))
    out: dict[str, Any] = {}
    for name, spec in metrics.items():
        if not isinstance(spec, dict):
            continue
        lo = hi = None
        for a, b in _RANGE_KEYS:
            lo, hi = _num(spec.get(a)), _num(spec.get(b))
            if lo is not None and hi is not None:
                break
        if lo is None or hi is None:
            continue
        until = _num(spec.get("first_steps")) or _num(spec.get("early_steps")) or window
        mean_lo = _num(spec.get("early_mean_min"))
        mean_hi = _num(spec.get("early_mean_max"))
        if mean_lo is None:
            mean_lo = mean_hi = _num(spec.get("early_mean"))
        out[str(name)] = {
            "lo": min(lo, hi),
            "hi": max(lo, hi),
            "mean_lo": mean_lo,
            "mean_hi": mean_hi,
            "until": None if until is None else until - 1,
        }
    return out


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


# -- transcripts ---------------------------------------------------------------------------
# The transcript viewer shows the attempts of the steps findings point at. Issue 6 brings the
# selection of flagged attempts; a finding whose evidence names ``attempt_ids`` shows those.

MAX_TEXT = 20_000
MAX_ATTEMPTS = 16
MAX_STEPS = 12


def transcript_steps(
    data: RunData, report: Report | None, limit: int = MAX_STEPS, latest: int = 2
) -> list[dict[str, Any]]:
    """The transcript steps to offer: those the findings point at (their first step, the steps
    of the attempts they cite, their other steps; the nearest file at or after each), then the
    latest ones; each ``{"step", "why"}``. The steps are those of the run's transcripts wherever
    they are (``rlvitals.source.transcript_store``: ``transcripts/`` or a framework's sample
    dump)."""
    store = transcript_store(data)
    have = store.steps() if store is not None else []
    if not have:
        return []
    flagged: dict[int, str] = {}
    for f in report.findings if report else []:
        if f.severity == "ok":
            continue
        cited = f.evidence.get("examples") if isinstance(f.evidence, dict) else None
        cited_steps = [e.get("step") for e in cited if isinstance(e, dict)] if cited else []
        for s in [f.first_step, *cited_steps, *f.steps]:
            if not isinstance(s, int) or isinstance(s, bool):
                continue
            i = bisect.bisect_left(have, s)
            near = have[i] if i < len(have) else have[-1]
            flagged.setdefault(near, f"{f.severity}: {f.title}")
    chosen = list(flagged.items())[: max(0, limit - latest)]
    for s in have[-latest:] if latest else []:
        if s not in flagged:
            chosen.append((s, "latest transcripts of the run"))
    return [{"step": s, "why": why} for s, why in chosen]


def flagged_ids(report: Report | None) -> dict[str, list[str]]:
    """The attempts the findings cite, each with the flags it raised (the card names them)."""
    ids: dict[str, list[str]] = {}
    for f in report.findings if report else []:
        ev = f.evidence if isinstance(f.evidence, dict) else {}
        got = ev.get("attempt_ids")
        if not isinstance(got, list):
            continue
        per = {
            str(e.get("attempt_id")): [str(x) for x in e.get("flags") or ()]
            for e in ev.get("examples") or ()
            if isinstance(e, dict)
        }
        every = [str(k) for k in ev.get("flags") or ()] if isinstance(ev.get("flags"), dict) else []
        for a in got:
            names = ids.setdefault(str(a), [])
            for flag in per.get(str(a)) or every or [f.check]:
                if flag not in names:
                    names.append(flag)
    return ids


def _clip(v: Any) -> Any:
    if isinstance(v, str) and len(v) > MAX_TEXT:
        return v[:MAX_TEXT] + f"\n… [{len(v) - MAX_TEXT} more characters not shown]"
    if isinstance(v, list):
        return [_clip(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _clip(x) for k, x in v.items()}
    return v


def load_transcripts(
    data: RunData,
    step: int,
    *,
    flagged: dict[str, list[str]] | set[str] | None = None,
    limit: int = MAX_ATTEMPTS,
    within: str | os.PathLike[str] | None = None,
) -> list[dict[str, Any]] | None:
    """The attempts of one step's transcript file, flagged ones first, then highest reward.

    Read through the one transcript store (``TranscriptStore``: streamed, so a 180 MB file
    costs what the kept attempts cost, not the file). None when the run has no transcript for
    ``step``, or, with ``within``, when the file's real path is outside that folder (a
    symbolic link out of the run). Long texts are cut to ``MAX_TEXT``.
    """
    store = transcript_store(data)
    if store is None or step < 0 or step not in store.steps():
        return None
    p = store.path(step)
    if not p.is_file():
        return None
    if within is not None:
        root = Path(within)
        root = (root if root.is_dir() else root.parent).resolve()
        try:
            real = p.resolve(strict=True)
        except (OSError, RuntimeError):
            return None
        if root not in real.parents:
            return None
    flagged = flagged or set()
    kept: list[tuple[tuple[int, float, int], dict[str, Any]]] = []  # a heap of the worst kept
    n = 0
    for a in store.iter_step(step):
        n += 1
        rv = a.reward if a.reward is not None and math.isfinite(a.reward) else -math.inf
        is_flagged = a.attempt_id in flagged
        # heapq keeps the smallest on top: the entry to drop first when a better one comes.
        rank = (1 if is_flagged else 0, rv, -a.index)
        if len(kept) >= limit and rank <= kept[0][0]:
            continue
        entry = _clip(clean(_entry(a)))
        entry["flagged"] = is_flagged
        if is_flagged and isinstance(flagged, dict):
            entry["flags"] = list(flagged[a.attempt_id])
        if len(kept) < limit:
            heapq.heappush(kept, (rank, entry))
        else:
            heapq.heapreplace(kept, (rank, entry))
    if n == 0 and store.had_problem(step):
        return None
    out = [e for _, e in sorted(kept, key=lambda t: t[0], reverse=True)]
    for e in out:
        e["of"] = n
    return out


def _entry(a: Any) -> dict[str, Any]:
    """A transcript attempt as the page shows it (keys it does not have are left out)."""
    d = a.to_dict()
    gens = []
    for g in d.pop("generations"):
        gens.append({k: v for k, v in g.items() if v is not None})
    d["generations"] = gens
    return {k: v for k, v in d.items() if v is not None or k == "reward"}


# -- the page ------------------------------------------------------------------------------


def _asset(name: str) -> str:
    return (resources.files("rlvitals.views") / "assets" / name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def page_html(payload: dict[str, Any], *, live: bool, title: str = "rlvitals") -> str:
    """The whole page: CSS, the plotting library, the app, and ``payload`` as JSON.

    ``live`` pages connect back to the server they came from (server-sent events); reports
    may not reach the network at all (their CSP has no ``connect-src``).
    """
    css = _asset("dashboard.css")
    scripts = [_asset("plot.js"), _asset("dashboard.js")]
    csp = csp_header(live)
    body = {
        **payload,
        "mode": "live" if live else "report",
        "version": __version__,
        "plots": [p.to_dict() for p in PLOTS],
        "verdicts": VERDICTS,
    }
    title = safe_line(title)
    esc_title = (
        title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )
    parts = [
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        '<meta name="referrer" content="no-referrer">\n',
        f"<title>{esc_title}</title>\n<style>\n{css}\n</style>\n</head>\n<body>\n",
        '<div id="app"><noscript>This page needs JavaScript to draw its plots.</noscript></div>\n',
        f'<script type="application/json" id="rlv-data">{safe_json(body)}</script>\n',
    ]
    parts += [f"<script>{s}</script>\n" for s in scripts]
    parts.append("</body>\n</html>\n")
    return "".join(parts)


def csp_header(live: bool) -> str:
    """The Content-Security-Policy the server sends with the live page (same as its meta)."""
    scripts = [_asset("plot.js"), _asset("dashboard.js")]
    hashes = " ".join(f"'{_sha256(s)}'" for s in scripts)
    connect = "'self'" if live else "'none'"
    return (
        f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; "
        f"img-src data:; connect-src {connect}; base-uri 'none'; form-action 'none'"
    )
