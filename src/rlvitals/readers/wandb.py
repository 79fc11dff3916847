"""W&B run directories (online or offline), read from the run's own ``.wandb`` log, live.

W&B writes every run locally first, online or offline: ``wandb/run-<time>-<id>/`` (or
``offline-run-...``) holds ``run-<id>.wandb``, a transaction log of every record the run made,
and ``wandb/latest-run`` links to the newest. wandb 0.31 removed its Python reader of that
file (``wandb.sdk.internal.datastore``); the supported route it left is ``wandb leet inspect
--json [--follow]``, a command of the ``wandb-core`` Go binary.

We read the file directly instead, and decode each record with the protobuf classes wandb
ships (``wandb.proto.wandb_internal_pb2.Record``), because:

- following a live run is then a byte offset: ``poll()`` reads only the records written
  since the last call, where ``leet inspect --json`` re-reads the whole log on each call (it
  has no offset) and ``--follow`` needs one long-lived subprocess per followed run (``serve``
  follows many), which exits on its own after an idle timeout;
- every record keeps its full precision and nesting (``leet`` prints JSON it re-encodes, with
  nested keys joined and NaN as a string);
- nothing runs but Python, and no platform binary is needed.

The framing is LevelDB's log format, which W&B has used since its first release: a 7-byte
file header (``:W&B``, magic 0xBEE1, version 0), then 32 KiB blocks of records, each with a
7-byte header (CRC-32 of type and data, length, type FULL/FIRST/MIDDLE/LAST); a block's last
bytes under 7 are zero padding. Each record's checksum is verified; a damaged one is one
warning naming the file and byte, and reading resumes at the next block. The risk of the
choice: the file format is not a public API. The header version is checked, and the protobuf
classes come from the installed wandb, which reads the records its own version writes.

Read: history rows (``_step`` or the step metric a ``define_metric`` names, every numeric key
under its own name, nested keys joined with ``.`` as W&B shows them, ``NaN``/``Infinity``
kept), ``_timestamp`` as the step time, the summary (``info["summary"]``), the config
(``info["config"]``), the run's id, name and project, and its exit (``finished`` or
``crashed``; ``running`` until then). Media (tables, histograms, images) are not metrics and
are left out, their fields too (a media value arrives as nested keys, ``completions._type``,
``completions.nrows``...). The tables the history names (``{"_type": "table-file", "path":
"media/table/<key>_<n>_<hash>.table.json", "nrows", "ncols", "log_mode", ...}``, the file
``{"columns": [...], "data": [[...], ...]}`` under the run's ``files/``) are kept as
``tables``, placed at the step their row is plotted at: those with prompt and completion
columns (TRL's ``completions``) are read as samples (``samples.wandb``). Needs the ``wandb``
extra.
"""

from __future__ import annotations

import fnmatch
import os
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import MissingExtraError, ReadError
from ..jsonio import loads
from ..model import RunData
from ._format import Format, register
from ._trackers import choose_run, map_by_keys, number
from .base import flatten, open_binary
from .mapping import Rule

__all__ = ["TableRef", "WandbReader", "find_run_file"]

_BLOCK = 32768
_HEADER = 7
_FILE_HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_TYPE_CRC = [zlib.crc32(bytes([t])) for t in range(5)]
_INTERNAL = {"_step", "_runtime"}
# Media whose file is a table of rows (an incremental table's file holds the rows added since
# its last log; a table-file the whole table as logged).
TABLE_TYPES = ("table-file", "incremental-table-file")


@dataclass(frozen=True)
class TableRef:
    """A table the history names: where it was logged and its file (under ``files/``)."""

    step: int
    key: str
    path: Path
    nrows: int | None = None  # rows as logged (W&B writes at most 10000 to the file)
    log_mode: str | None = None  # IMMUTABLE, MUTABLE or INCREMENTAL


def _pb() -> Any:
    try:
        from wandb.proto import wandb_internal_pb2
    except ImportError:
        raise MissingExtraError("wandb", "reading a W&B run directory") from None
    return wandb_internal_pb2


def _run_dirs(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.iterdir()
        if p.is_dir() and p.name.startswith(("run-", "offline-run-")) and any(p.glob("*.wandb"))
    )


def _run_id(run_dir: Path) -> str:
    return run_dir.name.rsplit("-", 1)[-1]


