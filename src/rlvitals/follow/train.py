"""The follow stage of a run trained in this process (``rlvitals demo``, ``rlvitals train``).

The trainer names its run directory in its ``run`` event; from then on a ``Follower`` reads and
judges it at each update, eval and stop, when due, and hands each update to the outputs (the
console, ``outputs.console.LiveView``, and those ``--webhook``/``--to`` name), judged with the
command's own ``Judge`` (``--set``, ``--rules``, ``--baseline``, ``--stall-after``, ``--only``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..checks.base import Report
from ..model import RunData
from ..outputs import Output
from .follower import Follower, Throttle

__all__ = ["TrainFollow", "shown_by"]


class TrainFollow:
    """Follows the run a trainer in this process writes, from its ``run`` event on. At most a
    twentieth of the time goes to judging (the run trains meanwhile: ``THROTTLE``). It never
    stops the training: a failure turns it off (``error`` says why).

    Args:
        judge: judges the run (a ``rlvitals.judge.Judge``; default: ``Judge()``).
        outputs: where each update goes.
        throttle: when to judge (default: ``THROTTLE``).
        min_alert: the lowest severity that counts as a new finding for the outputs.
    """

    THROTTLE = Throttle(every_s=5.0, cost_factor=20.0)

    def __init__(
        self,
        judge: Callable[[RunData, float], Report] | None = None,
        outputs: Iterable[Output] = (),
        throttle: Throttle | None = None,
        *,
        min_alert: str = "warn",
    ) -> None:
        self.judge = judge
        self.outputs = list(outputs)
        self.throttle = throttle or self.THROTTLE
        self.min_alert = min_alert
        self.run_dir: str | None = None
        self.follower: Follower | None = None
        self.error: str | None = None

    def event(self, kind: str, data: Mapping[str, Any]) -> None:
        """A trainer event: ``run`` names the run directory; ``step``, ``eval`` and
        ``stopped`` read it, and judge it when due."""
        if kind == "run":
            self.run_dir = str(data["run_dir"])
        elif kind in ("step", "eval", "stopped"):
            self.poll()

    def poll(self, *, force: bool = False) -> None:
        """Read what is new and judge it when due (always with ``force``)."""
        if self.error is not None or self.run_dir is None:
            return
        try:
            if self.follower is None:
                self.follower = Follower(
                    self.run_dir,
                    self.judge,
                    self.outputs,
                    self.throttle,
                    min_alert=self.min_alert,
                )
            self.follower.poll(force=force)
        except Exception as exc:  # the follow must never stop the training it judges
            self.error = f"{type(exc).__name__}: {exc}"

    def end(self) -> None:
        """The trainer returned: judge the ended run whole once more, so what the outputs
        were told last (the verdict left on the console) is the run's, not one the throttle
        judged before the last updates and evals."""
        self.poll(force=True)

    def close(self, timeout: float = 10.0) -> int:
        """Close the outputs: how many alerts they could not deliver."""
        if self.follower is not None:
            return int(self.follower.close(timeout))
        return sum(out.close(timeout) for out in self.outputs)


def shown_by(view: Any, follow: TrainFollow) -> Callable[[str, Mapping[str, Any]], None]:
    """The trainer's event handler when a console shows the run: each event drawn by ``view``
    (``outputs.console.LiveView``), then followed by ``follow`` (the view among its outputs);
    the follow turning off is said in the view (``view.checks_off``)."""

    def on_event(kind: str, data: Mapping[str, Any]) -> None:
        view.event(kind, data)
        if follow.error is None:
            follow.event(kind, data)
            if follow.error is not None:
                view.checks_off(follow.error)

    return on_event
