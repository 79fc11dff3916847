"""Re-run the reproductions of the attack reports (../shared/research/adversarial-2026-12-03.md
and adversarial-2026-12-07.md, round 4) and the newcomer report's first-hour list, and say which
still hold.

Each finding's reproduction is written as a test that follows the report's steps (the same
inputs, the same command, the behaviour the report measured asserted away); this script runs
them all in one pytest session and prints, per finding, its tests and what became of each:

    python benchmarks/hostile_rerun.py            # the table
    python benchmarks/hostile_rerun.py --json     # the same as JSON

A finding is fixed only when every one of its tests ran and passed; it holds when one failed.
A named test that did not run (skipped, its module skipped for want of an extra, not found,
broken at collection) proves nothing either way: it is listed as NOT RUN, the script says so
on stderr and exits 2. Exit 1: some finding holds; 0: every finding is fixed. What each test
did comes from pytest itself (a plugin in the session records every collection and test
report), not from guessing at its output.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HF = "tests/test_hostile_fleet.py::"
HR = "tests/test_hostile_runs.py::"
R4 = "tests/test_hostile_round4.py::"
SL = "tests/test_server_limits.py::"

# finding -> (severity, what, [test node ids])
FINDINGS: dict[str, tuple[str, str, list[str]]] = {
    "N01": (
        "security",
        "s3 keys with ../ written outside the mirror",
        ["tests/test_remote.py::test_object_keys_with_dot_dot_never_land_outside_the_mirror"],
    ),
    "N02": (
        "security",
        "a name that is not UTF-8: report/export/query traceback",
        [
            HF + "test_names_that_are_not_utf8_are_shown_escaped_in_export_query_and_report",
            "tests/test_fuzz_readers.py::test_hostile_file_names_are_read_and_shown_escaped",
        ],
    ),
    "N03": (
        "security",
        "a FIFO hangs check/export/query",
        [
            HF + "test_a_fifo_never_hangs_check_export_or_query",
            "tests/test_fuzz_readers.py::test_special_files_in_a_folder_never_hang_a_command",
        ],
    ),
    "N04": (
        "data loss",
        "export -o . deletes ./runs",
        [
            HF + "test_export_never_deletes_a_training_runs_folder_named_like_a_table",
            HF + "test_export_does_not_write_through_a_symlinked_table_folder",
        ],
    ),
    "N05": (
        "wrong answer",
        "query matches Reward/Mean for reward/mean",
        [HF + "test_query_keeps_keys_that_differ_only_in_case_apart"],
    ),
    "N06": (
        "wrong answer",
        "glob characters in an export folder's name",
        [HF + "test_query_reads_a_folder_whose_name_holds_glob_characters"],
    ),
    "N07": (
        "wrong answer",
        "torn/locked SQLite read as a console log; -wal/-shm left",
        [
            HR + "test_a_torn_or_locked_sqlite_store_is_reported_never_read_as_a_console_log",
            HR + "test_reading_a_wal_store_leaves_no_files_beside_it",
        ],
    ),
    "N08": (
        "data loss",
        "a bad shard line breaks every later log_step",
        [
            "tests/test_writer_shards.py::"
            "test_a_journal_line_with_wrong_types_is_skipped_and_later_updates_go_on"
        ],
    ),
    "N09": (
        "data loss",
        "a restarted shard appends to a torn line",
        ["tests/test_writer_shards.py::test_a_restarted_shard_never_appends_to_a_torn_last_line"],
    ),
    "N10": (
        "security",
        "Parquet bomb expanded whole; 571 KB cost 1.5 GB (bound by the file's size)",
        [
            HR + "test_a_parquet_bomb_is_read_within_a_bound",
            R4 + "test_a_small_parquet_file_is_read_within_a_bound_tied_to_its_size",
            R4 + "test_rlprobe_rows_read_by_column_keep_nulls_ranks_and_order",
        ],
    ),
    "N11": (
        "security",
        "gzip bomb event file decompressed whole, every pass",
        [
            HR + "test_a_gzip_bomb_event_file_is_decompressed_within_a_bound_and_once",
            "tests/test_fuzz_readers.py::test_compressed_logs_are_one_error_line_in_bounded_time",
        ],
    ),
    "N12": (
        "traceback",
        "deep JSON in console/W&B/trackio",
        [
            HR + "test_deep_json_on_a_console_line_is_read_not_a_traceback",
            HR + "test_deep_values_in_wandb_and_trackio_are_read_not_a_traceback",
        ],
    ),
    "N13": (
        "wrong answer",
        "a writer clock 1 h behind is 'stalled'",
        [HR + "test_a_writer_clock_an_hour_behind_is_not_a_stall"],
    ),
    "N14": (
        "security",
        "formats --explain / query --json print raw controls",
        [
            HR + "test_formats_explain_never_prints_a_run_paths_terminal_controls",
            HF + "test_query_json_escapes_c1_and_bidi_characters",
            "tests/test_safety.py::test_commands_print_hostile_run_text_visibly_escaped",
            "tests/test_safety.py::test_query_and_export_print_hostile_run_text_visibly_escaped",
        ],
    ),
    "N15": (
        "traceback",
        "unreadable transcripts/: report traceback",
        [HR + "test_unreadable_transcripts_folder_is_a_warning_not_a_traceback"],
    ),
    "N16": (
        "wrong answer",
        "an unreadable run dropped; watch waits for ever",
        [
            HF + "test_an_unreadable_run_is_an_error_line_not_passed_over",
            HF + "test_watch_on_an_unreadable_run_dir_is_an_error_not_a_wait",
        ],
    ),
    "N17": (
        "wrong answer",
        "a zeroed block in a .wandb log dropped silently",
        [HR + "test_a_zeroed_stretch_inside_a_wandb_log_is_warned"],
    ),
    "N18": (
        "wrong answer",
        "CR-only line endings lose every record",
        [HR + "test_cr_only_line_endings_read_every_record"],
    ),
    "N19": (
        "cosmetic",
        "report cards: 'no step records', same names, spill",
        [HR + "test_report_tells_runs_of_one_file_name_apart_and_says_steps_without_times"],
    ),
    "N20": (
        "cosmetic",
        "query's SQL reach undocumented; extensions on",
        [
            HF + "test_query_says_what_sql_can_do_and_keeps_extensions_off",
            "tests/test_docs.py::test_the_documented_export_and_query_commands_run_as_written",
        ],
    ),
    "F03": (
        "traceback",
        "deep transcript: RecursionError, watch exits 0",
        [
            HR + "test_a_deep_transcript_file_is_read_and_judged",
            HR + "test_watch_that_could_not_judge_exits_2_with_the_reason",
        ],
    ),
    "F11": (
        "data loss",
        "cyclic/deep metadata loses the update",
        ["tests/test_writer.py::test_one_cyclic_or_deep_metadata_value_never_costs_its_update"],
    ),
    "F18": (
        "wrong answer",
        "TB 512 MiB length mid-file; step 2**64-5",
        [
            "tests/test_readers_tensorboard.py::"
            "test_a_512_mib_length_mid_file_is_damage_when_records_follow"
        ],
    ),
    "F21": (
        "wrong answer",
        "empty steps.jsonl beside attempts; dict status",
        [
            HR + "test_an_empty_steps_file_beside_rewarded_attempts_is_judged_from_them",
            HR + "test_a_status_that_is_not_a_word_is_unknown_not_a_stall",
        ],
    ),
    "F25": (
        "cosmetic",
        "715 warnings on a full disk; run.json 'running'",
        ["tests/test_writer.py::test_a_full_disk_is_warned_once_per_kind_and_run_json_still_ends"],
    ),
    "F26": (
        "cosmetic",
        "a kill leaves .tmp files / an empty run.json",
        [
            "tests/test_writer.py::test_a_run_killed_while_claiming_its_name_leaves_no_empty_run_json",
            R4 + "test_temporaries_a_killed_writer_left_are_ignored_and_said_once",
        ],
    ),
    "F16": (
        "security",
        "one address's idle streams take every descriptor (a 4,096 open-file limit)",
        [
            SL + "test_idle_event_streams_never_lock_out_healthz_or_the_page",
            SL + "test_one_client_address_cannot_take_every_connection",
            SL + "test_one_address_cannot_spend_the_processs_descriptors",
        ],
    ),
    # round 4 (adversarial 2026-12-07)
    "R4-01": (
        "crash",
        "a damaged sealed prime-rl chunk: traceback everywhere, serve never starts",
        [
            R4 + "test_a_damaged_sealed_chunk_is_a_warning_and_the_run_is_read",
            R4 + "test_every_command_judges_a_folder_with_a_damaged_chunk",
            R4 + "test_serve_starts_on_a_folder_with_a_damaged_chunk",
        ],
    ),
    "R4-02": (
        "security",
        "a sealed chunk decompressed whole (32 KB cost 2.2 GB)",
        [
            R4 + "test_a_zstd_bomb_is_read_within_a_bound_in_bounded_memory",
            R4 + "test_a_sealed_chunk_is_read_in_blocks_not_whole",
            R4 + "test_blank_runs_and_blocks_give_the_same_lines_as_one_at_a_time",
        ],
    ),
    "R4-03": (
        "crash",
        "a NeMo-RL dump named past int64: OverflowError, the folder lost",
        [
            R4 + "test_a_dump_named_past_int64_is_skipped_with_a_warning",
            R4 + "test_a_dump_named_past_int64_loses_no_other_run",
            R4 + "test_serve_reads_a_run_past_a_dump_named_past_int64",
        ],
    ),
    "R4-04": (
        "wrong answer",
        "NeMo-RL discovery: a looping link, an unreadable dump, loop -> .",
        [
            R4 + "test_a_self_looping_link_named_like_a_dump_is_one_warning",
            R4 + "test_one_unreadable_dump_loses_only_itself",
            R4 + "test_a_link_back_to_its_folder_is_not_followed",
            R4 + "test_every_odd_entry_at_once_leaves_the_run_judged",
        ],
    ),
    "R4-05": (
        "crash",
        "check DIR on a run folder it cannot enter: traceback",
        [R4 + "test_a_run_folder_that_cannot_be_entered_is_one_error_line"],
    ),
    "R4-06": (
        "security",
        "reader warnings and the run chooser print raw terminal controls",
        [
            R4 + "test_reader_warnings_never_print_a_paths_terminal_controls",
            R4 + "test_the_run_chooser_never_prints_a_run_names_terminal_controls",
        ],
    ),
    "R4-07": (
        "crash",
        "an output plugin's describe() kills watch/serve; a hung update() freezes /metrics",
        [
            R4 + "test_an_output_whose_describe_raises_never_stops_watch",
            R4 + "test_an_output_whose_describe_raises_never_stops_serve",
            R4 + "test_an_output_that_blocks_never_freezes_metrics_and_healthz_names_it",
        ],
    ),
    "R4-08": (
        "wrong answer",
        "a console log whose first line is over 256 KB is 'not a run'",
        [
            R4 + "test_a_console_log_with_a_long_first_line_is_read",
            R4 + "test_text_without_steps_past_its_first_64_kib_is_not_called_one_line",
        ],
    ),
    "R4-09": (
        "wrong answer",
        "only the first bad line of a shard journal is warned",
        [R4 + "test_every_bad_journal_line_is_counted_per_shard"],
    ),
    # the first hour (newcomer 2026-12-03)
    "H01": (
        "first hour",
        "check sqlite:///mlflow.db",
        [
            "tests/test_readers_mlflow.py::"
            "test_check_takes_the_tracking_uri_as_mlflow_users_write_it"
        ],
    ),
    "H02": (
        "first hour",
        "check wandb reads debug.log as runs",
        [
            "tests/test_readers_wandb.py::"
            "test_check_of_the_wandb_folder_judges_the_runs_not_wandbs_own_logs"
        ],
    ),
    "H03": (
        "first hour",
        "demo --fault stall: too early to tell when busy",
        [HR + "test_the_stall_demo_outlasts_the_stall_line_on_a_busy_machine"],
    ),
    "H04": (
        "first hour",
        "exploited 'mastered' / 'Nothing went wrong'",
        [HR + "test_an_exploited_runs_mastered_finding_never_says_the_checkpoint_learned"],
    ),
    "H05": (
        "first hour",
        "report says RUN; flagged cards unnamed",
        [HR + "test_report_next_steps_name_the_real_run_and_flagged_cards_name_their_flags"],
    ),
    "H06": (
        "first hour",
        "which held-out pair / first window is which",
        ["tests/test_grpo.py::test_live_view_shows_the_key_numbers_and_the_summary"],
    ),
    "H07": (
        "first hour",
        "baseline from one run; one card per metric",
        [
            "tests/test_cli_check.py::"
            "test_a_baseline_from_one_run_is_refused_and_many_ranges_are_one_card"
        ],
    ),
    "H08": (
        "first hour",
        "demo --json has no verdict",
        ["tests/test_grpo_runs.py::test_demo_command_runs_and_reports_json"],
    ),
}

ELSEWHERE = {
    "N02 (serve)": "serve with a name that is not UTF-8: "
    + SL
    + "test_a_file_name_that_is_not_utf8_is_served_escaped",
    "N03 (serve)": "serve with a FIFO: " + SL + "test_a_fifo_named_like_a_log_is_never_opened",
}

# Loaded into the pytest session (-p): every collection and test report, by node id, to JSON.
PLUGIN = """
import json, os

