"""Mapping tables: a framework's metric keys onto the canonical names, by meaning (docs/metrics.md).

A table is data: each ``Rule`` maps one source key (or a regular expression over keys) to the
canonical name of what it really measures, with an optional linear transform (percent to
fraction, ``1 - x``). Keys that measure something else (k1 where the canonical metric is k3,
|Δp| where it is |Δlogp|, batch std where it is within-group std) are listed in ``unmapped``
with the reason, so ``rlvitals formats`` and docs/formats.md show what was left out and why.
Where a framework has no such metric, the canonical one is absent, never faked.

A table lists the keys its framework logs. A key ``schema.py`` already declares as a synonym is
listed as ``synonym(key, note)``, its canonical name and transform taken from the schema; a
``Rule`` says what the schema does not (a framework's own key, a transform, a pattern).

When two source keys map to one canonical name, the earlier rule wins for the whole run (a
``Mapper`` remembers the best source seen), so values never flip between sources by step.

A key no table rule maps goes on down one chain (``readers/keys.py``): synonyms declared in
``schema.py``, then normalised tokens; a key the table lists as not mapped stops at the table.
The Mapper records which step mapped each key (``RunData.resolved``) and why the others stayed
under their own names (``RunData.unmapped``). A ``None`` value (JSON ``null``) is no value: the
key is left out of that record (a periodic evaluation null between evaluations is not a NaN);
one that turns null for good is missing from there on, as one that vanished is
(``RunData.missing``); one null on every record is no metric at all
(``info["never_measured"]``).
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ReadError
from ..model import Presence, RunData
from ..schema import is_canonical
from . import keys as _keys

__all__ = ["Mapper", "MappingTable", "Rule", "apply_table", "load_user_mapping", "synonym"]


@dataclass(frozen=True)
class Rule:
    """``source`` (a key, or a regex if it starts with ``^``) -> ``target`` (may use ``\\1``).

    The canonical value is ``value * scale + offset``.
    """

    source: str
    target: str
    note: str = ""
    scale: float = 1.0
    offset: float = 0.0
    kind: str = "table"  # the step of the chain (keys.KINDS): table, user mapping, synonym...
    # Written as ``synonym(source)``: the canonical name and transform are schema.py's.
    schema: bool = field(default=False, compare=False)

    @property
    def is_pattern(self) -> bool:
        return self.source.startswith("^")

    def transform_text(self) -> str:
        if self.scale == 1.0 and self.offset == 0.0:
            return ""
        if self.scale == -1.0 and self.offset == 1.0:
            return "1 - x"
        parts = []
        if self.scale != 1.0:
            parts.append(f"x * {self.scale:g}")
        else:
            parts.append("x")
        if self.offset:
            parts.append(f"+ {self.offset:g}")
        return " ".join(parts)


def synonym(source: str, note: str = "") -> Rule:
    """A table rule for a key ``schema.py`` declares as a synonym of a canonical metric.

    The canonical name and the transform are the schema's (declared once); the table says that
    its framework logs the key, where it ranks among the table's rules for that metric (the
    first listed that a run logs wins), and what the framework's value is (``note``).
    """
    hit = _keys.declared(source)
    if hit is None:
        raise ValueError(f"{source!r} is not an exact synonym in schema.py; write a Rule")
    target, alias = hit
    return Rule(source, target, note, alias.scale, alias.offset, schema=True)


@dataclass(frozen=True)
class MappingTable:
    """The mapping of one source format: rules in priority order, and what is left out."""

    name: str
    rules: tuple[Rule, ...]
    unmapped: tuple[tuple[str, str], ...] = ()  # (source key, why it is not mapped)
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "rules": [
                {
                    "source": r.source,
                    "canonical": r.target,
                    "transform": r.transform_text() or None,
                    "note": r.note or None,
                }
                for r in self.rules
            ],
            "unmapped": [{"source": s, "why": why} for s, why in self.unmapped],
            "notes": list(self.notes),
        }


class Mapper:
    """Applies a MappingTable to records of one run, remembering the best source per target.

    Each key resolves once (cached) through the chain: user rules and the table first, then,
    unless the table lists the key as not mapped, the shared vocabulary (``keys.fallback``).
    A pattern rule whose expansion is not a canonical name does not match.
    """

    def __init__(self, table: MappingTable, run: RunData, *, extra: Iterable[Rule] = ()) -> None:
        self.rules = (*tuple(extra), *table.rules)
        self.table = table
        self.run = run
        self._exact: dict[str, list[tuple[int, Rule]]] = {}
        self._patterns: list[tuple[int, re.Pattern[str], Rule]] = []
        for i, r in enumerate(self.rules):
            if r.is_pattern:
                self._patterns.append((i, re.compile(r.source), r))
            else:
                self._exact.setdefault(r.source, []).append((i, r))
        self._blocked = _keys.blocker(table.unmapped)
        self._cache: dict[str, list[tuple[str, int, Rule]]] = {}
        self._best: dict[str, int] = {}  # target -> priority of the best source seen so far

    def _resolve(self, key: str) -> list[tuple[str, int, Rule]]:
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        out = resolve_key(key, self._exact, self._patterns, self._blocked, len(self.rules))
        self._cache[key] = out
        note_resolution(self.run, key, out, self._blocked)
        return out

    def add(self, step: int, record: Mapping[str, float | None], stream: str | None = None) -> None:
        """Record a step's source values under their own names and their canonical names.

        ``stream`` names where the record came from when one run is several writers' files
        (prime-rl's trainer and orchestrator): a key is judged missing only against the
        records of its own writer, never because another writer's file was read after it.

        ``None`` (a JSON ``null``, an empty cell) is no value: the key is absent from this
        record, as if it were not written (a periodic evaluation null between evaluations is
        not a NaN; a key that turns null for good is missing, like one that vanished:
        ``RunData.missing``). A key null on every record so far is listed in
        ``info["never_measured"]``, not made a metric.
        """
        run = self.run
        add = run.metrics.add
        if record:
            # The stream is named by the record's first key, written or not, so a record
            # whose first key is null this time stays in its stream.
            first = next(iter(record))
            stream = first if stream is None else f"{stream}\x1f{first}"
            if None in record.values():
                record = self._present(record)
            if run.presence is None:
                run.presence = Presence()
            run.presence.record(step, record, stream)
        never = run.info.get("never_measured")
        if never:
            for key in [k for k in never if k in record]:
                never.remove(key)
            if not never:
                del run.info["never_measured"]
        chosen: dict[str, tuple[int, float, str]] = {}
        best_of = self._best.get
        for key, value in record.items():
            for target, prio, rule in self._resolve(key):
                best = best_of(target)
                if best is not None and prio > best:
                    continue
                cur = chosen.get(target)
                if cur is None or prio < cur[0]:
                    chosen[target] = (prio, value * rule.scale + rule.offset, key)  # type: ignore[operator]
        original = run.original
        for key, value in record.items():
            name = key
            if (key in chosen and chosen[key][2] != key) or original.get(key, key) != key:
                # The source key spells a canonical name that another key fills (here, or
                # for the run: a record where the other is absent too): keep the source
                # value apart so the two never mix.
                name = f"{run.format}:{key}"
            run.source_keys.add(name)
            add(step, name, value)  # type: ignore[arg-type]
        for target, (prio, value, key) in chosen.items():
            best = best_of(target)
            if best is None or prio < best:
                self._best[target] = prio
                run.original[target] = key
            add(step, target, value)

    def _present(self, record: Mapping[str, float | None]) -> dict[str, float]:
        """The keys of ``record`` that hold a value; a key null before it ever had one is
        noted in ``info["never_measured"]``."""
        run = self.run
        out: dict[str, float] = {}
        for key, value in record.items():
            if value is not None:
                out[key] = value
            elif key not in run.metrics and key not in run.source_keys:
                never = run.info.setdefault("never_measured", [])
                if key not in never:
                    never.append(key)
        return out


def resolve_key(
    key: str,
    exact: Mapping[str, list[tuple[int, Rule]]],
    patterns: Iterable[tuple[int, re.Pattern[str], Rule]],
    blocked: Iterable[tuple[re.Pattern[str], str]],
    n_rules: int,
) -> list[tuple[str, int, Rule]]:
    """(canonical target, priority, rule) for ``key``: its rules, else the shared vocabulary."""
    out = [(r.target, i, r) for i, r in exact.get(key, ())]
    for i, pat, r in patterns:
        m = pat.match(key)
        if m:
            target = m.expand(r.target)
            if is_canonical(target):
                out.append((target, i, r))
    if out or any(rx.match(key) for rx, _ in blocked):
        return out
    for target, prio, kind, a in _keys.fallback(key):
        out.append(
            (target, n_rules + prio, Rule(a.source, target, a.note, a.scale, a.offset, kind))
        )
    return out


def note_resolution(
    run: RunData,
    key: str,
    out: list[tuple[str, int, Rule]],
    blocked: Iterable[tuple[re.Pattern[str], str]],
) -> None:
    """Record in ``run`` which rule mapped ``key`` (``resolved``), or why none did."""
    if out:
        target, _, rule = min(out, key=lambda t: t[1])
        kind = rule.kind
        if kind == "table" and rule.is_pattern and rule.target == r"\1":
            kind = "canonical"
        detail = "; ".join(x for x in (rule.source if rule.source != key else "", rule.note) if x)
        run.resolved[key] = (target, kind, detail)
        return
    for rx, why in blocked:
        if rx.match(key):
            run.unmapped[key] = f"the table leaves it out: {why}"
            return
    run.unmapped[key] = _keys.unmapped_reason(key)


def _rules_from(obj: Any, where: str) -> list[Rule]:
    rules = []
    if not isinstance(obj, dict):
        raise ReadError("expected a table of canonical name = source key", path=where)
    table = obj.get("metrics", obj) if isinstance(obj.get("metrics"), dict) else obj
    for target, spec in table.items():
        if target == "metrics":
            continue
        scale, offset, note = 1.0, 0.0, ""
        if isinstance(spec, str):
            source = spec
        elif isinstance(spec, dict) and isinstance(spec.get("source"), str):
            source = spec["source"]
            try:
                scale = float(spec.get("scale", 1.0))
                offset = float(spec.get("offset", 0.0))
            except (TypeError, ValueError):
                raise ReadError(
                    f"key {target!r}: 'scale' and 'offset' must be numbers", path=where
                ) from None
            note = str(spec.get("note", ""))
        else:
            raise ReadError(
                f"key {target!r}: expected a source key string or "
                f'{{source = "...", scale = 1.0}} (not {spec!r})',
                path=where,
            )
        if not is_canonical(target):
            raise ReadError(
                f"key {target!r} is not a canonical metric name (see `rlvitals formats` and "
                "docs/metrics.md)",
                path=where,
            )
        if source.startswith("^"):
            try:
                re.compile(source)
            except re.error as exc:
                raise ReadError(
                    f"key {target!r}: bad regular expression: {exc}", path=where
                ) from None
        rules.append(Rule(source, target, note or "user mapping", scale, offset, "user mapping"))
    return rules


def load_user_mapping(path: str | os.PathLike[str]) -> list[Rule]:
    """Rules from a user mapping file: TOML or JSON, ``canonical name = "source key"``.

    A value may also be a table ``{source = "key", scale = 0.01, offset = 0.0}``; a source
    starting with ``^`` is a regular expression. A top-level ``[metrics]`` table is accepted.
    User rules take precedence over the format's own.
    """
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ReadError(f"cannot read the mapping file: {exc.strerror}", path=p) from None
    try:
        if p.endswith(".json"):
            obj = json.loads(raw)
        else:
            obj = tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "JSON" if p.endswith(".json") else "TOML"
        raise ReadError(f"not valid {kind}: {exc}", path=p) from None
    return _rules_from(obj, p)


def apply_table(
    run: RunData, table: MappingTable, *, prefix: str = "", extra: Iterable[Rule] = ()
) -> None:
    """Map whole series already in ``run`` (source keys) onto canonical names.

    For each canonical target, the highest-priority rule with a source series present wins;
    ``prefix`` is stripped from source keys first (HF Trainer's ``train/`` in TensorBoard).
    Keys go through the same chain as the ``Mapper``'s (table, synonyms, tokens). Used where
    values arrive per key rather than per step (TensorBoard).
    """
    mapper = Mapper(table, run, extra=extra)
    keys = {k[len(prefix) :]: k for k in run.source_keys if k.startswith(prefix)}
    chosen: dict[str, tuple[int, str, Rule]] = {}
    for short, full in sorted(keys.items()):
        for target, prio, r in mapper._resolve(short):
            cur = chosen.get(target)
            if cur is None or prio < cur[0]:
                chosen[target] = (prio, full, r)
    for short, full in keys.items():
        if short != full:
            if short in run.resolved:
                run.resolved[full] = run.resolved.pop(short)
            if short in run.unmapped:
                run.unmapped[full] = run.unmapped.pop(short)
    for target, (_, full, r) in chosen.items():
        if target == full:
            run.original[target] = full
            continue
        s = run.metrics.get(full)
        if s is None:
            continue
        run.metrics.replace(target, s.steps, s.values * r.scale + r.offset)
        run.original[target] = full
