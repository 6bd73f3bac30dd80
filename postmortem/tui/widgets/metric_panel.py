"""One dashboard panel: a metric over steps, the incident marked, a cursor, zoom."""

from __future__ import annotations

import numpy as np
from textual_plotext import PlotextPlot

from postmortem.tui.widgets.decimate import decimate, with_breaks


class MetricPanel(PlotextPlot, can_focus=True):
    """Plots `column` of the run on a log scale where asked; knows its panel id. It takes the
    focus (tab), so F1 can say what it shows."""

    DEFAULT_CSS = ""

    def __init__(self, panel: str, column: str, steps: np.ndarray, values: np.ndarray,
                 log_scale: bool = False, ghost: tuple[str, np.ndarray, np.ndarray] | None = None, **kw):
        super().__init__(**kw)
        self.panel, self.column, self.log_scale = panel, column, log_scale
        self.steps, self.values = steps, values
        self.ghost = ghost        # (run id, steps, values) of a run over the same data, in gray
        self.marks: list[int] = []
        self.cursor: int | None = None
        self.window: tuple[int, int] | None = None
        self._cache: dict = {}
        self._drawn: tuple | None = None         # what the plot holds: width, window, marks, cursor
        self._spacings: dict[int, float] = {}   # id of a drawn steps array -> its usual spacing
        self.border_title = f"{panel}{' (log scale)' if log_scale else ''}"
        if column.replace("_", "-") != panel:
            self.border_title += f": {column}"
        if ghost:
            self.border_title += f", gray: {ghost[0]}"

    def set_data(self, steps: np.ndarray, values: np.ndarray) -> None:
        """Other points (another segment's history); drawn at the next redraw."""
        self.steps, self.values = steps, values
        self._cache.clear()
        self._spacings.clear()
        self._drawn = None

    def value_at(self, step: int) -> float | None:
        if not len(self.steps):
            return None
        i = int(np.clip(np.searchsorted(self.steps, step), 0, len(self.steps) - 1))
        return float(self.values[i])

    def _ticks(self, s: np.ndarray, v: np.ndarray) -> None:
        """Whole steps on x; on a log scale, the metric's own values on y, not their log10."""
        plt = self.plt
        xs = sorted({int(x) for x in np.linspace(s.min(), s.max(), 5).round()})   # not np.unique: see decimate
        plt.xticks(xs, [f"{x:,}" for x in xs])
        if self.log_scale:
            lo, hi = float(v.min()), float(v.max())
            ys = np.linspace(lo, hi, 4) if hi > lo else np.array([lo])
            plt.yticks(ys.tolist(), [f"{10 ** y:.3g}" for y in ys])

    def _points(self) -> tuple[tuple, tuple | None]:
        """This run's decimated points and the gray run's, cached together per window, width
        and marks, so moving the cursor over a 1M-step run redraws a few hundred."""
        width = max(20, (self.size.width or 80) - 10)
        key = (self.window, width, tuple(self.marks))
        if key not in self._cache:
            if len(self._cache) >= 4:              # the whole run, the zoom, and a resize or two
                self._cache.pop(next(iter(self._cache)))
            ghost = self._decimated(*self.ghost[1:], width) if self.ghost else None
            self._cache[key] = (self._decimated(self.steps, self.values, width), ghost)
        return self._cache[key]

    def _decimated(self, steps: np.ndarray, values: np.ndarray, width: int) -> tuple:
        spacing = self._spacing(steps)          # the whole series', zoomed or not
        if self.window is not None:
            lo, hi = np.searchsorted(steps, self.window[0]), np.searchsorted(steps, self.window[1], "right")
            steps, values = steps[lo:hi], values[lo:hi]
        keep = np.flatnonzero(np.isin(steps, self.marks))
        idx = decimate(steps, values, width, keep)
        s, v = steps[idx], values[idx]
        finite = np.isfinite(v)
        if self.log_scale:
            finite &= v > 0
            v = np.where(finite, np.log10(np.where(v > 0, v, 1)), np.nan)
        return s, v, finite, with_breaks(s, np.where(finite, v, np.nan), spacing, width)

    def _spacing(self, steps: np.ndarray) -> float:
        """The run's usual distance between logged steps, once per series (1M steps: ~10 ms)."""
        if id(steps) not in self._spacings:
            self._spacings[id(steps)] = float(np.median(np.diff(steps))) if len(steps) > 1 else 1.0
        return self._spacings[id(steps)]

    def redraw(self) -> None:
        """Drawn again in the next frame (marks, cursor or window changed)."""
        self._drawn = None
        self.refresh()

    def render(self):
        # drawn when the frame is made, for the width it has then: once before the first
        # frame (a panel has no width when it is mounted), again for a new width or a key
        drawn = (self.size.width, self.window, tuple(self.marks), self.cursor)
        if drawn != self._drawn:
            self._draw()
            self._drawn = drawn
        return super().render()

    def _draw(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        (s, v, finite, line), ghost = self._points()
        shown_s, shown_v = [s[finite]], [v[finite]]
        if ghost is not None and ghost[2].any():
            gs, gv, gf, gline = ghost
            plt.plot(gline[0].tolist(), gline[1].tolist(), marker="braille", color="gray")
            shown_s.append(gs[gf])
            shown_v.append(gv[gf])
        if finite.any():
            plt.plot(line[0].tolist(), line[1].tolist(), marker="braille")
        if any(len(x) for x in shown_s):
            self._ticks(np.concatenate(shown_s), np.concatenate(shown_v))
        for m in self.marks:
            if len(s) and s[0] <= m <= s[-1]:
                plt.vline(m, "red")
        if self.cursor is not None:
            plt.vline(self.cursor, "blue")
