"""The follow stage: live runs followed as they grow, and the only loops that poll them.

    follower.py  Follower: one run, read since last time, judged when due (Throttle), each
                 update handed to the outputs
    fleet.py     Fleet: many runs, the given ones and those discovered under folders; its
                 loop (``Fleet.run``)
    hub.py       Hub: ``rlvitals serve``'s fleet, with the live page's and /metrics' outputs;
                 ``serve`` and ``serve_in_background`` run it beside the HTTP server
    watch.py     Watcher and ``watch``: ``rlvitals watch``'s run and its terminal loop
    train.py     TrainFollow: the run trained in this process (``rlvitals demo``, ``train``)

What the stage finds goes to ``rlvitals.outputs`` (the terminal, the page, the console, a
webhook, /metrics); ``rlvitals.views`` only draws and serves what it is handed.
"""

from __future__ import annotations

from .fleet import Fleet
from .follower import Follower, Throttle

__all__ = ["Fleet", "Follower", "Throttle"]
