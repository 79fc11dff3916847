"""The run config: defaults, validation errors that name section and key, the reference page."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from rlvitals.config import Config, load_config, option, reference, reference_markdown
from rlvitals.errors import ConfigError

DOCS = Path(__file__).resolve().parents[1] / "docs" / "config.md"


def test_every_default_is_filled_in():
    cfg = load_config()
    assert cfg.output.output_dir == "runs" and cfg.output.trace == "full"
    assert cfg.output.name is None and cfg.output.wandb_project is None
    assert cfg.training.mode == "sync" and cfg.training.max_steps_off_policy == 2
    assert cfg.rollout.max_group_losses == 1
    whole = cfg.to_dict()
    assert set(whole) == {"output", "training", "rollout"}
    assert {r["key"] for r in reference()} == {k for s in whole.values() for k in s}


def test_a_toml_file_is_loaded_and_validated(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(
        '[output]\noutput_dir = "out"\ntrace = "samples"\nprogress_every_seconds = 30\n'
        '[training]\nmode = "async"\nmax_steps_off_policy = 4\n'
        "[rollout]\nreward_range = [0, 1]\n"
    )
    cfg = load_config(path)
    assert cfg.source == str(path)
    assert cfg.output.trace == "samples" and cfg.output.progress_every_seconds == 30.0
    assert isinstance(cfg.output.progress_every_seconds, float)
    assert cfg.training.mode == "async" and cfg.training.max_steps_off_policy == 4
    assert cfg.rollout.reward_range == [0.0, 1.0]
    assert cfg.rollout.max_group_losses == 1  # untouched keys keep their default


@pytest.mark.parametrize(
    ("raw", "section", "key", "expected"),
    [
        ({"outptu": {}}, "outptu", None, "unknown section; expected one of: [output]"),
        ({"output": {"trce": "full"}}, "output", "trce", "unknown key 'trce'; expected one of"),
        (
            {"output": {"trace": "ful"}},
            "output",
            "trace",
            'expected "full" or "samples" (not \'ful\')',
        ),
        (
            {"training": {"max_steps_off_policy": "2"}},
            "training",
            "max_steps_off_policy",
            "expected an integer (not '2')",
        ),
        (
            {"training": {"max_steps_off_policy": 2.5}},
            "training",
            "max_steps_off_policy",
            "expected an integer (not 2.5)",
        ),
        (
            {"training": {"max_steps_off_policy": True}},
            "training",
            "max_steps_off_policy",
            "expected an integer (not True)",
        ),
        (
            {"training": {"max_steps_off_policy": -1}},
            "training",
            "max_steps_off_policy",
            "expected a value >= 0 (not -1)",
        ),
        ({"training": {"mode": "offline"}}, "training", "mode", 'expected "sync" or "async"'),
        (
            {"rollout": {"max_consecutive_rollout_failures": -1}},
            "rollout",
            "max_consecutive_rollout_failures",
            "expected a value >= 0",
        ),
        (
            {"output": {"progress_every_seconds": float("nan")}},
            "output",
            "progress_every_seconds",
            "expected a number",
        ),
        (
            {"output": {"progress_every_seconds": 0}},
            "output",
            "progress_every_seconds",
            "expected a value >= 0.01",
        ),
        ({"output": {"name": "a/b"}}, "output", "name", "expected a plain directory name"),
        (
            {"rollout": {"reward_range": [1, 0]}},
            "rollout",
            "reward_range",
            "expected [lowest, highest] with lowest < highest",
        ),
        (
            {"rollout": {"reward_range": "0-1"}},
            "rollout",
            "reward_range",
            "expected a list of numbers (not '0-1')",
        ),
        ({"rollout": 3}, "rollout", None, "expected a table of keys (not 3)"),
    ],
)
def test_bad_config_names_section_key_and_what_was_expected(raw, section, key, expected):
    with pytest.raises(ConfigError) as err:
        load_config(raw)
    assert err.value.section == section and err.value.key == key
    where = f"[{section}.{key}]" if key else f"[{section}]"
    assert str(err.value).startswith(f"config {where}: ")
    assert expected in str(err.value)


def test_a_file_that_is_not_toml_or_missing_is_a_config_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[output\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "missing.toml")


def test_overrides_apply_over_the_source():
    cfg = load_config({"output": {"trace": "samples"}}, overrides={"output": {"name": "x"}})
    assert (cfg.output.trace, cfg.output.name) == ("samples", "x")
    with pytest.raises(ConfigError, match=r"\[training.nope\]"):
        load_config(None, overrides={"training": {"nope": 1}})


@dataclass
class ModelConfig:
    """The loop's own model section."""

    layers: int = option(2, "transformer layers", minimum=1)
    name: str = option("tiny", "model name")


def test_a_loop_adds_sections_validated_the_same_way():
    cfg = load_config({"model": {"layers": 4}}, sections={"model": ModelConfig})
    assert cfg.section("model").layers == 4 and cfg.section("model").name == "tiny"
    assert cfg.to_dict()["model"] == {"layers": 4, "name": "tiny"}
    with pytest.raises(ConfigError, match=r"\[model.layers\]: expected a value >= 1"):
        load_config({"model": {"layers": 0}}, sections={"model": ModelConfig})
    with pytest.raises(ConfigError, match="unknown section"):
        load_config({"model": {"layers": 4}})
    again = load_config(cfg, sections={"model": ModelConfig})
    assert again.to_dict() == cfg.to_dict()


def test_a_config_passes_through_unchanged():
    cfg = load_config({"training": {"mode": "async"}})
    assert isinstance(cfg, Config)
    assert load_config(cfg).to_dict() == cfg.to_dict()


def test_every_key_has_help_text_a_type_and_a_default():
    rows = reference({"model": ModelConfig})
    assert rows, "no keys?"
    for row in rows:
        assert row["help"].strip(), f"[{row['section']}] {row['key']} has no help"
        assert row["type"]
    assert ("model", "layers") in {(r["section"], r["key"]) for r in rows}


def test_docs_config_md_is_the_generated_reference():
    assert DOCS.read_text() == reference_markdown(), (
        "docs/config.md is stale: python -m rlvitals.config > docs/config.md"
    )
