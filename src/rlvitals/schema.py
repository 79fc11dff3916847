"""The run directory's names and the canonical metric vocabulary (docs/metrics.md): ONE declaration.

One vocabulary for every run, whatever framework wrote it: the writer emits these names, every
reader maps its framework's keys onto them by meaning, and every check and view reads only them.
The declaration is data, one module per family in ``vocabulary/`` (``vocabulary/reward.py``
...); this module assembles it and is what the rest of the package reads. Each ``MetricSpec``
carries its meaning, a short label for the views, and the synonyms
other frameworks and peer tools log it under (``Alias``): ``readers/keys.py`` builds the
vocabulary of synonyms and normalised tokens from them, ``docs/metrics.md`` is generated from
them (``python -m rlvitals.schema > docs/metrics.md``; a test keeps the two equal), and the
views take their labels and key numbers from them.
"""

from __future__ import annotations

import re

from .vocabulary import FAMILY_MODULES, KEPT
from .vocabulary.spec import Alias, MetricSpec

__all__ = [
    "FAMILIES",
    "FORMAT_ID",
    "KEPT",
    "METRICS",
    "PATTERNS",
    "RESERVED_STEP_KEYS",
    "Alias",
    "MetricSpec",
    "describe",
    "is_canonical",
    "key_metrics",
    "label",
    "metrics_markdown",
    "plot_members",
]

FORMAT_ID = "rlvitals-run/1"

# File names inside a run directory (docs/format.md).
RUN_JSON = "run.json"
STEPS = "steps.jsonl"
ROLLOUTS = "rollouts.jsonl"
PROGRESS = "progress.jsonl"
EVALS = "evals.jsonl"
TRANSCRIPTS = "transcripts"
CHECKPOINTS = "checkpoints"

# Keys of a step record that are not metrics.
RESERVED_STEP_KEYS = frozenset({"step", "time", "policy_version"})

# How non-finite numbers are spelled in our files (docs/format.md).
NONFINITE_STRINGS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


# Families in the seeds' reading order: (title, what the section says before its table).
FAMILIES: dict[str, tuple[str, str]] = {f.FAMILY: (f.TITLE, f.INTRO) for f in FAMILY_MODULES}

METRICS: dict[str, MetricSpec] = {m.name: m for f in FAMILY_MODULES for m in f.METRICS}

# Families of names with a variable part (docs/metrics.md), with the keys they are read from.
PATTERNS: list[tuple[re.Pattern[str], MetricSpec]] = [p for f in FAMILY_MODULES for p in f.PATTERNS]


def plot_members(plot: str) -> tuple[str, ...]:
    """The names (and ``*`` globs of families) a dashboard plot draws, in declaration order."""
    fixed = [m.name for m in METRICS.values() if m.plot == plot]
    globs = [
        spec.glob or re.sub(r"<[^>]+>", "*", spec.name) for _, spec in PATTERNS if spec.plot == plot
    ]
    return tuple(dict.fromkeys([*fixed, *globs]))


def describe(name: str) -> MetricSpec | None:
    """The spec of a canonical name (fixed or patterned), or None for a non-canonical key."""
    spec = METRICS.get(name)
    if spec is not None:
        return spec
    for pattern, pspec in PATTERNS:
        if pattern.match(name):
            return pspec
    return None


def is_canonical(name: str) -> bool:
    """Whether ``name`` belongs to the canonical vocabulary."""
    return describe(name) is not None


def label(name: str) -> str:
    """The short label views show for ``name`` (its own name where none is declared)."""
    spec = METRICS.get(name)
    return spec.label if spec is not None and spec.label else name


def key_metrics() -> tuple[tuple[str, str], ...]:
    """(name, label) of the numbers ``rlvitals watch`` shows, in the declaration's order."""
    return tuple((m.name, m.label) for m in METRICS.values() if m.key)


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _alias_text(a: Alias) -> str:
    t = f"`{_md(a.source)}`"
    if a.scale == -1.0 and a.offset == 1.0:
        t += " (1 − x)"
    return t


