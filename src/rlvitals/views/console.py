"""The terminal console every text view prints through.

Run text (metric names, titles, transcripts) is untrusted: the console never reads markup or
emoji codes in it, never highlights it, and renders at a fixed width when asked (tests).
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Any

from .. import safe
from ..outputs import Output

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["FindingLines", "plain_console"]


class FindingLines(Output):
    """An ``Output`` that prints one line per new finding (``rlvitals: WARN check: title``),
    run text made safe for a terminal: the TRL callback's live log."""

    def __init__(self, stream: IO[str], prefix: str = "rlvitals: ") -> None:
        self.stream = stream
        self.prefix = prefix

    def update(self, run: Any, update: Any) -> None:
        for f, before in update.new_findings:
            was = f" (was {before})" if before else ""
            line = f"{f.severity.upper()}{was} {f.check}: {f.title}"
            print(self.prefix + safe.line(line), file=self.stream, flush=True)


def plain_console(
    file: IO[str] | None = None, *, width: int | None = None, color: bool | None = None
) -> Console:
    """A rich Console for untrusted text: no markup, no emoji, no highlighting, no wrapping
    of long words. ``color`` forces colour on (True) or off (False); None detects."""
    from rich.console import Console

    return Console(
        file=file,
        width=width,
        highlight=False,
        soft_wrap=False,
        force_terminal=color,
        no_color=color is False,
        emoji=False,
        markup=False,
    )
