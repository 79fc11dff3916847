"""W&B alerts: each new finding posted with ``wandb.alert`` on the run's own W&B run, an
``Output`` (``--to wandb``; ``RLVitalsCallback(outputs=["wandb"])``).

W&B forwards a run's alerts to the Slack channel and e-mail its users already set up, so the
finding reaches them where they look. Which W&B run:

- the one given (``WandbAlerts(run=wandb_run)``);
- else the run active in this process (``wandb.run``), when the followed run is no W&B run or
  is that same run: the TRL callback beside TRL's own W&B logging (``report_to="wandb"``), a
  training loop that called ``wandb.init``;
- else, when the followed run is a W&B run directory (``rlvitals watch wandb/latest-run``), that
  run, joined from this process by its id, project and entity: an online run as a secondary
  writer (W&B's ``shared`` mode, ``x_primary=False``, so this process never marks it
  finished), an offline run as an offline run of the same id in ``dir`` (default
  ``~/.cache/rlvitals/wandb``, never the watched ``wandb/`` folder, whose ``latest-run``
  would move), which ``wandb sync`` uploads into the run with its alerts;
- else nothing is posted, and each finding is listed as not delivered with why.

What is news is the follow stage's (``AlertTracker``), as for the webhook: one alert per
finding, again only when its severity rises. Each alert's title names the severity, the check,
the verdict and the metric (at most 63 characters, as ``wandb.alert`` requires), so W&B's own
``wait_duration`` (``wait``, default 300 s: the same title is not sent again before it) never
swallows a different finding or an escalation; the same wait is kept here too, which also
holds offline, where no server applies it. Alerts are posted from one thread of their own:
``update`` returns at once and joining a W&B run (seconds) never holds the follow loop back; a
failure is one entry in ``undelivered()``, never an exception into training.

wandb 0.31 in offline mode writes each alert into the run's ``.wandb`` log as an ``alert``
record (``wandb sync`` sends it); ``tests/test_wandb_alerts.py`` reads them back from there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import safe
from ..checks.base import VERDICTS, Finding
from ..errors import MissingExtraError, UsageError
from . import Output, finding_key

__all__ = ["WandbAlerts", "alert_fields", "wandb_output"]

log = logging.getLogger("rlvitals.alerts")

# wandb.alert's levels, by the finding's severity.
LEVELS = {"fail": "ERROR", "warn": "WARN", "info": "INFO", "ok": "INFO"}
TITLE_MAX = 63  # wandb.alert: "must be less than 64 characters long"
EVIDENCE_LINES = 12  # evidence keys quoted in an alert's text
DEFAULT_DIR = Path.home() / ".cache" / "rlvitals" / "wandb"


def alert_fields(
    finding: Finding, run: str, source: str = "", previous: str | None = None
) -> dict[str, str]:
    """``wandb.alert``'s title, text and level for ``finding`` of run ``run``: the title
    names the severity, check, verdict and metric (a digest of the finding's key when that
    would pass 63 characters); the text the finding, its evidence and its next action.
    Run text is one line each, controls removed, ``&<>`` escaped (W&B forwards alerts to
    Slack, where ``<!channel>`` in a reply would ping a channel)."""
    verdict = VERDICTS.get(finding.verdict, finding.verdict)
    title = f"{finding.severity.upper()} {finding.check}: {verdict}"
    if finding.metric:
        title += f" ({finding.metric})"
    title = safe.line(title)
    if len(title) > TITLE_MAX:
        digest = hashlib.sha1(json.dumps(finding_key(finding)).encode()).hexdigest()[:6]
        title = title[: TITLE_MAX - 9].rstrip() + f"… #{digest}"
    where = finding.check + (f", {finding.metric}" if finding.metric else "")
    if finding.first_step is not None:
        where += f", from step {finding.first_step}"
    lines = [f"{safe.line(run)}: {safe.line(finding.title)}", f"{verdict} ({safe.line(where)})"]
    if previous:
        lines.append(f"(was {previous})")
    items = list(finding.evidence.items())
    for k, v in items[:EVIDENCE_LINES]:
        shown = v if isinstance(v, str) else json.dumps(v, default=str)
        lines.append(f"{safe.line(str(k))}: {safe.line(shown)[:200]}")
    if len(items) > EVIDENCE_LINES:
        lines.append(f"... and {len(items) - EVIDENCE_LINES} more evidence keys")
    if finding.action:
        lines.append(f"Next: {safe.line(finding.action)}")
    if source:
        lines.append(f"rlvitals check {safe.line(source)}")
    return {
        "title": title,
        "text": safe.slack("\n".join(lines)),
        "level": LEVELS.get(finding.severity, "INFO"),
    }


def wandb_output(arg: str | None = None) -> WandbAlerts:
    """``--to wandb`` or ``--to wandb=wait=SECONDS,dir=PATH``."""
    kw: dict[str, Any] = {}
    for part in (arg or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in ("wait", "dir"):
            raise UsageError(f"output wandb: expected wait=SECONDS or dir=PATH (not {part!r})")
        if key == "wait":
            try:
                kw["wait"] = float(value)
            except ValueError:
                raise UsageError(f"output wandb: wait: expected seconds (not {value!r})") from None
        else:
            kw["directory"] = value
    return WandbAlerts(**kw)


class _NoRun(Exception):
    """No W&B run to post on (the reason is the message)."""


class WandbAlerts(Output):
    """Posts each new finding with ``wandb.alert`` (see the module docstring).

    Args:
        run: the W&B run to post on (default: found as the module docstring says).
        wait: ``wandb.alert``'s ``wait_duration`` in seconds, kept here as well: the same
            title is not posted again before it has passed.
        directory: where a W&B run joined from this process keeps its files.
        on_alert: called with (title, text, level, wait) after each alert is posted (from
            the posting thread).
    """

    def __init__(
        self,
        run: Any = None,
        *,
        wait: float = 300.0,
        directory: str | Path | None = None,
        on_alert: Callable[[str, str, str, float], None] | None = None,
    ) -> None:
        try:
            import wandb  # noqa: F401
        except ImportError:
            raise MissingExtraError("wandb", "W&B alerts (--to wandb)") from None
        if not wait >= 0:
            raise UsageError(f"output wandb: wait: expected 0 or more seconds (not {wait})")
        self.run = run
        self.wait = float(wait)
        self.directory = Path(directory) if directory is not None else DEFAULT_DIR
        self.on_alert = on_alert
        self.posted = 0
        self.suppressed = 0  # the same title again within ``wait``
        self.failures: list[tuple[str, str]] = []
        self._joined: Any = None  # a run this output joined (finished at close)
        self._target: Any = None
        self._target_name = ""
        self._join_failed: str | None = None
        self._last: dict[str, float] = {}
        self._queue: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._work, name="rlvitals-wandb", daemon=True)
        self._thread.start()

    # -- Output --------------------------------------------------------------------------

    def update(self, run: Any, update: Any) -> None:
        """One alert for each finding that is news (``update.new_findings``)."""
        for f, before in update.new_findings:
            fields = alert_fields(f, run.name, run.source, before)
            self._queue.put((_identity(run), fields))

    def describe(self) -> str:
        return f"W&B alerts{f' on {self._target_name}' if self._target_name else ''}"

    def status_line(self) -> str:
        with self._lock:
            lost = len(self.failures)
        held = f", {self.suppressed} held back within {self.wait:g} s" if self.suppressed else ""
        return f"{self.describe()}: {self.posted} posted{held}" + (
            f", {lost} not posted" if lost else ""
        )

    def undelivered(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self.failures)

    def close(self, timeout: float = 10.0) -> int:
        """Post what is queued (within ``timeout`` seconds), finish a run joined here;
        returns how many alerts were not posted."""
        self._queue.put(None)
        self._thread.join(timeout)
        with self._lock:
            return len(self.failures) + self._queue.qsize()

    # -- the posting thread --------------------------------------------------------------

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                break
            identity, fields = item
            try:
                self._post(identity, fields)
            except Exception as exc:  # never into the follow loop, never into training
                with self._lock:
                    self.failures.append((fields["title"], f"{type(exc).__name__}: {exc}"))
                log.warning("W&B alert %r not posted: %s", fields["title"], exc)
        if self._joined is not None:
            with contextlib.suppress(Exception):
                self._joined.finish()

    def _post(self, identity: dict[str, Any], fields: dict[str, str]) -> None:
        now = time.monotonic()
        last = self._last.get(fields["title"])
        if last is not None and now - last < self.wait:
            self.suppressed += 1
            return
        try:
            target = self._resolve(identity)
        except _NoRun as exc:
            with self._lock:
                self.failures.append((fields["title"], str(exc)))
            return
        target.alert(
            title=fields["title"], text=fields["text"], level=fields["level"],
            wait_duration=self.wait,
        )  # fmt: skip
        self._last[fields["title"]] = now
        self.posted += 1
        if self.on_alert is not None:
            self.on_alert(fields["title"], fields["text"], fields["level"], self.wait)

    def _resolve(self, identity: dict[str, Any]) -> Any:
        """The W&B run to post on (see the module docstring), found once."""
        if self._target is not None:
            return self._target
        if self.run is not None:
            self._target = self.run
        else:
            import wandb

            active = wandb.run
            wid = identity.get("run_id")
            if active is not None and (wid is None or active.id == wid):
                self._target = active
            elif wid is None:
                raise _NoRun(
                    "no W&B run: the followed run is no W&B run and none is active in this "
                    "process (wandb.init, or TRL's report_to='wandb')"
                )
            elif self._join_failed:
                raise _NoRun(self._join_failed)
            else:
                try:
                    self._target = self._joined = self._join(identity)
                except Exception as exc:  # not logged in, no network: said once, not retried
                    self._join_failed = f"joining W&B run {wid} failed: {type(exc).__name__}: {exc}"
                    raise _NoRun(self._join_failed) from None
        self._target_name = str(getattr(self._target, "id", "") or "")
        return self._target

    def _join(self, identity: dict[str, Any]) -> Any:
        """The watched W&B run, joined from this process (an offline one as offline)."""
        import wandb

        offline = Path(str(identity.get("run_dir") or "")).name.startswith("offline-run-")
        options: dict[str, Any] = dict(
            console="off", silent=True, save_code=False, disable_git=True,
            x_label="rlvitals", x_update_finish_state=False,
            x_disable_stats=True, x_disable_meta=True,
        )  # fmt: skip
        if not offline:
            options.update(mode="shared", x_primary=False)
        self.directory.mkdir(parents=True, exist_ok=True)
        return wandb.init(
            id=identity["run_id"],
            project=identity.get("project"),
            entity=identity.get("entity"),
            mode="offline" if offline else None,
            resume="allow" if offline else None,
            dir=str(self.directory),
            reinit="create_new",
            settings=wandb.Settings(**options),
        )


def _identity(run: Any) -> dict[str, Any]:
    """The W&B identity of a followed run (its id, project, entity, folder), when it is a W&B
    run directory; else empty."""
    try:
        data = run.data
    except Exception:
        return {}
    if getattr(data, "format", None) != "wandb":
        return {}
    info = data.info
    return {k: info.get(k) for k in ("run_id", "project", "entity", "run_dir") if info.get(k)}
