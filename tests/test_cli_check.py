"""`rlvitals check` and `rlvitals baseline` as a user runs them: output, exit codes, errors."""

from __future__ import annotations

import json

import pytest

from rlvitals.cli import main
from synth import synth_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli")
    return {
        "healthy": synth_run(out, "healthy", lr=0.04, seed=1),
        "healthy2": synth_run(out, "healthy2", lr=0.04, seed=2),
        "healthy3": synth_run(out, "healthy3", lr=0.04, seed=3),
        "too_easy": synth_run(out, "too_easy", start_pass=(0.97, 1.0)),
        "nan": synth_run(out, "nan", nan_loss_from=30, lr=0.04),
    }


def test_json_output_has_verdict_and_findings(runs, capsys):
    assert main(["check", str(runs["too_easy"]), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["runs"][0]
    assert out["verdict"] == "too_easy"
    f = next(f for f in out["findings"] if f["check"] == "groups")
    assert set(f) >= {"check", "severity", "verdict", "title", "metric", "first_step", "evidence"}
    assert f["first_step"] == 0


def test_fail_on_warn_exits_1_when_a_warning_exists(runs, capsys):
    assert main(["check", str(runs["too_easy"]), "--fail-on", "warn"]) == 1
    assert main(["check", str(runs["too_easy"]), "--fail-on", "fail"]) == 0
    assert main(["check", str(runs["nan"]), "--fail-on", "fail"]) == 1
    assert main(["check", str(runs["healthy"]), "--fail-on", "warn"]) == 0
    capsys.readouterr()


def test_text_output_names_verdict_and_next_action(runs, capsys):
    main(["check", str(runs["nan"])])
    out = capsys.readouterr().out
    assert "verdict: NON-FINITE VALUES" in out
    assert "train/loss is NaN from step 30" in out
    assert "next:" in out


def test_markdown_output(runs, capsys):
    main(["check", str(runs["too_easy"]), "--format", "markdown"])
    out = capsys.readouterr().out
    assert out.startswith("## ") and "| severity | check | step |" in out


def test_several_runs_give_a_list_and_the_worst_exit_code(runs, capsys):
    code = main(["check", str(runs["healthy"]), str(runs["nan"]), "--json", "--fail-on", "warn"])
    out = json.loads(capsys.readouterr().out)["runs"]
    assert code == 1
    assert [r["verdict"] for r in out] == ["learning", "non_finite"]
    assert [r["path"] for r in out] == [str(runs["healthy"]), str(runs["nan"])]


def test_missing_path_is_one_line_and_exit_2(tmp_path, capsys):
    code = main(["check", str(tmp_path / "nope")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "nope" in err and "Traceback" not in err


def test_bad_threshold_override_is_exit_2(runs, capsys):
    assert main(["check", str(runs["healthy"]), "--set", "rejected_warn=abc"]) == 2
    assert "expected a number" in capsys.readouterr().err


def test_baseline_from_healthy_seeds_flags_a_different_run(runs, tmp_path, capsys):
    b = tmp_path / "ranges.json"
    seeds = [str(runs[k]) for k in ("healthy", "healthy2", "healthy3")]
    assert main(["baseline", *seeds, "-o", str(b)]) == 0
    base = json.loads(b.read_text())
    assert base["format"] == "rlvitals-baseline/1"
    rm = base["metrics"]["reward/mean"]
    assert rm["early_min"] <= min(rm["early_means"]) <= max(rm["early_means"]) <= rm["early_max"]
    assert len(rm["slopes"]) == 3
    capsys.readouterr()
    main(["check", str(runs["too_easy"]), "--baseline", str(b), "--json"])
    out = json.loads(capsys.readouterr().out)["runs"][0]
    found = [f for f in out["findings"] if f["check"] == "baseline"]
    flagged = {f["metric"] for f in found} | {
        m for f in found for m in f["evidence"].get("metrics", {})
    }
    assert "reward/mean" in flagged
    main(["check", seeds[0], "--baseline", str(b), "--json"])
    out = json.loads(capsys.readouterr().out)["runs"][0]
    assert not [f for f in out["findings"] if f["check"] == "baseline" and f["severity"] != "info"]


def test_a_baseline_from_one_run_is_refused_and_many_ranges_are_one_card(runs, tmp_path, capsys):
    """Newcomer 2026-12-03: a baseline from one run was accepted without a word ("your seeds
    1 to 1"), and a run outside it got one WARN card per metric, each with the same advice."""
    assert main(["baseline", str(runs["healthy"]), "-o", str(tmp_path / "one.json")]) == 2
    assert "two or more healthy runs" in capsys.readouterr().err
    assert not (tmp_path / "one.json").exists()
    b = tmp_path / "ranges.json"
    seeds = [str(runs[k]) for k in ("healthy", "healthy2", "healthy3")]
    assert main(["baseline", *seeds, "-o", str(b)]) == 0
    capsys.readouterr()
    main(["check", str(runs["too_easy"]), "--baseline", str(b), "--json"])
    found = json.loads(capsys.readouterr().out)["runs"][0]["findings"]
    early = [f for f in found if f["check"] == "baseline" and "healthy range" in f["title"]]
    assert len(early) == 1 and len(early[0]["evidence"]["metrics"]) > 2, early


def _reward_log(path, seed, start, rise, steps=60):
    import random

    rnd = random.Random(seed)
    with open(path, "w") as f:
        for s in range(steps):
            r = start + rise * s / steps + rnd.gauss(0, 0.02)
            f.write(json.dumps({"step": s, "reward": round(r, 4)}) + "\n")
    return str(path)


def test_a_run_outside_the_baseline_keeps_its_own_reward_verdict(tmp_path, capsys):
    """Newcomer 2026-12-07 problem 2: a run whose first steps sit below the seeds' range got
    the verdict "reward flat despite learning signal" while its reward finding said it learns.
    Starting unlike the seeds says the setup differs (a warning), not whether it learns."""
    seeds = [_reward_log(tmp_path / f"seed{i}.jsonl", i, 0.5 + 0.02 * i, 0.3) for i in (1, 2)]
    b = tmp_path / "ranges.json"
    assert main(["baseline", *seeds, "-o", str(b)]) == 0
    cases = {  # run: (first mean, rise over the run, steps) and its verdicts without a baseline
        "learns": ((0.2, 0.3, 60), {"learning"}),
        "flat": ((0.2, 0.0, 60), {"plateau", "too_hard", "not_learning"}),
        "short": ((0.2, 0.0, 12), {"too_early"}),
    }
    for name, ((start, rise, steps), verdicts) in cases.items():
        run = _reward_log(tmp_path / f"{name}.jsonl", 3, start, rise, steps)
        capsys.readouterr()
        main(["check", run, "--json"])
        alone = json.loads(capsys.readouterr().out)["runs"][0]["verdict"]
        assert alone in verdicts, name
        assert main(["check", run, "--baseline", str(b), "--json", "--fail-on", "warn"]) == 1
        out = json.loads(capsys.readouterr().out)["runs"][0]
        assert out["verdict"] == alone, name
        early = [f for f in out["findings"] if f["check"] == "baseline"]
        assert [f["metric"] for f in early] == ["reward/mean"], name
        assert early[0]["severity"] == "warn" and early[0]["verdict"] != "not_learning", name
    main(["check", seeds[0], "--baseline", str(b), "--json"])
    out = json.loads(capsys.readouterr().out)["runs"][0]
    assert out["verdict"] == "learning"
    assert not [f for f in out["findings"] if f["check"] == "baseline"]


@pytest.mark.parametrize("fmt", ["json", "csv", "console", "trl", "tensorboard"])
def test_a_from_that_reads_nothing_is_an_input_error(runs, fmt, capsys):
    """Newcomer 2026-12-07 problem 4: `check RUN_DIR --from json` read 0 steps and said TOO
    EARLY TO TELL, exit 0 (a CI gate passed). A --from that reads nothing where another reader
    reads the path is one error line, exit 2, naming the format that reads it."""
    run = str(runs["healthy"])
    for argv in (["check", run, "--from", fmt], ["metrics", run, "--from", fmt]):
        assert main(argv) == 2, argv
        cap = capsys.readouterr()
        assert cap.out == "" and cap.err.count("\n") == 1 and "Traceback" not in cap.err
        assert f"--from {fmt} read nothing" in cap.err and "reads as rlvitals" in cap.err
        assert run in cap.err


def test_a_from_on_an_empty_log_is_a_run_just_started(tmp_path, capsys):
    """What stays quiet: nothing written yet (a live run) with its own format named."""
    empty = tmp_path / "live.jsonl"
    empty.write_text("")
    assert main(["check", str(empty), "--from", "jsonl", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["verdict"] == "too_early"


def test_metrics_format_json_is_the_output(runs, capsys):
    assert main(["metrics", str(runs["healthy"]), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["steps"]) == 40 and "reward/mean" in out["metrics"]


def test_bad_baseline_file_is_one_clear_line(runs, tmp_path, capsys):
    bad = tmp_path / "b.json"
    bad.write_text('{"hello": 1}')
    assert main(["check", str(runs["healthy"]), "--baseline", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not a baseline file" in err and str(bad) in err


def test_every_threshold_is_documented_with_its_default():
    from pathlib import Path

    from rlvitals.checks import Thresholds

    doc = (Path(__file__).parent.parent / "docs" / "checks.md").read_text()
    for _check, f in Thresholds.fields():
        default = f.default
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        assert f"| `{f.name}` | {shown} |" in doc, f.name


def test_a_noiseless_line_says_exact_not_a_z_of_1e15(tmp_path, capsys):
    """Newcomer 2026-12-07: a noiseless line (values i / 30, residuals at the floats'
    rounding) printed trend_z=6679000000000000.0. Its z is exact; a noisy line keeps its
    number."""
    import math
    import re

    from rlvitals.checks.stats import trend
    from rlvitals.readers import read

    exact = tmp_path / "exact.jsonl"
    exact.write_text("".join(json.dumps({"step": i, "reward": i / 30}) + "\n" for i in range(30)))
    noisy = _reward_log(tmp_path / "noisy.jsonl", 1, 0.2, 0.3, 30)
    assert trend(read(exact).series("reward/mean")).z == math.inf
    assert math.isfinite(trend(read(noisy).series("reward/mean")).z)
    main(["check", str(exact)])
    out = capsys.readouterr().out
    assert "trend_z=exact (no noise)" in out, out
    main(["check", noisy])
    z = re.search(r"trend_z=([0-9.e+-]+)", capsys.readouterr().out)
    assert z is not None and 3 < float(z.group(1)) < 1000


def test_a_missing_extra_names_the_one_pip_command_that_works_for_this_install():
    """Newcomer 2026-12-07 problem 8: the message put `pip install 'rlvitals[serve]'` first,
    which fails for a user of a checkout (rlvitals is not on an index); `-e '.[serve]'` works
    only from the checkout's root. The command names the install as it is."""
    import shlex
    from pathlib import Path

    from rlvitals.errors import MissingExtraError, install_command

    root = Path(__file__).resolve().parent.parent
    msg = str(MissingExtraError("serve", "the live dashboard (rlvitals serve)"))
    assert msg.endswith("pip install -e " + shlex.quote(f"{root}[serve]")), msg
    assert "'rlvitals[" not in msg
    cases = {  # PEP 610 direct_url.json as pip writes it -> the command
        "pip install -e '/home/u/rlvitals[serve]'": {
            "url": "file:///home/u/rlvitals",
            "dir_info": {"editable": True},
        },
        "pip install '/home/u/rlvitals[serve]'": {"url": "file:///home/u/rlvitals", "dir_info": {}},
        "pip install '/w/rlvitals-0.4.0-py3-none-any.whl[serve]'": {
            "url": "file:///w/rlvitals-0.4.0-py3-none-any.whl",
            "archive_info": {},
        },
        "pip install 'rlvitals[serve] @ git+https://example.org/rlvitals.git'": {
            "url": "https://example.org/rlvitals.git",
            "vcs_info": {"vcs": "git", "commit_id": "0" * 40},
        },
        "pip install 'rlvitals[serve]'": {},  # from an index
    }
    for want, direct in cases.items():
        assert install_command("serve", checkout=False, direct_url=direct) == want
