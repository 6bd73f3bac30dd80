"""What the dashboard paints first, as plain arrays and rows: made in the loader process where
the run was read, so the first frame needs neither pandas nor pydantic nor numpy in the app
(the series are array.array; each panel's plot comes drawn for the width it is expected to
have, see `with_drawings`)."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Sequence

from postmortem.diagnose.panels import CHARTS
from postmortem.tui.widgets.plotdata import Ghost, drawing, points, spacing

if TYPE_CHECKING:          # the app paints from a FirstView before pandas and pydantic
    from postmortem.diagnose.models import Analysis, Hypothesis
    from postmortem.run.model import RunLog

# dashboard panel -> the canonical column it draws, and whether on a log scale
PANELS = tuple((chart.id, chart.columns[0], chart.log_scale) for chart in CHARTS)
PANEL_ROWS = 9                # the least height of a panel (app.tcss; the dashboard shares the rest)


@dataclass
class Cause:
    """One ranked cause of an incident, as the dashboard's causes pane shows it."""
    pattern: str
    score: float
    supported_by: list[tuple[str, str]]          # (panel, observation)
    contradicted_by: list[tuple[str, str]]
    discriminate: str                            # the experiment that tells it apart


@dataclass
class IncidentRow:
    """What the dashboard draws of one incident (the analysis' Incident comes with the run)."""
    step: int
    kind: str
    metric: str
    segment: int
    rise: float | None
    peak_step: int | None
    top: str | None               # the top cause's pattern and score
    score: float | None
    confidence: str = "high"      # low: thin evidence
    causes: list[Cause] = field(default_factory=list)     # every cause, ranked
    no_cause: str | None = None   # why no cause has support, where none has


@dataclass
class CheckRow:
    id: str
    status: str                   # pass, fail, skipped
    detail: str
    leaf: str | None              # the pattern a failure points to


@dataclass
class FirstView:
    run_id: str
    resumed: bool                 # more than one segment
    largest: int                  # index of the incident shown first
    segment: int                  # the panels draw the run up to this segment's end
    panels: list[tuple[str, str, array, array, bool]]    # panel, column, steps, values, log
    layers: list[tuple[str, array, array]]                # per-layer grad norms
    ghost: Ghost | None                                   # another run's loss, in gray
    incidents: list[IncidentRow]
    checks: list[CheckRow]
    read_s: float = 0.0           # the file read's seconds, for benchmarks/bench_tui.py
    warnings: list[str] = field(default_factory=list)     # what the reader noticed (a cut last line, ...)
    segments: list[tuple[int, int, int]] = field(default_factory=list)    # (segment, first step, last step)
    # column -> tui.widgets.plotdata.Drawing for the terminal the app opens in; made per
    # opening (with_drawings), never kept
    drawings: dict = field(default_factory=dict)


def first_view(log: RunLog, result: Analysis, others: Sequence[RunLog] = (), read_s: float = 0.0,
               max_layers: int = 8) -> FirstView:
    """The panels of the largest incident's segment (a NaN, else the spike that rose the most);
    the first `max_layers` per-layer grad norms (a terminal shows a few)."""
    from postmortem.diagnose.models import worst
    largest = worst(result.incidents)
    first = result.incidents[largest] if result.incidents else None
    segment = first.segment if first else int(log.frame.segment.max())
    resumed = len(log.segments()) > 1
    history = segment_history(log, segment) if resumed else log.frame
    panels = [(panel, column, *plain(*series(log, history, column)), log_scale) for panel, column, log_scale in PANELS
              if column in log.frame and log.frame[column].notna().any()]
    names = [name for name in log.metrics if name.startswith("grad_norm/")][:max_layers]
    layers = [(name, *plain(*series(log, history, name))) for name in names]
    # a top cause only where it has support (a score of 0 is none: `analyze` says "no
    # convincing cause" there too)
    tops = [i.hypotheses[0] if i.hypotheses and i.hypotheses[0].score > 0 else None for i in result.incidents]
    incidents = [IncidentRow(i.step, i.shown_kind, i.metric, i.segment, i.rise, i.symptoms.peak_step,
                             top.pattern if top else None, top.score if top else None, i.confidence,
                             [cause(h) for h in i.hypotheses], i.no_cause)
                 for i, top in zip(result.incidents, tops)]
    checks = [CheckRow(c.id, c.status, c.detail, c.leaf) for c in result.checks]
    return FirstView(log.run_id, resumed, largest, segment, panels, layers,
                     ghost(others[0]) if others else None, incidents, checks, read_s,
                     warnings=list(result.run.warnings),
                     segments=[(s["segment"], s["first_step"], s["last_step"]) for s in log.segments()])


