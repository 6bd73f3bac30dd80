"""Table cells as plain text: a DataTable reads a str as markup, and a lesson or a log's
observation with [brackets] in it must show as written."""

from __future__ import annotations

from rich.text import Text


def plain(*cells) -> tuple[Text, ...]:
    return tuple(Text(str(c)) for c in cells)