def find_run_file(path: Path, run: str | None = None) -> Path | None:
    """The ``.wandb`` log that ``path`` stands for, or None where it is no W&B run.

    ``path`` is a ``.wandb`` file, a run directory (``run-*``, ``offline-run-*``,
    ``latest-run``) or a ``wandb/`` folder holding run directories (a project folder holding
    ``wandb/`` is not claimed: a TRL output directory may hold it beside its own files). A folder of several runs reads ``run`` (an id or directory name), else the
    one ``latest-run`` links to; without either, a ``ReadError`` lists the runs.
    """
    if path.is_file():
        return path if path.suffix == ".wandb" else None
    if not path.is_dir():
        return None
    logs = sorted(path.glob("*.wandb"))
    if logs:
        return max(logs, key=lambda p: p.stat().st_mtime).resolve()
    folder = path
    dirs = _run_dirs(folder)
    if not dirs:
        return None
    if run is None and (folder / "latest-run").is_dir():
        return find_run_file((folder / "latest-run").resolve())
    names = [(d.name, _run_id(d)) for d in dirs]
    chosen = choose_run(str(folder), names, run, "W&B runs")
    return find_run_file(folder / chosen)


def _valid_at(data: bytes, pos: int, base: int) -> bool:
    """Whether a whole record with a matching checksum (or a block's zero tail) is at
    ``pos`` of ``data`` (``base``: the file offset of ``data[0]``)."""
    space = _BLOCK - (base + pos) % _BLOCK
    if space < _HEADER:
        return data[pos : pos + space] == bytes(space)
    if pos + _HEADER > len(data):
        return False
    crc, length, kind = struct.unpack_from("<IHB", data, pos)
    if not 1 <= kind <= _LAST or length > space - _HEADER or pos + _HEADER + length > len(data):
        return False
    return zlib.crc32(data[pos + _HEADER : pos + _HEADER + length], _TYPE_CRC[kind]) == crc


def _resync(data: bytes, pos: int, base: int, space: int) -> int:
    """How far past ``pos`` the next whole record of the block starts (its header and
    checksum verified; a random match is a 1 in 2^32 chance), else ``space`` (the rest of the
    block is skipped, as LevelDB's reader does). A damaged length loses only its own record."""
    stop = min(pos + space, len(data) - _HEADER)
    for p in range(pos + 1, stop):
        if _valid_at(data, p, base) and (_BLOCK - (base + p) % _BLOCK) >= _HEADER:
            return p - pos
    return space


def _value(raw: str) -> Any:
    try:
        return loads(raw)  # values nested deeper than 64 levels become null
    except ValueError:
        return None


