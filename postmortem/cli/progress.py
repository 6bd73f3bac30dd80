"""Long work that speaks, on stderr (stdout keeps the result, --json one JSON document): on a
terminal rich's progress display (a spinner for a phase, a bar for a replay's steps, arm by
arm), in a pipe one line per phase. Short work stays quiet in a pipe (`quiet_below`)."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

BIG_READ = 20 << 20        # bytes: a read this big is announced in a pipe too (a 1M-step log)


def _terminal() -> bool:
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


def say(line: str) -> None:
    """One line on stderr, prefixed as every message of the command line."""
    print(f"postmortem: {line}", file=sys.stderr, flush=True)


def size_of(path) -> int:
    """The bytes of `path`, or of the files directly in a folder (where a run's log lies; its
    checkpoints below are not read), for what a read is told."""
    try:
        if os.path.isfile(path):
            return os.path.getsize(path)
        with os.scandir(path) as entries:
            return sum(e.stat().st_size for e in entries if e.is_file())
    except OSError:
        return 0


def megabytes(n: int) -> str:
    return f"{n / 1e6:.0f} MB" if n >= 10e6 else f"{n / 1e6:.1f} MB"


PIPE_AFTER_S = 1.0          # a phase said in a pipe once it has lasted this long


@contextmanager
def phase(text: str, in_pipe: bool = True, read_bytes: int = 0):
    """A phase of long work: a spinner with its words and seconds on a terminal (gone when it
    ends), its words once in a pipe (when `in_pipe`) after PIPE_AFTER_S: what is refused at
    once (a file of an unknown format) stays one line. A phase that reads a text of
    `read_bytes` (BIG_READ or more) shows on a terminal a bar of the bytes scanned."""
    if _terminal() and read_bytes >= BIG_READ:
        with _bytes_bar(text):
            yield
        return
    if not _terminal():
        if not in_pipe:
            yield
            return
        import threading
        timer = threading.Timer(PIPE_AFTER_S, say, (text,))
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        bar.add_task(text, total=None)
        yield


@contextmanager
def _bytes_bar(text: str):
    """The bytes of a big text scanned (run.readprogress), then the columns put together."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    # the bar and its bytes first: a long path is what gets cut at the right edge, not them
    from rich.table import Column

    from postmortem.run import readprogress
    words = TextColumn("{task.description}", table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"))
    with Progress(SpinnerColumn(), BarColumn(bar_width=30), DownloadColumn(), TimeElapsedColumn(), words,
                  console=Console(stderr=True), transient=True, expand=True) as bar:
        task = bar.add_task(text, total=None)

        def scanned(done: int, total: int) -> None:
            words = text if done < total else f"scanned; putting the columns together: {text}"
            bar.update(task, completed=done, total=total, description=words)

        with readprogress.listening(scanned):
            yield


class ArmSteps:
    """A replay's progress, the `progress(arm, step, done, total)` callback of the engine: a bar
    per arm on a terminal, in a pipe the heading and a line as each arm starts. The heading
    comes with the first step, or once the start (importing torch, loading the checkpoint:
    seconds, tens of them on a loaded machine) has lasted PIPE_AFTER_S: a replay refused at
    once says its one line alone, and a slow start is not silent."""

    def __init__(self, heading: str, enabled: bool = True):
        import threading
        self.heading, self.enabled = heading, enabled
        self.terminal = enabled and _terminal()
        self.started = time.monotonic()
        self.arms: dict[str, int] = {}
        self.bar: Progress | None = None
        self.said = False                      # the heading is said once, by the timer or a step
        self.saying = threading.Lock()
        self.timer: threading.Timer | None = None

    def __enter__(self) -> "ArmSteps":
        if self.terminal:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self.bar.__enter__()
        if self.enabled:
            import threading
            self.timer = threading.Timer(PIPE_AFTER_S, self._say_heading)
            self.timer.daemon = True
            self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.bar is not None:
            self.bar.__exit__(*exc)
            self.bar = None

    def _say_heading(self) -> None:
        with self.saying:
            if self.said:
                return
            self.said = True
        if self.bar is not None:
            self.bar.console.print(f"postmortem: {self.heading}", highlight=False)
        else:
            say(self.heading)

    def __call__(self, arm: str, step: int, done: int, total: int) -> None:
        if not self.enabled:
            return
        if arm not in self.arms:
            if self.timer is not None:
                self.timer.cancel()
            self._say_heading()
            self.arms[arm] = self.bar.add_task(arm, total=total) if self.bar is not None else 0
            if self.bar is None:
                say(f"arm {len(self.arms)}, {arm}: {total} steps")
        if self.bar is not None:
            self.bar.update(cast("TaskID", self.arms[arm]), completed=done, description=f"{arm:18s} step {step}")

    def done(self) -> str:
        return f"{len(self.arms)} arm(s) in {time.monotonic() - self.started:.0f} s"
