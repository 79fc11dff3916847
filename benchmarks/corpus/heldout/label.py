"""Labels for the held-out set of real runs (``benchmarks/corpus/heldout/``).

The rules below were written down and committed before any tool's verdict on these files was
looked at, and every label in ``manifest.json`` is derived by them (never by hand, never from
what rlvitals or rl-doctor says). They are tool-neutral: they read the file's own numbers
through the small reference readers here (not rlvitals'), under the keys the labeller mapped by
meaning for each file in ``sources.toml`` (``reward``, ``kl``, ``entropy``, ...).

    python benchmarks/corpus/heldout/label.py           # re-derive, rewrite manifest.json
    python benchmarks/corpus/heldout/label.py --check   # exit 1 when manifest.json differs

The rules (label vocabulary of the wild corpus, plus ``non_finite``):

| label | rule (on the series of the mapped key, NaN/inf left out except by non_finite) |
|---|---|
| healthy | reward: >= 12 records, last-quarter mean above first-quarter mean by > 3 standard errors, and no other rule fires |
| plateau | reward: >= 20 records, last quarter within 2 standard errors of the first (onset: first record) |
| length/truncation | clip ratio (share of replies cut at the length cap) >= 0.5 on any record (a level: one record is enough) |
| length/collapse | mean length sustained below 25% of its start |
| kl_drift | KL to the reference policy sustained >= 0.5, or its last-quarter mean >= 10x its second-quarter mean and >= 0.1 |
| grad_spikes | grad norm > 10x the run's median on any record (>= 10 records) |
| zero_std_groups | share of groups whose rewards all agree >= 0.5 on any record |
| no_signal | reward std (the mean of per-group stds, or the batch's std) exactly 0 on any record |
| entropy_collapse | policy entropy sustained below 30% of its start |
| non_finite | NaN or inf in reward, loss, KL, entropy, length or grad norm on any record |
| format-only | no rule above gives a verdict: the file must only be read |

Definitions. *Start*: the median of the first three records (one noisy first record does not
set it). *Sustained*: the record is past the bound and so are at least two of the three records
from it (the median of records i..i+2; a file with fewer records: each record). *Standard
error*: of each quarter's mean, from the quarter's population variance, the two combined in
quadrature; a quarter is ``max(n // 4, 2)`` records (the wild corpus's ``wildlib.trend``).
*Onset*: the step (as the file prints it; files that print none count records from 1) of the
first record that satisfies the rule; plateau's is the first record.

Why these bounds: healthy/plateau/truncation/collapse/grad/zero-std are the wild corpus's label
rules (``../shared/corpus/wild/README.md``), kept so the two sets speak the same language.
KL: the wild corpus's level (0.5 nats) sustained, since drift is a state, not one record; the
rise is measured from the second quarter because KL starts at 0 by construction (the policy is
the reference at step 0), and 0.1 nats keeps a tenfold rise between tiny values (0.001 to 0.01)
from counting. Entropy: a healthy run sharpens to 50-80% of its start (issue 36), so below 30%
is past what sharpening explains. Non-finite: only the training metrics, since some trainers
print NaN by design for an undefined statistic (a std over one sample).
"""

from __future__ import annotations

import argparse
import ast
import csv
import io
import json
import math
import re
import statistics as st
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
Rows = list[dict[str, Any]]
Series = list[tuple[int, float]]

# -- rule constants (see the module docstring for each one's source) ----------------------------
HEALTHY_MIN, HEALTHY_Z = 12, 3.0
PLATEAU_MIN, PLATEAU_Z = 20, 2.0
CLIP_LEVEL = 0.5
LENGTH_COLLAPSE = 0.25
KL_LEVEL, KL_RISE, KL_RISE_FLOOR = 0.5, 10.0, 0.1
GRAD_FACTOR, GRAD_MIN = 10.0, 10
ZERO_STD_LEVEL = 0.5
ENTROPY_COLLAPSE = 0.30
FINITE_KEYS = ("reward", "loss", "kl", "entropy", "length", "grad")


# -- series ---------------------------------------------------------------------------------------


