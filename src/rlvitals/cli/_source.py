"""The source options every reading command shares: ``--from FORMAT``, ``--mapping FILE``
``--samples DIR`` and ``--run NAME``.

One helper so the options mean the same everywhere (check, report, watch, serve, baseline,
transcripts, metrics, formats --explain): ``--from`` names the source format, overriding
sniffing; ``--mapping`` adds ``canonical name = "source key"`` rules ahead of the format's own
table; ``--samples`` reads a framework's sample dump as the run's attempts (``readers.samples``);
``--run`` picks one run of a tracker store that holds several (a W&B ``wandb/`` folder, a
trackio project, an MLflow store). ``read_source`` reads a run with them and refuses one from which no canonical metric
could be read, naming the keys left unmapped and ``--mapping``.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..model import RunData
from ..readers.keys import require_metrics

__all__ = ["add_source_args", "open_kwargs", "read_source", "require_metrics"]


def add_source_args(
    p: argparse.ArgumentParser, *, also: tuple[str, ...] = (), samples: bool = True
) -> None:
    """Add ``--from FORMAT`` (and the spellings in ``also``), ``--mapping FILE`` and (unless
    ``samples`` is False) ``--samples DIR`` to ``p``."""
    p.add_argument(
        "--from",
        *also,
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


def open_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``source_format``, ``mapping`` and ``run`` from parsed arguments, for readers and
    views (``--samples`` is ``args.samples``)."""
    return {
        "source_format": getattr(args, "source_format", None),
        "mapping": getattr(args, "mapping", None),
        "run": getattr(args, "store_run", None),
    }


def read_source(
    path: str, args: argparse.Namespace, *, shown: int = 20, require: bool = True
) -> RunData:
    """Read ``path`` with the command's ``--from``/``--mapping``; warnings go to stderr."""
    from . import read_run

    kw = open_kwargs(args)
    data = read_run(
        path,
        kw["source_format"],
        mapping=kw["mapping"],
        shown=shown,
        samples=getattr(args, "samples", None),
        run=kw["run"],
    )
    if require:
        require_metrics(data, path)
    return data
