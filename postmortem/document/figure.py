"""The post-mortem's figure: the panels around the incident (loss, grad norm, LR, loss scale
where logged) with the incident marked and a replay's arms over the loss, as a PNG beside
the Markdown. matplotlib (the `figure` extra) is imported here only when a figure is drawn:
the dashboard and `analyze` never load it."""

from __future__ import annotations

import importlib.util
import io
import pickle
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from postmortem.child import command
from postmortem.diagnose.panels import BY_ID
from postmortem.errors import DocumentError
from postmortem.files import atomic_write

if TYPE_CHECKING:
    import pandas as pd

# (column, title, log scale) in the order drawn; a panel with no value in the window is left out
PANELS = tuple((BY_ID[p].columns[0], BY_ID[p].title, BY_ID[p].figure_log_scale)
               for p in ("loss", "grad-norm", "lr", "loss-scale"))
BEFORE, AFTER = 150, 100     # logged points shown before and after the incident
NEEDS_EXTRA = "the figure needs matplotlib: pip install -e '.[figure]' (the `figure` extra)"


class FigureUnavailable(DocumentError):
    """matplotlib is not installed."""


def available() -> bool:
    """matplotlib is installed (looked up, not imported)."""
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        return False


def _window(log, step: int, segment: int | None, replay) -> tuple[pd.DataFrame, int]:
    """The incident's segment, BEFORE logged points before it to AFTER after, widened to
    the replay's first step."""
    frame = log.frame
    if segment is None:
        rows = np.flatnonzero(frame["step"].to_numpy() == step)
        segment = int(frame["segment"].iloc[rows[-1]]) if len(rows) else int(frame["segment"].iloc[-1])
    seg = frame[frame["segment"] == segment]
    steps = seg["step"].to_numpy()
    at = int(np.searchsorted(steps, step))
    first = steps[max(0, at - BEFORE)] if len(steps) else step
    for arm in _arms(replay):
        first = min(first, min(arm[0]))
    last = steps[min(len(steps) - 1, at + AFTER)] if len(steps) else step
    return seg[(seg["step"] >= first) & (seg["step"] <= last)], segment


def _arms(replay) -> list[tuple[list[int], list[float], str]]:
    """(steps, losses, name) of each arm of a replay that ran (duck-typed: the document is
    handed a ReplayResult, it never imports the replay)."""
    out = []
    for name, arm in (getattr(replay, "arms", None) or {}).items():
        losses = getattr(arm, "losses", None) or {}
        if getattr(arm, "skipped", None) or len(losses) < 2:
            continue          # skipped, or one point (an earlier checkpoint's score of two batches)
        steps = sorted(int(s) for s in losses)
        out.append((steps, [float(losses[s]) for s in steps], name))
    return out


@dataclass
class Panel:
    """One panel's points: `y` NaN where the logged value is not finite, `bad` those steps."""

    column: str
    title: str
    log_scale: bool
    x: np.ndarray
    y: np.ndarray
    bad: np.ndarray


@dataclass
class Picture:
    """What the figure shows, plain arrays (drawn here or in a child process)."""

    title: str
    step: int
    panels: list[Panel]
    arms: list[tuple[list[int], list[float], str]] = field(default_factory=list)


def picture(log, step: int, replay=None, kind: str = "incident", segment: int | None = None) -> Picture:
    """The panels' points around the incident (numpy only: no matplotlib here)."""
    window, segment = _window(log, step, segment, replay)
    x = window["step"].to_numpy()
    panels = []
    for col, title, logy in PANELS:
        if col not in window or not window[col].notna().any():
            continue
        y = window[col].to_numpy(dtype=float)
        finite = np.isfinite(y)
        bad = ~finite & window.index.isin(_nonfinite_rows(log, col))      # logged NaN or inf
        shown = finite | bad           # the steps it was logged at: a line broken where it is not finite
        panels.append(Panel(col, title, logy and bool(finite.any()) and bool((y[finite] > 0).all()),
                            x[shown], np.where(finite, y, np.nan)[shown], x[bad]))
    if not panels:
        raise DocumentError(f"nothing to draw around step {step}: the run logs no loss, grad norm, LR or loss scale")
    title = f"{log.run_id}: {kind} at step {step}" + (f" (segment {segment})" if segment else "")
    return Picture(title, step, panels, _arms(replay))


def draw(log, step: int, replay=None, kind: str = "incident", segment: int | None = None):
    """The matplotlib Figure. Raises FigureUnavailable without matplotlib."""
    return draw_picture(picture(log, step, replay, kind, segment))


