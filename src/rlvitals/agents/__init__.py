"""rlvitals for coding agents: the read-only tools ``rlvitals mcp`` serves over MCP.

    tools = Tools(Roots(["runs/"]))      # every path is checked against the roots
    tools.find_runs("runs/")             # every run under a folder
    tools.check_run("runs/my-run")       # verdict, findings, evidence, next action
    tools.read_metrics("runs/my-run", ["reward/mean"], first_step=100, last_step=200)
    tools.list_transcripts("runs/my-run", flag="*")
    tools.compare_runs("runs/a", "runs/b")

``tools`` holds what each tool does, as plain functions returning JSON-able dicts (testable
without the ``mcp`` extra); ``server`` binds them to the MCP SDK (``pip install
'rlvitals[mcp]'``). Every answer comes from the same discovery, reading and judging as
``rlvitals check`` (``source.find_runs``, ``Source.read``, ``fleet.judging.judged``): the
tools never judge a second way.
"""

from __future__ import annotations

from ..errors import PathRefused
from .tools import Roots, Tools

__all__ = ["PathRefused", "Roots", "Tools"]