class WandbReader:
    """One W&B run, read from its ``.wandb`` log incrementally by byte offset."""

    name = "wandb"

    def __init__(
        self, path: Path, *, extra_rules: tuple[Rule, ...] = (), run: str | None = None
    ) -> None:
        found = find_run_file(path, run)
        if found is None:
            raise ReadError(
                "no W&B run here (expected run-*.wandb or wandb/run-*/)", path=str(path)
            )
        self.file = found
        self.pb = _pb()
        self.path = path
        self.extra_rules = extra_rules
        self._reset()

    def _reset(self) -> None:
        self.run = RunData(source=str(self.path), format=self.name)
        self.run.info.update(
            {"status": "running", "config": {}, "summary": {}, "run_dir": str(self.file.parent)}
        )
        self._offset = 0  # the byte after the last whole record read
        self._step_metric: dict[str, str] = {}  # metric name or glob -> the key that steps it
        self._step_cache: dict[str, str | None] = {}
        self._unstepped: set[str] = set()
        self._last_step = -1
        self._broken = False
        self._zeros_warned: set[int] = set()  # where a stretch of zeros was warned
        self.tables: list[TableRef] = []  # the run's tables, in logging order

    def poll(self) -> bool:
        """Read the records written since the last call; True if any were."""
        if self._broken:
            return False
        try:
            with open_binary(self.file) as f:
                size = os.fstat(f.fileno()).st_size
                if size < self._offset:  # the log was replaced: read the new one whole
                    self._reset()
                    self.run.warnings.append(f"{self.file}: the log shrank; read from its start")
                f.seek(self._offset)
                data = f.read()
        except OSError as exc:
            self.run.warnings.append(f"{self.file}: cannot read ({exc.strerror})")
            return False
        changed = self._scan(data)
        if changed:
            map_by_keys(self.run, self.extra_rules, time_key="_timestamp")
        return changed

    def finish(self) -> None:
        """The log is complete: a record cut at its end is a warning."""
        try:
            size = self.file.stat().st_size
        except OSError:
            return
        if size > self._offset and not self._broken:
            self.run.warnings.append(
                f"{self.file}: byte {self._offset}: the log ends inside a record "
                f"({size - self._offset} bytes); that record is lost"
            )

    def _scan(self, data: bytes) -> bool:
        base = self._offset
        pos = 0
        if base == 0:
            if len(data) < _HEADER:
                return False
            if data[:_HEADER] != _FILE_HEADER:
                what = "a W&B log of another version" if data[:4] == b":W&B" else "no W&B log"
                self.run.warnings.append(f"{self.file}: {what} (header {data[:7]!r}); not read")
                self._broken = True
                return False
            pos = _HEADER
        n = len(data)
        parts: list[bytes] = []
        changed = False
        while True:
            at = base + pos
            space = _BLOCK - at % _BLOCK
            if space < _HEADER:  # zero padding to the block's end
                if pos + space > n:
                    break
                pos += space
                continue
            if pos + _HEADER > n:
                break
            crc, length, kind = struct.unpack_from("<IHB", data, pos)
            if kind == 0 and length == 0 and crc == 0:  # zeros: skip the rest of the block
                stop = min(pos + space, n)
                tail = data[pos:stop]
                damaged = pos + space < n or tail.count(0) != len(tail) or bool(parts)
                if damaged and at not in self._zeros_warned:  # records follow the zeros
                    self._zeros_warned.add(at)
                    changed = True
                    self.run.warnings.append(
                        f"{self.file}: byte {at}: zero bytes where a record belongs (damaged, "
                        f"or never written before a crash); skipped to byte {at + space}, the "
                        "records there are lost"
                    )
                if pos + space > n:
                    break
                pos += space
                parts = []
                continue
            if length > space - _HEADER or kind > _LAST:
                skip = _resync(data, pos, base, space)
                pos += skip
                parts = []
                changed = True
                self.run.warnings.append(
                    f"{self.file}: byte {at}: not a record header; skipped to byte {at + skip}"
                )
                continue
            end = pos + _HEADER + length
            if end > n:
                break
            body = data[pos + _HEADER : end]
            if zlib.crc32(body, _TYPE_CRC[kind]) != crc:
                # Damaged data under an intact length: the next record starts right after
                # it (checked); else the length was damaged: the next whole record is found.
                skip = end - pos if _valid_at(data, end, base) else _resync(data, pos, base, space)
                pos += skip
                parts = []
                changed = True
                self.run.warnings.append(
                    f"{self.file}: byte {at}: record checksum mismatch (damaged bytes); "
                    f"skipped to byte {at + skip}"
                )
                continue
            pos = end
            if kind == _FULL:
                parts = [body]
            elif kind == _FIRST:
                parts = [body]
                continue
            elif kind == _MIDDLE:
                if parts:
                    parts.append(body)
                continue
            elif parts:
                parts.append(body)
            else:
                continue  # the end of a record whose start was damaged
            self._record(b"".join(parts), base + pos)
            parts = []
            self._offset = base + pos
            changed = True
        if not parts and base + pos > self._offset:
            self._offset = base + pos  # padding and skipped bytes need not be read again
        return changed

    def _record(self, raw: bytes, at: int) -> None:
        rec = self.pb.Record()
        try:
            rec.ParseFromString(raw)
        except Exception as exc:  # protobuf's DecodeError: one record lost, not the run
            self.run.warnings.append(f"{self.file}: byte {at}: not a W&B record ({exc})")
            return
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            self._history(rec.history)
        elif kind == "run":
            r = rec.run
            info = self.run.info
            info["run_id"] = r.run_id
            info["name"] = r.display_name or r.run_id
            if r.project:
                info["project"] = r.project
            if r.entity:
                info["entity"] = r.entity
            if r.HasField("start_time"):
                info["created_time"] = r.start_time.seconds + r.start_time.nanos / 1e9
            self._items(info["config"], r.config.update, r.config.remove)
        elif kind == "config":
            self._items(self.run.info["config"], rec.config.update, rec.config.remove)
        elif kind == "summary":
            self._items(self.run.info["summary"], rec.summary.update, rec.summary.remove)
        elif kind == "metric":
            m = rec.metric
            if m.step_metric and (m.name or m.glob_name):
                self._step_metric[m.name or m.glob_name] = m.step_metric
                self._step_cache.clear()
        elif kind == "exit":
            code = rec.exit.exit_code
            self.run.info["exit_code"] = code
            self.run.info["status"] = "finished" if code == 0 else "crashed"

    @staticmethod
    def _key(item: Any) -> str:
        return ".".join(item.nested_key) if item.nested_key else item.key

    def _items(self, into: dict[str, Any], update: Any, remove: Any) -> None:
        for item in update:
            keys = list(item.nested_key) or [item.key]
            d = into
            for k in keys[:-1]:
                nxt = d.get(k)
                if not isinstance(nxt, dict):
                    nxt = d[k] = {}
                d = nxt
            d[keys[-1]] = _value(item.value_json)
        for item in remove:
            into.pop(self._key(item), None)

    def _stepped_by(self, key: str) -> str | None:
        if key in self._step_cache:
            return self._step_cache[key]
        found = self._step_metric.get(key)
        if found is None:
            for pat, metric in self._step_metric.items():
                if fnmatch.fnmatchcase(key, pat):
                    found = metric
                    break
        self._step_cache[key] = found
        return found

    def _history(self, h: Any) -> None:
        items = [
            (tuple(item.nested_key) or (item.key,), _value(item.value_json)) for item in h.item
        ]
        # A media value comes as nested keys (("completions", "_type"), ("completions",
        # "path"), ...) or, from older writers, one dict with "_type": its fields are no metric.
        media = {k[:-1] for k, _ in items if len(k) > 1 and k[-1] == "_type"}
        found: dict[str, dict[str, Any]] = {}
        row: dict[str, float] = {}
        for path, value in items:
            owner = next((path[:i] for i in range(1, len(path)) if path[:i] in media), None)
            if owner is not None:
                if len(path) == len(owner) + 1:
                    found.setdefault(".".join(owner), {})[path[-1]] = value
                continue
            key = ".".join(path)
            if isinstance(value, dict):
                if "_type" in value:
                    found[key] = value
                    continue
                for k, v in flatten(value, ".", key + "."):
                    f = number(v)
                    if f is not None:
                        row[k] = f
                continue
            f = number(value)
            if f is not None:
                row[key] = f
        step_value = row.get("_step")
        if step_value is not None and step_value == step_value and abs(step_value) < 2**63:
            step = int(step_value)
        elif h.HasField("step"):
            step = h.step.num
        else:
            step = self._last_step + 1
        self._last_step = step
        metrics = self.run.metrics
        keys = self.run.source_keys
        for key, value in row.items():
            if key in _INTERNAL and key != "_timestamp":
                continue
            metrics.add(self._at(key, row, step), key, value)
            keys.add(key)
        for key, fields in found.items():
            file = fields.get("path")
            if (
                fields.get("_type") in TABLE_TYPES
                and isinstance(file, str)
                and not Path(file).is_absolute()
                and ".." not in Path(file).parts  # a table is read from the run's files/ only
            ):
                nrows = fields.get("nrows")
                mode = fields.get("log_mode")
                self.tables.append(
                    TableRef(
                        self._at(key, row, step),
                        key,
                        self.file.parent / "files" / file,
                        nrows if isinstance(nrows, int) else None,
                        mode if isinstance(mode, str) else None,
                    )
                )

    def _at(self, key: str, row: dict[str, float], step: int) -> int:
        """The step ``key`` of a row at ``_step`` ``step`` is plotted at (its step metric's
        value where ``define_metric`` names one and the row has it; the step metric itself,
        which a ``"*"`` glob names too, at its own value, so it ends where the others do)."""
        by = self._stepped_by(key) if self._step_metric else None
        if by is None:
            return step
        s = row.get(by)
        if s is not None and s == s and abs(s) < 2**63:
            return int(s)
        if key not in self._unstepped:
            self._unstepped.add(key)
            self.run.warnings.append(
                f"{self.file}: {key!r} is plotted against {by!r} but a row at _step "
                f"{step} lacks it; such rows are placed at their _step"
            )
        return step


