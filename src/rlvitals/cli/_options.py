"""The options the commands share, declared once so that they mean the same everywhere.

Source options (``add_source_args``; check, report, watch, serve, baseline, transcripts,
metrics, formats --explain): ``--from`` names the source format, overriding sniffing;
``--mapping`` adds ``canonical name = "source key"`` rules ahead of the format's own table;
``--samples`` reads a framework's sample dump as the run's attempts (``readers.samples``);
``--run`` picks one run of a tracker store that holds several (a W&B ``wandb/`` folder, a
trackio project, an MLflow store). ``source_of`` turns them into a ``rlvitals.source.Source``;
``read_source`` reads a run with them and refuses one from which no canonical metric could be
read, naming the keys left unmapped and ``--mapping``.

Judging options (``add_judge_args``; check, report, export, watch, serve, demo, train):
``--baseline``, ``--set``, ``--rules``, ``--stall-after`` and ``--only``, turned into one
``rlvitals.judge.Judge`` by ``judge_of``.

Output options (``add_output_args``; watch, serve, demo, train: where a followed run's news
goes, ``--webhook``, ``--to``, ``--alert-on``) become the ``Output`` objects ``outputs_of``
builds; the pace of a command's loop (``watch --interval``, ``serve --poll``) its
``rlvitals.follow.Throttle`` (``throttle_of``). Each object is built here once and handed down
whole.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from ..checks.base import Report
    from ..checks.context import Thresholds
    from ..follow import Throttle
    from ..judge import Judge
    from ..model import RunData
    from ..outputs import Output
    from ..source import Source

__all__ = [
    "add_judge_args",
    "add_output_args",
    "add_source_args",
    "judge_of",
    "one_run_of",
    "outputs_of",
    "overrides",
    "read_source",
    "runs_of",
    "show_judging_warnings",
    "source_of",
    "throttle_of",
]


# -- what to read --------------------------------------------------------------------------


def add_source_args(p: argparse.ArgumentParser, *, samples: bool = True) -> None:
    """Add ``--from FORMAT``, ``--mapping FILE``, ``--run NAME`` and (unless ``samples`` is
    False) ``--samples DIR`` to ``p``. (``--format`` is never a source: where a command has
    it, it names the output, text or json.)"""
    p.add_argument(
        "--from",
        dest="source_format",
        default=None,
        metavar="FORMAT",
        help="source format, overriding sniffing (see `rlvitals formats`)",
    )
    p.add_argument(
        "--mapping",
        default=None,
        metavar="FILE",
        help='TOML or JSON of canonical name = "source key" rules, ahead of the format\'s own '
        "table (docs/formats.md)",
    )
    p.add_argument(
        "--run",
        dest="store_run",
        default=None,
        metavar="NAME",
        help="the run to read from a tracker store that holds several (a W&B wandb/ folder, "
        "a trackio project, an MLflow store): its name or id",
    )
    if samples:
        p.add_argument(
            "--samples",
            metavar="DIR",
            default=None,
            help="a framework's per-sample dump read as the run's attempts and transcripts "
            "(verl rollout_data_dir, TRL completions/, prime-rl rollouts/, NeMo-RL "
            "train_data_step*.jsonl, tinker iteration_*/, Miles/slime rollout_data/); found "
            "without it where the framework puts it by default beside the log",
        )


def source_of(args: argparse.Namespace, path: str) -> Source:
    """The ``Source`` of ``path`` read with the command's source options."""
    from ..source import Source

    return Source(
        path,
        format=getattr(args, "source_format", None),
        mapping=getattr(args, "mapping", None),
        samples=getattr(args, "samples", None),
        run=getattr(args, "store_run", None),
    )


def runs_of(paths: list[str]) -> list[str]:
    """Every run the paths name, each once, as ``rlvitals check`` finds them (a folder is
    searched: ``source.find_runs``); a path that names no run is one error line."""
    from ..source import find_runs

    runs: list[str] = []
    for path in paths:
        runs.extend(r for r in find_runs(path).runs if r not in runs)
    return runs


def one_run_of(path: str) -> str:
    """The run a command that follows one run (``watch``) follows at ``path``: the path, or the
    one run found under a folder; a folder of several runs is an error naming them. A path
    with no run yet (not there, or empty) is itself: the run is waited for."""
    from ..errors import ReadError
    from ..source import find_runs

    try:
        runs = find_runs(path).runs
    except ReadError:
        return path
    if len(runs) > 1:
        names = ", ".join(runs[:3]) + (", ..." if len(runs) > 3 else "")
        raise UsageError(
            f"{path}: a folder of {len(runs)} runs ({names}): name one, or follow them all "
            f"with `rlvitals serve {path}`"
        )
    return runs[0] if runs else path


def read_source(
    path: str, args: argparse.Namespace, *, shown: int = 20, require: bool = True
) -> RunData:
    """Read ``path`` with the command's source options; notes and warnings go to stderr (the
    first ``shown`` warnings and a count of the rest)."""
    from ..readers.keys import require_metrics
    from . import show_read_warnings

    data = source_of(args, path).read()
    show_read_warnings(data, shown)
    if require:
        require_metrics(data, path)
    return data


