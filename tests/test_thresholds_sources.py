"""Every line a check draws is a threshold with its source beside it (issue 36 item 4, issue 38
item 4): each check owns a frozen dataclass of its lines, every field saying what it means and
where it comes from; ``--set`` reaches every field by a name unique across the checks;
docs/checks.md's table is generated from them; a number a rule compares against that is not a
field is a module constant with a ``# source:`` comment; a check module that fails to import
is an error."""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
from pathlib import Path

import pytest

from rlvitals.checks.thresholds import Thresholds, classes, fields, markdown
from rlvitals.checks.verdict import CHECK_ORDER, check_functions
from rlvitals.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ROOT / "src" / "rlvitals" / "checks"
# Words that mark a source as one of the kinds DESIGN.md allows.
KINDS = re.compile(
    r"seed|science\.md|DESIGN\.md|docs|rl-doctor|verl|TRL|trl #|NeMo|tinker|prime-rl|"
    r"Trinity|et al\.|\d{4}\.\d{4,5}|families: |measurement: |numerical guard",
)
# Words a source must never lean on: a corpus file, the label rule of a manifest.
CORPUS = re.compile(r"corpus|manifest|label rule|wild", re.I)
# Lines that were fitted to corpus files, to be chosen again on the families (issue 36 item 4).
FITTED: set[str] = set()


def test_every_threshold_has_a_source_and_a_meaning():
    missing = [
        f"{check}.{f.name}"
        for check, f in fields()
        if not f.metadata.get("source", "").strip() or not f.metadata.get("what", "").strip()
    ]
    assert not missing, f"thresholds without a source or a meaning: {missing}"


def test_every_source_is_of_an_allowed_kind_and_names_no_corpus_file():
    odd = [
        f"{c}.{f.name}: {f.metadata['source']}"
        for c, f in fields()
        if f.name not in FITTED and not KINDS.search(f.metadata["source"])
    ]
    assert not odd, f"sources of no known kind: {odd}"
    fitted = {f.name for _c, f in fields() if CORPUS.search(f.metadata["source"])}
    assert fitted == FITTED, f"thresholds whose source is a corpus file or its label rule: {fitted}"


def test_names_are_unique_and_every_field_is_settable():
    names = [f.name for _c, f in fields()]
    assert len(names) == len(set(names))
    th = Thresholds()
    for check, f in fields():
        raw = "7" if f.type in (int, "int") else "0.123"
        got = th.with_overrides({f.name: raw})
        assert getattr(got, f.name) == (7 if raw == "7" else 0.123), f.name
        owner = next(c for c in classes() if f.name in {x.name for x in dataclasses.fields(c)})
        assert getattr(got.of(owner), f.name) == getattr(got, f.name), (check, f.name)


def test_overrides_are_checked():
    with pytest.raises(UsageError, match="unknown threshold 'nope'"):
        Thresholds().with_overrides({"nope": "1"})
    with pytest.raises(UsageError, match="flat_z: expected a number"):
        Thresholds().with_overrides({"flat_z": "high"})
    with pytest.raises(TypeError):
        Thresholds(nope=1)
    th = Thresholds(clip_frac_warn=0.3)
    assert (
        th.clip_frac_warn == 0.3
        and th != Thresholds()
        and th.replace(clip_frac_warn=0.2) == Thresholds()
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        th.clip_frac_warn = 0.5  # type: ignore[misc]
    # A process pool sends it to its workers: pickled and copied whole.
    import copy
    import pickle

    assert pickle.loads(pickle.dumps(th)) == th == copy.deepcopy(th)
    assert pickle.loads(pickle.dumps(th)).clip_frac_warn == 0.3


def test_every_check_module_declares_its_lines_beside_it():
    owners = {c.__module__.rsplit(".", 1)[-1] for c in classes()}
    # Checks that draw no line of their own: non-finite values are found at once, structural
    # zeros are recognised by their config, the baseline is the user's own ranges.
    assert set(CHECK_ORDER) - owners == {"nonfinite", "structural", "baseline"}


def test_docs_checks_md_is_the_generated_table():
    doc = (ROOT / "docs" / "checks.md").read_text()
    got = doc.split("<!-- thresholds: generated -->\n", 1)[1].split("<!-- thresholds: end -->", 1)[
        0
    ]
    assert got == markdown(), (
        "docs/checks.md's thresholds table is stale: regenerate it with "
        "`python -c \"from rlvitals.checks.thresholds import markdown; print(markdown(), end='')\"`"
    )


# Numbers a rule may hold a value against without a field: identities and halves (most of a
# window, half a range), numerical guards, and display limits (ints).
ALLOWED = {0.0, 1.0, 2.0, 0.5, -1.0}


def _module_constants_with_sources(tree: ast.Module, text: list[str]) -> set[str]:
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            name = getattr(node.targets[0], "id", None)
            above = text[node.lineno - 2] if node.lineno >= 2 else ""
            if name and "# source:" in "\n".join(text[max(0, node.lineno - 4) : node.lineno]):
                out.add(name)
            del above
    return out


def test_no_bare_threshold_in_a_rule():
    """A float a check compares against is a field or a sourced module constant: no bare
    0.37 in a rule. (Floats inside the lines dataclasses are their defaults.)"""
    bad = []
    for path in sorted(CHECKS.glob("*.py")):
        text = path.read_text().splitlines()
        tree = ast.parse("\n".join(text))
        sourced = _module_constants_with_sources(tree, text)
        skip: set[int] = set()
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                getattr(d, "id", None) == "lines" for d in node.decorator_list
            ):
                skip.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                name = getattr(node.targets[0], "id", None)
                if name in sourced:
                    skip.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
                elif isinstance(node.value, ast.Constant) and isinstance(node.value.value, float):
                    bad.append(f"{path.name}:{node.lineno} {name} has no '# source:' comment")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, float)
                and node.lineno not in skip
                and node.value not in ALLOWED
                and abs(node.value) >= 1e-5
            ):
                bad.append(f"{path.name}:{node.lineno} {node.value}")
    assert not bad, "bare numbers in rules (make them a lines field with its source): " + ", ".join(
        bad
    )


def test_a_check_module_that_fails_to_import_is_an_error(monkeypatch):
    broken = "rlvitals.checks.episodes"
    with monkeypatch.context() as m:
        m.setitem(sys.modules, broken, None)  # importing it raises ImportError
        with pytest.raises(ImportError, match="episodes"):
            check_functions()
    assert [n for n, _f in check_functions()] == CHECK_ORDER
