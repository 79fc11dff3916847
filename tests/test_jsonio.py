"""JSON Lines in and out: non-finite numbers, odd values, torn last lines, atomic files."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlvitals.jsonio import (
    clean,
    decode_line,
    dumps,
    encode,
    encode_line,
    read_complete_lines,
    to_float,
    write_json_atomic,
)


def test_non_finite_numbers_are_spelled_as_strings():
    rec = {"a": math.nan, "b": math.inf, "c": -math.inf, "d": [1.5, math.nan], "e": None}
    assert clean(rec) == {
        "a": "NaN",
        "b": "Infinity",
        "c": "-Infinity",
        "d": [1.5, "NaN"],
        "e": None,
    }
    assert encode(rec) == b'{"a":"NaN","b":"Infinity","c":"-Infinity","d":[1.5,"NaN"],"e":null}'
    assert json.loads(dumps(rec))["a"] == "NaN"


def test_numpy_scalars_arrays_tuples_and_keys_become_plain_json():
    rec = {
        1: np.float32(0.5),
        "b": np.int64(3),
        "c": np.array([1.0, np.nan]),
        "d": (1, 2),
        "e": np.bool_(True),
        "f": {3, 1},
    }
    assert clean(rec) == {"1": 0.5, "b": 3, "c": [1.0, "NaN"], "d": [1, 2], "e": True, "f": [1, 3]}
    assert decode_line(encode_line(clean(rec)))["c"] == [1.0, "NaN"]


def test_text_utf8_cannot_hold_is_escaped_not_fatal():
    out = decode_line(encode_line({"s": "a\ud800b"}))
    assert out == {"s": "a\\ud800b"}


def test_decode_accepts_the_bare_tokens_python_json_writes():
    assert math.isnan(decode_line(b'{"a": NaN}')["a"])
    assert decode_line('{"a": -Infinity}')["a"] == -math.inf
    with pytest.raises(ValueError):
        decode_line(b'{"a": ')


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, 1.0), (True, 1.0), ("NaN", math.nan), ("Infinity", math.inf), ("x", None), (None, None)],
)
def test_to_float(value, expected):
    got = to_float(value)
    assert got == expected or (math.isnan(got) and math.isnan(expected))


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_any_float_round_trips(x):
    back = to_float(decode_line(encode_line(clean({"x": x})))["x"])
    assert back == x or (math.isnan(back) and math.isnan(x))


def test_a_last_line_without_newline_waits_for_the_next_pass(tmp_path):
    p = tmp_path / "f.jsonl"
    p.write_bytes(b'{"a":1}\n{"a":2}\n{"a":')
    got = list(read_complete_lines(p))
    assert [(n, line) for n, _, line in got] == [(1, b'{"a":1}'), (2, b'{"a":2}')]
    end = got[-1][1]
    with open(p, "ab") as f:
        f.write(b"3}\n")
    more = list(read_complete_lines(p, end, first_line=3))
    assert [(n, line) for n, _, line in more] == [(3, b'{"a":3}')]


def test_an_oversized_line_is_skipped_by_number(tmp_path):
    p = tmp_path / "f.jsonl"
    p.write_bytes(b"x" * 100 + b"\n" + b'{"a":1}\n')
    got = list(read_complete_lines(p, max_line=50))
    assert [(n, line) for n, _, line in got] == [(1, None), (2, b'{"a":1}')]
    assert got[-1][1] == os.path.getsize(p)


def test_write_json_atomic_leaves_no_temporary_file(tmp_path):
    p = tmp_path / "run.json"
    write_json_atomic(p, {"x": math.nan})
    write_json_atomic(p, {"x": 1}, fsync=False)
    assert json.loads(p.read_text()) == {"x": 1}
    assert os.listdir(tmp_path) == ["run.json"]
