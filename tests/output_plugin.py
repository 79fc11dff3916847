"""A third-party output as a package would ship it: one file, registered by an entry point.

``install(site)`` writes the package's one module and a ``*.dist-info`` with its
``entry_points.txt`` into ``site``; with ``site`` on ``sys.path``, ``importlib.metadata`` finds
the ``recorder`` output in the ``rlvitals.outputs`` group, as it would after ``pip install``
(nothing is installed). ``--to recorder=FILE`` then records every alert it is handed, one
JSON line each, in FILE.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

MODULE = '''"""rlv_recorder: each alert rlvitals hands it, one JSON line in a file."""

import json

from rlvitals.outputs import Output


class Recorder(Output):
    def __init__(self, path):
        self.path = path
        self.closed = False

    def update(self, run, update):
        with open(self.path, "a", encoding="utf-8") as f:
            for finding, before in update.new_findings:
                f.write(json.dumps({
                    "run": run.name,
                    "check": finding.check,
                    "severity": finding.severity,
                    "verdict": finding.verdict,
                    "metric": finding.metric,
                    "previous": before,
                }) + "\\n")

    def close(self, timeout=10.0):
        self.closed = True
        return 0
'''


def install(site: Path) -> Path:
    """The package in ``site`` (a folder to put on ``sys.path``); returns ``site``."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "rlv_recorder.py").write_text(MODULE)
    info = site / "rlv_recorder-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rlv-recorder\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[rlvitals.outputs]\nrecorder = rlv_recorder:Recorder\n")
    return site


def recorded(path: Path) -> list[dict[str, Any]]:
    """The alerts the recorder wrote to ``path``, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def serve_once(paths: list[Path], outputs: list[Any]) -> None:
    """What ``rlvitals serve`` does with its outputs, in-process: follow the runs, judge
    each once, hand the outputs every update, stop, close them."""
    from rlvitals.follow.hub import Hub

    hub = Hub(paths, outputs=outputs)
    for _ in range(100):
        hub.poll()
        if all(r.report is not None for r in hub.runs.values()):
            break
        time.sleep(0.05)
    hub.stop()
    assert hub.close(5) == 0
