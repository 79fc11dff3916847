"""W&B runs whose completions are tables (TRL's ``log_completions`` with ``report_to="wandb"``),
made by the real wandb in offline mode and read as the run's samples and transcripts."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rlvitals.cli import main
from rlvitals.readers import read
from test_readers_wandb import _env

pytest.importorskip("wandb")

# As TRL logs it: HF's WandbCallback plots every key against train/global_step (synced into the
# table's row), the trainer logs its scalars, then GRPOTrainer.log its completions table.
# One process writes every run the module reads (one spec file each, a run in its folder):
# wandb and its service start once, not once per run.
WRITER = r"""
import json, os, sys
import wandb
for path in sys.argv[1:]:
    spec = json.load(open(path))
    run = wandb.init(project="rlvitals-test", name="grpo-tables", dir=os.path.dirname(path),
                     config=spec.get("config", {}),
                     settings=wandb.Settings(console="off", x_disable_stats=True))
    run.define_metric("train/global_step")
    run.define_metric("*", step_metric="train/global_step", step_sync=True)
    tables = {}  # key -> the table a MUTABLE or INCREMENTAL log adds rows to
    for row in spec["logs"]:
        out = {}
        for k, v in row.items():
            if isinstance(v, dict) and "log_mode" in v:  # one table, added to and logged again
                t = tables.get(k)
                if t is None or v.get("new"):
                    t = tables[k] = wandb.Table(columns=v["columns"], log_mode=v["log_mode"])
                for r in v["data"]:
                    t.add_data(*r)
                out[k] = t
            elif isinstance(v, dict) and "columns" in v:
                out[k] = wandb.Table(columns=v["columns"], data=v["data"])
            elif isinstance(v, dict) and "histogram" in v:
                out[k] = wandb.Histogram(v["histogram"])
            else:
                out[k] = v
        wandb.log(out)
    run.finish()
"""

COLUMNS = ["step", "prompt", "completion", "accuracy", "format", "advantage"]
PROMPTS = [f"What is {i} + {i}? Think, then give the answer in \\boxed{{}}." for i in (2, 3, 4, 5)]


def reply(i: int, good: bool) -> str:
    n = 2 * (i + 2)
    answer = n if good else n + 1
    return (
        f"We add {i + 2} to itself: {i + 2} + {i + 2}. Counting on from {i + 2} gives "
        f"{answer}, so the sum is {answer}. The answer is \\boxed{{{answer}}}."
    )


def trl_rows(step: int, *, hack_from: int | None = None, gens: int = 4) -> list[list[Any]]:
    """One logging step of GRPOTrainer: each prompt ``gens`` times (a group), the rewards of
    two functions (NaN where one did not apply) and the group-normalised advantage."""
    rows: list[list[Any]] = []
    for p, prompt in enumerate(PROMPTS):
        for g in range(gens):
            good = (g + p + step) % 3 != 0
            completion = reply(p, good)
            acc: float = 1.0 if good else 0.0
            fmt = 0.5 if g % 2 else float("nan")
            if hack_from is not None and step >= hack_from and g < 2:
                completion, acc, fmt = "", 1.0, 0.5  # an empty reply the grader rewards
            rows.append([step, prompt, completion, acc, fmt, 0.0])
    return rows


def make_runs(root: Path, specs: dict[str, dict[str, Any]]) -> dict[str, Path]:
    """Real offline W&B runs, one per spec (``{"logs": [...], "config": {...}}``, tables as
    ``{"columns", "data"}``), each in ``root/<name>/wandb/``, written by one process; each
    name's run dir."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.py").write_text(WRITER)
    paths = []
    for name, spec in specs.items():
        (root / name).mkdir()
        paths.append(root / name / "spec.json")
        paths[-1].write_text(json.dumps({"logs": spec["logs"], "config": spec.get("config", {})}))
    subprocess.run(
        [sys.executable, str(root / "train.py"), *map(str, paths)],
        env=_env(root),
        check=True,
        timeout=300,
        capture_output=True,
    )
    return {name: (root / name / "wandb" / "latest-run").resolve() for name in specs}


def trl_logs(steps: range, table: dict[str, Any] | None = None, **kw: Any) -> list[dict[str, Any]]:
    """TRL's logs of ``steps``; ``table``: more of the completions table's spec (its
    ``log_mode``: one table added to and logged again, ``new``: a new one each step)."""
    logs: list[dict[str, Any]] = []
    for s in steps:
        rows = trl_rows(s, **kw)
        logs.append({"train/global_step": s, "train/reward": 0.5})
        logs.append({"completions": {"columns": COLUMNS, "data": rows, **(table or {})}})
    return logs


