"""The shape issue 38 gave the live stage, held by a test: one place builds a judge from
options (and the CLI's flags one more), the live classes take configured objects (at most 7
parameters each), the polling loops live in ``follow/`` (and the trainer's own loop), and
``views/`` only draws: it builds no Judge, Follower or Fleet and opens no reader."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from rlvitals.follow import Fleet, Follower
from rlvitals.follow.hub import Hub
from rlvitals.follow.watch import Watcher

PKG = Path(__file__).resolve().parent.parent / "src" / "rlvitals"


def _trees() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(), str(p)) for p in sorted(PKG.rglob("*.py"))}


def _called(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _calls(tree: ast.AST, names: set[str]) -> list[int]:
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and _called(n) in names]


def test_a_judge_is_built_in_at_most_two_places() -> None:
    places = [
        f"{p.relative_to(PKG)}:{line}" for p, t in _trees().items() for line in _calls(t, {"Judge"})
    ]
    assert len(places) <= 2, places


def test_the_live_classes_take_at_most_seven_parameters() -> None:
    for cls in (Follower, Fleet, Watcher, Hub):
        params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
        assert len(params) <= 7, (cls.__name__, params)


def _polls(loop: ast.While) -> bool:
    """A loop that follows runs: it polls them (``Follower.poll``, ``Fleet.poll``) inside.
    A retry's backoff, a timer's beat or an event stream's wait are loops of their own."""
    return bool(_calls(loop, {"poll", "poll_once"}))


def test_polling_loops_live_in_the_live_stage_and_the_trainer() -> None:
    where = {PKG / "follow", PKG / "grpo"}
    outside = [
        f"{p.relative_to(PKG)}:{n.lineno}"
        for p, t in _trees().items()
        if not any(d in p.parents for d in where)
        for n in ast.walk(t)
        if isinstance(n, ast.While) and _polls(n)
    ]
    assert outside == [], outside


def test_views_build_no_judge_follower_or_fleet_and_open_no_reader() -> None:
    builders = {"Judge", "Follower", "Fleet", "Hub", "Watcher", "judging", "find_runs"}
    found = []
    for p, t in _trees().items():
        if PKG / "views" not in p.parents:
            continue
        for n in ast.walk(t):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            name = _called(n)
            reads = isinstance(f, ast.Name) and f.id in ("read", "read_run")
            reads |= (
                isinstance(f, ast.Attribute)
                and f.attr in ("read", "read_run")
                and isinstance(f.value, ast.Name)
                and f.value.id in ("readers", "source", "Source")
            )
            if name in builders or reads:
                found.append(f"{p.relative_to(PKG)}:{n.lineno} {name}")
    assert found == [], found
