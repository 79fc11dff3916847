"""The README's commands and config are real: every command it shows exists and has help, and
its config block loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlvitals.cli import COMMANDS, main
from rlvitals.config import load_config

README = (Path(__file__).parent.parent / "README.md").read_text()


def _blocks(lang: str = "") -> list[str]:
    return re.findall(r"```" + lang + r"[^\n]*\n(.*?)```", README, flags=re.S)


def _shell_blocks() -> list[str]:
    return [b for lang, b in re.findall(r"```(\w*)\n(.*?)```", README, flags=re.S)
            if lang in ("", "bash", "sh", "console")]  # fmt: skip


def test_readme_starts_with_the_demo_and_the_test_command():
    first = _blocks()[0]
    assert "rlvitals demo" in first and "scripts/test" in first
    assert README.index("rlvitals demo") < 400


@pytest.mark.parametrize(
    "command",
    sorted({m for b in _shell_blocks() for m in re.findall(r"\brlvitals ([a-z]+)\b", b)}),
)
def test_every_command_the_readme_shows_exists_with_help(command, capsys):
    assert command in COMMANDS
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip()


def test_every_command_is_in_the_readme():
    text = " ".join(_blocks()) + README
    for command in COMMANDS:
        assert f"rlvitals {command}" in text, command


def test_the_readme_config_block_loads(tmp_path):
    (toml,) = _blocks("toml")
    p = tmp_path / "run.toml"
    p.write_text(toml)
    cfg = load_config(p)
    assert cfg.training.mode == "async" and cfg.rollout.reward_range == [0.0, 1.0]
