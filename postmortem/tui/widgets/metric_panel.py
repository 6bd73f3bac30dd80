"""One dashboard panel: a metric over steps, the incident marked, a cursor, zoom."""

from __future__ import annotations

from bisect import bisect_right

from textual_plotext import PlotextPlot

from postmortem.tui.widgets.plotdata import Drawing, Ghost, drawing, points, spacing


class MetricPanel(PlotextPlot, can_focus=True):
    """Plots `column` of the run on a log scale where asked; knows its panel id. It takes the
    focus (tab), so F1 can say what it shows.

    Steps and values may come as numpy arrays or as plain arrays (array.array: the loader's
    first view); `first`, when given, is the plot the loader made for the width the panel
    was expected to have: drawn without numpy, which is imported only when the panel is
    drawn for anything else."""

    DEFAULT_CSS = ""

    def __init__(self, panel: str, column: str, steps, values, log_scale: bool = False,
                 ghost: Ghost | None = None, first: Drawing | None = None, **kw):
        super().__init__(**kw)
        self.panel, self.column, self.log_scale = panel, column, log_scale
        self._steps, self._values = steps, values
        self.ghost = ghost        # (run id, steps, values) of a run over the same data, in gray
        self.first = first
        self.marks: list[int] = []
        self.cursor: int | None = None
        self.window: tuple[int, int] | None = None
        self.span: tuple[int, int] | None = None       # the steps every panel spans unzoomed
        self._cache: dict = {}
        self._drawn: tuple | None = None         # what the plot holds: width, window, marks, cursor
        # "run", "ghost": the whole series' usual distance between steps, zoomed or not
        self._spacings: dict[str, float] = {}
        self.border_title = f"{panel}{' (log scale)' if log_scale else ''}"
        if column.replace("_", "-") != panel:
            self.border_title += f": {column}"
        if ghost:
            self.border_title += f", gray: {ghost[0]}"

    @property
    def steps(self):
        """The steps drawn, as a numpy array."""
        return self._arrays()[0]

    @property
    def values(self):
        return self._arrays()[1]

    def _arrays(self):
        import numpy as np
        if not isinstance(self._steps, np.ndarray) or not isinstance(self._values, np.ndarray):
            self._steps, self._values = np.asarray(self._steps), np.asarray(self._values)
        return self._steps, self._values

    def set_data(self, steps, values) -> None:
        """Other points (another segment's history); drawn at the next redraw."""
        self._steps, self._values = steps, values
        self.first = None
        self._cache.clear()
        self._spacings.pop("run", None)
        self._drawn = None

    def value_at(self, step: int) -> tuple[float, int] | None:
        """(value, the step it was logged at): at `step` when it was logged there (a NaN
        too), else the last one logged before it; None before the first."""
        i = bisect_right(self._steps, step) - 1
        if i < 0:
            return None
        return float(self._values[i]), int(self._steps[i])

    def _points(self, width: int) -> tuple[tuple, tuple | None]:
        """This run's decimated points and the gray run's, cached together per window, width
        and marks, so moving the cursor over a 1M-step run redraws a few hundred."""
        key = (self.window, width, tuple(self.marks))
        if key not in self._cache:
            if len(self._cache) >= 4:              # the whole run, the zoom, and a resize or two
                self._cache.pop(next(iter(self._cache)))
            typical = self._spacings                # once a series (1M steps: ~10 ms)
            if "run" not in typical:
                typical["run"] = spacing(self.steps)
            ghost = None
            if self.ghost:
                if "ghost" not in typical:
                    typical["ghost"] = spacing(self.ghost[1])
                ghost = points(*self.ghost[1:], width, self.window, self.marks, self.log_scale,
                               typical["ghost"])
            self._cache[key] = (points(self.steps, self.values, width, self.window, self.marks,
                                       self.log_scale, typical["run"]), ghost)
        return self._cache[key]

    def drawing(self, width: int) -> Drawing:
        """The plot for `width` columns of content, as the panel stands (window, marks, cursor,
        span)."""
        key = (width, self.window, tuple(self.marks), self.cursor, self.span)
        if self.first is not None and self.first.key == key:
            return self.first
        return drawing(key, *self._points(max(20, width - 10)), self.log_scale)

    def redraw(self) -> None:
        """Drawn again in the next frame (marks, cursor or window changed)."""
        self._drawn = None
        self.refresh()

    def render(self):
        # drawn when the frame is made, for the width it has then: once before the first
        # frame (a panel has no width when it is mounted), again for a new width or a key
        drawn = (self.size.width, self.window, tuple(self.marks), self.cursor, self.span)
        if drawn != self._drawn:
            self.drawing(self.size.width).plot(self.plt)
            self._drawn = drawn
        return super().render()
