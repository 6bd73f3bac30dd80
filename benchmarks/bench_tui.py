"""The TUI's speed: from the command to the painted dashboard of the sample run, against
`python -c "import textual.app"`, whole processes, alternated; and the time a key takes
(cursor, zoom) on a 1M-step run, against a key bound to nothing.

    python benchmarks/make_runs.py --steps 1000000
    python benchmarks/bench_tui.py [--rounds 9]

The command is the real one, `postmortem tui --device cpu RUN` in a pseudo-terminal of
120x40: it is painted when the terminal has been sent the marked incident's status line and
the loss panel's title (one frame draws both); then ctrl+q. The baseline is timed to its exit.
Each round times the baseline, a first opening (an empty cache: the run read and analyzed
before the first frame) and a second opening of the same run (its view kept by the first,
see postmortem/tui/viewcache.py). It also times, to their exit, what bounds a first opening
from below: importing the libraries the run is read and analyzed with (numpy, pyarrow,
pydantic, pandas), and importing the loader's whole core (the readers and the diagnosis).
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import pty
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
POSTMORTEM = Path(sys.executable).parent / "postmortem"


def painted(cmd: list[str], marks: list[bytes], size=(120, 40), limit: float = 60.0) -> float:
    """Seconds from starting `cmd` in a pseudo-terminal to the moment every one of `marks`
    has been written to it."""
    pid, fd = pty.fork()
    if pid == 0:                                           # the child: the command, as typed
        os.execv(cmd[0], cmd)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    start, seen, screen = time.perf_counter(), None, b""
    try:
        while time.perf_counter() - start < limit:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            try:
                screen += os.read(fd, 1 << 16)
            except OSError:                                # it ended
                break
            if all(m in screen for m in marks):
                seen = time.perf_counter() - start
                break
        os.write(fd, b"\x11")                              # ctrl+q
        deadline = time.perf_counter() + 10
        while time.perf_counter() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    os.read(fd, 1 << 16)
                except OSError:
                    pass
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    finally:
        os.close(fd)
    if seen is None:
        raise RuntimeError(f"{' '.join(cmd)}: never painted {marks}; last: {screen[-400:]!r}")
    return seen


def exited(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def bench_first_paint(rounds: int) -> dict:
    run = ROOT / "sample_runs" / "long-tail-token"
    app_cmd = [str(POSTMORTEM), "tui", "--device", "cpu", str(run)]
    marks = [b"spike at step 250", b"loss (log scale)"]
    base_cmd = [sys.executable, "-c", "import textual.app"]
    # a first opening reads and analyzes the run before its first frame: these bound it
    libraries_cmd = [sys.executable, "-c", "import numpy, pyarrow, pyarrow.json, pydantic, pandas"]
    core_cmd = [sys.executable, "-c", "import postmortem.diagnose.analyze, postmortem.run, postmortem.tui.view"]
    # pandas, pydantic, numpy or torch imported by the app's modules (tests/tui/test_tui.py holds
    # the first frame itself to no numpy)
    probe = [sys.executable, "-c", "import sys, postmortem.tui.app, postmortem.tui.view; "
                                   "print(sorted({'pandas', 'torch', 'pydantic', 'numpy'} & set(sys.modules)))"]
    with tempfile.TemporaryDirectory() as caches:
        def opening(cache: str) -> float:
            os.environ["XDG_CACHE_HOME"] = cache
            return painted(app_cmd, marks)

        opening(caches + "/warm-up"), exited(base_cmd)     # warm the file cache
        firsts, seconds, bases, libraries, cores = [], [], [], [], []
        for i in range(rounds):                            # baseline, first, second, baseline ...
            bases.append(exited(base_cmd))
            firsts.append(opening(f"{caches}/{i}"))
            kept(f"{caches}/{i}")
            seconds.append(opening(f"{caches}/{i}"))
            libraries.append(exited(libraries_cmd))
            cores.append(exited(core_cmd))
    os.environ.pop("XDG_CACHE_HOME")

    def ratios(times):
        return [round(a / b, 2) for a, b in zip(times, bases)]
    return {"run": "sample_runs/long-tail-token", "import_textual_app_s": statistics.median(bases),
            "first_opening_s": statistics.median(firsts), "first_opening_ratio": statistics.median(ratios(firsts)),
            "first_opening_ratios": ratios(firsts),
            "second_opening_s": statistics.median(seconds), "second_opening_ratio": statistics.median(ratios(seconds)),
            "second_opening_ratios": ratios(seconds),
            "libraries_import_s": statistics.median(libraries), "libraries_ratio": statistics.median(ratios(libraries)),
            "core_import_s": statistics.median(cores), "core_ratio": statistics.median(ratios(cores)),
            "app_imports_before_the_run": subprocess.run(probe, capture_output=True, text=True).stdout.strip()}


def kept(cache: str, limit: float = 10.0) -> None:
    """Until the loader of the first opening has kept the run's view (the app may quit first)."""
    deadline = time.perf_counter() + limit
    while not list(Path(cache).glob("postmortem/views/*.pickle")):
        if time.perf_counter() > deadline:
            raise RuntimeError(f"no view kept under {cache}")
        time.sleep(0.05)


