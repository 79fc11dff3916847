"""Every command in the README and docs runs as written: each `rlvitals ...` line parses (the
cheap ones run), each Python block compiles, each TOML block parses, each link resolves, each
sample path is made by a documented command, and the README's config makes a run."""

from __future__ import annotations

import ast
import os
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from rlvitals.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)


def _blocks(page: Path, langs: tuple[str, ...]) -> list[str]:
    return [b for lang, b in FENCE.findall(page.read_text()) if lang in langs]


def _command_lines() -> list[tuple[str, str]]:
    """(page, command) for every ``rlvitals`` command line in a shell block."""
    out = []
    for page in PAGES:
        for block in _blocks(page, ("", "bash", "sh", "console")):
            for raw in block.splitlines():
                line = raw.strip().removeprefix("$ ")
                for part in re.split(r"\s*&&\s*", line):
                    part = re.sub(r"\s+#.*$", "", part).strip()
                    part = re.split(r"\s+(?:>|\||2>)\s*", part)[0]  # redirections, pipes
                    part = re.sub(r"^(\.venv/bin/|\S*/bin/)", "", part)
                    if not part.startswith("rlvitals ") or " [--" in part:
                        continue  # not a command, or a usage synopsis ([--top K] ...)
                    out.append((page.name, part))
    return out


COMMANDS = _command_lines()
OTHERS = {"formats.md", "metrics.md", "checks.md"}


def test_the_docs_show_commands_at_all() -> None:
    assert len(COMMANDS) > 15


@pytest.mark.parametrize(("page", "command"), COMMANDS, ids=[f"{p}:{c}" for p, c in COMMANDS])
def test_every_documented_command_parses(page: str, command: str) -> None:
    argv = shlex.split(command)[1:]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse: 2 for a bad command line, 0 for --help/--version
        assert exc.code == 0, f"{page}: {command!r} does not parse"


