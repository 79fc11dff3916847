"""A light start: ``rlvitals --help`` loads the command modules and little else; ``check`` and
``metrics`` load neither the reference trainer nor the views they do not draw with; nothing
sets a process-wide environment variable on the way (the trainer's ``OMP_WAIT_POLICY`` is set
when the trainer loads torch, not when the CLI starts). Each case runs in a fresh interpreter,
so what it loads is what a user's ``rlvitals ...`` loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")
RUN = str(Path(__file__).parent / "data" / "verl" / "issue1208_console.log")
MAX_HELP_MODULES = 30

PROBE = """
import json, os, sys
from rlvitals.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
mods = sorted(m for m in sys.modules if m == "rlvitals" or m.startswith("rlvitals."))
print(json.dumps({"modules": mods, "omp": os.environ.get("OMP_WAIT_POLICY")}), file=sys.stderr)
"""


def _loaded(*argv: str) -> tuple[list[str], str | None]:
    """The rlvitals modules a fresh ``rlvitals ARGV`` loaded, and OMP_WAIT_POLICY after it."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    got = json.loads(out.stderr.strip().splitlines()[-1])
    return got["modules"], got["omp"]


def _named(modules: list[str], part: str) -> list[str]:
    return [m for m in modules if m.startswith(f"rlvitals.{part}")]


def test_help_loads_the_command_modules_and_little_else() -> None:
    modules, omp = _loaded("--help")
    assert len(modules) <= MAX_HELP_MODULES, modules
    assert not _named(modules, "grpo") and not _named(modules, "views"), modules
    assert omp is None  # nothing set in the user's process


@pytest.mark.parametrize(
    ("command", "views"),
    [("check", {"views.check", "views.fleet", "views.console"}), ("metrics", {"views.series"})],
)
def test_check_and_metrics_load_no_trainer_and_only_their_views(
    command: str, views: set[str]
) -> None:
    modules, omp = _loaded(command, RUN)
    assert not _named(modules, "grpo") and not _named(modules, "follow"), modules
    drawn = {m.removeprefix("rlvitals.") for m in _named(modules, "views.")}
    assert drawn <= views | {"views.console"}, drawn
    assert omp is None
