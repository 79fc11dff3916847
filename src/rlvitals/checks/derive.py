"""Series the checks derive from the run before judging it, computed once.

The transcript flag rates (from a scan of the run's transcripts) and the within-step
Spearman correlation of reward with reply length (from the attempts table) are evidence for
several checks and worth a plot. They are computed here, once, before any check runs; the
checks read them through ``Context.series`` like the run's own, and ``run_checks`` returns
them on ``Report.series``. Nothing is written into the run that was read, so judging a run
twice gives the same report.
"""

from __future__ import annotations

from ..model import Series
from .context import Context
from .transcripts import REWARD_LENGTH, flag_rates, reward_length_series

__all__ = ["derive"]


def derive(ctx: Context) -> dict[str, Series]:
    """The derived series of the run under ``ctx``, by name (also kept in ``ctx.derived``)."""
    out: dict[str, Series] = {}
    sc = ctx.transcript_scan
    if sc is not None:
        out.update(flag_rates(sc))
    rl = reward_length_series(ctx.data)
    if rl is not None:
        out[REWARD_LENGTH] = rl
    ctx.derived.update(out)
    return out