def _num(v: Any) -> float | None:
    """A printed value as a float (bools and non-numbers: None)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        s = v.strip().rstrip("%")
        m = re.fullmatch(r"(?:np\.float\d*|tensor)\((.*?)(?:,.*)?\)", s)
        if m:
            s = m.group(1)
        try:
            return float(s)
        except ValueError:
            return None
    return None


def series(rows: Rows, key: str | None, finite: bool = True) -> Series:
    """(step, value) of every record that has ``key``; NaN/inf left out unless not ``finite``."""
    if not key:
        return []
    out = []
    for r in rows:
        v = _num(r.get(key))
        if v is None or (finite and not math.isfinite(v)):
            continue
        out.append((int(r["step"]), v))
    return out


def quarters(xs: list[float]) -> tuple[float, float, float]:
    """First-quarter mean, last-quarter mean and their difference in standard errors."""
    q = max(len(xs) // 4, 2)
    a, b = xs[:q], xs[-q:]
    se = math.sqrt(st.pvariance(a) / len(a) + st.pvariance(b) / len(b)) or 1e-12
    return st.mean(a), st.mean(b), (st.mean(b) - st.mean(a)) / se


def start(s: Series) -> float:
    return st.median(v for _, v in s[:3])


def sustained(s: Series, past: Callable[[float], bool]) -> int | None:
    """Step of the first record past the bound whose median with the next two is past it."""
    for i, (step, v) in enumerate(s):
        window = [x for _, x in s[i : i + 3]]
        if past(v) and (len(s) < 3 or len(window) < 2 or past(st.median(window))):
            return step
    return None


def _r(x: float) -> float:
    return round(x, 6)


# -- the rules: each returns a label dict or None -----------------------------------------------


def rule_plateau(rows: Rows, keys: dict[str, str]) -> dict[str, Any] | None:
    s = series(rows, keys.get("reward"))
    if len(s) < PLATEAU_MIN:
        return None
    a, b, z = quarters([v for _, v in s])
    if abs(z) >= PLATEAU_Z:
        return None
    return {
        "label": "plateau",
        "onset_step": s[0][0],
        "rule": f"{keys['reward']}: >= {PLATEAU_MIN} records and last-quarter mean within "
        f"{PLATEAU_Z:g} standard errors of first-quarter mean",
        "evidence": {"first_quarter_mean": _r(a), "last_quarter_mean": _r(b), "z": round(z, 2)},
    }


def rule_truncation(rows: Rows, keys: dict[str, str]) -> dict[str, Any] | None:
    s = series(rows, keys.get("clip"))
    hit = [(t, v) for t, v in s if v >= CLIP_LEVEL]
    if not hit:
        return None
    return {
        "label": "length",
        "kind": "truncation",
        "onset_step": hit[0][0],
        "rule": f"{keys['clip']} >= {CLIP_LEVEL} on any record (onset: the first)",
        "evidence": {"share_of_records": round(len(hit) / len(s), 3), "max": _r(max(hit)[1])},
    }


def rule_length_collapse(rows: Rows, keys: dict[str, str]) -> dict[str, Any] | None:
    s = series(rows, keys.get("length"))
    if len(s) < 3:
        return None
    s0 = start(s)
    onset = sustained(s, lambda v: v < LENGTH_COLLAPSE * s0)
    if onset is None:
        return None
    return {
        "label": "length",
        "kind": "collapse",
        "onset_step": onset,
        "rule": f"{keys['length']} sustained below {LENGTH_COLLAPSE:g} x its start "
        "(median of the first three records)",
        "evidence": {"start": _r(s0), "min": _r(min(v for _, v in s))},
    }


def rule_kl(rows: Rows, keys: dict[str, str]) -> dict[str, Any] | None:
    s = series(rows, keys.get("kl"))
    if not s:
        return None
    onset = sustained(s, lambda v: v >= KL_LEVEL)
    xs = [v for _, v in s]
    if onset is not None:
        return {
            "label": "kl_drift",
            "onset_step": onset,
            "rule": f"{keys['kl']} sustained >= {KL_LEVEL}",
            "evidence": {"first": _r(xs[0]), "max": _r(max(xs))},
        }
    if len(s) < HEALTHY_MIN:
        return None
    q = len(s) // 4
    second, last = st.mean(xs[q : 2 * q]), st.mean(xs[-q:])
    if last < KL_RISE_FLOOR or last < KL_RISE * second:
        return None
    bound = KL_RISE * second
    rise_onset = sustained(s[q:], lambda v: v >= bound and v >= KL_RISE_FLOOR)
    return {
        "label": "kl_drift",
        "onset_step": rise_onset if rise_onset is not None else s[-q][0],
        "rule": f"{keys['kl']} last-quarter mean >= {KL_RISE:g} x its second-quarter mean "
        f"and >= {KL_RISE_FLOOR}",
        "evidence": {"second_quarter_mean": _r(second), "last_quarter_mean": _r(last)},
    }


def rule_grad_spikes(rows: Rows, keys: dict[str, str]) -> dict[str, Any] | None:
    s = series(rows, keys.get("grad"))
    if len(s) < GRAD_MIN:
        return None
    med = st.median(v for _, v in s)
    if med <= 0:
        return None
    hit = [(t, v) for t, v in s if v > GRAD_FACTOR * med]
    if not hit:
        return None
    return {
        "label": "grad_spikes",
        "onset_step": hit[0][0],
        "rule": f"{keys['grad']} > {GRAD_FACTOR:g}x the run's median",
        "evidence": {
            "median": _r(med),
            "spike_steps": [t for t, _ in hit][:20],
            "spike_values": [_r(v) for _, v in hit][:20],
        },
    }


def rule_zero_std(rows: Rows, keys: dict[str, str]) -> dict[str, Any] | None:
    s = series(rows, keys.get("zero_std"))
    hit = [(t, v) for t, v in s if v >= ZERO_STD_LEVEL]
    if not hit:
        return None
    return {
        "label": "zero_std_groups",
        "onset_step": hit[0][0],
        "rule": f"{keys['zero_std']} >= {ZERO_STD_LEVEL} on any record (onset: the first)",
        "evidence": {"share_of_records": round(len(hit) / len(s), 3), "max": _r(max(hit)[1])},
    }


def rule_no_signal(rows: Rows, keys: dict[str, str]) -> dict[str, Any] | None:
    s = series(rows, keys.get("reward_std"))
    hit = [t for t, v in s if v == 0]
    if not hit:
        return None
    return {
        "label": "no_signal",
        "onset_step": hit[0],
        "rule": f"{keys['reward_std']} == 0 on any record (every group, or the whole batch, "
        "scored alike)",
        "evidence": {"share_of_records": round(len(hit) / len(s), 3)},
    }


def rule_entropy(rows: Rows, keys: dict[str, str]) -> dict[str, Any] | None:
    s = series(rows, keys.get("entropy"))
    if len(s) < 3:
        return None
    s0 = start(s)
    if s0 <= 0:
        return None
    onset = sustained(s, lambda v: v < ENTROPY_COLLAPSE * s0)
    if onset is None:
        return None
    return {
        "label": "entropy_collapse",
        "onset_step": onset,
        "rule": f"{keys['entropy']} sustained below {ENTROPY_COLLAPSE:g} x its start "
        "(median of the first three records)",
        "evidence": {"start": _r(s0), "min": _r(min(v for _, v in s))},
    }


def rule_non_finite(rows: Rows, keys: dict[str, str]) -> dict[str, Any] | None:
    bad: list[tuple[int, str]] = []
    for role in FINITE_KEYS:
        for t, v in series(rows, keys.get(role), finite=False):
            if not math.isfinite(v):
                bad.append((t, keys[role]))
    if not bad:
        return None
    bad.sort()
    return {
        "label": "non_finite",
        "onset_step": bad[0][0],
        "rule": "NaN or inf in reward, loss, KL, entropy, length or grad norm (onset: the first)",
        "evidence": {"records": len(bad), "keys": sorted({k for _, k in bad})},
    }


PROBLEM_RULES = (
    rule_plateau,
    rule_truncation,
    rule_length_collapse,
    rule_kl,
    rule_grad_spikes,
    rule_zero_std,
    rule_no_signal,
    rule_entropy,
    rule_non_finite,
)


def labels(rows: Rows, keys: dict[str, str]) -> list[dict[str, Any]]:
    """Every rule on one file's records; healthy when reward rises and nothing else fires;
    format-only when no rule gives a verdict."""
    out = [lab for rule in PROBLEM_RULES if (lab := rule(rows, keys)) is not None]
    if out:
        return out
    s = series(rows, keys.get("reward"))
    if len(s) >= HEALTHY_MIN:
        a, b, z = quarters([v for _, v in s])
        if z > HEALTHY_Z:
            return [
                {
                    "label": "healthy",
                    "rule": f"{keys['reward']}: >= {HEALTHY_MIN} records, last-quarter mean above "
                    f"first-quarter mean by > {HEALTHY_Z:g} standard errors; no other rule fires",
                    "evidence": {
                        "first_quarter_mean": _r(a),
                        "last_quarter_mean": _r(b),
                        "z": round(z, 2),
                    },
                }
            ]
    return [{"label": "format-only", "rule": "no rule gives a verdict"}]


# -- reference readers: each returns records {"step": int, <key as printed>: value, ...} -------
# Steps are the file's own; a file that prints none is numbered by record (from 1) and its
# source says ``steps = "record"``.


def _numbered(rows: Rows, step_key: str | None) -> Rows:
    out = []
    for i, r in enumerate(rows, 1):
        step = _num(r.get(step_key)) if step_key else None
        if step_key and step is None:
            continue
        out.append({**r, "step": int(step) if step is not None else i})
    return out


def read_trainer_state(path: Path, reward: str, **_: Any) -> Rows:
    """TRL ``trainer_state.json`` (``log_history``) or a bare log_history list: the training
    records (those with the reward key)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    hist = doc["log_history"] if isinstance(doc, dict) else doc
    return [r for r in _numbered(hist, "step") if reward in r]


