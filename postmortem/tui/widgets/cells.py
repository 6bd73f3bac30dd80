"""Table cells as plain text: a DataTable reads a str as markup, and a lesson or a log's
observation with [brackets] in it must show as written."""

from __future__ import annotations

from rich.text import Text


def columns(table, **widths: int) -> None:
    """Columns of fixed widths: a table then reads the same at any size and whenever its
    rows arrive (content-measured widths settle on the table's idle, a frame late)."""
    for label, width in widths.items():
        table.add_column(label, width=width)


def plain(*cells) -> tuple[Text, ...]:
    return tuple(Text(str(c)) for c in cells)
