"""The heartbeat between updates: a thread that writes ``progress.jsonl`` every few seconds,
so a slow phase (sampling, grading) is told apart from a stall (docs/format.md, progress.jsonl)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Heartbeat"]

log = logging.getLogger("rlvitals")


class Heartbeat:
    """Calls ``beat()`` every ``every`` seconds on a daemon thread until ``stop()``.

    ``beat`` writes one progress record (``Run.heartbeat``); a failure in it is told once
    through ``on_error`` and the thread goes on.
    """

    def __init__(
        self,
        every: float,
        beat: Callable[[], Any],
        on_error: Callable[[Exception], None],
        name: str,
    ) -> None:
        self._every = every
        self._beat = beat
        self._on_error = on_error
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self._beat()
            except Exception as exc:  # the heartbeat thread must never die noisily
                self._on_error(exc)

    def stop(self) -> None:
        """Ask the thread to stop (it does within its interval)."""
        self._stop.set()

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the thread, unless called from it."""
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout)


def log_progress(rec: dict[str, Any]) -> None:
    """Echo a progress record to the ``rlvitals`` logger."""
    needed = rec.get("attempts_needed")
    log.info(
        "progress: step %s %s, %s attempts done%s, %.0f s since the last update",
        rec["step"],
        rec["phase"],
        rec["attempts_done"],
        f" of {needed}" if needed else "",
        rec["seconds_since_step"],
    )
