"""The one table layer (``readers/tables.py``): the shapes issue 36 found refused or misread,
each on a file drawn here (never a copy of a real one), and the periodic evaluation written as
``null`` between evaluations (issue 37, first hour, item 3)."""

from __future__ import annotations

import io
import json
import math
import random
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from rlvitals import read
from rlvitals.checks import run_checks
from rlvitals.errors import UnknownFormatError
from rlvitals.readers.tables import Rows, cell, find_steps, step_rank

N = 40


def _curve(seed: int = 1) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    reward = [round(0.2 + 0.5 * i / N + rng.gauss(0, 0.02), 4) for i in range(N)]
    kl = [round(0.001 * i, 5) for i in range(N)]
    return reward, kl


def _cli(argv: list[str]) -> tuple[int, str, str]:
    from rlvitals.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _at(run, key: str) -> dict[int, float]:
    s = run.series(key)
    assert s is not None, (key, sorted(run.source_keys))
    return dict(zip(s.steps.tolist(), s.values.tolist()))


# -- the shapes issue 36 names --------------------------------------------------------------


@pytest.mark.parametrize("with_step", [False, True])
@pytest.mark.parametrize("indent", [None, 2])
def test_a_json_object_of_per_step_lists_is_read(tmp_path: Path, with_step: bool, indent) -> None:
    reward, kl = _curve()
    doc: dict = {"rewards_avg": reward, "kl_avg": kl}
    if with_step:
        doc = {"step": list(range(10, 10 * N + 1, 10)), **doc}
    p = tmp_path / "history.json"
    p.write_text(json.dumps(doc, indent=indent))
    run = read(p)
    steps = list(range(10, 10 * N + 1, 10)) if with_step else list(range(1, N + 1))
    assert _at(run, "rewards_avg") == dict(zip(steps, reward))
    assert _at(run, "kl_avg") == dict(zip(steps, kl))
    assert run.original["reward/mean"] == "rewards_avg"
    numbered = any("numbered in order" in w for w in run.warnings)
    assert numbered is (not with_step)  # the reading says so


def test_a_csv_whose_step_column_is_update(tmp_path: Path) -> None:
    reward, kl = _curve()
    p = tmp_path / "log.csv"
    p.write_text(
        "update,reward,kl\n"
        + "".join(f"{i * 4},{r},{k}\n" for i, (r, k) in enumerate(zip(reward, kl)))
    )
    run = read(p)
    assert run.format == "csv"
    assert _at(run, "reward/mean") == {i * 4: r for i, r in enumerate(reward)}
    assert "update" not in run.source_keys and "update" not in run.unmapped
    rc, out, _ = _cli(["formats", "--explain", str(p)])
    assert rc == 0 and "step column 'update'" in out


def test_json_lines_whose_step_is_training_step(tmp_path: Path) -> None:
    # open-instruct's key: the step, not a metric left unmapped.
    reward, _ = _curve()
    p = tmp_path / "metrics.jsonl"
    p.write_text(
        "".join(
            json.dumps({"training_step": 2 * i + 1, "reward": r}) + "\n"
            for i, r in enumerate(reward)
        )
    )
    run = read(p)
    assert run.format == "jsonl"
    assert _at(run, "reward/mean") == {2 * i + 1: r for i, r in enumerate(reward)}
    assert "training_step" not in run.unmapped and "training_step" not in run.source_keys
    assert not any("numbered" in w for w in run.warnings)


def _trl_dict(step: int, reward: float, first: str = "loss") -> dict:
    return {
        first: 0.001 * step,
        "grad_norm": 0.31 + step / 1000,
        "learning_rate": 1e-6 * (1 - step / 200),
        "num_tokens": 1234.0 * step,
        "completions/mean_length": 150.0 + step,
        "reward": reward,
        "reward_std": 0.35,
        "frac_reward_zero_std": 0.1,
        "kl": 0.0001 * step,
        "entropy": 0.6,
        "epoch": step / 200,
    }


def _printed(d: dict) -> str:
    # transformers' ProgressCallback.on_log: floats formatted f"{v:.4g}", the dict printed
    return str({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in d.items()})


def _bar(desc: str, n: int, total: int) -> str:
    pct = int(100 * n / total)
    return f"{desc}: {pct:3d}%|{'#' * (pct // 10):<10}| {n}/{total} [00:01<00:00, 12.00it/s]"