class Frames:
    """When the app last composed a frame for the screen (headless: composed, not written)."""

    def __init__(self, app):
        self.last = 0.0
        display = app._display

        def timed(screen, renderable):
            display(screen, renderable)
            if renderable is not None:
                self.last = time.perf_counter()
        app._display = timed


async def bench_keys(run: Path, presses: int) -> dict:
    """Per key: from the key sent to the last frame it caused (the run's panels redrawn);
    the key is sent the way a terminal's arrives. A key bound to nothing is the baseline."""
    from textual import events

    from postmortem.tui.app import PostmortemApp
    from postmortem.tui.session import Session
    app = PostmortemApp(session=Session.read(str(run)))
    frames = Frames(app)
    out: dict[str, list[float]] = {"none": [], "right": [], "shift+right": [], "z": []}
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause(0.5)
        for _ in range(presses):                         # a do-nothing key, then each real one
            for key in out:
                event = events.Key("x" if key == "none" else key, None)
                event.set_sender(app)
                t = time.perf_counter()
                frames.last = t
                app._driver.send_message(event)          # as a terminal's key arrives
                await asyncio.sleep(0.25)                # long enough for every frame it causes
                out[key].append(frames.last - t)
        rows = len(app.session.log.frame)
    med = {k: statistics.median(v) for k, v in out.items()}
    return {"run": str(run.relative_to(HERE)), "rows": rows,
            **{f"{k}_ms": round(v * 1000, 2) for k, v in med.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    paint = bench_first_paint(args.rounds)
    print(f"command to painted dashboard, {paint['run']}: python -c 'import textual.app' "
          f"{paint['import_textual_app_s']:.3f} s; first opening {paint['first_opening_s']:.3f} s, "
          f"ratio {paint['first_opening_ratio']:.2f} (median of {paint['first_opening_ratios']}); "
          f"second opening {paint['second_opening_s']:.3f} s, ratio {paint['second_opening_ratio']:.2f} "
          f"(median of {paint['second_opening_ratios']}); "
          f"importing numpy, pyarrow, pydantic and pandas {paint['libraries_import_s']:.3f} s, ratio "
          f"{paint['libraries_ratio']:.2f}; the loader's core {paint['core_import_s']:.3f} s, ratio "
          f"{paint['core_ratio']:.2f}; "
          f"imported by the app before the run: {paint['app_imports_before_the_run']}")
    big = HERE / "data" / "1000000" / "metrics.parquet"
    keys = None
    if big.exists():
        keys = asyncio.run(bench_keys(big, 15))
        print("key to last frame, 1M steps: " + "  ".join(f"{k} {v}" for k, v in keys.items() if k.endswith("_ms")))
    else:
        print(f"keys not measured: no {big.relative_to(ROOT)} (benchmarks/make_runs.py --steps 1000000)")
    results = HERE / "results" / "tui.json"
    if keys is None and results.exists():       # not measured this time: the last figures stay
        keys = json.loads(results.read_text()).get("keys")
    results.write_text(json.dumps({"first_paint": paint, "keys": keys}, indent=2))


if __name__ == "__main__":
    main()
