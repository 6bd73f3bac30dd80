"""A text log's bytes as UTF-8, whatever it was written in.

UTF-8 (the common case) is mapped, not copied. A byte-order mark says UTF-8,
UTF-16 or UTF-32; UTF-16 without one shows as NULs in every other byte. A file
that is not UTF-8 is read as cp1252 (a superset of latin-1's printable
characters); a byte neither can read becomes U+FFFD. The readers then see UTF-8
only, and the encoding is said in a warning.
"""

from __future__ import annotations

import mmap
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

_BOMS = [(b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
         (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")]
UTF8 = "utf-8"
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)     # the pages mapped in one call, not faulted one by one


def encoding_of_head(head: bytes) -> str | None:
    """The encoding the first bytes say (a BOM, UTF-16's NULs), or None: ASCII-compatible."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    pairs = head[: len(head) - len(head) % 2]
    if len(pairs) >= 8 and pairs.count(b"\x00") * 4 >= len(pairs):
        even, odd = pairs[0::2].count(0), pairs[1::2].count(0)
        if odd >= 0.9 * len(pairs) // 2 and even == 0:
            return "utf-16-le"
        if even >= 0.9 * len(pairs) // 2 and odd == 0:
            return "utf-16-be"
    return None


def utf8_head(head: bytes) -> bytes:
    """The first bytes of a file as UTF-8, without a byte-order mark: a UTF-16 or UTF-32 file
    (what PowerShell's `>` writes) shows its `{` or its header as any other file does."""
    enc = encoding_of_head(head)
    if enc is None or enc == "utf-8-sig":
        return head.removeprefix(b"\xef\xbb\xbf")
    unit = 4 if "32" in enc else 2
    return head[:len(head) - len(head) % unit].decode(enc, "replace").lstrip("\ufeff").encode(UTF8)


def is_wide(head: bytes) -> bool:
    """UTF-16 or UTF-32 text."""
    return (encoding_of_head(head) or "").startswith(("utf-16", "utf-32"))


def _map(path: Path) -> bytes | mmap.mmap:
    """The file's bytes: mapped when it is a plain file at rest (no copy), else read. A file
    written in the last minute is read: a trainer that starts again and truncates it while
    it is mapped would end this process (SIGBUS); appending is harmless either way."""
    try:
        st = path.stat()
        if st.st_size and path.is_file() and time.time() - st.st_mtime > 60 and hasattr(mmap, "MAP_SHARED"):
            fd = os.open(path, os.O_RDONLY)
            try:
                return mmap.mmap(fd, 0, flags=mmap.MAP_SHARED | _POPULATE, prot=mmap.PROT_READ)
            finally:
                os.close(fd)
    except (OSError, ValueError):
        pass                                     # not mappable here: read it
    return path.read_bytes()


def _is_utf8(data) -> bool:
    b = np.frombuffer(data, dtype=np.uint8)
    step = 1 << 24
    if all(b[i:i + step].max(initial=0) < 0x80 for i in range(0, len(b), step)):
        return True                              # ASCII: nothing to check
    try:       # a SIMD check of the whole text, no copy
        offsets = pa.py_buffer(np.array([0, len(b)], dtype=np.int64))
        pa.LargeStringArray.from_buffers(1, offsets, pa.py_buffer(data)).validate(full=True)
        return True
    except pa.ArrowInvalid:
        return False


def _eight_bit(data: bytes) -> tuple[bytes, str]:
    """Text that is not UTF-8: mostly UTF-8 with a few stray bytes, or an 8-bit code page."""
    as_utf8 = data.decode(UTF8, "replace")
    bad = as_utf8.count("\ufffd") - data.count(b"\xef\xbf\xbd")
    wide = len(as_utf8) - len(as_utf8.encode("ascii", "ignore"))
    good = wide - as_utf8.count("\ufffd")         # characters UTF-8 did read
    if good > bad:
        return as_utf8.encode(UTF8), f"UTF-8 with {bad} byte(s) that are not"
    return data.decode("cp1252", "replace").encode(UTF8), "cp1252 (latin-1)"


def utf8_bytes(path: Path) -> tuple[bytes | mmap.mmap, str | None]:
    """The text as UTF-8 bytes (bytes or a read-only map), and what it was read from when
    that was not UTF-8 (None: it was)."""
    data = _map(path)
    enc = encoding_of_head(bytes(data[:4096]))
    if enc is None:
        if _is_utf8(data):
            return data, None
        return _eight_bit(bytes(data))
    text = bytes(data).decode(enc, "replace")
    return text.encode(UTF8), None if enc == "utf-8-sig" else enc.upper().replace("-LE", " LE").replace("-BE", " BE")


def decode(data: bytes, enc: str | None = None) -> str:
    """Bytes of a text log's head as text, in the encoding its first bytes say."""
    enc = enc or encoding_of_head(data[:4096]) or UTF8
    return data.decode(enc, "replace")


def open_text(path: Path):
    """The file opened as text in the encoding its head says (UTF-8 else), bad bytes replaced."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        head = b""
    enc = encoding_of_head(head)
    if enc is None and head and not _valid_prefix(head):
        enc = "cp1252"
    return open(path, "r", encoding=enc or UTF8, errors="replace", newline="")


def _printable(line: bytes) -> bool:
    return all(c >= 32 or c in (9, 13, 27) for c in line)


def _valid_prefix(head: bytes) -> bool:
    try:
        head.decode(UTF8)
    except UnicodeDecodeError as err:
        return err.start > len(head) - 4         # a multi-byte character cut at the edge
    return True


def looks_like_text(head: bytes) -> bool:
    """Text in some encoding: a BOM or UTF-16's NULs, or no NUL and mostly printable bytes."""
    if not head:
        return False
    if encoding_of_head(head):
        return True
    if b"\x00" in head:
        # binary, unless a text line opens it and a blob follows (a log with bytes pasted in)
        first, nl, _ = head.partition(b"\n")
        return bool(nl) and len(first) >= 8 and b"\x00" not in first and _printable(first)
    if _valid_prefix(head):
        return True
    control = sum(head.count(bytes([c])) for c in range(32) if c not in (9, 10, 12, 13, 27))
    return control * 20 < len(head)              # a code page's text, not a binary file
