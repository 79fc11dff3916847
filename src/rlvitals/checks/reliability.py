"""Findings resting on numbers known to mislead: qualified or withheld, and skipped updates.

After the checks, each finding is held against the reliability table
(``vocabulary/reliability.py``): where the key it rests on is one its framework, in the run's
version and settings, logs post-correction, as a structural zero, with a known defect, as a
different unit or normalisation, or has removed, the finding says so beside its title
(``qualify``) or is made information with the reason (``withhold``). A fact whose version or
condition the run does not record is still said, as a possibility.

Updates the framework skips by design are counted and named, never read as a lack of signal:
an isolated non-finite gradient norm in a framework that skips such steps, an update with no
trainable group in OpenPipe ART (``skipped_update`` rows). Run by ``rlvitals.judge`` after
the checks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..settings import settings_of
from ..vocabulary.reliability import KeyFact, framework_of, key_facts, version_in
from .base import Finding
from .context import Context, finding
from .levels import apply_levels

__all__ = ["qualify", "skipped_updates"]


def _source_key(ctx: Context, metric: str) -> str:
    """The key the run logged ``metric`` under (its own name when not mapped)."""
    return ctx.data.original.get(metric, metric)


def _certain(ctx: Context, fact: KeyFact) -> bool:
    """Whether the run records the version and settings the fact depends on."""
    s = ctx.data.settings
    if version_in(s.framework_version if s else None, fact.versions) is None:
        return False
    if fact.when:
        name = fact.when.partition("=")[0]
        return s is not None and getattr(s, name, None) is not None
    return True


def _words(fact: KeyFact, certain: bool) -> str:
    where = (
        ""
        if certain
        else f" (if the run's {fact.framework} is {fact.versions}"
        + (f" with {fact.when})" if fact.when else ")")
    )
    return f"{fact.says}{where}: {fact.source}"


def _isolated_nonfinite(ctx: Context, metric: str) -> bool:
    """Whether every non-finite value of ``metric`` stands alone (no two updates in a row)."""
    s = ctx.data.series(metric)
    if s is None or not len(s):
        return False
    bad = ~np.isfinite(s.values)
    return bool(bad.any()) and not bool((bad[1:] & bad[:-1]).any())


def qualify(ctx: Context, findings: list[Finding]) -> list[Finding]:
    """``findings`` with every one resting on a key the table matches qualified or withheld
    (module docstring), plus the skipped updates' own finding."""
    settings_of(ctx.data)
    findings = apply_levels(ctx, findings)
    for f in findings:
        if not f.metric:
            continue
        src = _source_key(ctx, f.metric)
        facts = key_facts(ctx.data, src)
        if not facts:
            continue
        notes: list[dict[str, Any]] = []
        for fact in facts:
            certain = _certain(ctx, fact)
            withhold = fact.effect == "withhold" and certain
            if fact.kind == "skipped_update":
                withhold = withhold and _isolated_nonfinite(ctx, f.metric)
            notes.append(
                {
                    "key": src,
                    "kind": fact.kind,
                    "says": fact.says,
                    "source": fact.source,
                    "versions": fact.versions,
                    "certain": certain,
                    "effect": "withhold" if withhold else "qualify",
                }
            )
            if withhold and f.severity in ("warn", "fail"):
                f.severity = "info"
                f.title = f"withheld ({src}: {fact.says}): {f.title}"
            else:
                f.title += f" [note: {src} {_words(fact, certain)}]"
        f.evidence["reliability"] = notes
    return findings + skipped_updates(ctx)


# Frameworks that skip an update whose gradient norm is not finite, by design (the
# ``skipped_update`` rows on grad_norm), and ART's trainable-group count.
_ART_TRAINABLE = "data/step_num_groups_trainable"


def skipped_updates(ctx: Context) -> list[Finding]:
    """Updates the framework skipped by design, counted and named (information)."""
    fw = framework_of(ctx.data)
    out: list[Finding] = []
    trainable = ctx.data.series(_ART_TRAINABLE)
    if fw == "art" and trainable is not None and len(trainable):
        skipped = trainable.steps[trainable.values == 0]
        if len(skipped):
            out.append(
                _skipped(
                    ctx,
                    _ART_TRAINABLE,
                    skipped,
                    "no trainable group (every "
                    "group's rewards were equal): ART skips such an update",
                )
            )
    gn_name = "train/grad_norm"
    gn = ctx.data.series(gn_name)
    if (
        gn is not None
        and len(gn)
        and any(f.kind == "skipped_update" for f in key_facts(ctx.data, _source_key(ctx, gn_name)))
    ):
        skipped = gn.steps[~np.isfinite(gn.values)]
        if len(skipped):
            out.append(
                _skipped(
                    ctx,
                    gn_name,
                    skipped,
                    "a non-finite gradient norm: the framework skips the optimizer step",
                )
            )
    return out


def _skipped(ctx: Context, metric: str, steps: np.ndarray, why: str) -> Finding:
    src = _source_key(ctx, metric)
    facts = [f for f in key_facts(ctx.data, src) if f.kind == "skipped_update"]
    source = facts[0].source if facts else ""
    return finding(
        "structural",
        "info",
        "learning",
        f"{len(steps)} update(s) skipped by design ({why}), first at step {int(steps[0])}: "
        "not a lack of learning signal",
        metric=metric,
        first_step=int(steps[0]),
        steps=[int(s) for s in steps[:20]],
        action="Nothing to fix for a few; a streak of skipped updates is a run that stopped "
        f"learning. Source: {source}",
        skipped_updates=len(steps),
        skipped_steps=[int(s) for s in steps[:50]],
        source=source,
    )
