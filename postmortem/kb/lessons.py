"""`learners/<name>/lessons.md`: one table row per lesson; read, filtered and grouped the
same way by the CLI and the TUI."""

from __future__ import annotations

import fcntl
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from postmortem.document.model import one_line
from postmortem.errors import KBError
from postmortem.files import NameRefused, check_name

HEADER = ("| date | pattern | run | lesson | post-mortem |\n"
          "|---|---|---|---|---|\n")
_LINK = re.compile(r"\[post-mortem\]\((.+)\)")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
# Only \n ends a row (str.splitlines would also split on \x85, \u2028, \x0c... inside a
# lesson), and a cell is written through one_line: no line break of any kind goes into it.


def check_learner(name: str) -> str:
    try:
        return check_name(name, "learner name")
    except NameRefused as err:
        raise KBError(str(err)) from None


def _escape(text: str) -> str:
    # a backslash is escaped too, so that a lesson ending in `\` cannot eat the cell's `|`
    return one_line(text).replace("\\", "\\\\").replace("|", "\\|")


def _unescape(text: str) -> str:
    return re.sub(r"\\([\\|])", r"\1", text)


def _cells(line: str) -> list[str]:
    """The cells of one table row, split on the pipes that are not escaped."""
    out, cell, i = [], [], 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            cell.append(line[i:i + 2])
            i += 2
            continue
        if c == "|":
            out.append("".join(cell))
            cell = []
        else:
            cell.append(c)
        i += 1
    out.append("".join(cell))
    if out and not out[0].strip():
        out = out[1:]
    if out and not out[-1].strip():
        out = out[:-1]
    return [x.strip() for x in out]


@dataclass
class Lesson:
    date: str
    pattern: str
    run_id: str
    lesson: str
    link: str
    learner: str = ""

    def row(self) -> str:
        return (f"| {self.date} | {_escape(self.pattern)} | {_escape(self.run_id)} | {_escape(self.lesson)} "
                f"| [post-mortem]({_escape(self.link)}) |\n")

    def to_dict(self) -> dict:
        return asdict(self)


def parse_row(line: str) -> Lesson | None:
    cells = _cells(line.rstrip("\r"))
    if len(cells) != 5 or not _DATE.fullmatch(cells[0]):
        return None
    link = _LINK.fullmatch(cells[4])
    if not link or not cells[1] or not cells[2]:
        return None
    return Lesson(cells[0], _unescape(cells[1]), _unescape(cells[2]), _unescape(cells[3]),
                  _unescape(link[1]))


def parse_lessons(text: str, learner: str = "") -> list[Lesson]:
    out = []
    for line in text.split("\n"):
        row = parse_row(line)
        if row is not None:
            row.learner = learner
            out.append(row)
    return out


def with_row(text: str, lesson: Lesson, learner: str, replace: bool = False) -> str:
    """The lessons file with `lesson` appended (a file without its final newline gets one
    first); `replace`: the row of the same run and date goes (--amend)."""
    if not text:
        return f"# Lessons of {learner}\n\n" + HEADER + lesson.row()
    lines = text.split("\n")
    if replace:
        lines = [ln for ln in lines
                 if not ((r := parse_row(ln)) and r.date == lesson.date and r.run_id == lesson.run_id)]
    text = "\n".join(lines)
    if not text.endswith("\n"):
        text += "\n"
    return text + lesson.row()


def append(path: Path, lesson: Lesson) -> None:
    """One write of one whole line under an exclusive lock: concurrent appends never
    interleave, and none is lost; a file a hand edit left without its final newline
    gets one before the row."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = lesson.row()
        size = os.fstat(fd).st_size
        if size == 0:
            data = f"# Lessons of {path.parent.name}\n\n" + HEADER + data
        elif os.pread(fd, 1, size - 1) != b"\n":
            data = "\n" + data
        os.write(fd, data.encode("utf-8"))
        os.fsync(fd)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_all(root: Path) -> list[Lesson]:
    """Every learner's lessons under `root/learners` (a folder that is not a plain name,
    or a lessons file that is not a file, is passed over)."""
    out = []
    for f in sorted((root / "learners").glob("*/lessons.md")):
        try:
            check_name(f.parent.name)
            if f.is_file():
                out += parse_lessons(f.read_text(encoding="utf-8", errors="replace"), f.parent.name)
        except (NameRefused, OSError):
            continue
    return out


def matches(lesson: Lesson, query: str) -> bool:
    """`pattern:fp16 learner:ana spike`: each field token narrows by prefix, the rest is text
    (case-insensitive, anywhere in the pattern, learner, run and lesson)."""
    words = []
    for token in query.lower().split():
        field, _, value = token.partition(":")
        if value and field in ("pattern", "learner", "run"):
            have = {"pattern": lesson.pattern, "learner": lesson.learner, "run": lesson.run_id}[field]
            if not have.lower().startswith(value):
                return False
        else:
            words.append(token)
    text = f"{lesson.pattern} {lesson.learner} {lesson.run_id} {lesson.lesson}".lower()
    return all(w in text for w in words)


def query(rows: list[Lesson], text: str = "") -> list[Lesson]:
    """The rows `text` matches (see `matches`), newest first."""
    out = [r for r in rows if matches(r, text)]
    out.sort(key=lambda r: r.date, reverse=True)
    return out


def group_by_pattern(rows: list[Lesson]) -> list[tuple[str, list[Lesson]]]:
    """(pattern, its rows) with the biggest pattern first, the rows in the order given."""
    groups: dict[str, list[Lesson]] = {}
    for r in rows:
        groups.setdefault(r.pattern, []).append(r)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
