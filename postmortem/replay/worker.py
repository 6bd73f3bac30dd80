"""A replay in a child process: the UI stays responsive while torch runs, and a crash or a
hang in the user's code cannot take the app down. The child writes one JSON message a line
(replay/models.py: Progress, EvidenceArrived, Finished with the ReplayResult, Failed in one
line, Stopped), and follow() hands them back as those models, as they arrive.
"""

from __future__ import annotations

import pickle
import queue as queues
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Iterator

from postmortem.child import command
from postmortem.errors import UserError
from postmortem.replay.checkpoints import checkpoints
from postmortem.replay.models import MESSAGE, Cancelled, EvidenceArrived, Failed, Finished, Message, Progress, Stopped

if TYPE_CHECKING:          # the app starts a replay without pandas in this module's imports
    from postmortem.diagnose.models import Incident
    from postmortem.run.model import RunLog


def what_is_missing(log: RunLog) -> str | None:
    """Why this run cannot be replayed, and how to fix it; None when it can. Reads the
    manifest and lists the checkpoint folder only: no torch, no user code imported."""
    hint = ("record the run with postmortem.run.record.Recorder: it writes manifest.json with "
            '"replay": {"entrypoint": "pkg.module:make_replay", "checkpoints": "checkpoints/"} '
            "and the per-step batch hashes")
    manifest = log.manifest
    run_dir = Path(log.source.path)
    run_dir = run_dir.parent if run_dir.is_file() else run_dir
    # a manifest may also hold the facts read from the log's own config: no file, no replay spec
    if manifest is None or manifest.replay is None and not (run_dir / "manifest.json").is_file():
        return f"no manifest.json beside the run, so no replay entry point nor checkpoints: {hint}"
    if manifest.replay is None:
        return f"manifest.json names no replay entry point: {hint}"
    world = getattr(manifest.config, "world_size", None)
    if world is not None and int(world) > 1:     # the panel replays on one process
        return (f"the run was trained on {int(world)} processes: replay it from the command line with "
                f"`postmortem replay {run_dir} --nproc {int(world)}`")
    folder = run_dir / (manifest.replay.checkpoints or "checkpoints/")
    if not checkpoints(manifest, run_dir):
        return (f"no checkpoint in {folder}: save one every N steps (the state after N steps, "
                f"named step-N.pt) so the steps before an incident can be replayed")
    return None


def _child(log, inc, arms: tuple[str, ...], device: str, out, cancel) -> None:
    from postmortem.replay.engine import Replayer
    try:
        if device == "auto":
            import torch
            device = "cuda" if torch.cuda.is_available() else "cpu"
        replayer = Replayer(log, inc, device, cancel=cancel,
                            progress=lambda arm, step, done, total: out(Progress(arm=arm, step=step, done=done,
                                                                                 total=total)),
                            on_evidence=lambda e: out(EvidenceArrived(evidence=e)))
        out(Finished(result=replayer.replay(arms)))
    except Cancelled as err:
        out(Stopped(arm=str(err)))
    except UserError as err:
        out(Failed(message=str(err)))
    except BaseException as err:        # the run's own code: one line in the panel
        out(Failed(message=f"the replay failed in the run's code: {type(err).__name__}: {err}"))


def main() -> None:
    """The child: the job pickled on stdin, one JSON message a line on the stdout it was
    given. The run's code printing to stdout goes to stderr instead, and SIGTERM asks the
    replay to stop between two steps."""
    import os
    import pickle
    import signal
    import threading
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    cancel = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: cancel.set())
    log, inc, arms, device = pickle.load(sys.stdin.buffer)

    def out(message) -> None:
        channel.write(message.model_dump_json() + "\n")
    _child(log, inc, tuple(arms), device, out, cancel)
    channel.flush()


@dataclass
class ReplayProcess:
    """One replay in a child interpreter (`python -m postmortem.replay.worker`): a crash,
    a hang or a segfault in the run's code cannot take the app down, and torch is never
    imported into the app."""

    log: RunLog            # pickled to the child: it is not read twice
    incident: Incident
    arms: tuple[str, ...]
    device: str = "auto"           # cuda when the child's torch sees one
    messages: list[Message] = field(default_factory=list)

    def start(self) -> ReplayProcess:
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(command("postmortem.replay.worker"),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None      # both piped, above
        self.stdout: IO[bytes] = stdout
        self.queue: queues.Queue[Message | int] = queues.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        job = pickle.dumps((self.log, self.incident, list(self.arms), self.device))
        try:
            stdin.write(job)
            stdin.close()
        except BrokenPipeError:
            pass                       # it died at once; follow() says how
        return self

    def _read(self) -> None:
        for line in self.stdout:
            try:
                self.queue.put(MESSAGE.validate_json(line))
            except ValueError:          # not one of ours (a stray line): skipped
                continue
        self.process.wait()
        self.queue.put(self.process.returncode)

    def follow(self) -> Iterator[Message]:
        """The messages (replay/models.py) as they arrive, blocking between them: a worker
        thread's loop. Ends after the last; a Failed when the process ended without saying
        why (killed, a segfault in an extension)."""
        while True:
            message = self.queue.get()
            if isinstance(message, int):          # the exit code: the child is gone
                if not any(isinstance(m, (Finished, Failed, Stopped)) for m in self.messages):
                    self.messages.append(Failed(message=self._death(message)))
                    yield self.messages[-1]
                return
            self.messages.append(message)
            yield message

    def _death(self, code: int) -> str:
        self.stderr.seek(0)
        lines = [x for x in self.stderr.read().decode(errors="replace").splitlines() if x.strip()]
        last = f": {lines[-1].strip()[:200]}" if lines else ""
        return f"the replay process died (exit code {code}){last}"

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def cancel(self, grace: float = 2.0) -> None:
        """Ask the replay to stop between two steps; kill it when it does not within `grace`."""
        if self.running:
            self.process.terminate()
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(1)
        self.reader.join(1)


if __name__ == "__main__":
    main()
