"""The run read and analyzed in a child process while the app starts: two cores do at once
what one thread did in turn (importing pandas is a third of the wait), and the dashboard is
drawn from plain arrays and rows before the app has imported pandas or pydantic itself.

The child writes pickles on its stdout: ("view", FirstView) as soon as it has one (the view
kept from the last opening of the same run, see viewcache.py, before pandas is imported),
("read",) once the run is read (before it is analyzed), ("view", FirstView) again when the
fresh one differs from the kept one, then ("run", RunLog, Analysis) for the editor, the
replay and the segments; or ("error", line). `postmortem tui` waits for the first of them
before the app takes the terminal (`problem`): a run that cannot be read is its one line and
exit code 2, never an app. Only the standard library is imported here: the CLI starts the
child before Textual.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from typing import IO, TYPE_CHECKING, Callable, Sequence

from postmortem.child import command
from postmortem.errors import UserError

if TYPE_CHECKING:
    from postmortem.diagnose.models import Analysis
    from postmortem.run.model import RunLog
    from postmortem.tui.view import FirstView


class Loader:
    """`terminal`: (columns, rows) the app opens in; the first view then comes with each
    panel's plot drawn for it (tui.view.with_drawings), so the app paints before numpy."""

    def __init__(self, run: str, format: str | None = None, against: Sequence[str] = (),
                 columns: dict[str, str] | None = None, terminal: tuple[int, int] | None = None):
        self._stderr = tempfile.TemporaryFile()      # a file, not a pipe: it never blocks the child
        self.proc = subprocess.Popen(command("postmortem.tui.loader"),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr)
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None      # both piped, above
        self.stdout: IO[bytes] = stdout
        self._pending: list[tuple] = []              # messages read ahead (problem, ready)
        try:
            stdin.write(pickle.dumps((run, format, list(against), columns or {}, terminal)))
            stdin.close()
        except BrokenPipeError:       # it did not start: first() says why, from its stderr
            pass

    def problem(self, slow=None) -> str | None:
        """Wait for the child's first word: None when the run is on its way (it was read, or
        a view kept from an earlier opening came), else the one line why it cannot be read.
        The app starts after it, so Textual's import still overlaps the read. `slow()` is
        called once when the word takes over half a second (a long run being read)."""
        import select
        try:
            if slow is not None and not select.select([self.stdout], [], [], 0.5)[0]:
                slow()
        except (ValueError, OSError):             # closed: _receive says why
            pass
        message = self._receive()
        if message[0] != "read":
            self._pending.append(message)
        return message[1] if message[0] == "error" else None

    def ready(self) -> bool:
        """Whether the child has written its first view or error (it can be read without
        waiting); a ("read",) before it is passed over."""
        import select
        while not self._pending:
            try:
                if not select.select([self.stdout], [], [], 0)[0]:
                    return False
            except (ValueError, OSError):             # closed
                return False
            message = self._receive()
            if message[0] != "read":
                self._pending.append(message)
        return True

    def first(self) -> tuple:
        """("view", FirstView) or ("error", one line)."""
        return self._next()

    def run(self) -> tuple:
        """("run", RunLog, Analysis, FirstView or None) (imports pandas and pydantic, to
        unpickle them), the view when a fresher one than the first came before the run; or
        ("error", why there is none)."""
        message, fresher = self._next(), None
        if message[0] == "view":                 # the first view was a kept one, and stale
            fresher, message = message[1], self._next()
        try:
            self.proc.wait(timeout=10)          # it has said all it had to: let it end on its own
        except subprocess.TimeoutExpired:
            pass
        self.close()
        if message[0] == "run":
            return (*message, fresher)
        return message if message[0] == "error" else ("error", "the loader process sent no run")

    def _next(self) -> tuple:
        """The next view, run or error (the word that the run was read is passed over)."""
        while not self._pending:
            message = self._receive()
            if message[0] != "read":
                return message
        return self._pending.pop(0)

    def _receive(self) -> tuple:
        try:
            return pickle.load(self.stdout)
        except (EOFError, pickle.UnpicklingError, ValueError):     # ValueError: closed meanwhile
            if self.stdout.closed:
                return ("error", "the loader process was stopped")
            self.proc.wait()
            self._stderr.seek(0)
            said = [line for line in self._stderr.read().decode(errors="replace").splitlines() if line.strip()]
            why = said[-1] if said else f"exit code {self.proc.returncode}"
            return ("error", f"the loader process stopped: {why}")

    def close(self) -> None:
        """Stop the child (the app quit before it was done) and free its pipes; twice is once."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.stdout.close()
        self._stderr.close()


def read_and_analyze(run: str, format: str | None = None, against: Sequence[str] = (),
                     columns: dict[str, str] | None = None,
                     on_read: Callable[[], None] | None = None) -> tuple[RunLog, Analysis, FirstView]:
    """(RunLog, Analysis, FirstView) of `run`: what the child does, and what a test that hands
    the app a read run (tui.session.Session.read) does in its own process. `on_read()` is
    called once the runs are read, before the analysis."""
    import time

    from postmortem.diagnose.analyze import analyze
    from postmortem.run.discover import read_run
    from postmortem.tui.view import first_view
    started = time.perf_counter()
    log = read_run(run, format=format, **(columns or {}))
    read_s = time.perf_counter() - started
    others = [read_run(other) for other in against]
    if on_read is not None:
        on_read()
    result = analyze(log, against=others)
    return log, result, first_view(log, result, others, read_s)


def main() -> None:
    from postmortem.tui import viewcache  # the child's own: the app's process never needs it
    run, format, against, columns, terminal = pickle.load(sys.stdin.buffer)   # columns: --loss, --step
    out = sys.stdout.buffer
    sys.stdout = sys.stderr               # a stray print must not break the pickles
    kept = viewcache.lookup(run, format, against, columns)
    if kept is not None:                  # painted from it while the run is read again,
        _send(out, ("view", drawn(kept, terminal)))
        _yield_cpu()                      # behind the app's first frame
    _import_the_core()
    try:
        log, result, view = read_and_analyze(run, format, against, columns,
                                             on_read=lambda: _send(out, ("read",)))
    except UserError as err:
        _send(out, ("error", str(err)))
        return
    if kept is None or not same(kept, view):
        _send(out, ("view", drawn(view, terminal)))
        # kept for next time before the run is sent: an app closed at once kills this process
        viewcache.keep(run, format, against, columns, view, viewcache.sources(run, log.source.files)
                       + [path for other in against for path in viewcache.sources(other, [])])
    _send(out, ("run", log, result))


def _import_the_core() -> None:
    """pandas, pydantic, the readers and the diagnosis, with the collector paused: imports
    make many objects and no garbage (~20 ms of the first opening); what they made is then
    set aside (gc.freeze) so the read of a long run never walks it."""
    import gc
    gc.disable()
    try:
        import postmortem.diagnose.analyze  # noqa: F401
        import postmortem.run  # noqa: F401
        import postmortem.tui.view  # noqa: F401
    finally:
        gc.freeze()
        gc.enable()


def drawn(view: FirstView, terminal: tuple[int, int] | None) -> FirstView:
    """The view with its panels drawn for the app's terminal (none known: as it is)."""
    if terminal is None:
        return view
    from postmortem.tui.view import with_drawings
    return with_drawings(view, *terminal)


def _yield_cpu() -> None:
    """Read the run at a lower priority: once the app has a view to paint, the paint comes first."""
    try:
        os.nice(5)
    except (AttributeError, OSError):     # no nice (Windows), or not allowed
        pass


def _send(out, message: tuple) -> None:
    pickle.dump(message, out, protocol=5)
    out.flush()


def same(a: FirstView, b: FirstView) -> bool:
    """Whether two first views paint the same dashboard (read_s aside: a timing; the
    drawings are made from the rest)."""
    import dataclasses
    return (pickle.dumps(dataclasses.replace(a, read_s=0.0, drawings={}))
            == pickle.dumps(dataclasses.replace(b, read_s=0.0, drawings={})))


if __name__ == "__main__":
    main()
