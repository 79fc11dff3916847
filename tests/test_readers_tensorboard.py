"""Our own TFRecord + protobuf reader of TensorBoard scalars (no TensorFlow)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from rlvitals.readers import open_reader, read
from rlvitals.readers.tensorboard import crc32c, iter_scalars, masked_crc

DATA = Path(__file__).parent / "data" / "tensorboard"


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _len(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _event(step: int, values: list[bytes]) -> bytes:
    summary = b"".join(_len(1, v) for v in values)
    return b"\x09" + struct.pack("<d", 1.0) + _varint(2 << 3) + _varint(step) + _len(5, summary)


def _simple(tag: str, v: float) -> bytes:
    return _len(1, tag.encode()) + b"\x15" + struct.pack("<f", v)


def _tensor(tag: str, tensor: bytes) -> bytes:
    return _len(1, tag.encode()) + _len(8, tensor)


def _record(data: bytes) -> bytes:
    header = struct.pack("<Q", len(data))
    return (
        header + struct.pack("<I", masked_crc(header)) + data + struct.pack("<I", masked_crc(data))
    )


def test_crc32c_known_vector() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_files_written_by_tensorboard_itself_are_read() -> None:
    got = iter_scalars(DATA / "verl_tf2" / "events.out.tfevents.fixture")
    assert (34, "critic/score/mean", pytest.approx(-0.0183)) in got  # float64 tensor
    assert (34, "response_length/mean", pytest.approx(1267.02, rel=1e-6)) in got  # float32
    got = iter_scalars(DATA / "trl_run" / "events.out.tfevents.fixture")
    assert (2, "train/frac_reward_zero_std", 1.0) in got  # simple_value


def test_tensor_encodings(tmp_path: Path) -> None:
    half = _varint(1 << 3) + _varint(19) + _len(2, b"") + _varint(13 << 3) + _varint(0x3C00)
    i64 = _varint(1 << 3) + _varint(9) + _len(10, _varint(-3))
    bf16 = _varint(1 << 3) + _varint(14) + _len(4, struct.pack("<H", 0x3F80))
    vec = _varint(1 << 3) + _varint(1) + _len(5, struct.pack("<2f", 1.0, 2.0))
    text = _varint(1 << 3) + _varint(7) + _len(8, b"hello")
    ev = _event(
        7,
        [
            _tensor("half", half),
            _tensor("i64", i64),
            _tensor("bf16", bf16),
            _tensor("vector", vec),
            _tensor("text", text),
        ],
    )
    p = tmp_path / "events.out.tfevents.1"
    p.write_bytes(_record(ev))
    assert iter_scalars(p) == [(7, "half", 1.0), (7, "i64", -3.0), (7, "bf16", 1.0)]


def test_junk_between_records_is_one_warning_and_reading_resumes(tmp_path: Path) -> None:
    p = tmp_path / "events.out.tfevents.2"
    p.write_bytes(
        _record(_event(1, [_simple("train/loss", 0.5)]))
        + b"\x00\xffjunk junk junk\x01"
        + _record(_event(2, [_simple("train/loss", 0.25)]))
        + _record(b"\x0a\xff\xff")  # a valid frame around a broken protobuf
        + _record(_event(3, [_simple("train/loss", 0.125)]))
    )
    run = read(p)
    assert run.series("train/loss").values.tolist() == [0.5, 0.25, 0.125]
    assert len(run.warnings) == 2
    assert "bad length checksum" in run.warnings[0] and str(p) in run.warnings[0]
    assert "bad event" in run.warnings[1]


def test_partial_record_is_read_on_the_next_pass(tmp_path: Path) -> None:
    p = tmp_path / "events.out.tfevents.3"
    first = _record(_event(1, [_simple("a", 1.0)]))
    second = _record(_event(2, [_simple("a", 2.0)]))
    p.write_bytes(first + second[:10])
    reader = open_reader(p)
    reader.poll()
    assert reader.run.series("a").steps.tolist() == [1]
    with open(p, "ab") as f:
        f.write(second[10:])
    assert reader.poll()
    assert reader.run.series("a").steps.tolist() == [1, 2]
    assert reader.run.warnings == []


def test_unknown_framework_keeps_tags_and_takes_canonical_names(tmp_path: Path) -> None:
    p = tmp_path / "events.out.tfevents.4"
    p.write_bytes(_record(_event(0, [_simple("reward/mean", 0.5), _simple("my/thing", 1.0)])))
    run = read(tmp_path)
    assert run.info["framework"] is None
    assert run.is_canonical("reward/mean") and not run.is_canonical("my/thing")
