"""``rlvitals transcripts``: what it shows, its JSON, escaping, and its errors."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from rlvitals.cli import main
from rlvitals.readers import read
from rlvitals.transcripts import Rules, TranscriptStore
from rlvitals.transcripts.browse import browse, pick_steps
from rlvitals.views.transcripts import render_text
from transcripts_synth import transcript_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli")
    return {
        "ansi": transcript_run(out, "ansi", steps=20, groups=6, hack="ansi", hack_from=8),
        "samples": transcript_run(out, "samples", steps=12, groups=4, trace="samples"),
    }


def cli(*args, capsys):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_pick_steps_every_n_with_the_last():
    assert pick_steps([0, 1, 2, 3, 4, 5, 6], every=3) == [0, 3, 6]
    assert pick_steps([0, 1, 2, 3, 4, 5], every=4) == [0, 4, 5]
    assert pick_steps([2, 4, 9], step=5) == [9]
    assert pick_steps([2, 4, 9], step=50) == [9]
    assert len(pick_steps(list(range(100)))) <= 9


def test_json_shows_top_attempts_per_step_with_flags(runs, capsys):
    code, out, _ = cli("transcripts", str(runs["ansi"]), "--every", "5", "--top", "2", "--json",
                       capsys=capsys)  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    assert doc["trace"] == "full" and [s["step"] for s in doc["steps"]] == [0, 5, 10, 15, 19]
    for s in doc["steps"]:
        rewards = [a["reward"] for a in s["shown"]]
        assert len(rewards) == 2 and rewards == sorted(rewards, reverse=True)
        for a in s["shown"]:
            assert {"attempt_id", "policy_version", "completion_tokens", "trained", "flags"} <= set(
                a
            )
    late = doc["steps"][-1]
    assert late["flag_counts"].get("early_exit", 0) > 0
    assert any(h["flag"] == "early_exit" for a in late["shown"] for h in a["flags"])


def test_lowest_shows_the_lowest_rewards(runs, capsys):
    _, out, _ = cli("transcripts", str(runs["ansi"]), "--step", "3", "--lowest", "--json",
                    capsys=capsys)  # fmt: skip
    (s,) = json.loads(out)["steps"]
    assert s["step"] == 3 and all(a["reward"] == 0.0 for a in s["shown"])


def test_one_attempt_by_id_in_full(runs, capsys):
    store = TranscriptStore(runs["ansi"])
    aid = next(iter(store.iter_step(12))).attempt_id
    _, out, _ = cli("transcripts", str(runs["ansi"]), "--attempt", aid, "--json", capsys=capsys)
    a = json.loads(out)["attempt"]
    assert a["attempt_id"] == aid and a["step"] == 12
    assert a["generations"][0]["prompt"].startswith("user:")


def test_flag_lists_the_attempts_that_raised_it(runs, capsys):
    _, out, _ = cli("transcripts", str(runs["ansi"]), "--flag", "early_exit", "--json",
                    capsys=capsys)  # fmt: skip
    doc = json.loads(out)
    assert doc["steps"] and doc["steps"][0]["step"] >= 8
    for s in doc["steps"]:
        assert all(any(h["flag"] == "early_exit" for h in a["flags"]) for a in s["shown"])


def test_terminal_text_is_escaped_never_markup(runs, capsys):
    code, out, _ = cli("transcripts", str(runs["ansi"]), "--step", "15", capsys=capsys)
    assert code == 0
    assert "\x1b" not in out and "\u202e" not in out
    assert "\\x1b[2J" in out and "\\u202e" in out
    assert "flag early_exit" in out and "reward 1" in out and "policy v15" in out


def test_rich_markup_in_a_reply_is_printed_literally(tmp_path):
    d = tmp_path / "run"
    (d / "transcripts").mkdir(parents=True)
    text = "[bold red]not bold[/] [link=http://x]y[/link] \x1b]8;;http://evil\x1b\\click"
    (d / "transcripts" / "step-000000.json").write_text(
        json.dumps([{"attempt_id": "a", "reward": 1, "generations": [{"completion": text}]}])
    )
    payload = browse(TranscriptStore(d), Rules(), None, step=0)
    buf = io.StringIO()
    render_text(payload, buf, width=200, color=True)
    got = buf.getvalue()
    assert "[bold red]not bold[/]" in got and "[link=http://x]" in got
    assert "\x1b]8" not in got and "\\x1b]8;;http://evil" in got


def test_samples_trace_says_what_it_can_and_cannot_show(runs, capsys):
    _, out, _ = cli("transcripts", str(runs["samples"]), capsys=capsys)
    assert 'trace = "samples"' in out and "Not available: prompts and replies" in out
    assert "completion tokens" in out
    _, out, _ = cli("transcripts", str(runs["samples"]), "--json", capsys=capsys)
    doc = json.loads(out)
    assert doc["trace"] == "samples" and doc["notes"]
    assert all(not a["has_text"] for s in doc["steps"] for a in s["shown"])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--flag", "nope"], "unknown flag 'nope'"),
        (["--attempt", "no-such-id"], "no attempt 'no-such-id'"),
        (["--top", "0"], "--top"),
        (["--rules", "/nonexistent/rules.toml"], "cannot read rules file"),
    ],
)
def test_bad_arguments_are_one_line_errors(runs, capsys, args, needle):
    code, _out, err = cli("transcripts", str(runs["ansi"]), *args, capsys=capsys)
    assert code == 2 and needle in err and err.count("\n") == 1


def test_missing_run_is_an_error(tmp_path, capsys):
    code, _, err = cli("transcripts", str(tmp_path / "nope"), capsys=capsys)
    assert code == 2 and "nope" in err


def test_run_without_transcripts_says_how_to_get_them(tmp_path, capsys):
    d = transcript_run(tmp_path, "r", steps=3, groups=2)
    for p in (d / "transcripts").iterdir():
        p.unlink()
    (d / "transcripts").rmdir()
    code, out, _ = cli("transcripts", str(d), capsys=capsys)
    assert code == 0 and 'trace = "full"' in out


def test_rollout_details_join_the_transcript(runs):
    data = read(str(runs["ansi"]))
    payload = browse(TranscriptStore(runs["ansi"]), Rules(), data, step=4, top=1)
    (a,) = payload["steps"][0]["shown"]
    assert a["truncated"] is False and a["response_tokens"] > 0


def test_command_is_listed_in_help():
    proc = subprocess.run(
        [sys.executable, "-m", "rlvitals", "--help"], capture_output=True, text=True, check=True
    )
    assert "transcripts" in proc.stdout


def test_json_writes_terminal_controls_as_escapes_and_keeps_the_text(runs, capsys):
    _, out, _ = cli("transcripts", str(runs["ansi"]), "--step", "15", "--json", capsys=capsys)
    assert "\u202e" not in out and "\x1b" not in out
    texts = [g["completion"] for s in json.loads(out)["steps"] for a in s["shown"]
             for g in a["generations"]]  # fmt: skip
    assert any("\x1b[2J" in t and "\u202e" in t for t in texts)
