"""Files of per-step metrics drawn, not collected (issue 36, item 2): the property test
(``tests/test_tables_drawn.py``) and the benchmark (``benchmarks/tables.py``) draw from here.

A ``Shape`` is a layout (JSON Lines, a JSON list of records, an object of per-step lists,
records under a section, pandas' split orient, CSV, TSV, Parquet, a markdown table, an ASCII
grid, TRL's console dicts, ``k: v`` log lines) x a step column (its name, none, one told by its
content, ``epoch`` with ``batch``) and its cadence x a value encoding (numbers, quoted numbers,
percents, scientific, integers, NaN/Infinity among them, null gaps) x noise lines (tqdm bars,
warnings, printed samples, config dumps) x line endings. ``write`` makes the file and returns
what a reading must give: every value at its step.

Metric names are real ones: every exact key of the frameworks' tables (``readers/``) and of
``tests/data/handwritten/names.toml``, less those a layout cannot hold as written (a ``|`` in
a markdown cell) and those that are bookkeeping by name (a step counter, an epoch, an index).
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvitals.readers import formats
from rlvitals.readers.console import CONSOLE_TABLES
from rlvitals.readers.tables import BATCH_NAMES, EPOCH_NAMES, INDEX_NAMES, step_rank

HERE = Path(__file__).parent
NAMES_TOML = HERE / "data" / "handwritten" / "names.toml"

# Layouts: those written by a library (no noise in them) and console-like text (noise drawn).
ROW_LAYOUTS = (
    "jsonl",
    "json_records",
    "json_columns",
    "json_nested",
    "json_split",
    "csv",
    "tsv",
    "parquet",
)
TEXT_LAYOUTS = ("markdown", "ascii_grid", "ascii_psql", "trl_dicts", "log_pairs")
LAYOUTS = ROW_LAYOUTS + TEXT_LAYOUTS
NOISY = ("jsonl", *TEXT_LAYOUTS)

# Step columns by name (as loops and frameworks print them), and the other ways.
STEP_NAMES = (
    "step", "Step", "global_step", "Global Step", "_step", "train/global_step", "iteration",
    "iter", "it", "update", "training_step", "train_step", "num_updates", "global_steps",
)  # fmt: skip
OTHER_STEPS = ("none", "content", "epoch+batch")
# What each layout can carry.
STEPS_FOR = {
    **{k: (*STEP_NAMES, *OTHER_STEPS) for k in ROW_LAYOUTS},
    "markdown": (*STEP_NAMES, "none", "content"),
    "ascii_grid": (*STEP_NAMES, "none", "content"),
    "ascii_psql": (*STEP_NAMES, "none", "content"),
    "trl_dicts": ("none", "step", "global_step", "global_step/max_steps"),
    "log_pairs": ("step", "Step", "iter", "iteration", "update", "global_step", "it"),
}
ENCODINGS = (
    "float",
    "rounded",
    "quoted",
    "percent",
    "scientific",
    "int",
    "nonfinite",
    "null_gaps",
    "placeholders",
)
ENCODINGS_FOR = {
    **{k: ENCODINGS for k in ROW_LAYOUTS},
    "parquet": ("float", "rounded", "int", "nonfinite", "null_gaps", "quoted", "placeholders"),
    "markdown": ("float", "rounded", "percent", "scientific", "int", "nonfinite", "null_gaps"),
    "ascii_grid": ("float", "rounded", "percent", "scientific", "int", "nonfinite", "null_gaps"),
    "ascii_psql": ("float", "rounded", "percent", "scientific", "int", "nonfinite", "null_gaps"),
    "trl_dicts": ("float", "rounded", "quoted", "scientific", "int", "nonfinite", "null_gaps"),
    "log_pairs": ("float", "rounded", "scientific", "int", "nonfinite"),
}
NOISE = ("bars", "warnings", "samples", "config")
ENDINGS = ("\n", "\r\n")
SUFFIX = {
    "jsonl": ".jsonl",
    "json_records": ".json",
    "json_columns": ".json",
    "json_nested": ".json",
    "json_split": ".json",
    "csv": ".csv",
    "tsv": ".tsv",
    "parquet": ".parquet",
    "markdown": ".md",
    "ascii_grid": ".txt",
    "ascii_psql": ".log",
    "trl_dicts": ".log",
    "log_pairs": ".log",
}


@dataclass(frozen=True)
class Shape:
    """What a drawn file is: the dimensions the benchmark reports by."""

    layout: str
    step: str  # a step column's name, or "none", "content", "epoch+batch", "global_step/max_steps"
    start: int
    every: int
    encoding: str
    noise: tuple[str, ...]
    ending: str
    pretty: bool  # JSON indented

    def key(self) -> str:
        noise = "+".join(self.noise) or "clean"
        step = self.step if self.step in (*OTHER_STEPS, "global_step/max_steps") else "named"
        return f"{self.layout} | step {step} | {self.encoding} | {noise}"


# -- names --------------------------------------------------------------------------------


def _bookkeeping(name: str) -> bool:
    n = re.sub(r"[\s\-]+", "_", name.strip().lower())
    return (
        step_rank(name) is not None
        or n in EPOCH_NAMES
        or n in BATCH_NAMES
        or n in INDEX_NAMES
        or n in ("time", "_timestamp", "timestamp")
        or n.endswith(("epoch", "/epoch"))
    )


def real_names() -> list[str]:
    """Every exact metric key of the frameworks' tables and of ``names.toml``."""
    out: dict[str, None] = {}
    for n in tomllib.loads(NAMES_TOML.read_text())["names"]:
        out.setdefault(n["key"], None)
    tables = [f.table for f in formats() if f.table is not None] + list(CONSOLE_TABLES)
    for t in tables:
        for r in t.rules:
            if not r.is_pattern and r.source.strip() == r.source:
                out.setdefault(r.source, None)
    return [k for k in out if not _bookkeeping(k)]


