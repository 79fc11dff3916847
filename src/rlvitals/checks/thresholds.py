"""Where the checks draw their lines: each check owns a small frozen dataclass of its
thresholds, declared beside its rules, every field with what it means and where it comes from.

    @lines
    @dataclass(frozen=True)
    class RewardLines:
        flat_z: float = line(2.0, "a flat reward's last quarter ...", "science.md 6: ...")

A source is a seed (``seeds/``), a paper, a framework's documentation, a statistical
convention (science.md 6), or an operating point chosen on the generated families of healthy
and broken runs (``benchmarks/families.py``) with its precision and recall. Never a corpus
file: the corpus is a test set.

``Thresholds`` holds one instance of every check's lines. A field is set by its name, unique
across the checks (``rlvitals check --set NAME=VALUE``, ``Thresholds(clip_frac_warn=0.3)``);
a check reads its own with ``ctx.thresholds.of(ItsLines)``. ``python -m
rlvitals.checks.thresholds`` prints the table docs/checks.md keeps (a test holds them equal).

Constants that are not a rule's line (the five-update window, the 3-of-5 rule, a trend's
significance) stay module constants, each with a ``# source:`` comment on the line before it.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Iterator
from dataclasses import Field, field
from typing import Any, TypeVar

from ..errors import UsageError

__all__ = ["Thresholds", "line", "lines", "markdown"]

T = TypeVar("T")

# Lines classes by their qualified name (a module imported again replaces its own), and the
# check (module) that owns each.
_CLASSES: dict[str, type] = {}
_OWNERS: dict[type, str] = {}
# Modules that hold lines but are not checks themselves (read by several checks).
HELPERS = ("sequences", "composition", "jump", "mismatch_cause")


def line(default: Any, what: str, source: str) -> Any:
    """A threshold: its default, what it means (one phrase, for docs/checks.md) and its
    source (a seed, a paper, a framework's docs, a statistical convention, or an operating
    point on the families with its precision and recall)."""
    return field(default=default, metadata={"what": what, "source": source})


def lines(cls: type[T]) -> type[T]:
    """Register ``cls`` (a frozen dataclass of ``line`` fields) as its module's lines."""
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__}: expected a frozen dataclass")
    key = f"{cls.__module__}.{cls.__qualname__}"
    old = _CLASSES.pop(key, None)
    if old is not None:
        _OWNERS.pop(old, None)
    _CLASSES[key] = cls
    _OWNERS[cls] = cls.__module__.rsplit(".", 1)[-1]
    return cls


def classes() -> list[type]:
    """Every check's lines class, in the checks' order (importing every check module: one
    that fails to import raises, ``verdict.check_functions``)."""
    verdict = importlib.import_module(f"{__package__}.verdict")
    verdict.check_functions()
    for name in HELPERS:
        importlib.import_module(f"{__package__}.{name}")
    order = {name: i for i, name in enumerate([*verdict.CHECK_ORDER, *HELPERS])}
    return sorted(_OWNERS, key=lambda c: order.get(_OWNERS[c], len(order)))


def fields() -> Iterator[tuple[str, Field[Any]]]:
    """(owning check, field) for every threshold, in the checks' order."""
    for cls in classes():
        for f in dataclasses.fields(cls):
            yield _OWNERS[cls], f


def _index() -> dict[str, type]:
    """Field name -> the lines class that holds it; names are unique across the checks."""
    out: dict[str, type] = {}
    for cls in classes():
        for f in dataclasses.fields(cls):
            if f.name in out:
                raise TypeError(
                    f"threshold {f.name!r} declared twice ({out[f.name].__name__}, "
                    f"{cls.__name__}): --set needs unique names"
                )
            out[f.name] = cls
    return out


