"""Keys by meaning (issue 11, items 1, 5, 6): one chain for every source, three KLs apart,
``formats --explain``, ``--from``/``--mapping`` on every reading command, missing values as a
signal, and reward components and breakdowns as canonical families."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rlvitals.cli import build_parser, main
from rlvitals.readers import read
from rlvitals.readers.keys import (
    fallback,
    is_eval_key,
    is_kl_like,
    normalise,
    token_conflicts,
    token_index,
)
from rlvitals.schema import METRICS, PATTERNS, is_canonical, metrics_markdown

ROOT = Path(__file__).parent.parent


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- the files ---------------------------------------------------------------------


@pytest.fixture
def rlwatch_jsonl(tmp_path: Path) -> Path:
    """The issue's JSONL: rlwatch's key names (``monitor.log_step`` kwargs), 500 steps."""
    rows = [
        {
            "step": s,
            "reward_mean": 0.2 + s / 1000,
            "entropy": 0.7 - s / 2000,
            "kl_divergence": 0.01 + s / 1e5,
            "reward_std": 0.3,
            "advantage_std": 1.0,
            "clip_fraction": 0.05,
        }
        for s in range(500)
    ]
    return _jsonl(tmp_path / "metrics.jsonl", rows)


RLWATCH_NAMES = {
    "reward_mean": "reward/mean",
    "entropy": "train/entropy",
    "kl_divergence": "train/ref_kl",
    "reward_std": "reward/std",
    "advantage_std": "train/advantage_std",
    "clip_fraction": "train/clip_frac",
}


def test_rlwatch_keys_read_every_metric_for_500_steps(rlwatch_jsonl: Path) -> None:
    run = read(rlwatch_jsonl)
    for key, name in RLWATCH_NAMES.items():
        s = run.series(name)
        assert s is not None and len(s) == 500, name
        assert run.original[name] == key
        assert run.resolved[key][0] == name
    assert run.series("reward/mean").at(499) == pytest.approx(0.699)
    assert not run.unmapped


def test_check_judges_the_rlwatch_file_instead_of_too_early(rlwatch_jsonl, capsys) -> None:
    code, out, err = cli(capsys, "check", str(rlwatch_jsonl), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert "too early" not in json.dumps(report).lower()


def test_someone_elses_steps_jsonl_is_refused_with_the_way_out(rlwatch_jsonl, tmp_path, capsys):
    d = tmp_path / "theirs"
    d.mkdir()
    (d / "steps.jsonl").write_bytes(rlwatch_jsonl.read_bytes())  # looks like our run directory
    code, _, err = cli(capsys, "check", str(d))
    assert code == 2 and "--from jsonl" in err and "reward_mean" in err
    code, out, err = cli(capsys, "metrics", str(d / "steps.jsonl"), "--from", "jsonl", "--json")
    assert code == 0, err
    assert len(json.loads(out)["metrics"]["reward/mean"]) == 500


def test_rl_doctor_jsonl_with_a_config_first_line_reads(tmp_path: Path) -> None:
    # rl-doctor's load_jsonl: a leading {"config": {...}} line, then TRL-style keys per step.
    rows: list[dict] = [{"config": {"algorithm": "grpo", "num_generations": 8}}]
    for s in range(1, 31):
        rows.append(
            {
                "step": s,
                "reward": 0.4 + s / 100,
                "reward_std": 0.3,
                "frac_reward_zero_std": 0.25,
                "entropy": 0.5,
                "kl": 0.001,
                "clip_ratio/region_mean": 0.01,
                "completions/mean_length": 120.0,
                "rewards/accuracy_reward/mean": 0.4,
                "rewards/format_reward/mean": 0.9,
            }
        )
    run = read(_jsonl(tmp_path / "run.jsonl", rows))
    assert run.info["config"] == {"algorithm": "grpo", "num_generations": 8}
    assert not run.warnings
    assert run.series("reward/mean").at(30) == pytest.approx(0.7)
    assert run.series("groups/signal_fraction").at(1) == pytest.approx(0.75)  # 1 - x
    assert run.series("train/entropy") is not None
    assert run.series("response/length_mean").at(1) == 120.0
    assert run.series("reward/component/format_reward/mean").at(5) == 0.9
    assert "kl" in run.unmapped and not run.has("train/ref_kl")  # which KL? not guessed


def test_wandb_csv_export_reads(tmp_path: Path) -> None:
    lines = [
        '"Step","grpo-7b - train/reward","grpo-7b - train/reward__MIN",'
        '"grpo-7b - train/reward__MAX","grpo-7b - train/entropy","grpo-7b - train/kl"'
    ]
    for s in range(20):
        lines.append(f"{s},{0.1 + s / 100},{0.05 + s / 100},{0.15 + s / 100},0.6,")
    path = tmp_path / "wandb_export.csv"
    path.write_text("\n".join(lines) + "\n")
    run = read(path)
    assert run.format == "csv"
    assert run.info["name"] == "grpo-7b"
    assert run.series("reward/mean").at(19) == pytest.approx(0.29)
    assert run.series("train/entropy").at(0) == 0.6
    assert run.series("train/reward__MIN").at(0) == pytest.approx(0.05)  # kept, not lost
    assert "train/reward__MAX" in run.unmapped
    assert not run.has("train/kl")  # empty cells: never logged


def test_wandb_csv_with_two_runs_reads_the_first_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "two.csv"
    path.write_text("Step,a - reward,b - reward\n0,0.1,0.9\n1,0.2,0.8\n")
    run = read(path)
    assert run.series("reward/mean").values.tolist() == [0.1, 0.2]
    assert run.series("b - reward").values.tolist() == [0.9, 0.8]
    assert any("2 runs" in w for w in run.warnings)


# -- the chain -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "name", "kind"),
    [
        ("reward_mean", "reward/mean", "synonym"),
        ("rewards/mean", "reward/mean", "synonym"),
        ("critic/score/mean", "reward/mean", "synonym"),
        ("raw_reward", "reward/mean", "synonym"),
        ("Reward", "reward/mean", "tokens"),
        ("train/Reward_Mean", "reward/mean", "tokens"),
        ("rewardMean", "reward/mean", "tokens"),
        ("train/entropy/mean", "train/entropy", "tokens"),
        ("policy.entropy", "train/entropy", "tokens"),
        ("clip_fraction", "train/clip_frac", "synonym"),
        ("actor/grad_norm", "train/grad_norm", "tokens"),
        ("frac_reward_zero_std", "groups/signal_fraction", "synonym"),
        ("train/response_length", "response/length_mean", "tokens"),
    ],
)
def test_a_key_resolves_by_meaning(key: str, name: str, kind: str) -> None:
    got = fallback(key)
    assert got, key
    assert (got[0][0], got[0][2]) == (name, kind)


def test_three_kls_land_apart_and_an_ambiguous_kl_stays_unmapped(tmp_path: Path) -> None:
    rows = [
        {
            "step": s,
            "ref_kl": 0.1,
            "actor/kl_loss": 0.11,
            "ppo_kl": 0.002,
            "approx_kl": 0.003,
            "mismatch_kl": 0.0004,
            "train/train_rollout_kl": 0.0005,
            "vllm_kl": -0.0001,
            "kl": 0.5,
            "train/kl_div": 0.6,
            "KL": 0.7,
        }
        for s in range(5)
    ]
    run = read(_jsonl(tmp_path / "kl.jsonl", rows))
    assert run.series("train/ref_kl").at(0) == 0.1  # the first synonym wins for the run
    assert run.resolved["actor/kl_loss"][0] == "train/ref_kl"
    assert run.series("train/ppo_kl").at(0) == 0.002
    assert run.resolved["approx_kl"][0] == "train/ppo_kl"
    assert run.series("train/mismatch_kl").at(0) == 0.0004
    assert run.resolved["train/train_rollout_kl"][0] == "train/mismatch_kl"
    assert run.series("train/mismatch_k1").at(0) == -0.0001
    for key in ("kl", "train/kl_div", "KL"):
        assert key not in run.resolved
        assert "which KL" in run.unmapped[key]
        assert run.series(key).at(0) is not None  # kept under its own name
    # A framework's own table knows which KL its `kl` is: TRL's is KL to the reference.
    from rlvitals.model import RunData
    from rlvitals.readers.mapping import Mapper
    from rlvitals.readers.trl import TRL

    trl = RunData(source="x", format="trl")
    Mapper(TRL, trl).add(1, {"kl": 0.5})
    assert trl.series("train/ref_kl").at(1) == 0.5 and trl.resolved["kl"][1] == "table"


def test_held_out_keys_never_become_training_metrics() -> None:
    # A held-out split's score reads as a held-out evaluation (eval/<suite>/score), anything
    # else of the split (its entropy, its loss) stays under its own name: never a training
    # metric either way.
    scores = {
        "eval_reward": "eval/eval/score",
        "eval/reward": "eval/eval/score",
        "val/reward_mean": "eval/val/score",
        "val/acc": "eval/val/score",
        "test/score": "eval/test/score",
        "heldout_accuracy": "eval/heldout/score",
        "eval/gsm8k/accuracy": "eval/gsm8k/score",
        "val/test_score/logic_assignment": "eval/logic_assignment/score",
    }
    for key, target in scores.items():
        assert is_eval_key(key), key
        assert [c[0] for c in fallback(key)] == [target], key
    for key in ("test/entropy", "val-core/x", "eval_loss", "val/reward_std", "eval/response_len"):
        assert is_eval_key(key), key
        assert fallback(key) == [], key


def test_short_names_of_hand_written_loops_map_by_meaning() -> None:
    # The names people give metrics in their own loops: abbreviations, spaces, camelCase.
    cases = {
        "rew": "reward/mean",
        "rwd": "reward/mean",
        "Reward": "reward/mean",
        "acc": "reward/mean",
        "success_rate": "reward/mean",
        "KL_ref": "train/ref_kl",
        "klRef": "train/ref_kl",
        "ent": "train/entropy",
        "gn": "train/grad_norm",
        "grad": "train/grad_norm",
        "len": "response/length_mean",
        "resp_len": "response/length_mean",
        "Avg Response Len": "response/length_mean",
        "Adv Std": "train/advantage_std",
        "Learning Rate": "train/lr",
        "Actor Loss": "train/loss",
        "rew_std": "reward/std",
        "format_reward": "reward/component/format_reward/mean",
        "noop_penalty": "reward/component/noop_penalty/mean",
        "mean_reward": "reward/mean",
    }
    for key, target in cases.items():
        assert [c[0] for c in fallback(key)] == [target], key
    # A bare kl still names no KL in particular: never guessed.
    assert fallback("kl") == [] and fallback("KL") == []


def test_a_percent_of_a_fraction_is_divided_by_100() -> None:
    for key, target in {
        "truncated_pct": "response/truncated_rate",
        "trunc %": "response/truncated_rate",
        "clip_pct": "train/clip_frac",
    }.items():
        (hit,) = fallback(key)
        assert hit[0] == target and hit[3].scale == 0.01, key
    (zero,) = fallback("zero_std_pct")  # share of groups with no signal, in percent
    assert zero[0] == "groups/signal_fraction" and (zero[3].scale, zero[3].offset) == (-0.01, 1.0)


def test_a_table_leaves_out_what_it_lists_as_not_mapped(tmp_path: Path) -> None:
    # verl's table lists critic/rewards/mean (after the in-reward KL penalty) as not mapped:
    # tokens alone would have read it as a reward.
    rows = [
        {"step": s, "data": {"critic/rewards/mean": 0.4, "critic/score/mean": 0.5}}
        for s in range(3)
    ]
    run = read(_jsonl(tmp_path / "verl.jsonl", rows))
    assert run.format == "verl-jsonl"
    assert run.series("reward/mean").at(0) == 0.5
    assert "table leaves it out" in run.unmapped["critic/rewards/mean"]


def test_user_mapping_comes_first_and_is_recorded(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "m.jsonl", [{"step": 0, "score": 0.1, "acc": 0.9}])
    mapping = tmp_path / "map.toml"
    mapping.write_text('"reward/mean" = "acc"\n')
    run = read(path, mapping=mapping)
    assert run.series("reward/mean").at(0) == 0.9
    assert run.resolved["acc"][1] == "user mapping"
    assert run.original["reward/mean"] == "acc"


def test_the_vocabulary_is_consistent() -> None:
    assert token_conflicts() == {}
    for spec in METRICS.values():
        for a in spec.aliases:
            assert not is_kl_like(a.source) or spec.name.endswith(("_kl", "_k1")), a
    for form in token_index():
        assert form not in {"kl", "kld", "kl_div"}
    for _, spec in PATTERNS:
        for a in spec.aliases:
            assert a.source.startswith("^"), a


def test_normalise() -> None:
    assert normalise("Train/Reward_Mean") == "reward"
    assert normalise("actor/pg_clipfrac") == "pg_clipfrac"
    assert normalise("train/entropy/mean") == "entropy"
    assert normalise("mean_reward") == "reward"
    assert normalise("rewardStd") == "reward_std"
    assert normalise("mean") == "mean"


# -- formats --explain and the shared source options ----------------------------------------


def test_formats_explain_prints_keys_rules_and_unmapped(rlwatch_jsonl, tmp_path, capsys):
    path = _jsonl(
        tmp_path / "e.jsonl",
        [{"step": s, "Reward": 0.5, "kl": 0.1, "rewards/fmt/mean": 1.0} for s in range(3)],
    )
    code, out, err = cli(capsys, "formats", "--explain", str(path))
    assert code == 0, err
    assert "Reward" in out and "reward/mean" in out and "tokens" in out
    assert "reward/component/fmt/mean" in out and "synonym" in out
    assert "left unmapped" in out and "kl:" in out
    code, out, _ = cli(capsys, "formats", "--explain", str(rlwatch_jsonl), "--json")
    d = json.loads(out)
    rows = {r["source"]: r for r in d["mapped"]}
    assert rows["kl_divergence"]["canonical"] == "train/ref_kl"
    assert rows["kl_divergence"]["rule"] == "synonym"
    assert d["unmapped"] == [] and d["format"] == "jsonl"


def test_formats_explain_with_a_user_mapping_names_the_rule(tmp_path, capsys):
    path = _jsonl(tmp_path / "u.jsonl", [{"step": 0, "myscore": 0.3}])
    mapping = tmp_path / "m.json"
    mapping.write_text('{"reward/mean": "myscore"}')
    code, _out, _ = cli(capsys, "formats", "--explain", str(path), "--mapping", str(mapping))
    assert code == 0
    row = json.loads(
        cli(capsys, "formats", "--explain", str(path), "--mapping", str(mapping), "--json")[1]
    )["mapped"][0]
    assert row["rule"] == "user mapping" and row["canonical"] == "reward/mean"


def test_a_file_with_no_canonical_metric_is_an_error_not_too_early(tmp_path, capsys):
    path = _jsonl(tmp_path / "odd.jsonl", [{"step": s, "foo": 1.0, "kl": 0.1} for s in range(9)])
    for cmd in ("check", "metrics", "report"):
        argv = [cmd, str(path)] + (["--json"] if cmd == "report" else [])
        code, out, err = cli(capsys, *argv)
        assert code == 2, (cmd, out, err)
        assert err.count("\n") == 1, err
        assert "foo" in err and "kl" in err and "--mapping" in err and str(path) in err
    mapping = tmp_path / "m.toml"
    mapping.write_text('"reward/mean" = "foo"\n')
    code, out, err = cli(capsys, "check", str(path), "--mapping", str(mapping), "--json")
    assert code == 0, err


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "R"],
        ["report", "R"],
        ["watch", "R"],
        ["serve", "R"],
        ["baseline", "R", "-o", "x.json"],
        ["transcripts", "R"],
        ["metrics", "R"],
        ["formats", "--explain", "R"],
    ],
)
def test_every_reading_command_takes_from_and_mapping(argv: list[str]) -> None:
    args = build_parser().parse_args([*argv, "--from", "jsonl", "--mapping", "m.toml"])
    assert args.source_format == "jsonl" and args.mapping == "m.toml"


@pytest.mark.parametrize("command", ["check", "metrics"])
def test_format_names_the_output_in_every_command_never_the_source(command: str) -> None:
    """Newcomer 2026-12-07 problem 4: in metrics, --format was a spelling of --from, so
    `metrics RUN --format json` read the run as the json format and printed an empty table."""
    args = build_parser().parse_args([command, "R", "--format", "json"])
    assert args.format == "json" and args.source_format is None
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([command, "R", "--format", "csv"])
    assert exc.value.code == 2


# -- missing is a signal --------------------------------------------------------------------


def test_nonfinite_strings_read_as_their_floats_and_null_as_no_value(tmp_path: Path) -> None:
    rows = [{"step": 0, "loss": 1.0, "grad_norm": 1.0, "entropy": 0.5, "lr": 1e-6}]
    rows.append({"step": 1, "loss": None, "grad_norm": "NaN", "entropy": "nan", "lr": "Infinity"})
    run = read(_jsonl(tmp_path / "n.jsonl", rows))
    assert run.series("train/loss").at(1) is None  # null: no value at step 1, not a NaN
    assert math.isnan(run.series("train/grad_norm").at(1))
    assert math.isnan(run.series("train/entropy").at(1))
    assert run.series("train/lr").at(1) == math.inf
    assert run.nulls == {}


def test_a_key_that_turns_null_for_good_is_missing_from_that_step(tmp_path: Path) -> None:
    # pandas and json.dumps(None) write null; a loss that stays null from step 7 on is missing
    # from there, as one whose key vanished is (a sink that drops NaN drops the key).
    rows = [{"step": s, "reward": 0.5, "loss": None if s >= 7 else 0.1} for s in range(10)]
    run = read(_jsonl(tmp_path / "null.jsonl", rows))
    assert run.missing == {"loss": 7, "train/loss": 7}
    s = run.series("train/loss")
    assert s.steps.tolist() == list(range(7)) and not any(math.isnan(v) for v in s.values)


def test_a_periodic_evaluation_null_between_evaluations_is_not_missing(tmp_path: Path) -> None:
    # Issue 37, first hour, item 3: an evaluation every 5th record, null between (what pandas
    # and json.dumps(None) write), the log ending 4 records after the last one.
    rows = [
        {
            "iteration": s,
            "score": 0.2 + s / 1000,
            "eval_acc": 0.3 + s / 2000 if s % 50 == 0 else None,
        }
        for s in range(0, 600, 10)
    ]
    run = read(_jsonl(tmp_path / "evals.jsonl", rows))
    assert run.missing == {} and run.nulls == {}
    ev = run.series("eval_acc")
    assert ev.steps.tolist() == list(range(0, 600, 50)) and np.isfinite(ev.values).all()


def test_a_key_that_comes_back_is_not_missing(tmp_path: Path) -> None:
    rows = [{"step": s, "reward": 0.5, "loss": None if s in (3, 4) else 0.1} for s in range(8)]
    assert read(_jsonl(tmp_path / "back.jsonl", rows)).missing == {}


def test_a_key_that_vanishes_from_later_records_is_missing(tmp_path: Path) -> None:
    # prime-rl drops a NaN key from its metrics.jsonl rows.
    rows = [{"step": s, "reward": 0.5, **({"loss": 0.1} if s < 12 else {})} for s in range(20)]
    run = read(_jsonl(tmp_path / "gone.jsonl", rows))
    assert run.missing == {"loss": 12, "train/loss": 12}
    assert run.series("train/loss").steps.tolist() == list(range(12))  # nothing faked


def test_sparse_and_lagging_keys_are_not_missing(tmp_path: Path) -> None:
    rows = [
        {"step": s, "reward": 0.5, **({"val_acc": 0.3} if s % 10 == 0 else {})} for s in range(35)
    ]
    assert read(_jsonl(tmp_path / "sparse.jsonl", rows)).missing == {}
    # Two files of one run, one behind the other (trainer and orchestrator): a stream of
    # records is judged against itself.
    d = tmp_path / "two"
    d.mkdir()
    _jsonl(d / "a.jsonl", [{"step": s, "reward": 0.5} for s in range(20)])
    _jsonl(d / "b.jsonl", [{"step": s, "loss": 0.1} for s in range(15)])
    run = read(d)
    assert run.series("train/loss") is not None and run.series("reward/mean") is not None
    assert run.missing == {}


def test_a_verl_key_that_goes_null_is_missing(tmp_path: Path) -> None:
    rows = [
        {"step": s, "data": {"critic/score/mean": 0.5, "actor/entropy": None if s > 5 else 0.3}}
        for s in range(1, 11)
    ]
    run = read(_jsonl(tmp_path / "verl.jsonl", rows))
    assert run.format == "verl-jsonl"
    assert run.missing["train/entropy"] == 6
    assert run.missing["actor/entropy"] == 6


def test_until_keeps_what_was_missing_by_then(tmp_path: Path) -> None:
    rows = [{"step": s, "reward": 0.5, "loss": None if s >= 5 else 0.1} for s in range(10)]
    run = read(_jsonl(tmp_path / "u.jsonl", rows))
    assert run.until(4).missing == {}
    assert run.until(9).missing["train/loss"] == 5


# -- reward components and breakdowns --------------------------------------------------------


def test_trl_reward_functions_become_components() -> None:
    run = read(ROOT / "tests" / "data" / "trl" / "tinylora_issue4_console.log")
    names = run.canonical_names("reward/component/")
    assert names == [
        "reward/component/code_reward_func/mean",
        "reward/component/code_reward_func/std",
    ]
    comp, total = run.series("reward/component/code_reward_func/mean"), run.series("reward/mean")
    assert comp.steps.tolist() == total.steps.tolist() and comp.values[0] == total.values[0]


def test_components_and_sources_from_other_frameworks(tmp_path: Path) -> None:
    # verl reward extra infos per data source (ray_trainer._val_metrics_update: val-aux/...),
    # tinker env/<tag>/reward/total, prime-rl per-env and per-function keys, rlprobe.
    rows = [
        {
            "step": s,
            "data": {
                "critic/score/mean": 0.5,
                "val-core/gsm8k/acc/mean@4": 0.6,
                "val-aux/gsm8k/format_score/mean@4": 0.9,
                "val-aux/gsm8k/acc/std@4": 0.1,
            },
        }
        for s in range(3)
    ]
    verl = read(_jsonl(tmp_path / "verl.jsonl", rows))
    assert verl.series("eval/gsm8k/score").at(0) == 0.6
    assert verl.series("eval/gsm8k/component/format_score").at(0) == 0.9
    assert "val-aux/gsm8k/acc/std@4" in verl.unmapped
    other = [
        {
            "step": s,
            "env/all/reward/total": 0.4,
            "env/math/reward/total": 0.7,
            "train/agg/effective/default/reward/mean": 0.5,
            "train/code_env/effective/default/reward/mean": 0.2,
            "train/agg/effective/default/rewards/correct/mean": 0.45,
            "reward_components/format": 1.0,
        }
        for s in range(3)
    ]
    run = read(_jsonl(tmp_path / "mix.jsonl", other))
    assert run.series("reward/source/math/mean").at(0) == 0.7
    assert not run.has("reward/source/all/mean")
    assert run.series("reward/source/code_env/mean").at(0) == 0.2
    assert run.series("reward/component/correct/mean").at(0) == 0.45
    assert run.series("reward/component/format/mean").at(0) == 1.0
    assert is_canonical("reward/component/format/mean")
    assert is_canonical("reward/source/math/std")


# -- one declaration -----------------------------------------------------------------------


def test_docs_metrics_page_is_generated_from_the_schema() -> None:
    assert (ROOT / "docs" / "metrics.md").read_text() == metrics_markdown(), (
        "regenerate: python -m rlvitals.schema > docs/metrics.md"
    )


def test_every_canonical_name_is_in_the_docs() -> None:
    page = metrics_markdown()
    for name in METRICS:
        assert f"`{name}`" in page
    for _, spec in PATTERNS:
        assert f"`{spec.name}`" in page


def test_the_views_take_their_names_from_the_schema() -> None:
    from rlvitals.outputs.terminal import KEY_METRICS
    from rlvitals.schema import key_metrics, label
    from rlvitals.views.dashboard import PLOTS

    assert key_metrics() == KEY_METRICS
    assert ("reward/mean", "reward") in KEY_METRICS
    ids = {p.id for p in PLOTS}
    for spec in [*METRICS.values(), *(s for _, s in PATTERNS)]:
        assert spec.plot in ids, spec.name
    assert all(p.metrics for p in PLOTS)
    assert label("train/mismatch_kl") == "mismatch KL" and label("not/a/metric") == "not/a/metric"


def test_tensorboard_tags_go_through_the_same_chain(tmp_path: Path) -> None:
    from test_readers_tensorboard import _event, _record, _simple

    data = b"".join(
        _record(
            _event(
                s,
                [
                    _simple("charts/reward_mean", 0.1 * s),
                    _simple("charts/kl", 0.01),
                    *([_simple("charts/entropy", 0.5)] if s < 5 else []),
                ],
            )
        )
        for s in range(10)
    )
    (tmp_path / "events.out.tfevents.1").write_bytes(data)
    run = read(tmp_path)
    assert run.series("reward/mean").at(3) == pytest.approx(0.3)
    assert run.resolved["charts/reward_mean"][:2] == ("reward/mean", "tokens")
    assert "which KL" in run.unmapped["charts/kl"]
    assert run.missing["charts/entropy"] == 5  # TensorBoard drops None: vanished from step 5


def test_presence_counts_blocks_of_records_with_the_same_keys() -> None:
    from rlvitals.model import Presence

    p = Presence()
    for s in range(10):
        keys = ["a", *(["b"] if s <= 5 else []), *(["c"] if s % 2 == 0 else [])]
        p.record(s, keys, "a")
        p.record(s, ["x", "y"], "x")  # another stream at the same steps
    assert p.vanished() == {"b": 6}
    assert p.keys["a"][1:] == [0, 9, 10] and p.keys["c"][3] == 5
    for s in range(10, 13):
        p.record(s, ["x"], "x")
    assert p.vanished() == {"b": 6, "y": 10}


# -- bookkeeping is known (newcomer 2026-12-07 problems 5 and 6) ---------------------------

BOOKKEEPING = [
    "_timestamp",  # W&B, MLflow, trackio
    "train/epoch",  # HF Trainer (TensorBoard adds the train/ prefix)
    "train/num_tokens",  # TRL
    "train/total_flos",
    "train/train_runtime",
    "train/train_samples_per_second",
    "train/completions/min_length",  # TRL's completions/ family
    "train/completions/max_length",
    "train/completions/mean_terminated_length",
    "train/completions/min_terminated_length",
    "train/completions/max_terminated_length",
]


def test_bookkeeping_keys_are_known_and_not_offered_to_map(tmp_path: Path, capsys) -> None:
    """A trainer's counters, clocks and length extremes were each offered as "numbers read but
    not judged" with a --mapping line; a key nobody knows still is."""
    rows = [
        {"step": s, "reward": 0.3 + s / 100, "judge_err": 0.0, **{k: float(s) for k in BOOKKEEPING}}
        for s in range(12)
    ]
    path = _jsonl(tmp_path / "loop.jsonl", rows)
    from rlvitals.readers.keys import unmapped_numeric

    run = read(path)
    assert [u["key"] for u in unmapped_numeric(run)] == ["judge_err"]
    for key in BOOKKEEPING:
        assert "kept as logged" in run.unmapped[key], key  # formats --explain says what it is
    code, out, _ = cli(capsys, "check", str(path), "--json")
    assert code == 0
    assert [u["key"] for u in json.loads(out)["runs"][0]["info"]["unmapped"]] == ["judge_err"]


