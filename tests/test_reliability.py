"""Numbers you can trust: the reliability table, a test per row, and skipped updates.

Each row of ``vocabulary/reliability.py`` is applied to a finding resting on its key, in a run
of its framework, version and settings: the finding is qualified or withheld and cites the
row's source; the same finding in another framework, or out of the row's version range, is
left alone.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from rlvitals.checks.base import Finding
from rlvitals.checks.context import Context
from rlvitals.checks.reliability import qualify, skipped_updates
from rlvitals.model import RunData
from rlvitals.settings import RunSettings
from rlvitals.vocabulary.reliability import FACTS, KINDS, KeyFact, markdown, version_in

DOCS = Path(__file__).resolve().parents[1] / "docs" / "reliability.md"
METRIC = "train/some_metric"


def _version_in_range(spec: str) -> str | None:
    """A version inside ``spec`` (None for ``*``)."""
    return {
        "*": None,
        ">=0.23": "1.16.0",
        ">=0.26": "1.16.0",
        ">=0.23,<0.29": "0.27.2",
        ">=0.5.21": "0.5.21",
    }[spec]


def _run(fact: KeyFact, framework: str | None = None, version: str | None = "in") -> RunData:
    data = RunData(source="mem", format="generic")
    s = RunSettings()
    s.framework = framework or fact.framework
    s.framework_version = _version_in_range(fact.versions) if version == "in" else version
    if fact.when:
        name, _, want = fact.when.partition("=")
        setattr(s, name, True if not want else (float(want) if name != "is_level" else want))
    data.settings = s
    key = fact.key.replace("*", "mean")
    data.original[METRIC] = key
    values = np.array([0.1, math.nan, 0.2, 0.3, math.nan, 0.25])  # isolated non-finite steps
    data.metrics.extend(METRIC, np.arange(6), values)
    data.metrics.extend(key, np.arange(6), values)
    return data


def _finding() -> Finding:
    return Finding("agreement", "warn", "drift", "something off", metric=METRIC, first_step=1)


@pytest.mark.parametrize("fact", FACTS, ids=lambda f: f"{f.framework}:{f.key}:{f.kind}")
def test_each_row_qualifies_or_withholds_a_finding_on_its_key(fact: KeyFact) -> None:
    ctx = Context(_run(fact))
    (f, *_rest) = qualify(ctx, [_finding()])
    notes = f.evidence["reliability"]
    assert any(n["source"] == fact.source and n["kind"] == fact.kind for n in notes)
    if fact.effect == "withhold":
        assert f.severity == "info" and f.title.startswith("withheld (")
    else:
        assert f.severity == "warn" and fact.source in f.title
    # another framework's run: the row does not apply
    other = "verl" if fact.framework != "verl" else "trl"
    (g, *_) = qualify(Context(_run(fact, framework=other)), [_finding()])
    assert "reliability" not in g.evidence and g.severity == "warn"


@pytest.mark.parametrize(
    "fact",
    [f for f in FACTS if f.versions != "*"],
    ids=lambda f: f"{f.framework}:{f.key}:{f.versions}",
)
def test_a_row_out_of_its_version_range_does_not_apply(fact: KeyFact) -> None:
    below = "0.1.0"
    above = "99.0.0"
    outside = below if version_in(below, fact.versions) is False else above
    (f, *_) = qualify(Context(_run(fact, version=outside)), [_finding()])
    assert not any(n["source"] == fact.source for n in f.evidence.get("reliability", []))


@pytest.mark.parametrize(
    "fact",
    [f for f in FACTS if f.versions != "*"],
    ids=lambda f: f"{f.framework}:{f.key}:{f.versions}",
)
def test_an_unrecorded_version_is_said_as_a_possibility(fact: KeyFact) -> None:
    (f, *_) = qualify(Context(_run(fact, version=None)), [_finding()])
    note = next(n for n in f.evidence["reliability"] if n["source"] == fact.source)
    assert note["certain"] is False and note["effect"] == "qualify"
    assert f.severity == "warn" and f"if the run's {fact.framework} is" in f.title


def test_rows_are_well_formed() -> None:
    for f in FACTS:
        assert f.kind in KINDS and f.effect in ("qualify", "withhold")
        assert f.source and f.says and f.framework
        assert f.versions == "*" or version_in("0.0.1", f.versions) is not None


def test_docs_reliability_md_is_the_generated_table() -> None:
    assert DOCS.read_text() == markdown(), (
        "docs/reliability.md is stale: python -m rlvitals.vocabulary.reliability > "
        "docs/reliability.md"
    )
    for f in FACTS:
        assert f.source.replace("|", "\\|") in DOCS.read_text()


def test_version_ranges() -> None:
    assert version_in("0.27.2", ">=0.23,<0.29") is True
    assert version_in("0.29.0", ">=0.23,<0.29") is False
    assert version_in("1.16.0.dev0", ">=0.26") is True
    assert version_in(None, ">=0.26") is None and version_in(None, "*") is True


def test_art_skipped_updates_are_counted_and_named_not_read_as_no_signal() -> None:
    data = RunData(source="mem", format="art")
    data.settings = RunSettings(framework="art", framework_version="0.5.21")
    data.metrics.extend(
        "data/step_num_groups_trainable",
        np.arange(8),
        np.array([4, 3, 0, 5, 0, 0, 4, 2], dtype=float),
    )
    (f,) = skipped_updates(Context(data))
    assert f.severity == "info" and f.evidence["skipped_updates"] == 3
    assert f.evidence["skipped_steps"] == [2, 4, 5] and "not a lack of learning signal" in f.title
    assert "OpenPipe/ART" in f.evidence["source"]


def test_a_streak_of_non_finite_grad_norms_is_not_withheld() -> None:
    fact = next(f for f in FACTS if f.framework == "open-instruct")
    data = _run(fact)
    data.metrics.replace(METRIC, np.arange(6), np.array([0.1, 0.2, math.nan, math.nan, 0.3, 0.1]))
    (f, *_) = qualify(Context(data), [_finding()])
    assert f.severity == "warn" and f.evidence["reliability"][0]["effect"] == "qualify"