def cause(h: Hypothesis) -> Cause:
    """A diagnose.models.Hypothesis as plain rows."""
    return Cause(h.pattern, h.score, [(o.panel, o.observation) for o in h.supported_by],
                 [(o.panel, o.observation) for o in h.contradicted_by], h.discriminate)


def segment_history(log: RunLog, segment: int):
    """The run as the model lived it up to the end of `segment`: after a resume the rewound
    steps of the earlier segment are left out."""
    from postmortem.diagnose.series import effective_history
    return effective_history(log, segment)


def series(log, history, column: str):
    """The steps and values of `column` in `history` (rows of `log.frame`; none there: empty),
    as numpy arrays: every step it was logged at, a logged NaN included (a panel lifts its
    pen there, and its value at that step is NaN, not the next one's)."""
    import numpy as np
    if column not in history:
        return np.array([], dtype=np.int64), np.array([])
    rows = history[log.logged_mask(column)[history.index.to_numpy()]]     # history keeps the run's row labels
    return rows.step.to_numpy(), rows[column].to_numpy(dtype=float)


def plain(steps, values) -> tuple[array, array]:
    """numpy arrays as array.array: they unpickle without numpy, and numpy reads them in place."""
    import numpy as np
    return (array("q", np.ascontiguousarray(steps, dtype=np.int64).tobytes()),
            array("d", np.ascontiguousarray(values, dtype=np.float64).tobytes()))


def ghost(other: RunLog) -> Ghost | None:
    """(run id, steps, loss) of another run as the model lived it to its end, if it logs loss."""
    frame = segment_history(other, int(other.frame.segment.max())) if len(other.frame) else other.frame
    if "loss" not in frame:
        return None
    return (other.run_id, *plain(*series(other, frame, "loss")))


# -- the first frame's plots, made where numpy is already paid for ----------------------------

def shown_panels(view: FirstView, rows: int) -> list[tuple[str, str, array, array, bool, Ghost | None]]:
    """(panel, column, steps, values, log scale, ghost) of each panel the dashboard shows in
    a terminal of `rows`: the run's panels, then as many per-layer grad norms as have room."""
    panels = [(panel, column, steps, values, log_scale, view.ghost if panel == "loss" else None)
              for panel, column, steps, values, log_scale in view.panels]
    room = max(0, (rows - 10) // PANEL_ROWS - len(panels))
    return panels + [("grad-norm", name, steps, values, True, None) for name, steps, values in view.layers[:room]]


def panel_width(columns: int, rows: int, panels: int) -> int:
    """The columns of a panel's plot in a terminal of `columns` x `rows`, as app.tcss lays the
    dashboard out: the panels take 3/5 of the width and leave the side at least 40, less a
    border each side, less a scroll bar where the panels are taller than their room. A guess
    that misses only costs the app numpy's import (the panel draws itself)."""
    width = max(0, min(columns * 3 // 5, columns - 40))
    room = rows - 3                                       # header, status line, footer
    scrolls = panels * PANEL_ROWS > room
    return width - 2 - (2 if scrolls else 0)


def logged_steps(view: FirstView) -> tuple[int, int] | None:
    """The first and last step the panels draw (none: None): the cursor stays within them."""
    spans = [(steps[0], steps[-1]) for _, _, steps, _, _ in view.panels if len(steps)]
    if not spans:
        return None
    return int(min(a for a, _ in spans)), int(max(b for _, b in spans))


def first_cursor(view: FirstView) -> int | None:
    """Where the cursor opens: on the largest incident, else on the last step logged."""
    if view.incidents:
        return view.incidents[view.largest].step
    steps = logged_steps(view)
    return steps[1] if steps else None


def with_drawings(view: FirstView, columns: int, rows: int) -> FirstView:
    """`view` with each panel's first plot made for a terminal of `columns` x `rows`: the
    largest incident marked, the cursor where the dashboard opens it, not zoomed."""
    shown = shown_panels(view, rows)
    width = panel_width(columns, rows, len(shown))
    marks = (view.incidents[view.largest].step,) if view.incidents else ()
    key = (width, None, marks, first_cursor(view), logged_steps(view))
    drawings = {}
    for _, column, steps, values, log_scale, gray in shown:
        run = points(steps, values, max(20, width - 10), None, list(marks), log_scale, spacing(steps))
        other = points(*gray[1:], max(20, width - 10), None, list(marks), log_scale, spacing(gray[1])) if gray else None
        drawings[column] = drawing(key, run, other, log_scale)
    return replace(view, drawings=drawings)
