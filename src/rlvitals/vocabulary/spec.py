"""The types of the canonical metric declaration, and the helpers its rows are written with."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["NAME", "Alias", "MetricSpec", "metric", "one_minus", "specs"]

# A pattern synonym's variable segment: one path segment, the ``name`` group.
NAME = r"(?P<name>[^/]+)"


@dataclass(frozen=True)
class Alias:
    """A key another framework or tool logs a metric under.

    ``source`` is an exact key, or a regular expression when it starts with ``^`` (then
    ``target`` is the canonical name it expands to, ``\\g<name>`` for its groups). The canonical
    value is ``value * scale + offset``; ``note`` says who logs it and what it is.
    """

    source: str
    target: str = ""
    scale: float = 1.0
    offset: float = 0.0
    note: str = ""


@dataclass(frozen=True)
class MetricSpec:
    """One canonical metric: name, family (the check that reads it), meaning, and synonyms.

    ``label`` is the short name views show; ``key`` marks the numbers ``rlvitals watch`` shows
    for every update. ``aliases`` are the keys other frameworks and peers log it under;
    ``plot`` names the dashboard plot that draws it.
    """

    name: str
    family: str
    description: str
    label: str = ""
    key: bool = False
    aliases: tuple[Alias, ...] = field(default=(), compare=False)
    plot: str = ""  # the dashboard plot that draws it (views/dashboard.py PLOTS)
    glob: str = ""  # for a family: the names it covers as a glob (default: <...> -> *)


_Row = tuple[str, str, str, bool, tuple[Alias, ...], str]


def metric(
    name: str,
    description: str,
    *aliases: str | Alias,
    label: str = "",
    key: bool = False,
    plot: str = "",
) -> _Row:
    """One metric's row: its name, meaning and synonyms (a plain string is an exact key)."""
    al = tuple(a if isinstance(a, Alias) else Alias(a) for a in aliases)
    return (name, description, label, key, al, plot)


def specs(family: str, rows: list[_Row]) -> list[MetricSpec]:
    """The family's rows as specs (the label defaults to the name's last segment)."""
    return [
        MetricSpec(n, family, d, lb or n.rsplit("/", 1)[-1], k, al, plot=pl)
        for n, d, lb, k, al, pl in rows
    ]


def one_minus(source: str, note: str) -> Alias:
    """A 1 - x synonym: a share of groups *without* signal where we count those with it."""
    return Alias(source, scale=-1.0, offset=1.0, note=note)