def read_jsonl(path: Path, reward: str, step_key: str | None = "step", **_: Any) -> Rows:
    """One JSON object a line; lines that are not one are skipped."""
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict) and reward in d:
            rows.append(d)
    return _numbered(rows, step_key)


def read_json_records(
    path: Path, reward: str, step_key: str | None = "step", under: str = "", **_: Any
) -> Rows:
    """A JSON list of records, or an object of per-step lists, optionally under a dotted key."""
    doc: Any = json.loads(path.read_text(encoding="utf-8"))
    for part in filter(None, under.split(".")):
        doc = doc[part]
    if isinstance(doc, dict):
        n = max(len(v) for v in doc.values() if isinstance(v, list))
        doc = [
            {k: v[i] for k, v in doc.items() if isinstance(v, list) and i < len(v)}
            for i in range(n)
        ]
    return _numbered([r for r in doc if isinstance(r, dict) and reward in r], step_key)


def read_csv(
    path: Path, reward: str, step_key: str | None = "step", delimiter: str = ",", **_: Any
) -> Rows:
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    rows = [
        {k.strip(): v for k, v in r.items() if k}
        for r in csv.DictReader(io.StringIO(text), delimiter=delimiter)
    ]
    return _numbered(
        [
            r
            for r in rows
            if _num(r.get(reward)) is not None
            or str(r.get(reward, "")).strip().lower() in ("nan", "inf", "-inf")
        ],
        step_key,
    )