@pytest.mark.parametrize("first", ["loss", "train/loss"])
def test_a_trl_console_of_40_quoted_dicts_among_finished_bars_is_numbered_in_order(
    tmp_path: Path, first: str
) -> None:
    # Shards loaded (bars 1/1, 2/2, 4/4), a dataset mapped (7473/7473), the training bar to
    # 200/200 and 40 logged dicts with quoted values, each drawn over the training bar at its
    # step (transformers' ProgressCallback updates the bar, then writes the logs): no bar
    # that ended before a record numbers it (the old reading gave steps 1, 2, 4, 200, 7473).
    # The dicts are numbered in order (1..40), or by the training bar under each (5..200,
    # the global steps); never by another bar.
    reward, _ = _curve(2)
    lines = ["INFO 12-07 10:00:00 [__init__.py:239] Automatically detected platform cuda."]
    lines += [_bar("Loading checkpoint shards", n, n) for n in (1, 2, 4)]
    lines.append(_bar("Map", 7473, 7473).replace("it/s", " examples/s"))
    lines.append("UserWarning: `max_new_tokens` is set; step 3 of the generation config is ignored")
    for i in range(N):
        step = 5 * (i + 1)
        lines.append(
            "\r"
            + _bar("", step, 200)
            + "\r"
            + " " * 40
            + "\r"
            + _printed(_trl_dict(step, reward[i], first))
        )
    lines.append(_bar("", 200, 200))
    lines.append(
        str(
            {
                "train_runtime": 7473.2,
                "train_samples_per_second": 0.214,
                "train_loss": 0.1,
                "epoch": 1.0,
            }
        )
    )
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    run = read(p)
    steps = [int(s) for s in run.series("reward/mean").steps]
    assert steps in (list(range(1, N + 1)), list(range(5, 5 * N + 1, 5))), steps
    want = {s: float(f"{r:.4g}") for s, r in zip(steps, reward)}
    assert _at(run, "reward/mean") == want


def test_trl_console_values_written_as_quoted_strings(tmp_path: Path) -> None:
    reward, _ = _curve(3)
    p = tmp_path / "out.txt"
    p.write_text("".join(_printed(_trl_dict(i + 1, r)) + "\n" for i, r in enumerate(reward)))
    run = read(p)
    assert _at(run, "reward/mean") == {i + 1: float(f"{r:.4g}") for i, r in enumerate(reward)}
    assert _at(run, "train/grad_norm")[3] == pytest.approx(0.313)


# -- null is no value; NaN is a value --------------------------------------------------------


def _eval_rows(null: object) -> list[dict]:
    rng = random.Random(3)
    rows = []
    for s in range(0, 600, 10):
        t = s / 10
        score = round(0.2 + 0.5 * (1 - math.exp(-t / 20)) + rng.gauss(0, 0.02), 4)
        ev = round(0.25 + 0.005 * t, 3) if s % 50 == 0 else null
        rows.append({"iteration": s, "score": score, "eval_acc": ev})
    return rows


def test_a_periodic_eval_null_between_evaluations_leaves_a_healthy_run_learning(
    tmp_path: Path,
) -> None:
    p = tmp_path / "evals_null.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in _eval_rows(None)))
    run = read(p)
    assert run.missing == {}
    rep = run_checks(run)
    assert rep.verdict != "non_finite", [f.title for f in rep.findings]
    assert not [f for f in rep.findings if f.check == "nonfinite"]


def test_a_real_nan_is_still_non_finite(tmp_path: Path) -> None:
    rows = _eval_rows(None)
    for r in rows[30:]:
        r["score"] = float("nan")
    p = tmp_path / "nan.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))  # bare NaN tokens
    rep = run_checks(read(p))
    assert rep.verdict == "non_finite", [f.title for f in rep.findings]


def test_a_reward_null_for_good_is_still_missing(tmp_path: Path) -> None:
    rows = _eval_rows(None)
    for r in rows[30:]:
        r["score"] = None
    p = tmp_path / "gone.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = read(p)
    assert run.missing.get("score") == 300
    assert run_checks(run).verdict == "non_finite"


# -- the layer itself -----------------------------------------------------------------------


