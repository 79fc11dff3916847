"""Console logs read by shape (readers/shapes.py, readers/console.py), and their events."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path
from typing import Any

import pytest

from rlvitals.errors import UnknownFormatError
from rlvitals.model import EVENT_KINDS
from rlvitals.readers import open_reader, read, sniff
from rlvitals.readers.console import CONSOLE_TABLES, ConsoleReader
from rlvitals.readers.shapes import ShapeParser, line_pairs, parse_timestamp
from rlvitals.readers.textlog import clean_line

DATA = Path(__file__).parent / "data"


def _parse(text: str, date: dt.date | None = None) -> ShapeParser:
    p = ShapeParser("log", date)
    for i, line in enumerate(text.split("\n"), 1):
        p.feed(clean_line(line), i)
    p.finish()
    return p


def _records(text: str) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for r in _parse(text).drain()[0]:
        out.setdefault(r.step, {}).update(r.values)
    return out


def _log(tmp_path: Path, text: str, name: str = "train.log") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# -- shapes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, want",
    [
        ("step:3 - actor/entropy:0.51 - critic/score/mean:0.25", {"actor/entropy": 0.51}),
        ("Step 3 | Loss -0.0003 | Entropy 0.5121 | Peak Mem. 71.8 GiB", {"Entropy": 0.5121}),
        ("step=3 loss=0.25 reward=0.5", {"loss": 0.25, "reward": 0.5}),
        ("epoch: 0|step: 3|act_loss: 0.5|cri_loss: nan", {"act_loss": 0.5}),
        (
            "Iter 3: Train loss 0.100, Total rewards mean 0.250, Peak mem 2.854 GB",
            {"Peak mem": 2.854},
        ),
        (
            "Global step 3: {'reward': np.float64(0.25), 'kl': tensor(0.5, device='cuda:0')}",
            {"kl": 0.5},
        ),
        ("{'loss': '0.2500', 'reward': 0.1, 'step': 3}", {"loss": 0.25}),
        ('{"step": 3, "reward": {"mean": 0.75}, "entropy": Infinity}', {"reward/mean": 0.75}),
        ("> (TaskRunner pid=12) step:3 - a:1 - b:2", {"a": 1.0, "b": 2.0}),
        ("(pid=12, ip=10.0.0.1) step:3 - a:1 - b:2 [repeated 3x across cluster]", {"b": 2.0}),
        ("\x1b[32mstep:3\x1b[0m - a:1 - b:2", {"a": 1.0}),
        ("[32mstep:3[0m - a:1 - b:2", {"b": 2.0}),
    ],
)
def test_a_line_with_a_step_and_pairs_is_a_record(line: str, want: dict[str, float]) -> None:
    recs = _records(line)
    assert list(recs) == [3], recs
    for k, v in want.items():
        assert recs[3][k] == v, recs[3]


def test_nan_inf_and_strings_are_values_not_dropped() -> None:
    recs = _records("step 1: {'a': nan, 'b': -inf, 'c': '0.5', 'd': np.float64(nan), 'e': 'n/a'}")
    v = recs[1]
    assert math.isnan(v["a"]) and v["b"] == -math.inf and v["c"] == 0.5 and math.isnan(v["d"])
    assert "e" not in v


def test_a_server_line_between_steps_keeps_its_names() -> None:
    line = (
        "INFO 12-01 10:00:00 metrics.py:345] Avg prompt throughput: 0.0 tokens/s, Running: 8 reqs"
    )
    recs = _records("step:1 - a:1 - b:2\n" + line)
    assert recs[1] == {"a": 1.0, "b": 2.0, "Avg prompt throughput": 0.0, "Running": 8.0}


def test_keys_are_kept_as_printed_for_the_mapping_chain() -> None:
    (pairs, _) = line_pairs(
        "Avg Reward: 0.41 | rewards / format: 1.0 | Total step time: 12.3s (40.1%)"
    )
    assert pairs == {"Avg Reward": 0.41, "rewards/format": 1.0, "Total step time": 12.3}


def test_lines_after_a_step_header_belong_to_it_until_the_next() -> None:
    text = (
        "===== Step 1/10 =====\n  • Loss: 0.5\n\n  • Avg Reward: 0.25\n"
        "===== Step 2/10 =====\n  • Loss: 0.4\n"
    )
    assert _records(text) == {1: {"Loss": 0.5, "Avg Reward": 0.25}, 2: {"Loss": 0.4}}


def test_a_record_before_its_step_line_leads_that_step_after_a_rule() -> None:
    text = "|E2E latency=2.1s |Others=0.1\nepoch: 0|step: 7|act_loss: 0.5\n-----\n|E2E latency=2.2s |Others=0.2\nepoch: 0|step: 8|act_loss: 0.4\n"
    recs = _records(text)
    assert recs[7]["E2E latency"] == 2.1 and recs[8]["E2E latency"] == 2.2


def test_records_without_a_step_take_their_order_and_say_so_once() -> None:
    p = _parse("{'loss': 0.1, 'reward': 0.2}\nnoise\n{'loss': 0.3, 'reward': 0.4}\n")
    recs, _ = p.drain()
    assert [(r.step, r.how) for r in recs] == [(1, "order"), (2, "order")]
    assert len(p.warnings) == 1 and "order of appearance" in p.warnings[0]


def test_a_record_of_another_family_joins_the_last_step() -> None:
    recs = _records("{'loss': 0.1}\n{'loss': 0.2}\n{'eval_loss': 0.9, 'eval_reward': 0.5}\n")
    assert recs == {1: {"loss": 0.1}, 2: {"loss": 0.2, "eval_loss": 0.9, "eval_reward": 0.5}}


def test_a_tqdm_position_gives_the_step() -> None:
    text = (
        " 10%|#         | 5/50 [00:05<00:45]\r{'loss': 0.1, 'reward': 0.2}\n"
        " 20%|##        | 10/50 [00:10<00:40]\n{'loss': 0.3, 'reward': 0.4}\n"
    )
    # The first record was drawn over its bar on the same line: the bar is lost, order is used.
    recs = _parse(text).drain()[0]
    assert [(r.step, r.how) for r in recs][-1] == (10, "bar")


def test_tqdm_postfix_is_the_record_of_its_bar() -> None:
    text = (
        "train: 50%|█████     | 2/4 [00:06<00:06,  3.0s/it, loss=0.5, grad_norm=1.0]\r"
        "train: 100%|██████████| 4/4 [00:12<00:00,  3.0s/it, loss=0.25, grad_norm=0.9]\n"
        "train: 100%|██████████| 4/4 [00:12<00:00,  3.0s/it, loss=0.2, grad_norm=0.8]\n"
    )
    assert _records(text) == {
        1: {"loss": 0.25, "grad_norm": 0.9},
        2: {"loss": 0.2, "grad_norm": 0.8},
    }


def test_multiline_dict_is_one_record_and_a_cut_one_is_read_as_far_as_it_goes() -> None:
    p = _parse("Step 4: {'a': 0.1,\n 'b': 0.2,\n 'c': 0.3}\nStep 5: {'a': 0.5,\n 'b': 0.")
    recs, _ = p.drain()
    assert recs[0].values == {"a": 0.1, "b": 0.2, "c": 0.3} and recs[0].step == 4
    assert recs[1].values == {"a": 0.5} and recs[1].step == 5
    assert any("incomplete at end of file" in w for w in p.warnings)


def test_markdown_table_rows_are_records_by_their_step_column() -> None:
    text = "| Step | Training Loss | reward |\n|---:|---|---|\n| 1 | 0.5 | 0.25 |\n| 2 | 0.4 | 0.5 |\n\nafter"
    assert _records(text) == {
        1: {"Training Loss": 0.5, "reward": 0.25},
        2: {"Training Loss": 0.4, "reward": 0.5},
    }


def test_rich_table_with_a_header_and_fancy_grid_of_pairs() -> None:
    rich = (
        "┏━━━━━━┳━━━━━━━━┳━━━━━━━━┓\n┃ Step ┃ reward ┃ kl     ┃\n┡━━━━━━╇━━━━━━━━╇━━━━━━━━┩\n"
        "│ 3    │ 0.5    │ 0.01   │\n│ 4    │ 0.6    │ 0.02   │\n└──────┴────────┴────────┘\n"
    )
    assert _records(rich) == {3: {"reward": 0.5, "kl": 0.01}, 4: {"reward": 0.6, "kl": 0.02}}
    grid = (
        "Train step 7/10 done.\n╒══════════╤═════════╤══════╤═════════╕\n"
        "│ a/reward │ 5.0e-01 │ a/kl │ 1.0e-02 │\n├──────────┼─────────┼──────┼─────────┤\n"
        "│ a/len    │ 1.2e+02 │      │         │\n╘══════════╧═════════╧══════╧═════════╛\n"
    )
    assert _records(grid) == {7: {"a/reward": 0.5, "a/kl": 0.01, "a/len": 120.0}}


def test_html_table_of_a_notebook_also_inside_the_ipynb(tmp_path: Path) -> None:
    html = (DATA / "trl-notebook" / "notebook_table.html").read_text()
    cell = {"output_type": "display_data", "data": {"text/html": html.splitlines(True)}}
    nb = {"cells": [{"cell_type": "code", "outputs": [cell]}], "nbformat": 4}
    path = _log(tmp_path, json.dumps(nb, indent=1), "grpo.ipynb")
    run = read(path)
    assert run.format == "console"
    assert run.series("reward/mean").values.tolist() == [-17.25, -10.5, 0.0]


# -- events ------------------------------------------------------------------------------


SLIME_503 = (DATA / "console" / "slime_503_and_crash.log").read_text()


def test_events_are_kept_with_kind_time_text_step_and_line() -> None:
    run = read(DATA / "console" / "slime_503_and_crash.log", "console")
    kinds = [e.kind for e in run.events]
    assert set(kinds) <= set(EVENT_KINDS)
    assert kinds.count("http_5xx") == 3
    tb = [e for e in run.events if e.kind == "traceback"]
    assert len(tb) == 1 and tb[0].text.startswith("Traceback") and "HTTPStatusError" in tb[0].text
    assert tb[0].step == 2  # after the last step line: a crash
    first = next(e for e in run.events if e.kind == "http_5xx")
    assert first.time == dt.datetime(2026, 1, 5, 0, 27, 53).timestamp()
    assert first.step == 1 and first.line > 0 and first.source.endswith(".log")
    assert run.until(1).events == [e for e in run.events if e.step is not None and e.step <= 1]


@pytest.mark.parametrize(
    "line, kind",
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "oom"),
        (
            "requests.exceptions.ConnectionError: [Errno 111] Connection refused",
            "connection_refused",
        ),
        ('INFO:     127.0.0.1:5123 - "POST /generate HTTP/1.1" 502 Bad Gateway', "http_5xx"),
        ("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1092)", "timeout"),
        ("2026-12-01 10:00:00,123 ERROR worker.py:12 -- worker died", "error"),
        ("E1201 10:00:00.123456 12345 engine.cc:88] engine lost", "error"),
        ("ValueError: expected a list", "error"),
    ],
)
def test_error_lines_become_events(line: str, kind: str) -> None:
    _, events = _parse(line).drain()
    assert [e.kind for e in events] == [kind]


def test_warnings_and_info_naming_errors_are_not_events() -> None:
    _, events = _parse(
        "2026-12-01 10:00:00 WARNING retrying: [Errno 111] Connection refused\n"
        "2026-12-01 10:00:01 WARNING ValueError: using a default\nINFO: no Error in 5 steps"
    ).drain()
    assert [e.kind for e in events] == ["connection_refused"]


@pytest.mark.parametrize(
    "text, want",
    [
        ("2026-12-01T10:00:01.5Z step:1", dt.datetime(2026, 12, 1, 10, 0, 1, 500000, dt.UTC)),
        ("2026-12-01 10:00:01,250 - INFO - x", dt.datetime(2026, 12, 1, 10, 0, 1, 250000)),
        ("12/01/2026 10:00:01 - INFO - x", dt.datetime(2026, 12, 1, 10, 0, 1)),
        ("[10:00:01] x", dt.datetime(2026, 12, 1, 10, 0, 1)),
        (
            "12-01 10:00:01 metrics.py:345] Avg prompt throughput: 0.0",
            dt.datetime(2026, 12, 1, 10, 0, 1),
        ),
        ("I1201 10:00:01.000250 77 trainer.py:12] x", dt.datetime(2026, 12, 1, 10, 0, 1, 250)),
    ],
)
def test_log_timestamps(text: str, want: dt.datetime) -> None:
    t, _, _ = parse_timestamp(text, dt.date(2026, 12, 1))
    assert t == pytest.approx(want.timestamp())


def test_timestamps_give_step_times_and_the_clock_rolls_over_midnight(tmp_path: Path) -> None:
    text = "[23:59:50] step:1 - a:1 - b:2\n[23:59:58] working\n[00:00:05] step:2 - a:2 - b:3\n"
    run = read(_log(tmp_path, text), "console")
    t = run.series("time").values
    assert t[1] - t[0] == 15.0
    assert run.info["log_last_time"] == t[1]


# -- the reader --------------------------------------------------------------------------


def test_console_is_the_last_resort_so_framework_readers_win() -> None:
    assert sniff(DATA / "verl" / "issue7412_console.log") == "verl"
    assert sniff(DATA / "marin" / "issue1988_simple_rl.log") == "console"
    # A framework without a reader of its own is named by its key table.
    assert sniff(DATA / "deepspeed-chat" / "issue444_step3.log") == "deepspeed-chat"
    assert read(DATA / "nemo-rl" / "constructed_grpo_console.log", "console").format == "console"
    # ... and the same verl log read by shape keeps its values under the source names.
    run = read(DATA / "verl" / "issue2060_console.log", "console")
    assert run.series("training/rollout_probs_diff_mean").at(1) == 0.003


def test_a_framework_table_refines_the_names() -> None:
    run = read(DATA / "trl-notebook" / "unsloth_issue2291_table.md")
    assert run.info["key_table"] in ("trl", "trl-console")
    assert run.info["records_by_step_source"] == {"column": 11}
    assert run.original["reward/mean"] == "reward"


def test_a_file_with_no_record_is_not_read_as_console(tmp_path: Path) -> None:
    path = _log(tmp_path, "hello\nLoading model...\nTraceback (most recent call last):\n")
    with pytest.raises(UnknownFormatError):
        sniff(path)


def test_live_reading_waits_for_a_line_and_a_dict_to_be_whole(tmp_path: Path) -> None:
    path = _log(tmp_path, "step 1: {'a': 0.1, 'b': 0.2}\nstep 2: {'a': 0.3,")
    reader = open_reader(path, "console")
    reader.poll()
    assert reader.run.steps().tolist() == [1]
    with open(path, "a") as f:
        f.write("\n 'b': 0.4}\n")
    reader.poll()
    assert reader.run.series("b").at(2) == 0.4
    assert reader.run.warnings == []


def test_huge_line_is_skipped_with_a_warning(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(ConsoleReader, "max_line", 4096)  # 64 MiB by default
    path = _log(tmp_path, "step:1 - a:1 - b:2\n" + "x" * 10000 + "\nstep:2 - a:2 - b:3\n")
    run = read(path, "console")
    assert run.steps().tolist() == [1, 2]
    assert any("too long" in w for w in run.warnings)


CONSOLE_FORMATS = {"console", *(t.name for t in CONSOLE_TABLES)}
CONSOLE_LOGS = sorted(
    p
    for p in DATA.glob("*/*")
    if p.suffix in (".log", ".md", ".html")
    and (p.with_name(p.stem + ".expect.json").exists())
    and json.loads(p.with_name(p.stem + ".expect.json").read_text())["format"] in CONSOLE_FORMATS
)


@pytest.mark.parametrize("path", CONSOLE_LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_check_judges_every_console_fixture(path: Path, capsys: Any) -> None:
    from rlvitals.cli import main

    rc = main(["check", str(path)])
    out = capsys.readouterr()
    assert rc in (0, 1), out.err  # a verdict, not an error
    assert "verdict:" in out.out


def test_console_fixtures_cover_every_framework_of_the_issue() -> None:
    names = {p.parent.name for p in CONSOLE_LOGS}
    assert {"nemo-rl", "torchforge", "deepspeed-chat", "marin", "mlx-lm", "art", "trl-ppo"} <= names
    assert "trl-notebook" in names


def test_events_only_parser_for_other_console_readers() -> None:
    p = ShapeParser("verl.log", records=False)
    for i, line in enumerate(SLIME_503.splitlines(), 1):
        p.feed(clean_line(line), i)
    p.finish()
    recs, events = p.drain()
    assert recs == [] and [e.kind for e in events].count("http_5xx") == 3
