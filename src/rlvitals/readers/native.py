"""rlvitals run directories (FORMAT.md, format 1): run.json, steps, rollouts, evals, progress."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import ReadError
from ..jsonio import decode_line, read_complete_lines, to_float
from ..model import RunData
from ..schema import EVALS, PROGRESS, RESERVED_STEP_KEYS, RUN_JSON, STEPS
from . import Format, register

__all__ = ["NativeReader"]


class _Tail:
    """Where one JSON Lines file was read up to."""

    __slots__ = ("line", "offset", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.line = 1


def _is_run_dir(p: Path) -> bool:
    if p.is_file():
        p = p.parent if p.name in (RUN_JSON, STEPS) else p
    return p.is_dir() and ((p / RUN_JSON).is_file() or (p / STEPS).is_file())


class NativeReader:
    """Reads an rlvitals run directory incrementally."""

    name = "rlvitals"

    def __init__(self, path: Path) -> None:
        if path.is_file():
            path = path.parent
        self.dir = path
        self.run = RunData(source=str(path), format=self.name)
        self._tails: dict[str, _Tail] = {}
        self._run_json_mtime: float | None = None

    def poll(self) -> bool:
        changed = self._read_run_json()
        changed |= self._read_lines(STEPS, self._on_step)
        changed |= self._read_lines(EVALS, self._on_eval)
        changed |= self._read_lines(PROGRESS, self._on_progress)
        return changed

    def _read_run_json(self) -> bool:
        p = self.dir / RUN_JSON
        try:
            mtime = p.stat().st_mtime
        except FileNotFoundError:
            return False
        if mtime == self._run_json_mtime:
            return False
        try:
            info = decode_line(p.read_bytes())
        except (ValueError, OSError) as exc:
            # run.json is rewritten atomically; a bad one is a real problem, but not fatal.
            self.run.warnings.append(f"{p}: not valid JSON ({exc}); run info skipped")
            self._run_json_mtime = mtime
            return False
        if not isinstance(info, dict):
            self.run.warnings.append(f"{p}: expected a JSON object; run info skipped")
        else:
            self.run.info = info
        self._run_json_mtime = mtime
        return True

    def _read_lines(self, name: str, handle: Any) -> bool:
        p = self.dir / name
        if not p.is_file():
            return False
        tail = self._tails.get(name)
        if tail is None:
            tail = self._tails[name] = _Tail(p)
        changed = False
        for lineno, end, line in read_complete_lines(p, tail.offset, first_line=tail.line):
            tail.offset, tail.line = end, lineno + 1
            if line is None:
                self.run.warnings.append(f"{p}:{lineno}: line too long; skipped")
                continue
            if not line.strip():
                continue
            try:
                rec = decode_line(line)
            except ValueError as exc:
                self.run.warnings.append(f"{p}:{lineno}: not JSON ({exc}); skipped")
                continue
            if not isinstance(rec, dict):
                self.run.warnings.append(f"{p}:{lineno}: expected a JSON object; skipped")
                continue
            try:
                handle(rec, p, lineno)
            except ReadError as exc:
                self.run.warnings.append(str(exc))
                continue
            changed = True
        return changed

    def _on_step(self, rec: dict[str, Any], p: Path, lineno: int) -> None:
        step = rec.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            raise ReadError(
                f"expected an integer 'step' (not {step!r}); skipped", path=str(p), line=lineno
            )
        add = self.run.metrics.add
        for key, value in rec.items():
            if key == "step":
                continue
            v = to_float(value)
            if v is None:
                if value is not None and key not in RESERVED_STEP_KEYS:
                    self.run.warnings.append(
                        f"{p}:{lineno}: metric {key!r} is not a number ({value!r}); skipped"
                    )
                continue
            add(step, key, v)

    def _on_eval(self, rec: dict[str, Any], p: Path, lineno: int) -> None:
        step, suite, score = rec.get("step"), rec.get("suite"), to_float(rec.get("score"))
        if not isinstance(step, int) or not isinstance(suite, str) or score is None:
            raise ReadError(
                "expected 'step', 'suite' and a numeric 'score'; skipped", path=str(p), line=lineno
            )
        self.run.evals.append(rec)
        self.run.metrics.add(step, f"eval/{suite}/score", score)

    def _on_progress(self, rec: dict[str, Any], p: Path, lineno: int) -> None:
        t = to_float(rec.get("time"))
        if t is None or not math.isfinite(t):
            raise ReadError("expected a numeric 'time'; skipped", path=str(p), line=lineno)
        self.run.heartbeats.append(rec)


register(
    Format(
        "rlvitals",
        "rlvitals run directory (run.json, steps.jsonl, rollouts.jsonl, ...)",
        _is_run_dir,
        NativeReader,
        priority=0,
    )
)