_PAIR_KEY = re.compile(r"^[A-Za-z_][\w./-]*$")


def names_for(layout: str, names: list[str]) -> list[str]:
    """The names a layout can hold as written (a console key: one token; a cell: no bar)."""
    if layout == "log_pairs":
        return [n for n in names if _PAIR_KEY.match(n) and not n.lower().startswith(("it", "iter"))]
    if layout in ("markdown", "ascii_grid", "ascii_psql"):
        return [n for n in names if "|" not in n and "  " not in n and n[:1].isalpha()]
    if layout == "trl_dicts":
        return [n for n in names if "'" not in n and "\\" not in n and "  " not in n]
    if layout == "tsv":
        return [n for n in names if "\t" not in n]
    return names


# -- values -------------------------------------------------------------------------------


def _value(rng: random.Random, encoding: str, i: int) -> tuple[Any, float | None]:
    """(what is written, what it denotes: None for no value)."""
    scale = rng.choice((1e-6, 1e-3, 0.01, 1.0, 1.0, 1.0, 10.0, 1000.0))
    x = rng.uniform(-1.0, 1.0) * scale if rng.random() < 0.2 else rng.uniform(0.0, 1.0) * scale
    if encoding == "int":
        v = rng.randint(0, 5000)
        return v, float(v)
    if encoding == "nonfinite" and rng.random() < 0.15:
        return rng.choice((math.nan, math.inf, -math.inf)), None  # denotes itself: see below
    if encoding == "null_gaps" and rng.random() < 0.3 and i > 0:
        return None, None
    if encoding == "rounded":
        x = round(x, 4)
    if encoding == "scientific":
        t = f"{x:.6e}"
        return ("sci", t), float(t)
    if encoding == "quoted":
        t = f"{x:.4g}"
        return ("quoted", t), float(t)
    if encoding == "percent":
        t = f"{100 * x:.2f}"
        return ("percent", t + "%"), float(t) / 100.0
    return x, x


def _nonfinite(v: Any) -> bool:
    return isinstance(v, float) and not math.isfinite(v)


# -- the file -----------------------------------------------------------------------------