def metrics_markdown() -> str:
    """docs/metrics.md, generated from this module's declaration."""
    lines = [
        "# Canonical metrics",
        "",
        "Generated from `src/rlvitals/schema.py` by `python -m rlvitals.schema`; a test keeps",
        "this page equal to the code.",
        "",
        "One vocabulary for every run, whatever framework wrote it. Lowercase, slash-namespaced.",
        "The writer emits these names; each reader maps its framework's keys onto them by",
        "meaning and keeps the original keys too. Where a framework measures a different",
        "quantity (k1 where we want k3, |Δp| where we want |Δlogp|, batch std where we want",
        "within-group std), the reader maps it to the name of what it really is, never to a",
        "look-alike.",
        "",
        "## How a source key finds its name",
        "",
        "Every reader resolves each key through one chain (`readers/keys.py`), and records",
        "which step mapped it (`rlvitals formats --explain FILE` prints it):",
        "",
        "1. **user mapping**: `--mapping FILE` rules, ahead of everything;",
        "2. **table**: the framework's own table (docs/formats.md); a key the table lists as",
        "   not mapped stays under its own name, whatever the steps below would say;",
        "3. **synonym**: the keys other frameworks and peer tools log a metric under (the",
        '   "also read from" column below), exact;',
        "4. **tokens**: the same synonyms after normalising case, separators (`/ . - _`,",
        "   spaces, camelCase), split prefixes (`train/`, `training/`, `actor/`, `policy/`,",
        "   `optim/`...) and mean suffixes (`_mean`, `/mean`, `_avg`): `Train/Reward_Mean`",
        "   reads as `reward/mean`;",
        "5. **canonical**: a key that already is a canonical name (generic JSONL/CSV).",
        "",
        "Tokens are normalised through abbreviations too (`rew`/`rwd` reward, `ent` entropy,",
        "`gn` grad norm, `len` length, `resp` response, `adv` advantage, `acc` accuracy,",
        "`trunc` truncated, `grp` group, plurals such as `lengths`, a whole key `R` the reward),",
        "phrases (`non_stop_rate` is the truncated rate) and word order (`reward_total` is",
        "`total_reward`): `KL_ref`, `Avg Response Len`, `GrpStd` and `Adv Std` find their names.",
        "A split word may come last (`success_rate/train`) or be part of the name",
        "(`loss/total`). A key that says it is a percent (`_pct`, `%`) of a fraction metric, or",
        "of an accuracy or success rate read as the reward, is divided by 100; a time in",
        "milliseconds (`step_time_ms`) is divided by 1,000. A loop's `<what>_reward`,",
        "`<what>_penalty` or `<what>_bonus` that names nothing else (not `episode_reward`,",
        "`kl_penalty`), alone or under split prefixes and a group of parts",
        "(`train/reward_metrics/format_reward`), is one part of its reward:",
        "`reward/component/<name>/mean`.",
        "",
        "Keys of held-out splits (`eval`, `val`, `test`, `validation`, `heldout`, `dev`",
        "prefixes, or named last: `success_rate/eval`, `reward_test`) never fall back to a",
        "training metric: one that names a score (`eval_reward`, `val/acc`, `test/score`,",
        "`acc/val`) reads as `eval/<suite>/score`, the suite from its other segments or the",
        "split's word. A KL-like key that no step maps (a bare `kl`, `kl_div`) stays",
        "unmapped under its own name: which of the three KLs it is cannot be guessed. Names",
        "that look like a metric and are not (a value loss, a coefficient, a return, an",
        "advantage mean, an episode's length, `reward_<what>`, a time of an unnamed part) stay",
        "unmapped too, and `formats --explain` says why.",
        "",
        "Sinks store NaN differently (verl's file logger writes `null`, prime-rl drops the key,",
        'TRL logs `None`, trackio and W&B JSON write `"NaN"`): `"NaN"`, `nan` and',
        '`"Infinity"` read as the floats they stand for; `null` and `None` are no value there',
        "(a periodic evaluation null between evaluations is not a NaN), and a metric that was",
        "logged on most records and then stays null or vanishes from the later ones is kept",
        "as missing from that step (`RunData.missing`).",
    ]
    for fam, (title, intro) in FAMILIES.items():
        fixed = [m for m in METRICS.values() if m.family == fam]
        pats = [spec for _, spec in PATTERNS if spec.family == fam]
        if not fixed and not pats:
            continue
        lines += ["", f"## {title}"]
        if intro:
            lines += ["", intro]
        lines += ["", "| name | definition | also read from |", "|---|---|---|"]
        for m in fixed:
            also = ", ".join(_alias_text(a) for a in m.aliases)
            lines.append(f"| `{m.name}` | {_md(m.description)} | {also} |")
        for spec in pats:
            also = "; ".join(
                f"`{_md(a.source)}`" + (f" ({_md(a.note)})" if a.note else "") for a in spec.aliases
            )
            lines.append(f"| `{spec.name}` | {_md(spec.description)} | {also} |")
    lines += [
        "",
        "## What this implementation adds",
        "",
        "- `discard/rollouts/ungraded` and `discard/rollouts/unfinished` (see docs/format.md).",
        "- `response/length_mean` and `response/truncated_rate` count the attempts that",
        "  produced a response (failed and unversioned attempts are left out, so a burst of",
        "  failures does not read as shorter replies).",
        "- Original keys of other frameworks stay under their own names (`rlvitals metrics",
        "  --all`); `rlvitals formats NAME` shows how each maps (docs/formats.md).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - regenerates docs/metrics.md
    import sys

    sys.stdout.write(metrics_markdown())