def total(row: list[Any]) -> float:
    return sum(v for v in row[3:5] if not math.isnan(v))  # accuracy + format, NaN left out


def exploit_steps() -> range:
    return range(1, 25)


def _specs() -> dict[str, dict[str, Any]]:
    """Every W&B run this module reads, by name."""
    trl = trl_logs(range(1, 4))
    # Not samples: a numbers-only table and a histogram, every step.
    for row in trl[1::2]:
        row["lengths"] = {"columns": ["step", "length"], "data": [[1, 10], [1, 12]]}
        row["reward_hist"] = {"histogram": [0.0, 0.5, 1.0]}
    big = [[1, f"{i}+{i}?", str(2 * i), 1.0] for i in range(10_050)]
    return {
        "trl": {"logs": trl},
        "no_text": {
            "logs": [
                {"train/global_step": 1, "train/reward": 0.5},
                {"scores": {"columns": ["step", "reward"], "data": [[1, 0.5], [1, 1.0]]}},
                {"names": {"columns": ["name", "note"], "data": [["a", "b"]]}},
                {"hist": {"histogram": [1.0, 2.0]}},
            ]
        },
        "other_key": {
            "logs": [
                {"train/global_step": 7, "train/reward": 0.5},
                {
                    "samples": {
                        "columns": ["input", "response", "score", "length"],
                        "data": [
                            ["2+2?", "4", 1.0, 3],
                            ["2+2?", "5", 0.0, 3],
                            ["3+3?", "", 1.0, 1],
                        ],
                    }
                },
            ]
        },
        "four_steps": {"logs": trl_logs(range(1, 5))},
        "exploit": {"logs": trl_logs(exploit_steps(), hack_from=12)},
        "three_steps": {"logs": trl_logs(range(1, 4))},
        "honest": {"logs": trl_logs(exploit_steps())},
        "unique": {
            "logs": [
                {"train/global_step": 1},
                {"completions": {"columns": COLUMNS, "data": trl_rows(1, gens=1)}},
            ],
            "config": {"log_unique_prompts": True},
        },
        "MUTABLE": {"logs": trl_logs(range(1, 4), table={"log_mode": "MUTABLE"})},
        "INCREMENTAL": {"logs": trl_logs(range(1, 4), table={"log_mode": "INCREMENTAL"})},
        "anew": {"logs": trl_logs(range(1, 4), table={"log_mode": "MUTABLE", "new": True})},
        "over_limit": {
            "logs": [
                {"train/global_step": 1, "train/reward": 0.5},
                {"samples": {"columns": ["step", "prompt", "completion", "reward"], "data": big}},
            ]
        },
    }


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every run of the module, written once (``make_runs``)."""
    return make_runs(tmp_path_factory.mktemp("wbtables"), _specs())


def own_copy(made: dict[str, Path], name: str, dest: Path) -> Path:
    """A copy of run ``name``'s folder at ``dest`` for a test that changes it; its run dir."""
    shutil.copytree(made[name].parent.parent, dest, symlinks=True)
    return (dest / "wandb" / "latest-run").resolve()


@pytest.fixture(scope="module")
def trl_run(made: dict[str, Path]) -> Path:
    return made["trl"]


def test_real_tables_are_where_the_history_says(trl_run: Path) -> None:
    """The layout read, as wandb 0.31 writes it: a history value names the file, whose JSON is
    {"columns", "data"} with NaN as a bare token and a counter (not the step) in its name."""
    files = sorted((trl_run / "files" / "media" / "table").glob("completions_*.table.json"))
    assert len(files) == 3
    doc = json.loads(files[0].read_text())
    assert doc["columns"] == COLUMNS and len(doc["data"]) == 16
    assert "NaN" in files[0].read_text()


def test_trl_tables_are_the_runs_attempts_grouped_by_prompt(trl_run: Path) -> None:
    run = read(trl_run)
    assert run.warnings == []
    assert run.info["samples"]["format"] == "wandb-tables"
    a = run.attempts
    assert a is not None and len(a) == 3 * 16
    for s in (1, 2, 3):
        rows = a.rows_at(s)
        assert a.reward[rows].tolist() == [total(r) for r in trl_rows(s)]  # TRL's total
        assert len(set(a.group_code[rows].tolist())) == 4  # one group per prompt
    # The per-step aggregates come from the rows; media fields are no metrics.
    assert run.series("reward/group_std_mean") is not None
    assert run.series("rollout/accuracy") is not None
    assert not [n for n in run.metrics.names() if n.startswith(("completions.", "lengths."))]
    # Placed at train/global_step, as TRL's own scalars are.
    assert run.series("train/reward").steps.tolist() == [1, 2, 3]


