"""Mapping tables, user mapping files, and the formats command and docs that show them."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from rlvitals.cli import main
from rlvitals.errors import ReadError
from rlvitals.model import RunData
from rlvitals.readers import formats, keys, read
from rlvitals.readers.console import CONSOLE_TABLES
from rlvitals.readers.mapping import Mapper, MappingTable, Rule, load_user_mapping, synonym
from rlvitals.schema import is_canonical
from rlvitals.views.formats import formats_markdown

ROOT = Path(__file__).parent.parent


def test_docs_formats_page_is_generated_from_the_tables() -> None:
    assert (ROOT / "docs" / "formats.md").read_text() == formats_markdown(), (
        "regenerate: python -m rlvitals.views.formats > docs/formats.md"
    )


def test_every_rule_targets_a_canonical_name() -> None:
    for f in formats():
        for r in f.table.rules if f.table else ():
            if not r.is_pattern:
                assert is_canonical(r.target), (f.name, r.target)


def test_tables_draw_the_schema_synonyms_from_the_schema() -> None:
    """A key schema.py declares as a synonym is listed as ``synonym(key)``: its canonical name
    and transform are declared once, in the schema, never repeated in a table (issue 29: 76
    table rules repeated one)."""
    tables = [t for f in formats() for t in (f.table, getattr(f.factory, "table", None)) if t]
    tables += CONSOLE_TABLES
    repeated, derived = [], 0
    for table in {id(t): t for t in tables}.values():
        for r in table.rules:
            hit = None if r.is_pattern else keys.declared(r.source)
            same = hit is not None and (hit[0], hit[1].scale, hit[1].offset) == (
                r.target,
                r.scale,
                r.offset,
            )
            derived += r.schema
            if same and not r.schema:
                repeated.append(f"{table.name}: {r.source} -> {r.target}")
    assert repeated == []
    assert derived >= 76
    # It takes the schema's transform (1 - x: TRL's share of groups *without* signal).
    rule = synonym("frac_reward_zero_std", "TRL")
    assert (rule.target, rule.scale, rule.offset) == ("groups/signal_fraction", -1.0, 1.0)
    with pytest.raises(ValueError, match="not an exact synonym"):
        synonym("my/own/key")


def test_first_rule_wins_for_the_whole_run() -> None:
    table = MappingTable("t", (Rule("a", "reward/mean"), Rule("b", "reward/mean")))
    run = RunData(source="x", format="t")
    m = Mapper(table, run)
    m.add(0, {"b": 2.0})
    m.add(1, {"a": 1.0, "b": 2.0})
    m.add(2, {"b": 3.0})  # "a" is known to exist now: "b" no longer fills reward/mean
    s = run.series("reward/mean")
    assert s.steps.tolist() == [0, 1] and s.values.tolist() == [2.0, 1.0]
    assert run.original["reward/mean"] == "a"
    assert run.series("b").values.tolist() == [2.0, 2.0, 3.0]


def test_source_key_spelling_a_canonical_name_of_another_meaning_is_namespaced() -> None:
    table = MappingTable("t", (Rule("rollout/truncated_ratio", "response/truncated_rate"),))
    run = RunData(source="x", format="fw")
    Mapper(table, run).add(0, {"rollout/truncated_ratio": 0.5, "response/truncated_rate": 9.0})
    assert run.series("response/truncated_rate").at(0) == 0.5
    assert run.series("fw:response/truncated_rate").at(0) == 9.0


def test_transform_scales_and_flips() -> None:
    table = MappingTable("t", (Rule("frac", "groups/signal_fraction", scale=-1, offset=1),))
    run = RunData(source="x", format="t")
    Mapper(table, run).add(0, {"frac": 0.25})
    assert run.series("groups/signal_fraction").at(0) == 0.75


def test_user_mapping_file_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "m.toml"
    toml.write_text('[metrics]\n"train/loss" = "loss"\n"train/lr" = { source = "^lr.*$" }\n')
    rules = load_user_mapping(toml)
    assert [(r.source, r.target) for r in rules] == [("loss", "train/loss"), ("^lr.*$", "train/lr")]
    js = tmp_path / "m.json"
    js.write_text(json.dumps({"reward/mean": {"source": "acc", "scale": 2}}))
    assert load_user_mapping(js)[0].scale == 2.0


@pytest.mark.parametrize(
    "text, expected",
    [
        ('"not/canonical" = "x"', "not a canonical metric name"),
        ('"train/loss" = 3', "expected a source key"),
        ('"train/loss" = { source = "^(" }', "bad regular expression"),
        ("this is not toml", "not valid TOML"),
    ],
)
def test_bad_user_mapping_names_the_file(tmp_path: Path, text: str, expected: str) -> None:
    p = tmp_path / "m.toml"
    p.write_text(text)
    with pytest.raises(ReadError) as err:
        load_user_mapping(p)
    assert str(p) in str(err.value) and expected in str(err.value)


def test_user_mapping_overrides_a_framework_table(tmp_path: Path) -> None:
    m = tmp_path / "m.toml"
    m.write_text('"reward/mean" = "critic/rewards/mean"\n')
    log = ROOT / "tests" / "data" / "verl" / "issue7412_console.log"
    run = read(log, mapping=m)
    assert run.original["reward/mean"] == "critic/rewards/mean"


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


def test_formats_command_lists_formats_and_tables() -> None:
    code, text = _cli("formats")
    assert code == 0 and "verl" in text and "tensorboard" in text
    code, text = _cli("formats", "verl")
    assert "critic/score/mean" in text and "training/rollout_probs_diff_*" in text
    code, text = _cli("formats", "--json")
    data = json.loads(text)
    names = [f["name"] for f in data["formats"]]
    assert names == [f.name for f in formats()]
    trl = next(f for f in data["formats"] if f["name"] == "trl")
    assert {"source": "reward_std", "canonical": "reward/std"}.items() <= trl["mapping"]["rules"][
        1
    ].items()


def test_formats_command_rejects_an_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["formats", "nope"]) == 2
    assert "unknown format 'nope'" in capsys.readouterr().err