WANT = set(json.loads(os.environ["HOSTILE_RERUN_NODES"]))
GOT = {"tests": {}, "modules": {}}


def _base(nodeid):
    return nodeid.split("[", 1)[0]


def pytest_collection_modifyitems(config, items):
    keep = [i for i in items if _base(i.nodeid) in WANT]
    drop = [i for i in items if _base(i.nodeid) not in WANT]
    items[:] = keep
    if drop:
        config.hook.pytest_deselected(items=drop)


def pytest_collectreport(report):
    if report.outcome != "passed":
        why = report.longrepr
        if isinstance(why, tuple):  # a skip: (file, line, reason)
            why = why[-1]
        text = str(why).strip().splitlines()
        GOT["modules"][report.nodeid] = [report.outcome, text[-1][:300] if text else ""]


def pytest_runtest_logreport(report):
    if report.when != "call" and report.outcome == "passed":
        return
    case = GOT["tests"].setdefault(report.nodeid, "passed")
    if report.outcome == "failed" or case == "failed":
        GOT["tests"][report.nodeid] = "failed"
    elif report.outcome == "skipped":
        GOT["tests"][report.nodeid] = "skipped"


def pytest_sessionfinish(session):
    with open(os.environ["HOSTILE_RERUN_REPORT"], "w") as f:
        json.dump(GOT, f)
