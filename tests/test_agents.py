"""``rlvitals mcp``: the real MCP client SDK talks to the server over stdio (a subprocess, as an
agent runs it), and the tools' answers are the judging of ``rlvitals check``.

Runs: one whose grader pays for edits to the tests (transcripts with a ``test_edit`` flag from
step 12), a healthy sibling, and one too short to judge (the checks abstain).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from rlvitals.agents import PathRefused, Roots, Tools
from rlvitals.fleet import judge
from transcripts_synth import transcript_run

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    transcript_run(root, "hacked", steps=24, groups=8, hack="test_edit", hack_from=12)
    transcript_run(
        root, "healthy", steps=24, groups=8, seed=1, lr=0.03, evals_every=4, heldout_rises=True
    )
    transcript_run(root, "short", steps=2, groups=4, seed=2)
    return root


def _check_json(path: Path) -> dict[str, Any]:
    (o,) = judge([str(path)])
    assert o.report is not None
    return o.report


def test_check_run_is_checks_judging(runs: Path) -> None:
    tools = Tools(Roots([runs]))
    got = tools.check_run("hacked")
    want = _check_json(runs / "hacked")
    assert got["verdict"] == want["verdict"] == "exploit_suspected"
    assert [(f["check"], f["severity"], f["title"]) for f in got["findings"]] == [
        (f["check"], f["severity"], f["title"]) for f in want["findings"]
    ]
    assert got["abstained"] is False
    assert got["next_action"] == next(
        f["action"] for f in want["findings"] if f["severity"] in ("warn", "fail")
    )
    assert any(c["tool"] == "list_transcripts" for c in got["follow_up"])
    assert "reader_warnings" in got["not_read"]


def test_a_run_too_short_to_judge_abstains(runs: Path) -> None:
    tools = Tools(Roots([runs]))
    got = tools.check_run("short")
    assert got["verdict"] == "too_early" and got["abstained"] is True
    assert got["abstained_because"] and got["not_read"]["checks_without_enough_evidence"]
    healthy = tools.check_run("healthy")
    assert healthy["verdict"] == "learning" and healthy["abstained"] is False
    assert healthy["worst"] in ("ok", "info")


def test_paths_outside_the_roots_are_refused(runs: Path, tmp_path: Path) -> None:
    tools = Tools(Roots([runs / "hacked"]))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (runs / "hacked" / "link-out").symlink_to(outside)
    try:
        for path in ("../healthy", str(runs / "healthy"), "link-out", "s3://bucket/run", "/"):
            with pytest.raises(PathRefused, match=r"roots|local paths"):
                tools.check_run(path)
        assert tools.find_runs(".")["count"] == 1  # the link out is not followed
    finally:
        (runs / "hacked" / "link-out").unlink()


def test_read_metrics_over_a_range_thins_and_summarises_every_point(runs: Path) -> None:
    tools = Tools(Roots([runs]))
    got = tools.read_metrics("hacked", ["reward/mean"], first_step=4, last_step=20, max_points=5)
    assert got["steps"][0] == 4 and got["steps"][-1] == 20 and len(got["steps"]) == 5
    s = got["metrics"]["reward/mean"]
    assert s["summary"]["points"] == 17  # every step in the range, not the 5 shown
    assert got["not_read"]["steps_outside_range"] == 24 - 17
    assert got["not_read"]["thinned"]
    from rlvitals.errors import UsageError

    with pytest.raises(UsageError, match="not in"):
        tools.read_metrics("hacked", ["reward/meen"])


def test_list_transcripts_shows_the_flagged_attempts(runs: Path) -> None:
    tools = Tools(Roots([runs]))
    got = tools.list_transcripts("hacked", chars=100)
    assert got["mode"] == "attempts raising any flag"
    shown = [a for s in got["steps"] for a in s["shown"]]
    assert shown and all(a["flags"] for a in shown)
    assert min(s["step"] for s in got["steps"]) >= 12  # the hack's onset
    assert {f["flag"] for a in shown for f in a["flags"]} >= {"test_edit"}
    quiet = tools.list_transcripts("healthy")
    assert not [a for s in quiet["steps"] for a in s["shown"]]
    assert "no attempt raised any flag" in quiet["notes"]


def test_compare_runs_puts_the_findings_side_by_side(runs: Path) -> None:
    got = Tools(Roots([runs])).compare_runs("hacked", "healthy")
    assert got["a"]["verdict"] == "exploit_suspected" and got["b"]["verdict"] != got["a"]["verdict"]
    assert any(f["check"] == "transcripts" for f in got["findings_only_in_a"])
    assert "reward/mean" in got["metrics"]


def test_llms_txt_names_only_commands_options_and_tools_that_exist() -> None:
    from rlvitals.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    commands: dict[str, Any] = sub.choices  # type: ignore[attr-defined]
    tools = {"find_runs", "check_run", "read_metrics", "list_transcripts", "compare_runs"}
    for path in (ROOT / "llms.txt", ROOT / "docs" / "llms.txt"):
        text = path.read_text(encoding="utf-8")
        named = re.findall(r"`rlvitals ([a-z]+)((?: [^`]*)?)`", text)
        assert len(named) >= 10, path
        for cmd, rest in named:
            assert cmd in commands, f"{path.name}: rlvitals {cmd}"
            options = {s for a in commands[cmd]._actions for s in a.option_strings}
            for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest):
                assert opt in options, f"{path.name}: rlvitals {cmd} {opt}"
        for tool in re.findall(r"\b([a-z]+_[a-z_]+)\(", text):
            assert tool in tools, f"{path.name}: {tool}"
        assert all(f"{t}(" in text for t in tools), path
    # The docs' copy is the root's, its links taken from docs/.
    root = (ROOT / "llms.txt").read_text(encoding="utf-8")
    assert (ROOT / "docs" / "llms.txt").read_text(encoding="utf-8") == root.replace("](docs/", "](")


def test_the_mcp_client_sdk_talks_to_rlvitals_mcp_over_stdio(runs: Path) -> None:
    anyio = pytest.importorskip("anyio")
    pytest.importorskip("mcp")
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *sys.path])}
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rlvitals", "mcp", "--root", str(runs)],
        env=env,
        cwd=str(runs.parent),
    )

    async def talk() -> dict[str, Any]:
        out: dict[str, Any] = {}
        with anyio.fail_after(120):
            async with Client(server) as client:
                listed = await client.list_tools()
                out["tools"] = {t.name: t for t in listed.tools}
                out["found"] = await client.call_tool("find_runs", {})
                out["check"] = await client.call_tool("check_run", {"run": "hacked"})
                out["short"] = await client.call_tool("check_run", {"run": "short"})
                out["transcripts"] = await client.call_tool(
                    "list_transcripts", {"run": "hacked", "top": 2}
                )
                out["metrics"] = await client.call_tool(
                    "read_metrics", {"run": "hacked", "metrics": ["reward/mean"], "last_step": 5}
                )
                out["outside"] = await client.call_tool("check_run", {"run": "../"})
                out["compare"] = await client.call_tool(
                    "compare_runs", {"run_a": "hacked", "run_b": "healthy"}
                )
        return out

    got = anyio.run(talk)
    tools = got["tools"]
    assert set(tools) == {
        "find_runs",
        "check_run",
        "read_metrics",
        "list_transcripts",
        "compare_runs",
    }
    for t in tools.values():
        assert "Needs" in (t.description or "") and "Returns" in (t.description or "")
        assert t.annotations is not None and t.annotations.read_only_hint is True
    assert tools["check_run"].input_schema["required"] == ["run"]

    def body(result: Any) -> dict[str, Any]:
        assert not result.is_error, result.content
        text = json.loads(result.content[0].text)
        assert text == result.structured_content
        return dict(text)

    found = body(got["found"])
    assert sorted(Path(r["path"]).name for r in found["runs"]) == ["hacked", "healthy", "short"]
    check = body(got["check"])
    assert check["verdict"] == _check_json(runs / "hacked")["verdict"] == "exploit_suspected"
    assert check["findings"] and check["next_action"] and check["abstained"] is False
    short = body(got["short"])
    assert short["abstained"] is True and short["verdict"] == "too_early"
    shown = [a for s in body(got["transcripts"])["steps"] for a in s["shown"]]
    assert shown and all(a["flags"] for a in shown)
    assert "test_edit" in {f["flag"] for a in shown for f in a["flags"]}
    assert body(got["metrics"])["steps"] == list(range(6))
    assert body(got["compare"])["a"]["verdict"] == "exploit_suspected"
    outside = got["outside"]
    assert outside.is_error
    assert "outside the roots" in outside.content[0].text
