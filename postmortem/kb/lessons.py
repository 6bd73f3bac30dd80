"""`learners/<name>/lessons.md`: one table row per lesson, appended under a lock."""

from __future__ import annotations

import fcntl
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from postmortem.files import atomic_write

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
HEADER = ("| date | pattern | run | lesson | post-mortem |\n"
          "|---|---|---|---|---|\n")
_ROW = re.compile(r"^\|\s*(\d{4}-\d{2}-\d{2})\s*\|\s*([\w-]+)\s*\|\s*(\S+)\s*\|\s*(.*?)\s*\|"
                  r"\s*\[post-mortem\]\((.+?)\)\s*\|\s*$")


class KBError(Exception):
    """A refusal of the knowledge base, as one line."""


def check_learner(name: str) -> str:
    if not NAME.match(name or "") or name in (".", "..") or ".." in name:
        raise KBError(f"learner name {name!r} is not a plain name (letters, digits, - _ .)")
    return name


@dataclass
class Lesson:
    date: str
    pattern: str
    run_id: str
    lesson: str
    link: str
    learner: str = ""

    def row(self) -> str:
        text = self.lesson.replace("|", "\\|").replace("\n", " ")
        return f"| {self.date} | {self.pattern} | {self.run_id} | {text} | [post-mortem]({self.link}) |\n"

    def to_dict(self) -> dict:
        return asdict(self)


def parse_lessons(text: str, learner: str = "") -> list[Lesson]:
    out = []
    for line in text.splitlines():
        m = _ROW.match(line)
        if m:
            out.append(Lesson(m[1], m[2], m[3], m[4].replace("\\|", "|"), m[5], learner))
    return out


def append(path: Path, lesson: Lesson) -> None:
    """One write of one whole line under an exclusive lock: concurrent appends never
    interleave, and none is lost."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = lesson.row()
        if os.fstat(fd).st_size == 0:
            data = f"# Lessons of {path.parent.name}\n\n" + HEADER + data
        os.write(fd, data.encode("utf-8"))
        os.fsync(fd)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def replace_row(path: Path, lesson: Lesson) -> None:
    """--amend: the row of the same run and date is rewritten, not doubled."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    lines = [ln for ln in text.splitlines(keepends=True)
             if not ((m := _ROW.match(ln.rstrip("\n"))) and m[1] == lesson.date and m[3] == lesson.run_id)]
    atomic_write(path, "".join(lines))
    append(path, lesson)


def read_all(root: Path) -> list[Lesson]:
    """Every learner's lessons under `root/learners`."""
    out = []
    for f in sorted((root / "learners").glob("*/lessons.md")):
        out += parse_lessons(f.read_text(encoding="utf-8", errors="replace"), f.parent.name)
    return out