@dataclass
class Drawn:
    """A drawn file and what reading it must give."""

    path: Path
    shape: Shape
    names: list[str]
    steps: list[int]  # the step of each record, as a reading must number it
    values: dict[str, dict[int, float]]  # key -> step -> value (NaN, inf included)


def _steps(shape: Shape, n: int) -> tuple[list[int], list[dict[str, Any]]]:
    """The steps a reading must give, and the step cells each row carries."""
    if shape.step == "none":
        # pandas' split orient writes its row index (0, 1, ...): the rows' steps by content
        first = 0 if shape.layout == "json_split" else 1
        return list(range(first, n + first)), [{} for _ in range(n)]
    if shape.step == "epoch+batch":
        per = 4
        first = shape.every if shape.start else 0  # batches from 1 (every, 2*every...) or 0
        last = first + (per - 1) * shape.every
        cells, steps = [], []
        for i in range(n):
            e, b = divmod(i, per)
            batch = first + b * shape.every
            steps.append(e * (last - first + shape.every) + batch)
            cells.append({"epoch": e + shape.start, "batch": batch})
        return steps, cells
    steps = [shape.start + i * shape.every for i in range(n)]
    if shape.step == "content":
        col = {"markdown": "#", "ascii_grid": "#", "ascii_psql": ""}.get(shape.layout, "")
        return steps, [{col: s} for s in steps]
    if shape.step == "global_step/max_steps":
        return steps, [{shape.step: f"{s}/{steps[-1]}"} for s in steps]
    return steps, [{shape.step: s} for s in steps]


# An evaluation a loop writes on every record: its score every k records, a placeholder
# between (readers.tables.placeholders reads the placeholder as no value).
EVAL_KEY = "val/accuracy"