def test_transcripts_show_prompt_and_completion(trl_run: Path, capsys) -> None:
    run = read(trl_run)
    got = list(run.transcripts.iter_step(2))
    assert len(got) == 16
    first = got[0]
    assert first.generations[0].prompt == PROMPTS[0]
    assert first.final_text() == trl_rows(2)[0][2]
    assert first.reward == total(trl_rows(2)[0])
    assert first.group_id == got[1].group_id != got[4].group_id
    assert main(["transcripts", str(trl_run), "--step", "2", "--json"]) == 0
    assert "We add 2 to itself" in capsys.readouterr().out


def test_tables_without_text_are_ignored(made: dict[str, Path]) -> None:
    run = read(made["no_text"])
    assert run.warnings == [] and run.notes == []
    assert run.attempts is None and run.transcripts is None
    assert "samples" not in run.info
    assert not [n for n in run.metrics.names() if n.startswith(("scores.", "names.", "hist."))]
    assert run.series("train/reward") is not None


def test_a_table_of_another_key_and_column_names_counts(made: dict[str, Path]) -> None:
    run = read(made["other_key"])
    a = run.attempts
    assert a is not None and a.step.tolist() == [7, 7, 7]
    assert a.reward.tolist() == [1.0, 0.0, 1.0]  # score alone: length is no reward
    t = list(run.transcripts.iter_step(7))
    assert [x.final_text() for x in t] == ["4", "5", ""]
    assert t[0].generations[0].prompt == "2+2?"