@pytest.mark.parametrize(
    "command", ["rlvitals formats", "rlvitals formats --json", "rlvitals demo --list-faults"]
)
def test_the_cheap_documented_commands_run(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(shlex.split(command)[1:]) == 0
    assert capsys.readouterr().out.strip()


FLEET = [(p, c) for p, c in COMMANDS if shlex.split(c)[1] in ("export", "query")]


@pytest.mark.parametrize(("page", "command"), FLEET, ids=[f"{p}:{c}" for p, c in FLEET])
def test_the_documented_export_and_query_commands_run_as_written(
    page: str,
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each `rlvitals export`/`query` line of the docs, run as written in a folder holding the
    `runs/` and `tables/` it names."""
    pytest.importorskip("duckdb")
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from synth import synth_run

    for name, kw in (("healthy", {"lr": 0.04}), ("nan", {"nan_loss_from": 8})):
        synth_run(tmp_path / "runs", name, steps=16, **kw)
    monkeypatch.chdir(tmp_path)
    assert main(["export", "runs/", "-o", "tables/"]) == 0
    if shlex.split(command)[1] == "export":
        import shutil

        shutil.rmtree(tmp_path / "tables")
    capsys.readouterr()
    assert main(shlex.split(command)[1:]) == 0, f"{page}: {command}"
    assert capsys.readouterr().out.strip()


def test_every_sample_run_path_is_made_by_a_documented_command() -> None:
    """A concrete ``runs/NAME`` a command reads is one a documented command writes."""
    placeholders = {
        "RUN",
        "my-run",
        "next-run",
        "<name>",
        "new",
        "seed0",
        "seed1",
        "seed2",
        "a",
        "b",
    }
    text = "\n".join(c for _, c in COMMANDS)
    for _, command in COMMANDS:
        for name in re.findall(r"\bruns/([\w.-]+)", command):
            if name in placeholders or name.startswith("seed-"):
                continue
            assert f"--name {name}" in text, f"nothing documented makes runs/{name}"


def test_python_blocks_compile() -> None:
    for page in PAGES:
        for block in _blocks(page, ("python",)):
            ast.parse(block, filename=page.name)


def test_toml_blocks_parse() -> None:
    for page in PAGES:
        for block in _blocks(page, ("toml",)):
            tomllib.loads(block)


def test_links_point_at_files_that_exist() -> None:
    link = re.compile(r"\]\(([^)\s]+)\)")
    for page in PAGES:
        for target in link.findall(page.read_text()):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            assert path.exists(), f"{page.name} links to {target}, which is not in the repo"


DEAD_NAMES = ("METRICS.md", "FORMAT.md", "research/", "science.md", "trainer-notes.md")


def test_no_page_names_a_file_the_repo_does_not_have() -> None:
    # The project's own notes (METRICS.md, FORMAT.md, research/*.md) are not shipped: a user
    # has docs/metrics.md and docs/format.md.
    for page in PAGES:
        text = page.read_text()
        for name in (*DEAD_NAMES, "research notes"):
            assert name not in text, (page.name, name)


def test_what_a_user_reads_in_the_package_names_only_shipped_files(capsys) -> None:
    # Docstrings (help(), an IDE), error messages and ``rlvitals formats`` point at docs/*.md.
    import ast

    from rlvitals.cli import main

    src = ROOT / "src" / "rlvitals"
    for path in src.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name in ("METRICS.md", "FORMAT.md", "research/", "trainer-notes.md"):
                    assert name not in node.value, (str(path.relative_to(src)), name)
    for fmt in ("rlvitals", "trl", "verl"):
        assert main(["formats", fmt]) == 0
        out = capsys.readouterr().out
        assert "METRICS.md" not in out and "FORMAT.md" not in out, fmt
        assert fmt != "rlvitals" or "(docs/metrics.md)" in out


def test_install_lines_name_real_extras_from_a_clone() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    assert not any(r.startswith("torch==") for r in extras["train"]), "train must not pin torch"
    assert "torch==2.13.0" in extras["dev"]
    # (docs/fleet.md and the other helpers' pages: their lines are theirs to change.)
    for page in [p for p in PAGES if p.name not in OTHERS]:
        for m in re.finditer(r"pip install ([^\n`]*)", page.read_text()):
            line = m.group(1)
            assert "'rlvitals[" not in line, f"{page.name}: rlvitals is not on PyPI: {line}"
            for extra in re.findall(r"\.\[([\w,]+)\]", line):
                assert all(e in extras for e in extra.split(",")), (page.name, line)
    first = FENCE.findall((ROOT / "README.md").read_text())[0][1]
    assert "-e '.[train]' 'torch==2.13.0'" in first


def test_the_readme_says_what_scripts_test_needs_before_it_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    head = readme[: readme.index("**Is your LLM RL run")]
    for word in ("network", "sudo apt-get", "RLVITALS_SKIP_BROWSER", "minutes"):
        assert word in head, word


def test_the_readme_config_makes_a_run_without_wandb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlvitals import Run, load_config

    (block,) = _blocks(ROOT / "README.md", ("toml",))
    (tmp_path / "run.toml").write_text(block)
    monkeypatch.chdir(tmp_path)
    cfg = load_config("run.toml")
    assert not cfg.output.wandb_project  # copying it verbatim needs no extra
    with Run(cfg) as run:
        run.log_attempt(0, "g0", "t0", 1.0, policy_version=0)
        run.log_step(0)
    assert (tmp_path / "runs" / "grpo-seed0" / "run.json").exists()


def test_the_example_config_runs_twice_without_a_name_clash() -> None:
    from rlvitals.config import load_config
    from rlvitals.grpo.config import SECTIONS

    for example in sorted((ROOT / "examples").glob("*.toml")):
        cfg = load_config(example, sections=SECTIONS)
        assert cfg.output.name is None, f"{example.name} pins a run name"
    args = build_parser().parse_args(["train", "examples/grpo.toml", "--name", "again"])
    assert args.name == "again"


def test_train_help_offers_only_its_own_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "--list-faults" not in capsys.readouterr().out


def test_demo_without_torch_is_one_line() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from rlvitals.cli import main\n"
        "raise SystemExit(main(['demo', '--steps', '1']))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    got = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert got.returncode == 2, got.stderr
    assert got.stderr.count("\n") == 1 and "'train' extra" in got.stderr
    assert "Traceback" not in got.stderr