def read_md_table(path: Path, reward: str, step_key: str | None = "step", **_: Any) -> Rows:
    """Markdown pipe tables: every row under a header that names the reward column."""
    rows: Rows = []
    header: list[str] | None = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip().strip("*`") for c in line.strip("|").split("|")]
        if header is None:
            header = cells
        elif not all(re.fullmatch(r":?-+:?", c) for c in cells) and reward in header:
            rows.append(dict(zip(header, cells)))
    return _numbered(rows, step_key)


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def read_verl_console(path: Path, reward: str, **_: Any) -> Rows:
    """verl-style console lines: ``step:N - key:value - key:value ...``."""
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = re.search(r"(?:^|\s|\))step:(\d+) - (.*)", ANSI.sub("", line))
        if not m:
            continue
        d: dict[str, Any] = {"step": int(m.group(1))}
        for kv in m.group(2).strip().split(" - "):
            if ":" in kv:
                k, v = kv.rsplit(":", 1)
                if _num(v) is not None:
                    d[k.strip()] = _num(v)
        if reward in d:
            rows.append(d)
    return rows


def read_dict_console(path: Path, reward: str, step_key: str | None = None, **_: Any) -> Rows:
    """Python dicts printed one per logging step (TRL's console ``{'loss': ...}``), read with
    ``ast.literal_eval`` (``nan``/``inf`` as floats)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    rows = []
    for m in re.finditer(r"\{[^{}]*\}", text):
        body = re.sub(r"(?<![\w'\"])(-?)(nan|inf)\b", r"\1float('\2')", m.group(0))
        body = re.sub(r"(?:np\.float\d*|tensor)\(([^()]*?)\)", r"\1", body)
        try:
            d = ast.parse(body, mode="eval").body
            vals = {ast.literal_eval(k): _eval(v) for k, v in zip(d.keys, d.values)}  # type: ignore[attr-defined]
        except (ValueError, SyntaxError, AttributeError, TypeError):
            continue
        if reward in vals:
            rows.append(vals)
    return _numbered(rows, step_key)


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "float":
        return float(ast.literal_eval(node.args[0]))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand)
    return ast.literal_eval(node)


def read_kv_lines(
    path: Path,
    reward: str,
    line: str,
    pair: str = r"([A-Za-z_][\w/.\-]*)\s*[:=]\s*([-+]?(?:\d[\d.eE+\-]*|nan|inf))",
    **_: Any,
) -> Rows:
    """Printed lines that match ``line`` (a regex with a ``step`` group), values as ``key: v`` or
    ``key=v`` pairs (``pair``: a regex with the key and the value as groups 1 and 2)."""
    rows = []
    for text in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = re.search(line, ANSI.sub("", text))
        if not m:
            continue
        d: dict[str, Any] = {k: _num(v) for k, v in re.findall(pair, text)}
        d["step"] = int(m.group("step"))
        if d.get(reward) is not None:
            rows.append(d)
    return rows


READERS: dict[str, Callable[..., Rows]] = {
    "trainer_state": read_trainer_state,
    "jsonl": read_jsonl,
    "json_records": read_json_records,
    "csv": read_csv,
    "md_table": read_md_table,
    "verl_console": read_verl_console,
    "dict_console": read_dict_console,
    "kv_lines": read_kv_lines,
}
ROLES = ("reward", "loss", "kl", "entropy", "length", "clip", "grad", "zero_std", "reward_std")


# -- the manifest --------------------------------------------------------------------------------


def rows_of(src: dict[str, Any], root: Path = HERE) -> Rows:
    """The file's records by its source's reader and options."""
    opts = dict(src.get("read", {}))
    return READERS[src["reader"]](root / src["path"], reward=src["keys"]["reward"], **opts)


def entry(src: dict[str, Any], root: Path = HERE) -> dict[str, Any]:
    """One manifest entry: labels by the rules, expected values read from the records."""
    rows = rows_of(src, root)
    if not rows:
        raise ValueError(
            f"{src['path']}: the reader found no record with {src['keys']['reward']!r}"
        )
    keys = {k: v for k, v in src["keys"].items() if k in ROLES}
    by_record = src.get("steps") == "record"
    expected = []
    for at, key in src["expected"]:
        row = rows[at - 1] if by_record else next(r for r in rows if r["step"] == at)
        v = _num(row[key])
        assert v is not None, (src["path"], at, key)
        if by_record:
            expected.append({"step": None, "record": at, "key": key, "value": v})
        else:
            expected.append({"step": at, "key": key, "value": v})
    out = {
        "path": src["path"],
        "framework": src["framework"],
        "kind": "real-run",
        "keys": keys,
        "labels": labels(rows, keys),
        "expected": expected,
        "steps": {"records": len(rows), "first": rows[0]["step"], "last": rows[-1]["step"]},
        "provenance": src["provenance"],
    }
    if by_record:
        out["onset_unit"] = "record (1-based order of the records the file prints)"
    return out


def sources(root: Path = HERE) -> list[dict[str, Any]]:
    with open(root / "sources.toml", "rb") as f:
        return list(tomllib.load(f).get("file", []))


def manifest(root: Path = HERE) -> dict[str, Any]:
    files = [entry(s, root) for s in sources(root)]
    return {
        "schema": 1,
        "description": "Held-out set of real LLM RL run logs that their authors committed to "
        "public GitHub repositories, saved byte-for-byte as read from the commit in "
        "provenance (cuts noted in provenance.truncated). Labels derived by label.py's "
        "rules, written before any tool's verdict on these files was seen.",
        "value_conventions": "expected.value is the value as printed; step is the file's own "
        "numbering; files that print no step carry record (1-based) and step null, and their "
        "onset_step counts records.",
        "counts": {"real-run": len(files), "repos": len({f["provenance"]["repo"] for f in files})},
        "files": files,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when manifest.json differs")
    args = ap.parse_args()
    man = manifest()
    text = json.dumps(man, indent=1) + "\n"
    path = HERE / "manifest.json"
    if args.check:
        same = path.exists() and path.read_text() == text
        print("manifest.json is up to date" if same else "manifest.json differs from the rules")
        return 0 if same else 1
    path.write_text(text)
    for f in man["files"]:
        names = [
            lab["label"] + (f"/{lab['kind']}" if lab.get("kind") else "") for lab in f["labels"]
        ]
        print(f"{f['path']}: {f['steps']['records']} records, {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