def _sniff(path: Path) -> bool:
    try:
        found = find_run_file(path)
    except ReadError:
        return True  # a wandb/ folder of several runs: the reader's error lists them
    except OSError:
        return False
    if found is None:
        return False
    if found == path or found == path.resolve():
        return True  # a .wandb file named as such: a damaged header is the reader's warning
    try:
        with open_binary(found) as f:
            return f.read(4) == b":W&B"
    except OSError:
        return False


# W&B's own logs of its service, beside the runs in a wandb/ folder: never a run.
_SERVICE_LOGS = {"debug.log", "debug-internal.log", "debug-cli.log", "debug-core.log"}
_RUN_FOLDER = re.compile(r"^(offline-)?run-\d{8}_\d{6}-\w+$")


def _service_logs(names: list[str]) -> set[str]:
    """W&B's service logs among the names of a ``wandb/`` folder (one holding run folders or
    ``latest-run``)."""
    if any(n == "latest-run" or _RUN_FOLDER.match(n) for n in names):
        return _SERVICE_LOGS
    return set()


register(
    Format(
        "wandb",
        "W&B run directory, online or offline (wandb/run-*, offline-run-*, latest-run, "
        "or the wandb/ folder; --run ID): history, summary, config, tables with prompt and "
        "completion columns as samples; live",
        _sniff,
        WandbReader,
        priority=3,
        table=None,
        kind="run directory",
        files="wandb/latest-run",
        markers=("*.wandb",),
        passes_over=_service_logs,
    )
)
