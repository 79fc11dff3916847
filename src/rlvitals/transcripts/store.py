"""The transcripts of a run directory, read lazily, one step file at a time.

``transcripts/step-NNNNNN.json`` holds the attempts of update NNNNNN (docs/format.md). Nothing is
read until asked; a step's attempts are yielded one by one. Small files are decoded at once
(msgspec); large ones, and any file msgspec refuses, are streamed element by element in
bounded memory (``stream.py``), so a 50 MB file or a torn one costs what one attempt costs,
and every readable attempt of a broken file is still read. A problem with a file becomes one
warning naming it, never an exception.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ..jsonio import decode_shallow
from ..readers.base import open_binary
from ..schema import TRANSCRIPTS
from .stream import MAX_STRING, Stream
from .text import flatten

__all__ = ["Generation", "TranscriptAttempt", "TranscriptStore"]

FAST_LIMIT = 8 << 20  # files up to this size are decoded in one go
_STEP_FILE = re.compile(r"^step-(\d+)\.json$")
_DECODER = msgspec.json.Decoder()


def _shallow(raw: bytes) -> Any:
    """A JSON document too deep for the decoder, its deepest values null; None if not JSON."""
    try:
        return decode_shallow(raw)[0]
    except ValueError:
        return None


def reward_number(v: Any) -> float | None:
    """A number from a transcript's field (JSON ``NaN``/``Infinity`` spelled out too), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            x = float(v)
        except ValueError:
            return None
        return x if v in ("NaN", "Infinity", "-Infinity") or math.isfinite(x) else None
    return None


def _int(v: Any) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return int(v) if math.isfinite(v) else None


@dataclass(slots=True)
class Generation:
    """One model reply of an attempt (docs/format.md ``generations[]``)."""

    prompt: Any = None  # text or chat messages; None with trace = "samples"
    completion: Any = None
    policy_version: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    trains: bool | None = None
    _texts: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def has_text(self) -> bool:
        return self.completion is not None or self.prompt is not None

    def completion_text(self) -> str:
        """The reply as text (chat messages and tool calls flattened)."""
        got = self._texts.get("completion")
        if got is None:
            got = self._texts["completion"] = (
                flatten(self.completion, 2 * MAX_STRING) if self.completion is not None else ""
            )
        return got

    def prompt_text(self) -> str:
        """The prompt as text (chat messages flattened)."""
        got = self._texts.get("prompt")
        if got is None:
            got = self._texts["prompt"] = (
                flatten(self.prompt, 2 * MAX_STRING) if self.prompt is not None else ""
            )
        return got


@dataclass(slots=True)
class TranscriptAttempt:
    """One attempt of a transcript file: identity, reward and its generations."""

    step: int
    index: int  # position in its step's file
    attempt_id: str
    group_id: str | None
    task_id: str | None
    reward: float | None
    trained: bool | None
    generations: list[Generation] = field(default_factory=list)
    cut: int = 0  # bytes of text not read (over the per-string bound)

    @property
    def has_text(self) -> bool:
        return any(g.has_text for g in self.generations)

    @property
    def policy_version(self) -> int | None:
        for g in self.generations:
            if g.policy_version is not None:
                return g.policy_version
        return None

    @property
    def completion_tokens(self) -> int | None:
        got = [g.completion_tokens for g in self.generations if g.completion_tokens is not None]
        return sum(got) if got else None

    @property
    def prompt_tokens(self) -> int | None:
        got = [g.prompt_tokens for g in self.generations if g.prompt_tokens is not None]
        return got[0] if got else None

    def final_text(self) -> str:
        """The text of the last reply (where the answer is)."""
        for g in reversed(self.generations):
            if g.completion is not None:
                return g.completion_text()
        return ""

    def completions_text(self) -> str:
        """Every reply's text, in order (what the policy wrote, tool calls included)."""
        return "\n".join(g.completion_text() for g in self.generations if g.completion is not None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "attempt_id": self.attempt_id,
            "group_id": self.group_id,
            "task_id": self.task_id,
            "reward": self.reward,
            "trained": self.trained,
            "policy_version": self.policy_version,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "text_cut_bytes": self.cut,
            "generations": [
                {
                    "policy_version": g.policy_version,
                    "prompt": g.prompt_text() if g.prompt is not None else None,
                    "completion": g.completion_text() if g.completion is not None else None,
                    "prompt_tokens": g.prompt_tokens,
                    "completion_tokens": g.completion_tokens,
                    "finish_reason": g.finish_reason,
                    "trains": g.trains,
                }
                for g in self.generations
            ],
        }


def _attempt(step: int, index: int, rec: Any, cut: int) -> TranscriptAttempt | None:
    if not isinstance(rec, dict):
        return None
    gens = []
    raw = rec.get("generations")
    for g in raw if isinstance(raw, list) else []:
        if not isinstance(g, dict):
            g = {"completion": g}
        # What the writer writes (ints or null, a string, a boolean) is taken as it is; the
        # rest goes through the lenient conversions.
        pv, pt, ct = g.get("policy_version"), g.get("prompt_tokens"), g.get("completion_tokens")
        fr = g.get("finish_reason")
        trains = g.get("trains")
        gens.append(
            Generation(
                g.get("prompt"),
                g.get("completion"),
                pv if pv is None or type(pv) is int else _int(pv),
                pt if pt is None or type(pt) is int else _int(pt),
                ct if ct is None or type(ct) is int else _int(ct),
                fr if fr is None or type(fr) is str else None,
                trains if trains is None or type(trains) is bool else None,
            )
        )
    aid = rec.get("attempt_id")
    gid, tid = rec.get("group_id"), rec.get("task_id")
    trained = rec.get("trained")
    reward = rec.get("reward")
    return TranscriptAttempt(
        step,
        index,
        aid if type(aid) is str else str(aid) if aid is not None else f"{step}#{index}",
        gid if gid is None or type(gid) is str else str(gid),
        tid if tid is None or type(tid) is str else str(tid),
        reward if type(reward) is float else reward_number(reward),
        trained if trained is None or type(trained) is bool else None,
        gens,
        cut,
    )


