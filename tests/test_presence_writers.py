"""A run written by several processes, each to a file of its own (prime-rl's older layout:
``trainer/metrics.jsonl`` beside ``orchestrator/metrics.jsonl``): a key is missing only when
its own writer stops logging it, never because the other writer's file is read after it."""

from __future__ import annotations

import json
from pathlib import Path

from rlvitals.checks import run_checks
from rlvitals.readers import read


def _write(path: Path, rows: list[dict[str, float]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _run(tmp_path: Path, *, orchestrator_stops_at: int | None = None) -> Path:
    out = tmp_path / "outputs"
    orch = []
    for i in range(30):
        row = {"step": i, "time": 1000.0 + 10 * i, "reward/mean": 0.2 + 0.01 * i}
        if orchestrator_stops_at is None or i < orchestrator_stops_at:
            row["off_policy/mean"] = 0.5
        orch.append(row)
    _write(out / "orchestrator" / "metrics.jsonl", orch)
    train = [
        {"step": i, "time": 1005.0 + 10 * i, "mismatch_kl/all/mean": 0.001, "loss/mean": 0.1}
        for i in range(30)
    ]
    _write(out / "trainer" / "metrics.jsonl", train)
    return out


def _missing(out: Path) -> list[str]:
    data = read(out)
    assert data.format == "prime-rl"
    report = run_checks(data, now=1_300.0)
    return [
        f"{f.first_step} {f.title}"
        for f in report.findings
        if f.check == "nonfinite" and f.severity in ("warn", "fail")
    ]


def test_two_writers_files_are_no_missing_keys(tmp_path: Path) -> None:
    assert _missing(_run(tmp_path)) == []


def test_a_key_its_own_writer_stops_logging_is_missing(tmp_path: Path) -> None:
    found = _missing(_run(tmp_path, orchestrator_stops_at=15))
    assert len(found) == 1 and found[0].startswith("15 "), found
