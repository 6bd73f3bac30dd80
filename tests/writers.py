"""Writers for test and benchmark fixtures: TensorBoard event files and W&B logs, by hand,
so the readers are tested against bytes laid out exactly as the real writers lay them."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

from postmortem.run.protowire import crc32c, masked


def varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number: int, wire: int, payload: bytes | int) -> bytes:
    key = varint((number << 3) | wire)
    if wire == 0:
        return key + varint(payload)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def scalar_event(step: int, tag: str, value: float, wall: float = 1.7e9) -> bytes:
    """PyTorch SummaryWriter's shape: wall_time, step, summary{value{tag, simple_value}}."""
    v = field(1, 2, tag.encode()) + field(2, 5, struct.pack("<f", value))
    ev = field(1, 1, struct.pack("<d", wall))
    if step:
        ev += field(2, 0, step)
    return ev + field(5, 2, field(1, 2, v))


def tensor_scalar_event(step: int, tag: str, value: float, wall: float = 1.7e9,
                        packed: bool = False) -> bytes:
    """TF2 `tf.summary.scalar`: a DT_FLOAT TensorProto, plugin "scalars"."""
    if packed:
        tensor = field(1, 0, 1) + field(2, 2, b"") + field(4, 2, struct.pack("<f", value))
    else:
        tensor = field(1, 0, 1) + field(2, 2, b"") + field(5, 2, struct.pack("<f", value))
    meta = field(1, 2, field(1, 2, b"scalars"))
    v = field(1, 2, tag.encode()) + field(9, 2, meta) + field(8, 2, tensor)
    return field(1, 1, struct.pack("<d", wall)) + field(2, 0, step) + field(5, 2, field(1, 2, v))


def text_event(step: int, tag: str, text: str) -> bytes:
    tensor = field(1, 0, 7) + field(8, 2, text.encode())
    meta = field(1, 2, field(1, 2, b"text"))
    v = field(1, 2, tag.encode()) + field(9, 2, meta) + field(8, 2, tensor)
    return field(1, 1, struct.pack("<d", 1.7e9)) + field(2, 0, step) + field(5, 2, field(1, 2, v))


def file_version_event() -> bytes:
    return field(1, 1, struct.pack("<d", 1.7e9)) + field(3, 2, b"brain.Event:2")


def record(data: bytes) -> bytes:
    header = struct.pack("<Q", len(data))
    return (header + struct.pack("<I", int(masked(np.array([crc32c(header)]))[0])) + data
            + struct.pack("<I", int(masked(np.array([crc32c(data)]))[0])))


def write_events(path: Path, events: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(record(e) for e in [file_version_event(), *events]))
    return path


# --- W&B ----------------------------------------------------------------------

def wandb_history(step: int, items: dict[str, str]) -> bytes:
    body = b"".join(field(1, 2, field(1, 2, k.encode()) + field(16, 2, v.encode()))
                    for k, v in items.items())
    body += field(2, 2, field(1, 0, step))
    return field(1, 0, step + 1) + field(2, 2, body)


def write_wandb(path: Path, records: list[bytes]) -> Path:
    """LevelDB log framing in 32 KiB blocks, as wandb's datastore writes it."""
    out = bytearray(b":W&B" + struct.pack("<HB", 0xBEE1, 0))
    block = 32768
    for data in records:
        first = True
        while True:
            room = block - len(out) % block
            if room < 7:
                out += b"\x00" * room
                continue
            chunk = data[:room - 7]
            data = data[room - 7:]
            last = not data
            kind = 1 if first and last else 2 if first else 4 if last else 3
            crc = zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF
            out += struct.pack("<IHB", crc, len(chunk), kind) + chunk
            first = False
            if last:
                break
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(out))
    return path