class TranscriptStore:
    """The transcript files of one run directory.

    ``warnings`` collects one line per problem file (each file is named once); pass ``warn``
    to hear of them as they happen.
    """

    def __init__(self, run_dir: str | os.PathLike[str], warn: Callable[[str], None] | None = None):
        p = Path(run_dir)
        self.run_dir = p if p.is_dir() else p.parent
        self.dir = self.run_dir / TRANSCRIPTS
        self.warnings: list[str] = []
        self._warned: set[str] = set()
        self._warn = warn
        self._steps: list[int] | None = None

    @property
    def exists(self) -> bool:
        return self.dir.is_dir()

    unreadable: str | None = None  # why the transcripts folder could not be listed

    def warn(self, path: Path, message: str) -> None:
        key = str(path)
        if key in self._warned:
            return
        self._warned.add(key)
        line = f"{path}: {message}"
        self.warnings.append(line)
        if self._warn is not None:
            self._warn(line)

    def had_problem(self, step: int) -> bool:
        """Whether reading ``step``'s file raised a warning."""
        return str(self.path(step)) in self._warned

    def steps(self, refresh: bool = False) -> list[int]:
        """Steps that have a transcript file, ascending."""
        if self._steps is None or refresh:
            found = []
            try:
                with os.scandir(self.dir) as it:
                    for e in it:
                        m = _STEP_FILE.match(e.name)
                        if m:
                            found.append(int(m.group(1)))
            except FileNotFoundError:
                found = []
            except OSError as exc:
                found = []
                self.unreadable = f"cannot read the folder ({exc.strerror or exc})"
                self.warn(self.dir, f"{self.unreadable}; its transcripts are not read")
            self._steps = sorted(found)
        return self._steps

    def path(self, step: int) -> Path:
        return self.dir / f"step-{step:06d}.json"

    def file_key(self, step: int) -> tuple[int, int] | None:
        """(size, mtime_ns) of the step's file, or None if it is missing."""
        try:
            st = self.path(step).stat()
        except OSError:
            return None
        return (st.st_size, st.st_mtime_ns)

    def iter_step(self, step: int) -> Iterator[TranscriptAttempt]:
        """The attempts of update ``step``, in file order (nothing if it has no file)."""
        p = self.path(step)
        try:
            f = open_binary(p)
        except FileNotFoundError:
            return
        except OSError as exc:
            self.warn(p, f"cannot read transcript file ({exc.strerror or exc}); skipped")
            return
        with f:
            try:
                size = os.fstat(f.fileno()).st_size
            except OSError:
                size = FAST_LIMIT + 1
            if size <= FAST_LIMIT:
                try:
                    raw = f.read()
                    doc = _DECODER.decode(raw)
                except RecursionError:  # a reply nested deeper than the decoder goes
                    doc = _shallow(raw)
                    self.warn(p, "values nested deeper than 64 levels replaced by null")
                except (msgspec.DecodeError, OSError):
                    doc = None
                if isinstance(doc, list):
                    for i, rec in enumerate(doc):
                        a = _attempt(step, i, rec, 0)
                        if a is not None:
                            yield a
                    bad = sum(1 for rec in doc if not isinstance(rec, dict))
                    if bad:
                        self.warn(p, f"{bad} entries are not attempt objects; skipped")
                    return
                f.seek(0)
            yield from self._stream(step, p, f)

    def _stream(self, step: int, p: Path, f: Any) -> Iterator[TranscriptAttempt]:
        s = Stream(f)
        bad = 0
        i = 0
        cut = 0
        for el in s:
            try:
                rec = _DECODER.decode(el.data)
            except RecursionError:
                rec = _shallow(el.data)
                self.warn(p, "values nested deeper than 64 levels replaced by null")
            except msgspec.DecodeError:
                rec = None
            a = _attempt(step, i, rec, el.cut)
            i += 1
            if a is None:
                bad += 1
                continue
            cut += el.cut
            yield a
        problems = []
        if s.error:
            problems.append(f"not a complete JSON list ({s.error}); read the {i} attempts before")
        if bad:
            problems.append(f"{bad} entries unreadable or not attempt objects; skipped")
        if s.skipped:
            problems.append(f"{s.skipped} attempts over {64} MB; skipped")
        if cut:
            problems.append(f"{cut} bytes of over-long text not read")
        if problems:
            self.warn(p, "; ".join(problems))

    def find(self, attempt_id: str, step: int | None = None) -> TranscriptAttempt | None:
        """The attempt with ``attempt_id``: in ``step``'s file when given (fast), else the
        first file whose bytes mention the id."""
        if step is not None:
            for a in self.iter_step(step):
                if a.attempt_id == attempt_id:
                    return a
            return None
        needle = msgspec.json.encode(attempt_id)
        for s in self.steps():
            if not self._mentions(self.path(s), needle):
                continue
            for a in self.iter_step(s):
                if a.attempt_id == attempt_id:
                    return a
        return None

    @staticmethod
    def _mentions(path: Path, needle: bytes) -> bool:
        keep = len(needle)
        tail = b""
        try:
            with open_binary(path) as f:
                while True:
                    chunk = f.read(1 << 20)
                    if not chunk:
                        return False
                    if needle in tail + chunk:
                        return True
                    tail = chunk[-keep:]
        except OSError:
            return False
