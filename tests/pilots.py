"""What the TUI tests wait on (the loader process's run painted and handed over) and read
(the screen's text, as a person sees it)."""

import html
import re
import time

from textual.worker import WorkerCancelled

CELL_PX = 12.2          # the width of a cell in Textual's SVG screenshot (font 20 x 0.61)
TEXT = re.compile(r'<text [^>]*?x="([\d.]+)"[^>]*?clip-path="url\(#[\w-]*?line-(\d+)\)">([^<]*)</text>')


async def opened(app, pilot, seconds=120.0):
    """Until the run is painted and handed over (or could not be read): the workers are
    awaited, no fixed sleep."""
    start = time.monotonic()
    while app.session.log is None and app.session.error is None:
        assert time.monotonic() - start < seconds, "the run was never handed over"
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:
            # a run that cannot be read makes the app leave, and leaving cancels the loader's
            # worker, which may not have returned yet: session.error says what happened
            pass
        await pilot.pause()


def screen_lines(app) -> list[str]:
    """The terminal's lines as drawn now: the text of the app's SVG screenshot, each piece at
    its column (what is off screen or hidden under another widget is not in it)."""
    width, height = app.size
    lines = [[" "] * width for _ in range(height)]
    for x, row, text in TEXT.findall(app.export_screenshot()):
        col = round(float(x) / CELL_PX)
        for i, ch in enumerate(html.unescape(text).replace("\xa0", " ")):
            if int(row) < height and col + i < width:
                lines[int(row)][col + i] = ch
    return ["".join(line).rstrip() for line in lines]


async def footer_line(app, pilot, seconds=30.0) -> str:
    """The footer's line once Textual has drawn it: the footer composes its keys after the
    screen's bindings settle, a frame or more after the run is painted on a loaded machine."""
    start = time.monotonic()
    while not (line := screen_lines(app)[-1]) and time.monotonic() - start < seconds:
        await pilot.pause(0.05)
    return line