def test_cells_read_quoted_numbers_percents_and_non_finite_values() -> None:
    assert cell("'0.9513'") == 0.9513 and cell('"0.25"') == 0.25 and cell("85%") == 0.85
    assert cell("12.3s") == 12.3 and cell(7) == 7.0 and cell(True) == 1.0
    assert math.isnan(cell("NaN")) and cell("Infinity") == math.inf and cell("-inf") == -math.inf
    for absent in (None, "", "null", "None", "N/A", "NA", "-"):
        assert cell(absent) is None
    assert cell("grpo-run-3") == "grpo-run-3" and cell([1, 2]) is None


@pytest.mark.parametrize(
    "name",
    [
        "step",
        "Step",
        "global_step",
        "Global Step",
        "train/global_step",
        "_step",
        "iteration",
        "iter",
        "it",
        "update",
        "training_step",
        "train_step",
        "global_steps",
        "num_updates",
    ],
)
def test_a_step_column_is_found_by_name(name: str) -> None:
    assert step_rank(name) is not None
    rows = [{"reward": 0.1 * i, name: 3 * i} for i in range(5)]
    got = find_steps(rows)
    assert (got.how, got.column) == ("name", name)


@pytest.mark.parametrize("name", ["time/step", "step_time", "max_steps", "epoch", "reward"])
def test_other_names_are_not_steps(name: str) -> None:
    assert step_rank(name) is None


def test_a_step_column_is_found_by_content_and_else_records_are_numbered() -> None:
    rows = [{"k": 2 * i, "reward": 0.1 * i} for i in range(6)]
    assert (find_steps(rows).how, find_steps(rows).column) == ("content", "k")
    # a counter of tokens is never the step; nor a column that goes back
    rows = [{"reward": 0.1 * i, "num_tokens": 1000 * i} for i in range(6)]
    assert find_steps(rows).how == "order"
    rows = [{"k": [3, 1, 2, 5, 4, 6][i], "reward": 0.1 * i} for i in range(6)]
    assert find_steps(rows).how == "order"
    rows = [{"epoch": 1.0 + i / 10, "reward": 0.1} for i in range(6)]  # HF's fractional epoch
    assert find_steps(rows).how == "order"


def test_epoch_with_batch_counts_the_batches_on(tmp_path: Path) -> None:
    p = tmp_path / "e.csv"
    rows = [(e, b, 0.1 * e + 0.001 * b) for e in (1, 2, 3) for b in range(10, 101, 10)]
    p.write_text("epoch,batch,reward\n" + "".join(f"{e},{b},{r}\n" for e, b, r in rows))
    run = read(p)
    steps = [int(s) for s in run.series("reward/mean").steps]
    assert steps == list(range(10, 301, 10))


def test_json_records_nested_under_sections_are_prefixed_by_their_section(tmp_path: Path) -> None:
    reward, _ = _curve()
    doc = {
        "config": {"lr": 1e-6, "betas": [0.9, 0.999, 0.5]},
        "train": [{"step": i + 1, "reward": r} for i, r in enumerate(reward)],
        "eval": {"step": [10, 20, 30, 40], "acc": [0.3, 0.4, 0.5, 0.55]},
    }
    p = tmp_path / "results.json"
    p.write_text(json.dumps(doc))
    run = read(p)
    assert _at(run, "reward/mean") == {i + 1: r for i, r in enumerate(reward)}
    assert _at(run, "eval/acc") == {10: 0.3, 20: 0.4, 30: 0.5, 40: 0.55}
    assert not [k for k in run.source_keys if "betas" in k or "lr" in k]


@pytest.mark.parametrize("orient", ["records", "split", "index", "columns", "table"])
def test_pandas_json_orients_are_read(tmp_path: Path, orient: str) -> None:
    pd = pytest.importorskip("pandas")
    reward, kl = _curve()
    df = pd.DataFrame({"update": range(0, 5 * N, 5), "reward": reward, "kl": kl})
    p = tmp_path / f"df_{orient}.json"
    df.to_json(p, orient=orient)
    run = read(p)
    assert _at(run, "reward/mean") == {5 * i: r for i, r in enumerate(reward)}
    assert not [k for k in run.source_keys if k in ("", "index", "update")]


