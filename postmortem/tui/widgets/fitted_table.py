"""A table that fits its width: short columns as wide as their cells, one text column takes
the rest. Names wrap at their hyphens and commas (the row grows) rather than being cut into
nonsense; the text column is cut with an ellipsis, and a pane beside it shows the row whole."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import DataTable


@dataclass(frozen=True)
class Col:
    """One column: `most` caps a short column's width; `text` marks the column that takes the
    rest; `wrap` wraps a cell onto more lines instead of cutting it; `optional` columns are
    left out when the text column would get fewer than `least` characters with them."""
    label: str
    most: int = 12
    text: bool = False
    wrap: bool = False
    optional: bool = False
    least: int = 16


def wrapped(cell: str, width: int) -> list[str]:
    """`cell` in lines of at most `width`: a list one item a line, text broken at spaces and
    after hyphens."""
    if len(cell) <= width:
        return [cell]
    if ", " in cell:                         # a list of names: one a line, no commas left dangling
        return [line for item in cell.split(", ") for line in wrapped(item, width)]
    return textwrap.wrap(cell, width, break_on_hyphens=True) or [cell]


def cut(cell: str, width: int) -> str:
    return cell if len(cell) <= width else cell[:max(0, width - 1)] + "…"


class FittedTable(DataTable):
    """A DataTable laid out again whenever its width changes or a row widens a short column.
    `rows` keeps every row as plain strings, for the panes that show one whole."""

    DEFAULT_CSS = """
    FittedTable {
        overflow-x: hidden;
        scrollbar-gutter: stable;
    }
    """

    def __init__(self, *cols: Col, **kw):
        kw.setdefault("cursor_type", "row")
        super().__init__(**kw)
        self.cols = cols
        self.rows_text: list[tuple[str, ...]] = []
        self.keys: list[str | None] = []
        self.shown: list[Col] = []          # the columns laid out, optional ones perhaps left out
        self._widths: tuple[int, ...] | None = None
        self._laid_for = -1                 # the width the rows were laid out for
        self._cursor: int | None = None     # a cursor asked for before the table had a width

    # -- rows ----------------------------------------------------------------------------

    def set_rows(self, rows, keys=None, cursor: int | None = None) -> None:
        """Replace every row; the cursor stays where it was (or moves to `cursor`)."""
        self.rows_text = [tuple(str(c) for c in r) for r in rows]
        self.keys = list(keys) if keys is not None else [None] * len(self.rows_text)
        self._layout(force=True, cursor=cursor)

    def add(self, row, key: str | None = None) -> None:
        self.rows_text.append(tuple(str(c) for c in row))
        self.keys.append(key)
        if self._fit() != self._widths:        # a short column widened: lay everything out again
            self._layout(force=True)
        elif self._widths is not None:
            self._add(self.rows_text[-1], key, self._widths)

    def point_at(self, row: int) -> None:
        """The cursor to `row`, now or, before the table has a width, once it is laid out."""
        if self._widths is None:
            self._cursor = row
        else:
            self.move_cursor(row=row)

    @property
    def widths(self) -> tuple[int, ...]:
        """The widths of the columns laid out (none before the table has a width)."""
        return self._widths or ()

    def row_text(self, index: int) -> tuple[str, ...] | None:
        return self.rows_text[index] if 0 <= index < len(self.rows_text) else None

    # -- layout --------------------------------------------------------------------------

    @property
    def room(self) -> int:
        """The characters the columns share: the table less its border and scrollbar gutter."""
        return self.scrollable_content_region.width

    def _fit(self) -> tuple[int, ...] | None:
        room = self.room
        if room <= 0:
            return None
        pad = 2 * self.cell_padding
        natural = {c.label: min(c.most, max([len(c.label)] + [len(r[i]) for r in self.rows_text]))
                   for i, c in enumerate(self.cols) if not c.text}
        shown = list(self.cols)
        while True:
            used = sum(natural[c.label] + pad for c in shown if not c.text)
            rest = room - used - pad
            optional = [c for c in shown if c.optional]
            if rest >= min(c.least for c in shown if c.text) or not optional:
                break
            shown.remove(optional[-1])
        self.shown = shown
        return tuple(natural[c.label] if not c.text else max(4, rest) for c in shown)

    def _layout(self, force: bool = False, cursor: int | None = None) -> None:
        widths = self._fit()
        if widths is None:
            self._cursor = cursor if cursor is not None else self._cursor
            return
        if not force and widths == self._widths and self.room == self._laid_for:
            return
        cursor, self._cursor = cursor if cursor is not None else self._cursor, None
        row = self.cursor_row if cursor is None else cursor
        self._widths, self._laid_for = widths, self.room
        self.clear(columns=True)
        for col, width in zip(self.shown, widths):
            self.add_column(col.label, width=width)
        for r, key in zip(self.rows_text, self.keys):
            self._add(r, key, widths)
        if self.rows_text:
            self.move_cursor(row=max(0, min(row, len(self.rows_text) - 1)), animate=False)

    def _add(self, row: tuple[str, ...], key: str | None, widths: tuple[int, ...]) -> None:
        index = {c.label: i for i, c in enumerate(self.cols)}
        cells = []
        for col, width in zip(self.shown, widths):
            cell = row[index[col.label]]
            cells.append(wrapped(cell, width) if col.wrap else [cut(cell, width)])
        height = max(len(lines) for lines in cells)
        self.add_row(*(Text("\n".join(lines)) for lines in cells), key=key, height=height)

    def on_resize(self) -> None:
        self._layout()