def draw_picture(pic: Picture):
    """The Figure of a Picture (Agg canvas, no pyplot: nothing global, safe in a thread)."""
    if not available():
        raise FigureUnavailable(NEEDS_EXTRA)
    # matplotlib (an extra) only when a figure is drawn: `analyze` and the dashboard never load it
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415

    rows = len(pic.panels) + (1 if pic.arms else 0)
    height = 1.9 * rows + 0.6 + (0.4 if pic.arms else 0)
    fig = Figure(figsize=(8, height), dpi=100)
    FigureCanvasAgg(fig)
    # fixed margins in inches: a constrained layout took 60% of the drawing's time
    outer = fig.add_gridspec(2 if pic.arms else 1, 1, left=1.0 / 8, right=1 - 0.2 / 8, top=1 - 0.35 / height,
                             bottom=0.5 / height, hspace=0.45 / (height / rows),
                             height_ratios=[len(pic.panels), 1] if pic.arms else None)
    grid = outer[0].subgridspec(len(pic.panels), 1, hspace=0.12)
    axes = [fig.add_subplot(grid[0])]
    axes += [fig.add_subplot(grid[i], sharex=axes[0]) for i in range(1, len(pic.panels))]
    for ax, p in zip(axes, pic.panels):
        ax.plot(p.x, p.y, color="0.25", lw=1.0, drawstyle="steps-post" if p.column == "loss_scale" else "default",
                label="logged" if p.column == "loss" else None)
        # a NaN or inf: a red mark at the top of the panel, where a value cannot be drawn
        if len(p.bad):
            ax.scatter(p.bad, np.ones(len(p.bad)), transform=ax.get_xaxis_transform(), marker="x",
                       color="tab:red", s=25, clip_on=False, label="NaN / inf" if p.column == "loss" else None)
        if p.log_scale:
            ax.set_yscale("log", base=2 if p.column == "loss_scale" else 10)
        ax.axvline(pic.step, color="tab:red", ls="--", lw=1)
        ax.set_ylabel(p.title)
        ax.grid(True, alpha=0.3)
        if ax is not axes[len(pic.panels) - 1]:
            ax.tick_params(labelbottom=False)
    axes[0].set_title(pic.title, loc="left", fontsize=10)
    axes[0].annotate(f"step {pic.step}", (pic.step, 0), xycoords=axes[0].get_xaxis_transform(), xytext=(3, 3),
                     textcoords="offset points", color="tab:red", fontsize=8)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(loc="upper left", fontsize=7)
    axes[len(pic.panels) - 1].set_xlabel("step")
    if pic.arms:
        axes.append(_replay_panel(fig.add_subplot(outer[1]), pic))
    return fig


def _replay_panel(ax, pic: Picture):
    """The replay's arms over the logged loss, on the replay's own steps: each arm's loss
    where the run's own was logged, so the arm that takes the incident away stands out."""
    first = min(min(steps) for steps, _, _ in pic.arms)
    last = max(max(steps) for steps, _, _ in pic.arms)
    loss = next((p for p in pic.panels if p.column == "loss"), None)
    if loss is not None:
        keep = (loss.x >= first) & (loss.x <= last)
        ax.plot(loss.x[keep], loss.y[keep], color="0.6", lw=4, alpha=0.6, label="logged", zorder=1)
    # drawn highest first at the incident: the arm that takes the spike away is on top, and
    # the faithful one (it retraces the log) dashed
    def at_incident(arm) -> float:
        steps, losses, _ = arm
        v = losses[steps.index(pic.step)] if pic.step in steps else -np.inf
        return v if np.isfinite(v) else np.inf
    order = sorted(pic.arms, key=lambda a: -at_incident(a))
    for steps, losses, name in order:
        ys = np.array(losses)
        ax.plot(steps, np.where(np.isfinite(ys), ys, np.nan), lw=1.3, marker=".", ms=3, zorder=2,
                ls="--" if name == "faithful" else "-", label=f"replay: {name}")
    ax.axvline(pic.step, color="tab:red", ls="--", lw=1)
    ax.set_xlim(first - 0.5, last + 0.5)
    ax.set_ylabel("loss, replayed")
    ax.set_xlabel("step (the replay's)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=7, ncols=2)
    return ax


def png_of(pic: Picture) -> bytes:
    out = io.BytesIO()
    draw_picture(pic).savefig(out, format="png", metadata={"Software": None})
    return out.getvalue()


def png(log, step: int, replay=None, kind: str = "incident", segment: int | None = None) -> bytes:
    """The figure as PNG bytes. Raises FigureUnavailable without matplotlib."""
    return png_of(picture(log, step, replay, kind, segment))


def _nonfinite_rows(log, col: str) -> "object":
    values = log.frame[col].to_numpy(dtype=float)
    rows = np.flatnonzero(log.nan_mask(col) | np.isinf(np.nan_to_num(values, nan=0.0)))
    return log.frame.index[rows]


def write(path: Path, log, step: int, replay=None, kind: str = "incident") -> Path:
    """Draw the figure into `path` (atomically). Raises FigureUnavailable without matplotlib."""
    return atomic_write(Path(path), png(log, step, replay, kind))


def write_in_child(path: Path, pic: Picture, timeout_s: float = 120.0) -> Path:
    """Draw in a child process (`python -m postmortem.document.figure PATH`, the Picture
    pickled to its stdin): the TUI's own process never imports matplotlib, and its UI thread
    does not share an interpreter with the drawing."""
    if not available():
        raise FigureUnavailable(NEEDS_EXTRA)
    try:
        r = subprocess.run(command("postmortem.document.figure", str(path)),
                           input=pickle.dumps(pic), capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise DocumentError(f"the figure took more than {timeout_s:.0f} s to draw") from None
    if r.returncode:
        lines = r.stderr.decode(errors="replace").strip().splitlines() or ["failed"]
        raise DocumentError(f"the figure: {lines[-1]}")
    return Path(path)


def is_png(data: bytes) -> bool:
    return data[:8] == b"\x89PNG\r\n\x1a\n"


def size_of(data: bytes) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's header."""
    if not is_png(data) or len(data) < 24:
        raise ValueError("not a PNG")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _child(argv: list[str]) -> int:
    """The child: a pickled Picture on stdin, the PNG written to argv[0]."""
    try:
        atomic_write(Path(argv[0]), png_of(pickle.load(sys.stdin.buffer)))
    except Exception as err:        # one line for the parent, whatever it was
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
