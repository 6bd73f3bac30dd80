"""The run read and analyzed in a child process while the app starts: two cores do at once
what one thread did in turn (importing pandas is a third of the wait), and the dashboard is
drawn from arrays before the app has imported pandas itself.

The child writes two pickles on its stdout: ("view", FirstView, analysis) as soon as it has
them, then ("log", RunLog) for the editor, the replay and the segments; or ("error", line).
Only the standard library is imported here: the CLI starts the child before Textual.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import tempfile


class Loader:
    def __init__(self, run: str, format: str | None = None, against: list[str] = (),
                 columns: dict | None = None):
        self._stderr = tempfile.TemporaryFile()      # a file, not a pipe: it never blocks the child
        self.proc = subprocess.Popen([sys.executable, "-m", "postmortem.tui.loader"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr)
        try:
            self.proc.stdin.write(pickle.dumps((run, format, list(against), columns or {})))
            self.proc.stdin.close()
        except BrokenPipeError:       # it did not start: first() says why, from its stderr
            pass

    def first(self) -> tuple:
        """("view", FirstView, analysis) or ("error", one line)."""
        return self._next()

    def log(self):
        """The RunLog (imports pandas, to unpickle its frame), or why there is none (a str)."""
        kind, *rest = self._next()
        try:
            self.proc.wait(timeout=10)          # it has said all it had to: let it end on its own
        except subprocess.TimeoutExpired:
            pass
        self.close()
        return rest[0] if kind == "log" else (rest[0] if rest else "the loader process sent no run")

    def _next(self) -> tuple:
        try:
            return pickle.load(self.proc.stdout)
        except (EOFError, pickle.UnpicklingError):
            self.proc.wait()
            self._stderr.seek(0)
            said = [line for line in self._stderr.read().decode(errors="replace").splitlines() if line.strip()]
            why = said[-1] if said else f"exit code {self.proc.returncode}"
            return ("error", f"the loader process stopped: {why}")

    def close(self) -> None:
        """Stop the child (the app quit before it was done) and free its pipes."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self._stderr.close()


def main() -> None:
    import time

    from postmortem.diagnose.analyze import analyze
    from postmortem.run import RunReadError, read_run
    from postmortem.tui.view import first_view
    run, format, against, columns = pickle.load(sys.stdin.buffer)    # columns: --loss, --step
    out = sys.stdout.buffer
    sys.stdout = sys.stderr               # a stray print must not break the pickles
    try:
        started = time.perf_counter()
        log = read_run(run, format=format, **columns)
        read_s = time.perf_counter() - started
        others = [read_run(other) for other in against]
        result = analyze(log, against=others)
    except RunReadError as err:
        pickle.dump(("error", str(err)), out)
        return
    pickle.dump(("view", first_view(log, result, others, read_s), result), out, protocol=5)
    out.flush()                           # the dashboard is drawn from this one
    pickle.dump(("log", log), out, protocol=5)
    out.flush()


if __name__ == "__main__":
    main()