def _evaluation(rng: random.Random, n: int) -> list[tuple[float, float | None]] | None:
    """Per record (written, denotes): scores every k >= 2 records from a drawn phase (at
    least three of them varying, now and then one scoring the placeholder itself), the
    placeholder (0.0, or -1.0) between; None where ``n`` holds fewer than three."""
    if n < 6:
        return None
    k = rng.randint(2, n // 3)
    phase = rng.randrange(0, n - 2 * k)
    c = rng.choice((0.0, 0.0, -1.0))
    out: list[tuple[float, float | None]] = []
    for i in range(n):
        if i >= phase and (i - phase) % k == 0:
            v = c if rng.random() < 0.1 and i > phase + 2 * k else round(rng.uniform(0.05, 0.95), 4)
            out.append((v, v))
        else:
            out.append((c, None))
    return out


def draw(rng: random.Random, shape: Shape, names: list[str], n: int, directory: Path) -> Drawn:
    """Write one drawn file of ``shape`` under ``directory``."""
    steps, step_cells = _steps(shape, n)
    rows: list[dict[str, Any]] = []
    evaluation = _evaluation(rng, n) if shape.encoding == "placeholders" else None
    if evaluation is not None:
        names = [*[k for k in names if k != EVAL_KEY], EVAL_KEY]
    values: dict[str, dict[int, float]] = {k: {} for k in names}
    for i, (s, sc) in enumerate(zip(steps, step_cells)):
        row = dict(sc)
        if evaluation is not None:
            row[EVAL_KEY], denotes = evaluation[i]
            if denotes is not None:
                values[EVAL_KEY][s] = denotes
        for k in names:
            if evaluation is not None and k == EVAL_KEY:
                continue
            written, denotes = _value(rng, shape.encoding, i)
            if _nonfinite(written):
                denotes = written
            elif written is None:
                row[k] = None
                continue
            row[k] = written
            values[k][s] = denotes  # type: ignore[assignment]
        if shape.layout in TEXT_LAYOUTS and all(row.get(k) is None for k in names):
            # A printed record or table row holds at least one value (a dict of Nones, a row
            # of dashes, is not printed as one).
            row[names[0]] = values[names[0]][s] = round(rng.uniform(0.0, 1.0), 4)
        rows.append(row)
    path = directory / f"drawn{SUFFIX[shape.layout]}"
    WRITERS[shape.layout](path, shape, rows, names, rng)
    return Drawn(path, shape, names, steps, values)


def _json_value(v: Any) -> Any:
    if isinstance(v, tuple):
        return v[1]  # a quoted number, a percent, scientific: written as a string
    return v


def _text(v: Any, *, quoted: bool = False) -> str:
    if v is None:
        return ""
    if isinstance(v, tuple):
        return v[1]
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    return str(v)


def _lines(path: Path, lines: list[str], shape: Shape, rng: random.Random) -> None:
    out: list[str] = []
    stepless = shape.step == "none"
    if shape.noise and shape.layout != "jsonl":
        out += _noise(rng, shape.noise, 3, shape.layout, stepless=stepless)
    for i, line in enumerate(lines):
        if (
            shape.noise
            and shape.layout in ("jsonl", "trl_dicts", "log_pairs")
            and i
            and rng.random() < 0.3
        ):
            out += _noise(rng, shape.noise, 1, shape.layout, stepless=stepless)
        out.append(line)
    if shape.noise and shape.layout != "jsonl":
        out += _noise(rng, ("warnings",), 1, shape.layout)
    path.write_bytes((shape.ending.join(out) + shape.ending).encode("utf-8"))


def _write_jsonl(
    path: Path, shape: Shape, rows: list[dict], names: list[str], rng: random.Random
) -> None:
    lines = [json.dumps({k: _json_value(v) for k, v in r.items()}) for r in rows]
    _lines(path, lines, shape, rng)


def _dump(path: Path, shape: Shape, doc: Any) -> None:
    text = json.dumps(doc, indent=2 if shape.pretty else None)
    path.write_bytes(text.replace("\n", shape.ending).encode("utf-8"))


def _write_records(
    path: Path, shape: Shape, rows: list[dict], names: list[str], rng: random.Random
) -> None:
    _dump(path, shape, [{k: _json_value(v) for k, v in r.items()} for r in rows])


def _write_columns(
    path: Path, shape: Shape, rows: list[dict], names: list[str], rng: random.Random
) -> None:
    cols = list(rows[0])
    _dump(path, shape, {c: [_json_value(r.get(c)) for r in rows] for c in cols})


def _write_nested(
    path: Path, shape: Shape, rows: list[dict], names: list[str], rng: random.Random
) -> None:
    doc = {
        "config": {"learning_rate": 1e-6, "betas": [0.9, 0.999], "seeds": [1, 2, 3]},
        "run": {
            "name": "drawn",
            "metrics": [{k: _json_value(v) for k, v in r.items()} for r in rows],
        },
    }
    _dump(path, shape, doc)


def _write_split(
    path: Path, shape: Shape, rows: list[dict], names: list[str], rng: random.Random
) -> None:
    cols = list(rows[0])
    doc = {
        "columns": cols,
        "index": list(range(len(rows))),
        "data": [[_json_value(r.get(c)) for c in cols] for r in rows],
    }
    _dump(path, shape, doc)


def _write_delimited(
    path: Path, shape: Shape, rows: list[dict], names: list[str], rng: random.Random
) -> None:
    cols = list(rows[0])
    buf = io.StringIO()
    w = csv.writer(
        buf, delimiter="\t" if shape.layout == "tsv" else ",", lineterminator=shape.ending
    )
    w.writerow(cols)
    for r in rows:
        w.writerow([_text(r.get(c)) for c in cols])
    path.write_bytes(buf.getvalue().encode("utf-8"))


def _write_parquet(
    path: Path, shape: Shape, rows: list[dict], names: list[str], rng: random.Random
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = list(rows[0])
    data = {}
    for c in cols:
        col = [r.get(c) for r in rows]
        if any(isinstance(v, tuple) for v in col):
            col = [None if v is None else _text(v) for v in col]
        elif all(v is None or isinstance(v, int) for v in col) and c not in names:
            pass
        else:
            col = [None if v is None else float(v) if not isinstance(v, str) else v for v in col]
        data[c] = col
    pq.write_table(pa.table(data), path)


def _cells(rows: list[dict], cols: list[str]) -> list[list[str]]:
    return [[_text(r.get(c)) or "-" for c in cols] for r in rows]


def _write_markdown(
    path: Path, shape: Shape, rows: list[dict], names: list[str], rng: random.Random
) -> None:
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(c) + " |" for c in _cells(rows, cols)]
    _lines(path, lines, shape, rng)


def _write_ascii(
    path: Path, shape: Shape, rows: list[dict], names: list[str], rng: random.Random
) -> None:
    cols = list(rows[0])
    body = _cells(rows, cols)
    widths = [max(len(c), *(len(r[i]) for r in body)) for i, c in enumerate(cols)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + " |"

    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    if shape.layout == "ascii_grid":  # tabulate's "grid"
        head = "+" + "+".join("=" * (w + 2) for w in widths) + "+"
        lines = [rule, line(cols), head]
        for r in body:
            lines += [line(r), rule]
    else:  # tabulate's "psql"
        mid = "|" + "+".join("-" * (w + 2) for w in widths) + "|"
        lines = [rule, line(cols), mid, *(line(r) for r in body), rule]
    _lines(path, lines, shape, rng)


def _py(v: Any, shape: Shape) -> str:
    if isinstance(v, tuple):
        return repr(v[1])  # transformers' ProgressCallback: f"{v:.4g}", printed quoted
    if isinstance(v, float):
        return (
            "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
        )
    return repr(v)


def _write_trl(
    path: Path, shape: Shape, rows: list[dict], names: list[str], rng: random.Random
) -> None:
    lines = []
    for r in rows:
        items = [(k, v) for k, v in r.items() if k in names] + [
            (k, v) for k, v in r.items() if k not in names
        ]
        lines.append("{" + ", ".join(f"{k!r}: {_py(v, shape)}" for k, v in items) + "}")
    _lines(path, lines, shape, rng)


_PAIR_STYLES = ("{k}: {v}", "{k}={v}", "{k} = {v}")
_STEP_STYLES = ("{name} {s} |", "{name} {s}:", "[{name} {s}]", "{name}={s}", "{name}: {s},")


def _write_pairs(
    path: Path, shape: Shape, rows: list[dict], names: list[str], rng: random.Random
) -> None:
    pair = rng.choice(_PAIR_STYLES)
    head = rng.choice(_STEP_STYLES)
    sep = rng.choice((" | ", ", ", "  ", " "))
    if "=" in pair and pair != "{k}={v}":
        sep = " | "  # "k = v k = v" cannot be told apart
    lines = []
    for r in rows:
        s = r[shape.step]
        pairs = sep.join(pair.format(k=k, v=_text(r[k])) for k in names if r.get(k) is not None)
        lines.append(head.format(name=shape.step, s=s) + " " + pairs)
    _lines(path, lines, shape, rng)


WRITERS = {
    "jsonl": _write_jsonl,
    "json_records": _write_records,
    "json_columns": _write_columns,
    "json_nested": _write_nested,
    "json_split": _write_split,
    "csv": _write_delimited,
    "tsv": _write_delimited,
    "parquet": _write_parquet,
    "markdown": _write_markdown,
    "ascii_grid": _write_ascii,
    "ascii_psql": _write_ascii,
    "trl_dicts": _write_trl,
    "log_pairs": _write_pairs,
}


# -- noise --------------------------------------------------------------------------------

_BARS = (
    "Loading checkpoint shards: 100%|##########| {n}/{n} [00:03<00:00,  1.52s/it]",
    "Map: 100%|##########| 7473/7473 [00:00<00:00, 40123.17 examples/s]",
    "Processed prompts: 100%|##########| 64/64 [00:04<00:00, 15.10it/s, est. speed input: 1893.22 toks/s]",
    "\r  3%|3         | 6/200 [00:31<16:50,  5.21s/it]\r  4%|4         | 8/200 [00:41<16:40,  5.21s/it]",
)
_WARNINGS = (
    "UserWarning: `max_new_tokens` is set; step 3 of the generation config is ignored",
    "WARNING:root:Step 12 took longer than expected; the scheduler will catch up",
    "/usr/lib/python3.11/site-packages/torch/utils/checkpoint.py:91: FutureWarning: use_reentrant=False",
    "[rank0]:[W1207 10:00:01.000000 123 ProcessGroupNCCL.cpp:4561] Warning: barrier() using device 0",
    "INFO 12-07 10:00:00 [__init__.py:239] Automatically detected platform cuda.",
)
_SAMPLES = (
    "Question: Natalia sold clips to 48 of her friends in April. How many clips did she sell?",
    "Answer: 72",
    "Completion: <think>48 / 2 = 24, 48 + 24 = 72</think> The answer is 72.",
    "-------------------------------------------------------------",
    "Prompt: <|im_start|>user\\nWhat is 12 * 7?<|im_end|>",
)
_CONFIGS = {
    "jsonl": ('{"config": {"learning_rate": 1e-06, "num_generations": 8, "beta": 0.04}}',),
    "text": (
        "GRPOConfig(output_dir='out', learning_rate=1e-06, num_generations=8, beta=0.04, max_steps=200)",
        "Namespace(lr=1e-06, batch_size=8, seed=42, epochs=3)",
    ),
}


def _noise(
    rng: random.Random, kinds: tuple[str, ...], n: int, layout: str, *, stepless: bool = False
) -> list[str]:
    out = []
    # A bar in progress printed beside records without a step numbers them (its position is
    # their step, as tqdm's training bar gives it): beside those, only bars that have ended.
    bars = _BARS[:3] if stepless else _BARS
    for _ in range(n):
        kind = rng.choice(kinds)
        if kind == "bars":
            out.append(rng.choice(bars).format(n=rng.choice((1, 2, 4))))
        elif kind == "warnings":
            out.append(rng.choice(_WARNINGS))
        elif kind == "samples":
            out.append(rng.choice(_SAMPLES))
        else:
            out.append(rng.choice(_CONFIGS["jsonl" if layout == "jsonl" else "text"]))
    return out


# -- drawing a shape with a random source (the benchmark); hypothesis draws the same fields --


def random_shape(rng: random.Random) -> Shape:
    layout = rng.choice(LAYOUTS)
    step = rng.choice(STEPS_FOR[layout])
    noise: tuple[str, ...] = ()
    if layout in NOISY and rng.random() < 0.6:
        noise = tuple(sorted(rng.sample(NOISE, rng.randint(1, len(NOISE)))))
    return Shape(
        layout,
        step,
        rng.choice((0, 1, 5, 10)),
        rng.choice((1, 2, 5, 10, 50)),
        rng.choice(ENCODINGS_FOR[layout]),
        noise,
        rng.choice(ENDINGS),
        rng.random() < 0.5,
    )


# -- what a reading must give ---------------------------------------------------------------


def series_of(run: Any, key: str) -> Any:
    """The series a source key was kept under (``format:key`` where another key filled the
    canonical name it spells)."""
    s = run.series(key)
    if s is None or key not in run.source_keys:
        s = run.series(f"{run.format}:{key}") or s
    return s


def mismatches(run: Any, drawn: Drawn) -> list[str]:
    """What the reading got wrong: a value missing or other at its step, a step invented."""
    out: list[str] = []
    want_steps = set(drawn.steps)
    for key, by_step in drawn.values.items():
        if not by_step:
            continue
        s = series_of(run, key)
        if s is None:
            out.append(f"{key!r} not read")
            continue
        got = dict(zip(s.steps.tolist(), s.values.tolist()))
        for step, v in by_step.items():
            g = got.get(step)
            if g is None:
                out.append(f"{key!r} has no value at step {step}")
            elif not _same(g, v):
                out.append(f"{key!r} at step {step}: read {g!r}, written {v!r}")
        extra = sorted(set(got) - set(by_step))
        if extra:
            out.append(f"{key!r} has values at steps never written: {extra[:5]}")
    invented = sorted({int(x) for x in run.steps()} - want_steps)
    if invented:
        out.append(f"steps never written: {invented[:5]}")
    return out


def _same(a: float, b: float) -> bool:
    if math.isnan(b):
        return math.isnan(a)
    if math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
