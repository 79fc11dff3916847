"""TensorBoard event files, whichever framework wrote them, without TensorFlow.

An event file is a TFRecord stream (``uint64 length, uint32 masked CRC32C of the length,
data, uint32 masked CRC32C of the data``) of ``Event`` protocol buffers. We decode the few
fields that carry scalars by hand: ``Event.step`` and ``Event.summary.value[]`` with either
``simple_value`` (TF1, tensorboardX, torch) or a scalar ``tensor`` (TF2 ``tf.summary.scalar``:
float, double, half, bfloat16 or integer, in ``*_val`` or ``tensor_content``).

Every point is kept: no reservoir sampling (TensorBoard's own ``EventAccumulator`` keeps
10,000 scalars per tag unless told otherwise). Reading is incremental: a record whose bytes are
not all there yet is read on the next pass. Both checksums are verified: a record whose data
CRC fails (a flipped bit) is dropped with a warning rather than read as a wrong value; a bad
length CRC, a length over 1 GiB (a damaged header claiming a terabyte) or a truncated protobuf
becomes one warning naming the file and the byte offset, and reading resumes at the next valid
record (found with a vectorised CRC scan). A gzip'd event file is read through gzip; at the end
of ``read()`` a cut last record and an empty file are each a warning.

The framework is recognised from the tag names (Miles, verl, TRL's ``train/`` prefix, ...)
and its mapping table applied to whole series after each read.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ..jsonio import EXPANSION_MIN_BYTES, EXPANSION_RATIO
from ..model import RunData
from ._format import Format, register
from ._trackers import map_by_keys
from .base import open_binary
from .mapping import Rule

__all__ = ["TensorBoardReader", "crc32c", "iter_scalars"]

# -- CRC32C (Castagnoli), table-driven ------------------------------------------------------

_POLY = 0x82F63B78
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    t = _TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# -- protobuf wire format --------------------------------------------------------------------


class _Bad(ValueError):
    pass


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise _Bad("truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of a message; value is int or bytes."""
    out = []
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        v: int | bytes
        if wire == 0:
            v, i = _varint(buf, i)
        elif wire == 1:
            if i + 8 > n:
                raise _Bad("truncated fixed64")
            v, i = buf[i : i + 8], i + 8
        elif wire == 2:
            ln, i = _varint(buf, i)
            if i + ln > n:
                raise _Bad("truncated bytes")
            v, i = buf[i : i + ln], i + ln
        elif wire == 5:
            if i + 4 > n:
                raise _Bad("truncated fixed32")
            v, i = buf[i : i + 4], i + 4
        else:
            raise _Bad(f"unsupported wire type {wire}")
        out.append((field, wire, v))
    return out


_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_UINT8, _DT_INT16, _DT_INT8 = 1, 2, 3, 4, 5, 6
_DT_INT64, _DT_BOOL, _DT_BFLOAT16, _DT_HALF, _DT_UINT32, _DT_UINT64 = 9, 10, 14, 19, 22, 23
_CONTENT = {
    _DT_FLOAT: "<f",
    _DT_DOUBLE: "<d",
    _DT_INT32: "<i",
    _DT_UINT8: "<B",
    _DT_INT16: "<h",
    _DT_INT8: "<b",
    _DT_INT64: "<q",
    _DT_BOOL: "<?",
    _DT_HALF: "<e",
    _DT_UINT32: "<I",
    _DT_UINT64: "<Q",
}


def _packed_varints(v: Any) -> list[int]:
    if isinstance(v, int):
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = _varint(v, i)
        out.append(x)
    return out


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def _tensor_scalar(buf: bytes) -> float | None:
    """The value of a TensorProto holding one number, or None."""
    dtype = 0
    content = b""
    values: list[float] = []
    for field, wire, v in _fields(buf):
        if field == 1 and wire == 0:
            dtype = v
        elif field == 2 and wire == 2:
            for f2, _, d in _fields(v):
                if f2 == 2:
                    size = next((s for f3, _, s in _fields(d) if f3 == 1), 1)
                    if size != 1:
                        return None
        elif field == 4 and wire == 2:
            content = v
        elif field == 5:  # float_val, packed or not
            values.extend(struct.unpack(f"<{len(v) // 4}f", v))
        elif field == 6:  # double_val
            values.extend(struct.unpack(f"<{len(v) // 8}d", v))
        elif field in (7, 10, 11, 16, 17):  # int_val, int64_val, bool_val, uint32, uint64
            values.extend(float(_signed(x)) for x in _packed_varints(v))
        elif field == 13:  # half_val: fp16 (or bfloat16) bits in an int32
            for x in _packed_varints(v):
                if dtype == _DT_BFLOAT16:
                    values.append(struct.unpack("<f", struct.pack("<I", (x & 0xFFFF) << 16))[0])
                else:
                    values.append(struct.unpack("<e", struct.pack("<H", x & 0xFFFF))[0])
        elif field == 8:  # string_val: not a number
            return None
    if content:
        if dtype == _DT_BFLOAT16:
            if len(content) != 2:
                return None
            (bits,) = struct.unpack("<H", content)
            return float(struct.unpack("<f", struct.pack("<I", bits << 16))[0])
        fmt = _CONTENT.get(dtype)
        if fmt is None or len(content) != struct.calcsize(fmt):
            return None
        return float(struct.unpack(fmt, content)[0])
    if len(values) == 1:
        return float(values[0])
    return None


