"""A section of one line (the lesson): wrapped on screen to be read whole, but Enter moves on
to the next field and a pasted line break becomes a space, so it stays the one line `check`
asks for."""

from __future__ import annotations

from textual import events
from textual.widgets import TextArea


class LineArea(TextArea):
    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.screen.focus_next()
            return
        await super()._on_key(event)

    async def _on_paste(self, event: events.Paste) -> None:
        event.stop()
        event.prevent_default()
        one_line = " ".join(event.text.splitlines())
        if one_line and (result := self._replace_via_keyboard(one_line, *self.selection)):
            self.move_cursor(result.end_location)
