"""The TUI's speed: from the command to the first painted dashboard (a 100k-step run, the
file read taken out), against `python -c "import textual"` run the same way, alternated;
and the time a key takes (cursor, zoom) on a 1M-step run, against a key bound to nothing.

    python benchmarks/make_runs.py --steps 100000 && python benchmarks/make_runs.py --steps 1000000
    python benchmarks/bench_tui.py [--rounds 7]

The child process (`--first-paint RUN`) prints the clock at its first painted frame with the
panels, its read time and whether torch was imported; the baselines print the clock once
imported. Process tear-down is left out of both.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def first_paint(run: str, process: bool = True) -> None:
    """In the child: open the dashboard headless and print the clock when the frame with the
    run's panels has been painted (not when the process has gone: its tear-down is not the
    user's wait)."""
    from postmortem.tui.loader import Loader
    loader = Loader(run) if process else None            # as `postmortem tui` starts it, before Textual
    from postmortem.tui.app import PostmortemApp
    seen = {}

    class FirstPaint(PostmortemApp):
        def show(self, view, result) -> None:
            super().show(view, result)
            seen["panels"] = len(self.query("MetricPanel"))

            def painted() -> None:
                seen["at"] = time.time()
                self.exit()
            self.call_after_refresh(painted)

    app = FirstPaint(run, loader=loader)
    app.run(headless=True, size=(120, 40))
    if loader is not None:
        loader.close()
    print(json.dumps({**seen, **app.timings, "torch": "torch" in sys.modules}))


def since(cmd: list[str]) -> tuple[float, dict]:
    """Seconds from starting `cmd` to the clock it prints last (a JSON object)."""
    t = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    info = json.loads(out.strip().splitlines()[-1])
    return info.pop("at") - t, info


def bench_first_paint(run: Path, rounds: int) -> dict:
    app_cmd = [sys.executable, __file__, "--first-paint", str(run)]
    # the baseline, timed the same way: to the clock printed once textual is imported
    base_cmd = [sys.executable, "-c", "import textual.app, time, json; print(json.dumps({'at': time.time()}))"]
    # what the reader needs before it reads a byte (pandas, pyarrow): reported apart
    readers_cmd = [sys.executable, "-c", "import postmortem.run, postmortem.diagnose.analyze, time, json; "
                                         "print(json.dumps({'at': time.time()}))"]
    bare_cmd = [sys.executable, "-c", "import time, json; print(json.dumps({'at': time.time()}))"]

    # the same app reading in its own thread, as before the loader process
    thread_cmd = app_cmd + ["--thread"]

    since(app_cmd), since(base_cmd)                                # warm the file cache
    apps, threads, bases, reads, readers, torch = [], [], [], [], [], False
    for _ in range(rounds):                              # A B C A B C ...
        t, info = since(app_cmd)
        apps.append(t - info["read_s"])
        reads.append(info["read_s"])
        torch |= info["torch"]
        t, info = since(thread_cmd)
        threads.append(t - info["read_s"])
        torch |= info["torch"]
        bases.append(since(base_cmd)[0])
        readers.append(since(readers_cmd)[0] - since(bare_cmd)[0])
    return {"run": str(run.relative_to(HERE)), "first_paint_minus_read_s": statistics.median(apps),
            "first_paint_in_a_thread_minus_read_s": statistics.median(threads),
            "read_s": statistics.median(reads), "import_textual_s": statistics.median(bases),
            "import_readers_s": statistics.median(readers),
            "ratio": statistics.median(a / b for a, b in zip(apps, bases)),
            "process_over_thread": statistics.median(a / b for a, b in zip(apps, threads)),
            "torch_imported": torch}


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
    app = PostmortemApp(str(run))
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
        rows = len(app.runlog.frame)
    med = {k: statistics.median(v) for k, v in out.items()}
    return {"run": str(run.relative_to(HERE)), "rows": rows,
            **{f"{k}_ms": round(v * 1000, 2) for k, v in med.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--first-paint", metavar="RUN")
    ap.add_argument("--thread", action="store_true", help="with --first-paint: read in the app's thread")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    if args.first_paint:
        first_paint(args.first_paint, process=not args.thread)
        return
    paint = bench_first_paint(HERE / "data" / "100000" / "metrics.parquet", args.rounds)
    print(f"first paint, 100k steps: {paint['first_paint_minus_read_s']:.3f} s beyond the read "
          f"({paint['read_s']:.3f} s; importing pandas and the readers {paint['import_readers_s']:.3f} s); "
          f"python -c 'import textual.app' {paint['import_textual_s']:.3f} s; "
          f"ratio {paint['ratio']:.2f}; read in the app's thread instead: "
          f"{paint['first_paint_in_a_thread_minus_read_s']:.3f} s (loader process / thread "
          f"{paint['process_over_thread']:.2f}); torch imported: {paint['torch_imported']}")
    keys = asyncio.run(bench_keys(HERE / "data" / "1000000" / "metrics.parquet", 15))
    print("key to last frame, 1M steps: " + "  ".join(f"{k} {v}" for k, v in keys.items() if k.endswith("_ms")))
    (HERE / "results" / "tui.json").write_text(json.dumps({"first_paint": paint, "keys": keys}, indent=2))


if __name__ == "__main__":
    main()