def test_a_pandas_csv_index_column_is_not_a_metric(tmp_path: Path) -> None:
    p = tmp_path / "p.csv"
    p.write_text(",step,reward\n" + "".join(f"{i},{i * 2},{0.1 * i}\n" for i in range(30)))
    run = read(p)
    assert "" not in run.source_keys and "" not in run.unmapped
    assert _at(run, "reward/mean")[4] == pytest.approx(0.2)


def test_a_parquet_table_is_read(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    reward, _ = _curve()
    p = tmp_path / "metrics.parquet"
    pq.write_table(
        pa.table({"global_step": list(range(1, N + 1)), "reward": reward, "tag": ["a"] * N}), p
    )
    run = read(p)
    assert run.format == "parquet"
    assert _at(run, "reward/mean") == {i + 1: r for i, r in enumerate(reward)}
    assert run.info["labels"] == {"tag": "a"}


@pytest.mark.parametrize("kind", ["tsv", "savetxt", "semicolon"])
def test_delimited_text_of_other_separators(tmp_path: Path, kind: str) -> None:
    reward, kl = _curve()
    if kind == "tsv":
        p, text = (
            tmp_path / "m.tsv",
            "step\treward\tkl\n"
            + "".join(f"{i}\t{r}\t{k}\n" for i, (r, k) in enumerate(zip(reward, kl))),
        )
    elif kind == "savetxt":
        p, text = (
            tmp_path / "m.txt",
            "# step reward kl\n"
            + "".join(f"{i} {r} {k}\n" for i, (r, k) in enumerate(zip(reward, kl))),
        )
    else:
        p, text = (
            tmp_path / "m.csv",
            "step;reward;kl\n"
            + "".join(f"{i};{r};{k}\n" for i, (r, k) in enumerate(zip(reward, kl))),
        )
    p.write_text(text)
    run = read(p)
    assert _at(run, "reward/mean") == dict(enumerate(reward))


def test_a_markdown_table_with_a_step_column_of_another_name(tmp_path: Path) -> None:
    reward, _ = _curve()
    rows = "".join(f"| {3 * i} | {r} | {0.5:.2f} |\n" for i, r in enumerate(reward))
    p = tmp_path / "log.md"
    p.write_text("Training results\n\n| Iteration | Reward | Loss |\n|---|---|---|\n" + rows)
    run = read(p)
    assert _at(run, "reward/mean") == {3 * i: r for i, r in enumerate(reward)}


def test_a_json_list_of_lists_is_refused_naming_what_is_missing(tmp_path: Path) -> None:
    p = tmp_path / "values.json"
    p.write_text(json.dumps([[1, 0.2], [2, 0.3]]))
    with pytest.raises(UnknownFormatError):
        read(p)
    run = read(p, "json")
    assert any("expected column names" in w for w in run.warnings)


def test_rows_hold_until_the_step_column_is_decided_and_say_where_steps_came_from() -> None:
    from rlvitals.model import RunData

    run = RunData(source="x", format="jsonl")
    got: list[tuple[int, dict]] = []
    rows = Rows(run, lambda s, v: got.append((s, v)), "x")
    rows.row({"n": 0, "reward": 0.1}, "x:1")
    rows.row({"n": 5, "reward": 0.2}, "x:2")
    assert not got and rows.pending == 2  # two rows: too few to choose by content
    rows.row({"n": 10, "reward": 0.3, "note": "warmup"}, "x:3")
    assert [s for s, _ in got] == [0, 5, 10] and all("n" not in v for _, v in got)
    assert "by its content" in run.info["steps_from"]["x"]
    assert run.info["labels"] == {"note": "warmup"}


def test_values_are_read_at_their_steps_in_a_drawn_csv_with_empty_cells(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    p = tmp_path / "gaps.csv"
    lines = ["step,reward,eval"]
    want_r, want_e = {}, {}
    for s in range(0, 200, 4):
        r = round(float(rng.normal(0.5, 0.1)), 5)
        e = round(float(rng.uniform()), 5) if s % 20 == 0 else None
        want_r[s] = r
        if e is not None:
            want_e[s] = e
        lines.append(f"{s},{r},{'' if e is None else e}")
    p.write_text("\n".join(lines) + "\n")
    run = read(p)
    assert _at(run, "reward/mean") == want_r and _at(run, "eval") == want_e
    assert run.missing == {}
