"""What a dashboard panel plots, as plain lists: made with numpy by the panel itself, or, for
the first frame, by the loader process (tui/loader.py), so the app paints before it has
imported numpy. No Textual here; numpy only inside the functions that compute.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

Ghost = tuple[str, array, array]
"""(run id, steps, values) of another run over the same data, drawn in gray."""


@dataclass(frozen=True)
class Drawing:
    """One panel's plot: its lines, ticks and vertical marks, for one width, window, set of
    marked steps, cursor and span (`key`)."""
    key: tuple                                   # (width, window, marks, cursor, span)
    line: tuple[list, list] | None               # this run, a NaN lifts the pen; None: no finite point
    ghost: tuple[list, list] | None              # another run's line, in gray
    xticks: list[int]
    yticks: tuple[list, list] | None             # log scale: positions (log10) and their labels
    vlines: list[tuple[int, str]]                # (step, color): the cursor, the marks in view
    xlim: tuple[int, int] | None = None          # every panel spans the same steps, zoomed or not

    def plot(self, plt) -> None:
        """Onto a plotext figure, cleared first."""
        plt.clear_data()
        plt.clear_figure()
        if self.xlim is not None:
            plt.xlim(*self.xlim)
        if self.ghost is not None:
            plt.plot(*self.ghost, marker="braille", color="gray")
        if self.line is not None:
            plt.plot(*self.line, marker="braille")
        if self.xticks:
            plt.xticks(self.xticks, [f"{x:,}" for x in self.xticks])
        if self.yticks is not None:
            plt.yticks(*self.yticks)
        for step, color in self.vlines:
            plt.vline(step, color)


def spacing(steps) -> float:
    """A run's usual distance between logged steps."""
    import numpy as np
    return float(np.median(np.diff(steps))) if len(steps) > 1 else 1.0


def points(steps, values, width: int, window: tuple[int, int] | None, marks: list[int],
           log_scale: bool, typical: float) -> tuple:
    """(steps, values, finite, line) drawn at `width` columns: each column's extremes, every
    marked step kept; on a log scale the values are log10; `line` has a NaN at each hole."""
    import numpy as np

    from postmortem.tui.widgets.decimate import decimate, with_breaks
    steps, values = np.asarray(steps), np.asarray(values)
    if window is not None:
        lo, hi = np.searchsorted(steps, window[0]), np.searchsorted(steps, window[1], "right")
        steps, values = steps[lo:hi], values[lo:hi]
    keep = np.flatnonzero(np.isin(steps, marks))
    idx = decimate(steps, values, width, keep)
    s, v = steps[idx], values[idx]
    finite = np.isfinite(v)
    if log_scale:
        finite &= v > 0
        v = np.where(finite, np.log10(np.where(v > 0, v, 1)), np.nan)
    return s, v, finite, with_breaks(s, np.where(finite, v, np.nan), typical, width)


def drawing(key: tuple, run: tuple, ghost: tuple | None, log_scale: bool) -> Drawing:
    """The Drawing of `run`'s points and the gray run's (from `points`) for `key`: the x axis
    is the zoom's window, else `span` (the steps every panel of the dashboard draws, so that
    a metric logged over part of the run is drawn where it was, under the others)."""
    import numpy as np
    _, window, marks, cursor, span = key
    s, v, finite, line = run
    shown_s, shown_v, ghost_line = [s[finite]], [v[finite]], None
    if ghost is not None and ghost[2].any():
        gs, gv, gf, gline = ghost
        ghost_line = (gline[0].tolist(), gline[1].tolist())
        shown_s.append(gs[gf])
        shown_v.append(gv[gf])
    xticks, yticks = [], None
    if any(len(x) for x in shown_s):
        all_s, all_v = np.concatenate(shown_s), np.concatenate(shown_v)
        # whole steps on x (a set, not np.unique: see decimate); on a log scale the metric's
        # own values on y, not their log10
        xticks = sorted({int(x) for x in np.linspace(all_s.min(), all_s.max(), 5).round()})
        if log_scale:
            lo, hi = float(all_v.min()), float(all_v.max())
            ys = np.linspace(lo, hi, 4) if hi > lo else np.array([lo])
            yticks = (ys.tolist(), [f"{10 ** y:.3g}" for y in ys])
    axis = window or span
    if axis is not None:            # the window's or the span's steps, logged there or not
        xticks = sorted({int(x) for x in np.linspace(axis[0], axis[1], 5).round()})
    # the cursor first: on the marked step (where the dashboard opens) the mark is what shows
    vlines = [(cursor, "blue")] if cursor is not None else []
    shown = axis or ((s[0], s[-1]) if len(s) else None)
    vlines += [(m, "red") for m in marks if shown and shown[0] <= m <= shown[1]]
    return Drawing(key, (line[0].tolist(), line[1].tolist()) if finite.any() else None,
                   ghost_line, xticks, yticks, vlines, axis)
