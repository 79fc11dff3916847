"""A big rollouts file read in pieces side by side (``readers._split``) reads exactly as one
pass does: the same rows, columns, string codes and warnings (line numbers included), for
clean files and damaged ones; a worker that fails costs only time."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from rlvitals.model import ATTEMPT_COLUMNS
from rlvitals.readers import _split, native, read


def _run(d: Path, lines: list[bytes], *, eol: bytes = b"\n", tail: bool = True) -> Path:
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"format": "rlvitals-run/1", "run_id": "r"}))
    steps = range(len(lines) // 40)
    (d / "steps.jsonl").write_text(
        "".join(json.dumps({"step": s, "reward/mean": 0.5}) + "\n" for s in steps)
    )
    body = eol.join(lines) + (eol if tail else b"")
    (d / "rollouts.jsonl").write_bytes(body)
    return d


def _lines(n: int, seed: int = 0) -> list[bytes]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        s = i // 40
        rec = {
            "step": s, "attempt_id": f"{s}-{i}", "group_id": f"{s}-g{i % 5}",
            "task_id": f"t{rnd.randrange(300)}", "policy_version": s - rnd.choice((0, 1)),
            "reward": rnd.choice((0.0, 1.0)), "trained": rnd.random() < 0.8,
            "discard_reason": rnd.choice((None, None, "no_variance", "stale")),
            "response_tokens": rnd.randrange(1, 900), "truncated": rnd.random() < 0.1,
            "lag": rnd.choice((0, 1)), "time": 1.7e9 + i, "duration": None,
            "metadata": {"turns": rnd.randrange(1, 5)},
        }  # fmt: skip
        out.append(json.dumps(rec).encode())
    return out


def _damaged(lines: list[bytes], seed: int = 1) -> list[bytes]:
    rnd = random.Random(seed)
    out = list(lines)
    for i in sorted(rnd.sample(range(len(out)), 60)):
        kind = i % 6
        if kind == 0:
            out[i] = b'{"step": 3, "reward": '  # cut short
        elif kind == 1:
            out[i] = out[i].replace(b'"reward": 1.0', b'"reward": NaN')  # a bare NaN
        elif kind == 2:
            out[i] = out[i].replace(b'{"step": ', b'{"step": -', 1)  # a step below 0
        elif kind == 3:
            out[i] = b"   "
        elif kind == 4:
            out[i] = out[i].replace(b'"lag": ', b'"lag": "x", "z": ', 1)  # a word for a number
        else:
            out[i] = out[i].replace(b'"reward": ', b'"reward": null, "z": ', 1)  # not graded
    return out


def _read(path: Path, parts: int) -> object:
    with _split.side_by_side(parts):
        return read(path)


def _same(a: object, b: object) -> None:
    ta, tb = a.attempts, b.attempts  # type: ignore[attr-defined]
    for col in ATTEMPT_COLUMNS:
        x, y = getattr(ta, col), getattr(tb, col)
        assert x.dtype == y.dtype, col
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), col
    assert (ta.task_ids, ta.group_ids, ta.discard_reasons) == (
        tb.task_ids,
        tb.group_ids,
        tb.discard_reasons,
    )
    assert a.warnings == b.warnings  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "shape",
    ["clean", "damaged", "crlf", "no_last_newline", "steps_out_of_order"],
)
def test_pieces_read_as_one_pass_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    monkeypatch.setattr(_split, "PIECE_BYTES", 40_000)  # pieces of a small file
    lines = _lines(3000)
    if shape == "damaged":
        lines = _damaged(lines)
    if shape == "steps_out_of_order":
        random.Random(2).shuffle(lines)
    d = _run(
        tmp_path / "r",
        lines,
        eol=b"\r\n" if shape == "crlf" else b"\n",
        tail=shape != "no_last_newline",
    )
    one = _read(d, 1)
    assert len(one.attempts) >= 2900
    if shape == "damaged":
        lined = [w for w in one.warnings if "rollouts.jsonl:" in w]
        assert len(lined) >= 20
        assert max(int(w.split("rollouts.jsonl:")[1].split(":")[0]) for w in lined) > 2000
    for parts in (2, 3, 4):
        assert len(_split.cut_points(d / "rollouts.jsonl", 0, parts, 1 << 20)) == parts - 1
        _same(one, _read(d, parts))


def test_a_worker_that_fails_costs_only_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_split, "PIECE_BYTES", 40_000)
    d = _run(tmp_path / "r", _damaged(_lines(3000)))
    one = _read(d, 1)

    def broken(*args: object) -> None:
        raise OSError("the worker's disk went away")

    monkeypatch.setattr(native, "_read_piece", broken)  # what the forked worker calls
    _same(one, _read(d, 3))


def test_a_small_file_is_one_piece(tmp_path: Path) -> None:
    d = _run(tmp_path / "r", _lines(200))
    assert _split.cut_points(d / "rollouts.jsonl", 0, 4, 1 << 20) == []
