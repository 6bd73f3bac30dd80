"""What the TUI tests wait on: the loader process's run painted and handed over."""

import time


async def opened(app, pilot, seconds=120.0):
    """Until the run is painted and handed over (or could not be read): the workers are
    awaited, no fixed sleep."""
    start = time.monotonic()
    while app.session.log is None and app.session.error is None:
        assert time.monotonic() - start < seconds, "the run was never handed over"
        await app.workers.wait_for_complete()
        await pilot.pause()
