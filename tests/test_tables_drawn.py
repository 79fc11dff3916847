"""Shapes drawn, not collected (issue 36, item 2): files of per-step metrics drawn from every
layout x real metric names x step columns and cadences x value encodings x noise lines x line
endings (``tables_draw``), each read as a user's file is (sniffed). Every value written must
be read back at its step, with no step the file never wrote; or the file is refused with one
clear message that names the file and what is missing. ``benchmarks/tables.py`` draws 10,000
and reports the share read back by shape."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvitals.errors import RlvitalsError
from rlvitals.readers import read
from tables_draw import (
    ENCODINGS_FOR,
    ENDINGS,
    LAYOUTS,
    NOISE,
    NOISY,
    STEPS_FOR,
    Shape,
    draw,
    mismatches,
    names_for,
    real_names,
)

NAMES = real_names()
POOL = {layout: names_for(layout, NAMES) for layout in LAYOUTS}


@st.composite
def cases(draw_: st.DrawFn) -> tuple[Shape, list[str], int, int]:
    layout = draw_(st.sampled_from(LAYOUTS))
    noise: tuple[str, ...] = ()
    if layout in NOISY:
        noise = tuple(sorted(draw_(st.sets(st.sampled_from(NOISE), max_size=len(NOISE)))))
    shape = Shape(
        layout,
        draw_(st.sampled_from(STEPS_FOR[layout])),
        draw_(st.sampled_from((0, 1, 5, 10))),
        draw_(st.sampled_from((1, 2, 5, 10, 50))),
        draw_(st.sampled_from(ENCODINGS_FOR[layout])),
        noise,
        draw_(st.sampled_from(ENDINGS)),
        draw_(st.booleans()),
    )
    names = draw_(st.lists(st.sampled_from(POOL[layout]), min_size=1, max_size=6, unique=True))
    return shape, names, draw_(st.integers(3, 40)), draw_(st.integers(0, 2**32 - 1))


def test_every_layout_has_real_names_to_draw() -> None:
    assert len(NAMES) >= 200
    for layout in LAYOUTS:
        assert len(POOL[layout]) >= 50, layout


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases())
def test_a_drawn_file_reads_back_every_value_at_its_step(case) -> None:
    shape, names, n, seed = case
    if shape.layout == "parquet":
        pytest.importorskip("pyarrow")
    with tempfile.TemporaryDirectory() as d:
        drawn = draw(random.Random(seed), shape, names, n, Path(d))
        try:
            run = read(drawn.path)
        except RlvitalsError as exc:
            message = str(exc)
            assert message.startswith(str(drawn.path)), message
            assert "expected" in message or " no " in message, message
            return
        wrong = mismatches(run, drawn)
        assert not wrong, (shape, run.format, wrong[:5], run.warnings[:3])
