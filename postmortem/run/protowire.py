"""Just enough protobuf wire format to read TensorBoard events and W&B records, and the
TFRecord framing and SummaryMetadata walk that TensorBoard's scalars and config both read."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np


class ProtoError(ValueError):
    """Bytes that are not a well-formed protobuf message."""


def read_varint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ProtoError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


Field = tuple[int, int, int | bytes]
"""(field number, wire type, value): an int for a varint (wire 0), bytes for the other wires.
Readers take it apart with `match` and a class pattern (`case (1, 2, bytes() as tag)`), which
says the field's number, wire and type at once."""


def fields(buf: bytes | memoryview, pos: int = 0, end: int | None = None) -> Iterator[Field]:
    """Yield (field number, wire type, value): an int for a varint, bytes for the other wires."""
    end = len(buf) if end is None else end
    value: int | bytes
    while pos < end:
        key, pos = read_varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtoError("field number 0")
        if wire == 0:
            value, pos = read_varint(buf, pos, end)
        elif wire == 1:
            if pos + 8 > end:
                raise ProtoError("truncated fixed64")
            value = bytes(buf[pos:pos + 8])
            pos += 8
        elif wire == 2:
            length, pos = read_varint(buf, pos, end)
            if pos + length > end:
                raise ProtoError("length past the end of the message")
            value = bytes(buf[pos:pos + length])
            pos += length
        elif wire == 5:
            if pos + 4 > end:
                raise ProtoError("truncated fixed32")
            value = bytes(buf[pos:pos + 4])
            pos += 4
        else:
            raise ProtoError(f"unsupported wire type {wire}")
        yield number, wire, value


def submessages(buf: bytes, number: int) -> Iterator[bytes]:
    """The length-delimited fields `number` of a message (embedded messages, strings), in order."""
    for field in fields(buf):
        match field:
            case (n, 2, bytes() as sub) if n == number:
                yield sub


def text(raw: bytes) -> str:
    """A string field (a tag, a plugin's name) as text, whatever its bytes."""
    return raw.decode("utf-8", "replace")


def plugin_data(metadata: bytes, plugin: str | None = None, content: bytes | None = None
                ) -> tuple[str | None, bytes | None]:
    """TensorBoard's SummaryMetadata.plugin_data (1): (plugin name 1, content 2), each over
    what came before (a later field of the same Summary.Value overrides an earlier one)."""
    for field in fields(metadata):
        match field:
            case (1, 2, bytes() as data):
                for data_field in fields(data):
                    match data_field:
                        case (1, 2, bytes() as name):
                            plugin = text(name)
                        case (2, 2, bytes() as c):
                            content = c
    return plugin, content


_U64 = struct.Struct("<Q")


def record_starts(data: bytes | memoryview) -> list[int]:
    """Where each whole TFRecord of `data` starts (u64 length | crc | data | crc), up to the
    first torn one; the CRCs are the reader's to check."""
    unpack = _U64.unpack_from
    n = len(data)
    found: list[int] = []
    append = found.append
    end = 0
    while end + 12 <= n:
        length = unpack(data, end)[0]
        if end + 16 + length > n:
            break
        append(end)
        end += 16 + length
    return found


def records(data: bytes) -> Iterator[bytes]:
    """The data of each whole TFRecord of `data`, unchecked (a file's head read for its config)."""
    for pos in record_starts(data):
        length = _U64.unpack_from(data, pos)[0]
        yield data[pos + 12:pos + 12 + length]


def as_double(raw: bytes) -> float:
    return struct.unpack("<d", raw)[0]


def as_float(raw: bytes) -> float:
    return struct.unpack("<f", raw)[0]


# --- CRC-32C (Castagnoli), vectorised over many equal-length records --------

def _crc32c_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table[i] = c
    return table


CRC32C_TABLE = _crc32c_table()


def crc32c_columns(data: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """CRC-32C of `length` bytes at each of `starts` in `data`, all at once."""
    crc = np.full(len(starts), 0xFFFFFFFF, dtype=np.uint32)
    table = CRC32C_TABLE
    for j in range(length):
        crc = table[(crc ^ data[starts + j]) & 0xFF] ^ (crc >> 8)
    return crc ^ np.uint32(0xFFFFFFFF)


def masked(crc: np.ndarray) -> np.ndarray:
    """TFRecord's masked CRC: rotate right by 15 and add a constant."""
    crc = crc.astype(np.uint32)
    return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(0xA282EAD8)


def crc32c(payload: bytes) -> int:
    """Scalar CRC-32C, for single records."""
    arr = np.frombuffer(payload, dtype=np.uint8)
    return int(crc32c_columns(arr, np.zeros(1, dtype=np.int64), len(arr))[0])
