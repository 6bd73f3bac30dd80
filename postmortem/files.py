"""Files as the user expects them: written whole (beside, then renamed over) with the mode
the umask gives, and names that are safe to become a path or a table cell."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from pathlib import Path
from typing import Callable

from postmortem.errors import UserError

# A run id or a learner name becomes a file name (learners/<name>/, <date>-<run_id>.md) and
# a cell of the lessons table: letters, digits and . _ - + = @ only, starting with a letter
# or digit, never `..`, at most MAX_NAME characters, matched whole (a `$` would let "bob\n" in).
MAX_NAME = 100
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@-]*")
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=@-]+")


class CannotWrite(UserError, OSError):
    """A file that cannot be written (a read-only or full file system, a folder that is not
    one): one line naming the file; still an OSError for the callers that roll back."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


class NameRefused(ValueError):
    """A run id or learner name that cannot be a file name; the message is one line."""


def check_name(value, what: str = "name") -> str:
    """`value` itself when it is a plain name, else NameRefused saying why in one line."""
    if not isinstance(value, str):
        raise NameRefused(f"{what} {value!r} is not text")
    shown = value if len(value) <= 40 else value[:37] + "..."
    if len(value) > MAX_NAME:
        raise NameRefused(f"{what} {shown!r} is longer than {MAX_NAME} characters")
    if not _NAME.fullmatch(value) or ".." in value:
        raise NameRefused(f"{what} {shown!r} is not a plain name (letters, digits and . _ - + = @, "
                          f"starting with a letter or digit, no '..')")
    return value


def safe_name(value: str) -> str:
    """A plain name for any text: `value` when it is one already, else the text with its odd
    characters folded to `-` and a short hash of the original (two originals never meet)."""
    try:
        return check_name(value)
    except NameRefused:
        pass
    digest = hashlib.sha256(str(value).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    stem = _UNSAFE.sub("-", str(value)).replace("..", "-").strip("-._+=@")[:MAX_NAME - 9]
    return f"{stem}-{digest}" if stem else f"run-{digest}"


def cache_home() -> Path:
    """The user's cache folder of postmortem: $XDG_CACHE_HOME/postmortem, else
    ~/.cache/postmortem (the scan's summaries under runs/, the dashboard's views under views/)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "postmortem"


def atomic_write(path: str | Path, content: str | bytes | Callable[[Path], None]) -> Path:
    """Write `content` (text, bytes, or a function that writes to the path it is given) to a
    temporary file in the same folder, then rename it over `path`. A new file gets the mode
    the umask gives (as `open` would); a file replaced keeps its mode."""
    path = Path(path)
    try:
        return _atomic_write(path, content)
    except CannotWrite:
        raise
    except OSError as err:
        raise CannotWrite(err.errno, f"cannot write {path}: {err.strerror or err}") from None


def _atomic_write(path: Path, content) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = os.stat(path).st_mode & 0o7777
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    tmp = path.parent / f".{path.name[:200]}.{secrets.token_hex(4)}.tmp"
    # 0o666 through the umask, like open(): mkstemp's 0600 hid post-mortems in a shared checkout
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        if callable(content):
            os.close(fd)
            content(tmp)
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(content.encode("utf-8") if isinstance(content, str) else content)
                f.flush()
                os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
