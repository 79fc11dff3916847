"""Re-run the reproductions of the 2026-12-03 attack report (../shared/research/
adversarial-2026-12-03.md) and the newcomer report's first-hour list, and say which still hold.

Each finding's reproduction is written as a test that follows the report's steps (the same
inputs, the same command, the behaviour the report measured asserted away); this script runs
them all in one pytest session and prints, per finding, its tests and whether it holds:

    python benchmarks/hostile_rerun.py            # the table, exit 1 if any finding holds
    python benchmarks/hostile_rerun.py --json     # the same as JSON

A finding holds when any of its tests fails. Findings whose fix lives elsewhere (the live
server's parts, rewritten on another branch) are listed with where they are handled.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HF = "tests/test_hostile_fleet.py::"
HR = "tests/test_hostile_runs.py::"

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
        "Parquet bomb expanded whole",
        [HR + "test_a_parquet_bomb_is_read_within_a_bound"],
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
            "tests/test_writer.py::test_a_run_killed_while_claiming_its_name_leaves_no_empty_run_json"
        ],
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
    "F16": "the connection cap and /healthz: the live server's rewrite (branch i32-serve)",
    "N02 (serve)": "serve with a name that is not UTF-8: the live server's rewrite (i32-serve)",
    "N03 (serve)": "serve with a FIFO: the live server's rewrite (i32-serve)",
}


def run(nodes: list[str]) -> dict[str, str]:
    """pytest's outcome per node id (parametrized cases folded: any failure fails)."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--junitxml={xml}",
                *nodes,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        out: dict[str, str] = {}
        if not xml.exists():
            return out
        for case in ET.parse(xml).getroot().iter("testcase"):
            name = case.get("name", "").split("[", 1)[0]
            path = case.get("classname", "").replace(".", "/") + ".py"
            key = f"{path}::{name}"
            bad = case.find("failure") is not None or case.find("error") is not None
            skipped = case.find("skipped") is not None
            now = "failed" if bad else "skipped" if skipped else "passed"
            if key not in out or now == "failed":
                out[key] = now
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    nodes = sorted({n for _, _, ns in FINDINGS.values() for n in ns})
    got = run(nodes)
    rows = []
    for fid, (sev, what, ns) in FINDINGS.items():
        states = [got.get(n, "not run") for n in ns]
        holds = any(s in ("failed", "not run") for s in states)
        rows.append(
            {
                "finding": fid,
                "severity": sev,
                "what": what,
                "tests": ns,
                "results": states,
                "holds": holds,
            }
        )
    held = [r for r in rows if r["holds"]]
    if args.json:
        print(json.dumps({"rows": rows, "elsewhere": ELSEWHERE, "hold": len(held)}, indent=2))
    else:
        for r in rows:
            mark = "HOLDS" if r["holds"] else "fixed"
            print(f"{r['finding']:4} {mark:5}  {r['severity']:12} {r['what']}")
            for n, s in zip(r["tests"], r["results"]):
                print(f"           {s:8} {n}")
        for k, v in ELSEWHERE.items():
            print(f"{k:4} -----  handled elsewhere: {v}")
        report = [r for r in rows if not r["finding"].startswith("H")]
        print(
            f"\n{sum(r['holds'] for r in report)} of {len(report)} report findings hold; "
            f"{sum(r['holds'] for r in rows if r['finding'].startswith('H'))} of "
            f"{sum(r['finding'].startswith('H') for r in rows)} first-hour items"
        )
    return 1 if held else 0


if __name__ == "__main__":
    sys.exit(main())
