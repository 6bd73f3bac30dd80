"""How far a read has come, for a front end that shows it (the command line's bar): the text
reader says the bytes it has scanned; nothing is said unless a front end listens."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

_listener: Callable[[int, int], None] | None = None


def advance(done: int, total: int) -> None:
    """`done` of `total` bytes of the text scanned."""
    if _listener is not None:
        _listener(done, total)


@contextmanager
def listening(callback: Callable[[int, int], None]) -> Iterator[None]:
    """Hand every `advance` of the reads inside to `callback(done, total)`."""
    global _listener
    before, _listener = _listener, callback
    try:
        yield
    finally:
        _listener = before