"""


def run(nodes: list[str], root: Path | None = None) -> dict[str, str]:
    """What became of each named test (node id, parametrized cases folded): ``passed``,
    ``failed`` (any case), ``skipped`` (any case), ``not run (...)`` with pytest's reason
    (its module skipped or broken at collection) or ``not collected`` (no such test). Their
    files are given to one pytest session whole, the other tests of those files deselected,
    so one module that cannot be collected never stops the others."""
    root = ROOT if root is None else root
    files = sorted({n.split("::", 1)[0] for n in nodes})
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "_hostile_rerun_plugin.py").write_text(PLUGIN)
        report = Path(tmp) / "report.json"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(root / "src"), tmp, *filter(None, [env.get("PYTHONPATH")])]
        )
        env["HOSTILE_RERUN_NODES"] = json.dumps(nodes)
        env["HOSTILE_RERUN_REPORT"] = str(report)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        cmd.append("--continue-on-collection-errors")  # one broken module stops no other
        done = subprocess.run(
            [*cmd, "-p", "_hostile_rerun_plugin", *files],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if not report.exists():
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            return {n: "not run (pytest wrote no report: " + " / ".join(tail) + ")" for n in nodes}
        got: dict[str, Any] = json.loads(report.read_text())
    out: dict[str, str] = {}
    for node in nodes:
        cases = [v for k, v in got["tests"].items() if k.split("[", 1)[0] == node]
        module = got["modules"].get(node.split("::", 1)[0])
        if cases:
            out[node] = next((s for s in ("failed", "skipped") if s in cases), "passed")
        elif module is not None:
            out[node] = f"not run (module {module[0]}: {module[1]})"
        else:
            out[node] = "not collected"
    return out


def verdicts(findings: dict[str, tuple[str, str, list[str]]], got: dict[str, str]) -> list[dict]:
    """Per finding: ``fixed`` when every test of it ran and passed, ``holds`` when one
    failed, ``not run`` otherwise (a test skipped or never collected proves nothing)."""
    rows = []
    for fid, (sev, what, ns) in findings.items():
        states = [got.get(n, "not collected") for n in ns]
        if "failed" in states:
            verdict = "holds"
        elif all(s == "passed" for s in states):
            verdict = "fixed"
        else:
            verdict = "not run"
        rows.append(
            {
                "finding": fid,
                "severity": sev,
                "what": what,
                "tests": ns,
                "results": states,
                "verdict": verdict,
                "holds": verdict == "holds",
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    nodes = sorted({n for _, _, ns in FINDINGS.values() for n in ns})
    rows = verdicts(FINDINGS, run(nodes))
    held = [r for r in rows if r["verdict"] == "holds"]
    unrun = [r for r in rows if r["verdict"] == "not run"]
    if args.json:
        print(
            json.dumps(
                {"rows": rows, "elsewhere": ELSEWHERE, "hold": len(held), "not_run": len(unrun)},
                indent=2,
            )
        )
    else:
        mark = {"holds": "HOLDS", "fixed": "fixed", "not run": "NOT RUN"}
        for r in rows:
            print(f"{r['finding']:5} {mark[r['verdict']]:7}  {r['severity']:12} {r['what']}")
            for n, s in zip(r["tests"], r["results"]):
                print(f"              {s[:60]:13} {n}")
        for k, v in ELSEWHERE.items():
            print(f"{k:5} -------  handled elsewhere: {v}")
        report = [r for r in rows if not r["finding"].startswith("H")]
        first = [r for r in rows if r["finding"].startswith("H")]
        print(
            f"\n{sum(r['holds'] for r in report)} of {len(report)} report findings hold, "
            f"{sum(r['verdict'] == 'not run' for r in report)} not run; "
            f"{sum(r['holds'] for r in first)} of {len(first)} first-hour items hold"
        )
    if unrun:
        tests = sorted(
            {n for r in unrun for n, s in zip(r["tests"], r["results"]) if s != "passed"}
        )
        print(
            f"error: {len(tests)} named test(s) did not run, so {len(unrun)} finding(s) are "
            f"neither fixed nor holding ({', '.join(r['finding'] for r in unrun)}); a test "
            "that did not run is not a pass:",
            file=sys.stderr,
        )
        for r in unrun:
            for n, s in zip(r["tests"], r["results"]):
                if s != "passed":
                    print(f"  {r['finding']}: {n}: {s}", file=sys.stderr)
        return 2
    return 1 if held else 0


if __name__ == "__main__":
    sys.exit(main())
