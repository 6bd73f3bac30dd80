"""Where the keys go, said in words: the focused panel's title starts with ▶, and no
single-letter key acts on a screen where a person types (a Tab too many lands in a list or
a table there, and the sentence typed on must not run commands)."""

from __future__ import annotations

MARK = "▶ "


def types_here(screen) -> bool:
    """Whether the focus is on a screen holding a place to type (an Input or a TextArea),
    wherever on it: then every key is the text's or a ctrl/function key, never a bare letter.
    With nothing focused (the commit screen once done) the letters act again."""
    return screen.focused is not None and bool(screen.query("Input, TextArea"))


def title(widget, text: str) -> None:
    """Set `widget`'s border title, marked when it has the focus."""
    widget.border_title = (MARK if widget.has_focus else "") + text


def mark(widget, focused: bool) -> None:
    """Mark or unmark the title of `widget` as the focus comes or goes."""
    current = str(widget.border_title or "")
    bare = current[len(MARK):] if current.startswith(MARK) else current
    if focused:
        widget.border_title = MARK + (bare or "(focused)")
    elif current.startswith(MARK):
        widget.border_title = "" if bare == "(focused)" else bare