def _event_scalars(data: bytes) -> tuple[int | None, float | None, list[tuple[str, float]]]:
    step: int | None = None
    wall: float | None = None
    out: list[tuple[str, float]] = []
    for field, wire, v in _fields(data):
        if field == 1 and wire == 1:
            wall = struct.unpack("<d", v)[0]
        elif field == 2 and wire == 0:
            step = _signed(v)
        elif field == 5 and wire == 2:
            for f2, w2, value in _fields(v):
                if f2 != 1 or w2 != 2:
                    continue
                tag = None
                num: float | None = None
                for f3, w3, x in _fields(value):
                    if f3 == 1 and w3 == 2:
                        tag = x.decode("utf-8", errors="replace")
                    elif f3 == 2 and w3 == 5:
                        num = struct.unpack("<f", x)[0]
                    elif f3 == 8 and w3 == 2:
                        num = _tensor_scalar(x)
                if tag is not None and num is not None:
                    out.append((tag, num))
    return step, wall, out


def iter_scalars(path: str | Path) -> list[tuple[int, str, float]]:
    """Every (step, tag, value) scalar of one event file (for tests and tools)."""
    r = TensorBoardReader(Path(path))
    out: list[tuple[int, str, float]] = []
    r._read_file(Path(path), lambda step, tag, v: out.append((step, tag, v)))
    return out


# -- the reader ------------------------------------------------------------------------------


def _event_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*tfevents*") if p.is_file())


GZIP_RATIO = EXPANSION_RATIO  # a gzip'd event file is decompressed up to this many times its size
GZIP_MIN_BYTES = EXPANSION_MIN_BYTES  # ... or this many bytes, whichever is more


class TensorBoardReader:
    """Every scalar of every event file under a path, read incrementally, none sampled away."""

    name = "tensorboard"

    def __init__(self, path: Path, *, extra_rules: tuple[Rule, ...] = ()) -> None:
        self.path = path
        self.run = RunData(source=str(path), format=self.name)
        self.extra_rules = extra_rules
        self._offsets: dict[Path, int] = {}
        self._tail: dict[Path, tuple[int, int]] = {}  # file -> (record offset, bytes it claims)
        self._gz_seen: dict[Path, tuple[int, int]] = {}  # gzip'd file -> (size, mtime) read

    def poll(self) -> bool:
        """Read the records written since the last call; True if any were."""
        changed = False
        for p in _event_files(self.path):
            changed |= self._read_file(p, self._add)
        if changed:
            map_by_keys(self.run, self.extra_rules)
        return changed

    def finish(self) -> None:
        """The files are complete: say what could not be read (a cut record, an empty file)."""
        for p in _event_files(self.path):
            tail = self._tail.get(p)
            if tail is not None:
                at, claimed = tail
                self.run.warnings.append(
                    f"{p}: byte {at}: the file ends inside a record ({claimed} bytes "
                    "claimed); that record is lost"
                )
            elif self._offsets.get(p, 0) == 0:
                self.run.warnings.append(f"{p}: empty event file (no records)")

    def _add(self, step: int, tag: str, value: float) -> None:
        self.run.metrics.add(step, tag, value)
        self.run.source_keys.add(tag)

    def _load(self, p: Path, offset: int) -> bytes | None:
        try:
            with open_binary(p) as f:
                if f.read(2) != b"\x1f\x8b":  # not gzip'd: only the new bytes
                    f.seek(offset)
                    return f.read()
                st = os.fstat(f.fileno())
                key = (st.st_size, st.st_mtime_ns)
                if self._gz_seen.get(p) == key:
                    return None  # unchanged since it was decompressed: nothing new
                raw = b"\x1f\x8b" + f.read()
        except OSError as exc:
            self.run.warnings.append(f"{p}: cannot read ({exc.strerror})")
            return None
        self._gz_seen[p] = key
        # A gzip'd event file: what decompresses so far, from the last record read, within
        # GZIP_RATIO times its size (a 1 MB file of zeros would expand to a gigabyte).
        limit = max(GZIP_MIN_BYTES, GZIP_RATIO * len(raw))
        try:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = d.decompress(raw, limit)
        except zlib.error as exc:
            self.run.warnings.append(f"{p}: gzip'd but not readable ({exc})")
            return None
        if d.unconsumed_tail:
            self.run.warnings.append(
                f"{p}: gzip'd, and expands to more than {GZIP_RATIO} times its size (a "
                f"decompression bomb?); read the first {limit} bytes only"
            )
        return out[offset:]

    def _read_file(self, p: Path, add: Any) -> bool:
        offset = self._offsets.get(p, 0)
        data = self._load(p, offset)
        if data is None:
            return False
        warn = self.run.warnings.append
        i, n = 0, len(data)
        changed = False
        self._tail.pop(p, None)
        while i + 12 <= n:
            header = data[i : i + 8]
            (length,) = struct.unpack("<Q", header)
            (hcrc,) = struct.unpack("<I", data[i + 8 : i + 12])
            if hcrc != masked_crc(header):
                j = _resync(data, i + 1)
                warn(
                    f"{p}: byte {offset + i}: not a TFRecord (bad length checksum); "
                    f"skipped {j - i} bytes"
                )
                i = j
                changed = True
                continue
            if length > MAX_RECORD:
                j = _resync(data, i + 1)
                warn(
                    f"{p}: byte {offset + i}: a record claims {length:,} bytes (more than "
                    f"the {MAX_RECORD >> 20} MiB a record may hold); skipped {j - i} bytes to "
                    "the next valid record"
                )
                i = j
                changed = True
                continue
            end = i + 12 + length + 4
            if end > n:
                j = _resync(data, i + 1)
                if _whole_record_at(data, j):
                    # Valid records follow: the length is damage, not a record being written.
                    warn(
                        f"{p}: byte {offset + i}: a record claims {length:,} bytes, but valid "
                        f"records follow it; skipped {j - i} bytes to the next one"
                    )
                    i = j
                    changed = True
                    continue
                self._tail[p] = (offset + i, length)
                break  # the rest of this record is still being written
            body = data[i + 12 : i + 12 + length]
            i_at, i = i, end
            changed = True
            (dcrc,) = struct.unpack("<I", data[end - 4 : end])
            if dcrc != masked_crc(body):
                warn(
                    f"{p}: byte {offset + i_at}: the record's data checksum does not match "
                    "(damaged bytes); record skipped"
                )
                continue
            try:
                step, _wall, scalars = _event_scalars(body)
            except (_Bad, struct.error, UnicodeDecodeError) as exc:
                warn(f"{p}: byte {offset + i_at}: bad event ({exc}); skipped")
                continue
            step = int(step or 0)
            if step < 0:  # an int64 step below 0 (2**64 - 5 written as an unsigned number)
                warn(f"{p}: byte {offset + i_at}: step {step} out of range (0..2**63-1); skipped")
                continue
            for tag, v in scalars:
                add(step, tag, v)
        self._offsets[p] = offset + i
        return changed