def test_a_trl_tensorboard_run_offers_no_bookkeeping(capsys) -> None:
    """The TRL GRPOTrainer run in the corpus (report_to tensorboard): 11 keys offered before."""
    run = ROOT / "benchmarks/corpus/trl/grpo-two-weighted/tensorboard"
    code, out, _ = cli(capsys, "check", str(run), "--json")
    assert code == 0
    assert json.loads(out)["runs"][0]["info"].get("unmapped", []) == []


@pytest.mark.parametrize("index", ["", "Unnamed: 0"])
def test_the_pandas_index_column_is_not_a_metric(tmp_path: Path, capsys, index: str) -> None:
    """``DataFrame.to_csv()`` writes the index first under an empty name (``Unnamed: 0`` once
    read back and written again): it was an unmapped key named "" in check, --explain and
    metrics --all."""
    lines = [f"{index},step,reward"] + [f"{i},{i},{0.2 + i / 50}" for i in range(30)]
    path = tmp_path / "p.csv"
    path.write_text("\n".join(lines) + "\n")
    run = read(path)
    assert index not in run.metrics.names() and index not in run.unmapped
    assert run.series("reward/mean") is not None and len(run.series("reward/mean")) == 30
    code, out, _ = cli(capsys, "check", str(path), "--json")
    assert code == 0 and json.loads(out)["runs"][0]["info"].get("unmapped", []) == []
    code, out, _ = cli(capsys, "metrics", str(path), "--all")
    assert code == 0 and not [ln for ln in out.splitlines()[2:] if ln.startswith(" ")]
