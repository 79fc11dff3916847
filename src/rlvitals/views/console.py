"""The terminal console every text view prints through.

Run text (metric names, titles, transcripts) is untrusted: the console never reads markup or
emoji codes in it, never highlights it, and renders at a fixed width when asked (tests).
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["plain_console"]


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