MAX_RECORD = 1 << 30  # a TFRecord claiming more than this is damage, not data
_NP_TABLE = np.array(_TABLE, dtype=np.uint32)


def _whole_record_at(data: bytes, j: int) -> bool:
    """Whether a whole TFRecord (header, data and both checksums) sits at ``j``."""
    if j + 12 > len(data):
        return False
    header = data[j : j + 8]
    (length,) = struct.unpack("<Q", header)
    if struct.unpack("<I", data[j + 8 : j + 12])[0] != masked_crc(header):
        return False
    end = j + 12 + length + 4
    if length > MAX_RECORD or end > len(data):
        return False
    return struct.unpack("<I", data[end - 4 : end])[0] == masked_crc(data[j + 12 : end - 4])


def _resync(data: bytes, start: int) -> int:
    """The first offset from ``start`` where a valid TFRecord header (length + its CRC) sits;
    where none is found yet, the last 11 bytes are kept for the next pass.

    Every candidate offset is tried at once with numpy (a CRC32C of 8 bytes per offset), so
    megabytes of junk cost milliseconds, not a Python loop per byte.
    """
    n = len(data)
    pos = start
    chunk = 1 << 20
    while pos + 12 <= n:
        end = min(n, pos + chunk + 11)
        buf = np.frombuffer(data, dtype=np.uint8, count=end - pos, offset=pos)
        m = len(buf) - 11
        crc = np.full(m, 0xFFFFFFFF, dtype=np.uint32)
        for k in range(8):
            crc = _NP_TABLE[(crc ^ buf[k : k + m]) & 0xFF] ^ (crc >> 8)
        crc ^= np.uint32(0xFFFFFFFF)
        masked = ((crc >> 15) | (crc << 17)) + np.uint32(0xA282EAD8)
        stored = buf[8 : 8 + m].astype(np.uint32)
        for k in (1, 2, 3):
            stored |= buf[8 + k : 8 + k + m].astype(np.uint32) << (8 * k)
        hits = np.flatnonzero(masked == stored)
        if len(hits):
            return pos + int(hits[0])
        pos += m
    return max(start, n - 11)  # wait for more bytes


def _sniff(path: Path) -> bool:
    if path.is_file():
        return "tfevents" in path.name
    if not path.is_dir():
        return False
    return any(p.is_file() for p in path.rglob("*tfevents*"))


register(
    Format(
        "tensorboard",
        "TensorBoard event files (events.out.tfevents.*), any framework; scalars only",
        _sniff,
        TensorBoardReader,
        priority=5,
        table=None,
        kind="event files",
        markers=("*tfevents*",),
    )
)