# -- how to judge --------------------------------------------------------------------------

_JUDGE_HELP = {
    "baseline": "healthy ranges from `rlvitals baseline` to hold the runs against",
    "stall_after": "a running run with no step record or progress for this long is stalled "
    "(default: ten typical step intervals, at least 10 s)",
}


def add_judge_args(
    p: argparse.ArgumentParser, *, baseline: str | None = None, stall_after: str | None = None
) -> None:
    """Add ``--baseline FILE``, ``--set NAME=VALUE``, ``--rules FILE``, ``--stall-after
    SECONDS`` and ``--only CHECK`` to ``p`` (``baseline`` and ``stall_after``: the command's
    own help for those two)."""
    p.add_argument("--baseline", metavar="FILE", help=baseline or _JUDGE_HELP["baseline"])
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a threshold (repeatable); see docs/checks.md",
    )
    p.add_argument(
        "--rules",
        metavar="FILE",
        default=None,
        help="transcript flag rules for your task (TOML or JSON; see docs/transcripts.md); "
        "default: $RLVITALS_TRANSCRIPT_RULES, else transcript-rules.toml in the run directory",
    )
    p.add_argument(
        "--stall-after",
        type=float,
        default=None,
        metavar="SECONDS",
        help=stall_after or _JUDGE_HELP["stall_after"],
    )
    p.add_argument(
        "--only",
        action="append",
        choices=_CheckNames(),
        default=None,
        metavar="CHECK",
        help="run only this check (repeatable)",
    )


class _CheckNames:
    """The checks' names, the choices of ``--only``: read when a value is checked, so declaring
    the option loads no check."""

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    @staticmethod
    def _names() -> list[str]:
        from ..checks.verdict import CHECK_ORDER

        return list(CHECK_ORDER)


def show_judging_warnings(data: RunData, report: Report) -> None:
    """What judging found wrong with the run's files (``Report.warnings``) on stderr, each line
    the reader did not already say."""
    from ..safe import line

    for w in report.warnings:
        if w not in data.warnings:
            print(f"warning: {line(w)}", file=sys.stderr)


def overrides(pairs: list[str]) -> Thresholds:
    """The thresholds with ``--set NAME=VALUE`` overrides, each checked."""
    from ..checks.context import Thresholds

    parsed = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(f"--set {pair!r}: expected NAME=VALUE")
        parsed[name.strip()] = value.strip()
    return Thresholds().with_overrides(parsed)


def judge_of(args: argparse.Namespace, *, check_rules: bool = True) -> Judge:
    """The ``Judge`` of the command's judging options, each checked now (a mistake is one
    error line at the start, not a warning on every judgement): the thresholds, the baseline
    file and, with ``check_rules``, the rules file."""
    from ..baseline import load as load_baseline
    from ..judge import Judge

    rules = getattr(args, "rules", None)
    if rules and check_rules:
        from ..transcripts.rules import load_rules

        load_rules(rules)
    path = getattr(args, "baseline", None)
    return Judge(
        baseline=load_baseline(path) if path else None,
        thresholds=overrides(getattr(args, "set", None) or []),
        rules=rules,
        stall_after=getattr(args, "stall_after", None),
        only=getattr(args, "only", None),
    )


# -- where results go ----------------------------------------------------------------------


def add_output_args(p: argparse.ArgumentParser) -> None:
    """``--webhook``, ``--to`` and ``--alert-on``: where a followed run's news goes (watch,
    serve; docs/outputs.md)."""
    p.add_argument(
        "--webhook",
        metavar="URL",
        help="post each new finding here (Slack-compatible JSON; Discord's own body for a "
        "Discord webhook URL)",
    )
    p.add_argument(
        "--to",
        dest="outputs",
        action="append",
        default=[],
        metavar="NAME[=ARG]",
        help="also hand each update to this output (repeatable): webhook=URL, slack=URL, "
        "discord=URL, wandb (a W&B alert), otel=URL (OpenTelemetry), or one an installed "
        "package registers (docs/outputs.md)",
    )
    p.add_argument(
        "--alert-on",
        choices=["info", "warn", "fail"],
        default="warn",
        help="lowest severity that counts as a new finding for the outputs (default: warn)",
    )


def outputs_of(args: argparse.Namespace) -> list[Output]:
    """The outputs ``--webhook`` and ``--to`` name, built now (a mistake is one error
    line at the start); on an error, those already built are closed."""
    from ..outputs import load_output

    specs = [f"webhook={args.webhook}"] if getattr(args, "webhook", None) else []
    specs += getattr(args, "outputs", None) or []
    built: list[Output] = []
    try:
        for spec in specs:
            built.append(load_output(spec))
    except BaseException:
        for out in built:
            out.close(0)
        raise
    return built


def throttle_of(args: argparse.Namespace, base: Throttle) -> Throttle:
    """``base`` (the pace of the command's follow stage) with the command's poll interval
    (``watch --interval``, ``serve --poll``: ``args.poll_s``)."""
    return dataclasses.replace(base, poll_s=args.poll_s)