def test_damaged_tables_are_one_line_each_and_the_rest_is_read(
    made: dict[str, Path], tmp_path: Path, capsys
) -> None:
    good = own_copy(made, "four_steps", tmp_path / "run")
    files = sorted(
        (good / "files" / "media" / "table").glob("completions_*.table.json"),
        key=lambda p: int(p.name.split("_")[1]),
    )
    text = files[0].read_text()
    files[0].write_text(text[: len(text) // 2])  # step 1: cut short
    files[1].unlink()  # step 2: gone
    doc = json.loads(files[2].read_text())
    doc["data"] = [r[:2] for r in doc["data"]]  # step 3: rows without their columns
    files[2].write_text(json.dumps(doc))
    run = read(good)
    a = run.attempts
    assert a is not None and sorted(set(a.step.tolist())) == [4]
    assert run.series("train/reward").steps.tolist() == [1, 2, 3, 4]
    for f, what in zip(files[:3], ("not a readable W&B table", "no such file", "columns")):
        lines = [w for w in run.warnings if f.name in w]
        assert len(lines) == 1 and what in lines[0], (f.name, run.warnings)
    # The check reads the transcripts again: still one line per file, never a traceback.
    assert main(["check", str(good)]) in (0, 1)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for f in files[:3]:
        assert sum(f.name in line for line in err.splitlines()) == 1, err


def transcript_findings(path: Path, capsys) -> list[dict[str, Any]]:
    main(["check", str(path), "--json"])
    (report,) = json.loads(capsys.readouterr().out)["runs"]
    return [f for f in report["findings"] if f["check"] == "transcripts"]


def test_rewarded_empty_replies_flag_as_they_do_from_trl_parquet(
    made: dict[str, Path], tmp_path: Path, capsys
) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    wb = made["exploit"]
    # The same rows as TRL's parquet (grpo_trainer.py: pandas.DataFrame(table).to_parquet).
    out = tmp_path / "trl" / "completions"
    out.mkdir(parents=True)
    for s in exploit_steps():
        df = pd.DataFrame(trl_rows(s, hack_from=12), columns=COLUMNS)
        df.to_parquet(out / f"completions_{s:05d}.parquet")
    from_wandb = transcript_findings(wb, capsys)
    from_parquet = transcript_findings(out.parent, capsys)
    flagged = [f for f in from_wandb if "empty_answer" in f.get("evidence", {}).get("flags", {})]
    # A transcript flag alone is a hypothesis (issue 27): info here, where no number (held-out,
    # replies, the flag's share climbing) corroborates it; both sources must say the same.
    assert flagged and flagged[0]["severity"] == "info"
    assert flagged[0]["verdict"] == "exploit_suspected"
    assert flagged[0]["first_step"] >= 12

    def key(fs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted(
            (f["verdict"], f["severity"], f["first_step"], sorted(f["evidence"].get("flags", {})))
            for f in fs
        )

    assert key(from_wandb) == key(from_parquet)


def test_trl_parquet_beside_the_run_is_read_and_tables_not_counted_twice(
    made: dict[str, Path], tmp_path: Path
) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    out = tmp_path / "output_dir"
    wb = own_copy(made, "three_steps", out)  # output_dir/wandb/latest-run, as TRL's
    (out / "completions").mkdir()
    for s in range(1, 4):
        df = pd.DataFrame(trl_rows(s), columns=COLUMNS)
        df.to_parquet(out / "completions" / f"completions_{s:05d}.parquet")
    run = read(wb)
    assert run.info["samples"]["format"] == "trl"
    assert len(run.attempts) == 3 * 16  # once, not twice
    assert any("W&B completions tables are not read" in n for n in run.notes)


def test_honest_tables_raise_no_transcript_flag(made: dict[str, Path], capsys) -> None:
    wb = made["honest"]
    found = [f for f in transcript_findings(wb, capsys) if f["severity"] in ("warn", "fail")]
    assert found == []


def test_unique_prompt_tables_are_read_without_group_statistics(made: dict[str, Path]) -> None:
    # (trl_rows(1, gens=1): what TRL's log_unique_prompts=True leaves in the table)
    run = read(made["unique"])
    assert len(run.attempts) == 4
    (line,) = [w for w in run.warnings if "log_unique_prompts" in w]
    assert "completions_" in line
    # Groups of one would all "have no variance": no group statistic is made up from them.
    assert not [k for k in run.metrics.names() if k.startswith(("groups/", "discard/groups/"))]
    assert run.attempts.trained.all()


@pytest.mark.parametrize("mode", ["MUTABLE", "INCREMENTAL"])
def test_a_table_added_to_and_logged_each_step_is_read_once_per_row(
    made: dict[str, Path], mode: str
) -> None:
    """One table that grows (add_data, then log again): W&B writes a MUTABLE table whole at
    each log, an INCREMENTAL one's new rows only. Either way each step gets its own rows."""
    run_dir = made[mode]
    files = sorted((run_dir / "files" / "media" / "table").glob("completions_*.table.json"))
    sizes = [len(json.loads(f.read_text())["data"]) for f in files]
    assert sorted(sizes) == ([16, 32, 48] if mode == "MUTABLE" else [16, 16, 16])
    parsed: list[str] = []  # table files parsed, in order
    real_load = json.load

    def load(f, *args, **kwargs):
        if str(getattr(f, "name", "")).endswith(".table.json"):
            parsed.append(Path(f.name).name)
        return real_load(f, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(json, "load", load)
        run = read(run_dir)
    assert run.warnings == []
    # Each file parsed once: a MUTABLE file is checked against a digest of the one before.
    assert sorted(parsed) == sorted(f.name for f in files)
    a = run.attempts
    assert a is not None and len(a) == 3 * 16
    for s in (1, 2, 3):
        rows = a.rows_at(s)
        assert a.reward[rows].tolist() == [total(r) for r in trl_rows(s)]
        got = [t.final_text() for t in run.transcripts.iter_step(s)]
        assert got == [r[2] for r in trl_rows(s)]


def test_a_mutable_table_made_anew_each_step_is_read_whole_with_one_warning(
    made: dict[str, Path],
) -> None:
    """Each log a new MUTABLE table: no file's rows start with the rows before, so each file
    is read whole (its own step's rows), and one warning says how it was read."""
    run = read(made["anew"])
    a = run.attempts
    assert a is not None and len(a) == 3 * 16
    for s in (1, 2, 3):
        assert a.reward[a.rows_at(s)].tolist() == [total(r) for r in trl_rows(s)]
    said = [w for w in run.warnings if "MUTABLE" in w]
    assert len(said) == 1 and "read whole" in said[0] and "completions" in said[0]


def test_a_table_over_wandbs_row_limit_reads_what_the_file_kept_and_says_so(
    made: dict[str, Path],
) -> None:
    run = read(made["over_limit"])
    a = run.attempts
    kept = [w for w in run.warnings if "rows logged in its file" in w]
    assert a is not None and 0 < len(a) < 10_050
    assert len(kept) == 1 and f"kept {len(a)} of the 10050 rows" in kept[0]