class Thresholds:
    """Every check's lines: one frozen instance of each check's dataclass. Set a field by its
    name (``Thresholds(clip_frac_warn=0.3)``); read a check's own with ``of(ItsLines)``, or
    any field by its name (``th.clip_frac_warn``)."""

    __slots__ = ("_by_class",)

    def __init__(self, **values: Any) -> None:
        index = _index()
        unknown = sorted(set(values) - set(index))
        if unknown:
            raise TypeError(f"unknown threshold(s): {', '.join(unknown)}")
        grouped: dict[type, dict[str, Any]] = {cls: {} for cls in classes()}
        for name, value in values.items():
            grouped[index[name]][name] = value
        object.__setattr__(self, "_by_class", {cls: cls(**kw) for cls, kw in grouped.items()})

    def of(self, cls: type[T]) -> T:
        """The lines of the check that declared ``cls``."""
        got: T = self._by_class[cls]
        return got

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by its values (a process pool sends it to its workers)."""
        return (_rebuild, (self.values(),))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not yet built (copy, unpickling): no field starts so
            raise AttributeError(name)
        for inst in self._by_class.values():
            if name in inst.__dataclass_fields__:
                return getattr(inst, name)
        raise AttributeError(f"no threshold named {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to threshold {name!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Thresholds) and self.values() == other.values()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        changed = {k: v for k, v in self.values().items() if v != _defaults()[k]}
        return f"Thresholds({', '.join(f'{k}={v!r}' for k, v in changed.items())})"

    def values(self) -> dict[str, Any]:
        """Every threshold by name."""
        return {
            k: v for inst in self._by_class.values() for k, v in dataclasses.asdict(inst).items()
        }

    def replace(self, **values: Any) -> Thresholds:
        """A copy with these fields set."""
        return Thresholds(**{**self.values(), **values})

    @staticmethod
    def fields() -> list[tuple[str, Field[Any]]]:
        """(owning check, field) for every threshold."""
        return list(fields())

    def with_overrides(self, pairs: dict[str, str]) -> Thresholds:
        """A copy with ``name=value`` overrides (from the CLI), each checked."""
        index = _index()
        known = {f.name: f for cls in index.values() for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for name, raw in pairs.items():
            if name not in known:
                raise UsageError(
                    f"unknown threshold {name!r}; expected one of: {', '.join(sorted(known))}"
                )
            try:
                values[name] = int(raw) if known[name].type in (int, "int") else float(raw)
            except ValueError:
                raise UsageError(f"threshold {name}: expected a number (not {raw!r})") from None
        return self.replace(**values)


def _rebuild(values: dict[str, Any]) -> Thresholds:
    return Thresholds(**values)


def _defaults() -> dict[str, Any]:
    return {f.name: f.default for _c, f in fields()}


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


# What the sources cite from the project's own notes (not shipped with the package), named
# for a user by the primary sources those notes summarise.
_NOTES = (
    (
        re.compile(r"science\.md 1"),
        "the mismatch literature (verl rollout_corr, tinker-cookbook, VCPO)",
    ),
    (re.compile(r"science\.md 2(?: detector)?"), "Cui et al. 2505.22617 (entropy)"),
    (re.compile(r"science\.md 3"), "GRPO's zero-variance groups (DAPO 2503.14476; p^G + (1-p)^G)"),
    (re.compile(r"science\.md 4"), "the reward-hacking literature (Gao et al.; Singhal et al.)"),
    (re.compile(r"science\.md 5"), "length and truncation (DAPO 2503.14476; verl, TRL clip_ratio)"),
    (re.compile(r"science\.md 6"), "change-point statistics (Montgomery & Runger)"),
    (re.compile(r"science\.md 7"), "RL-Insight (verl)"),
    (re.compile(r"DESIGN\.md"), "the judging principles (above)"),
)


def _for_users(source: str) -> str:
    for pattern, words in _NOTES:
        source = pattern.sub(words, source)
    return source


def markdown() -> str:
    """The thresholds table docs/checks.md keeps: check, name, default, meaning, source (the
    project's own notes named by the primary sources they summarise)."""
    out = [
        "| check | name | default | meaning | source |",
        "|---|---|---|---|---|",
    ]
    for check, f in fields():
        what = f.metadata["what"].replace("|", "\\|")
        src = _for_users(f.metadata["source"]).replace("|", "\\|")
        out.append(f"| {check} | `{f.name}` | {_shown(f.default)} | {what} | {src} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
