"""What the dashboard paints first, as plain arrays and rows: made in the loader process where
the run was read, so the first frame needs neither pandas nor pydantic in the app."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from postmortem.diagnose.panels import CHARTS

# dashboard panel -> the canonical column it draws, and whether on a log scale
PANELS = tuple((chart.id, chart.columns[0], chart.log_scale) for chart in CHARTS)


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
    panels: list[tuple[str, str, np.ndarray, np.ndarray, bool]]   # panel, column, steps, values, log
    layers: list[tuple[str, np.ndarray, np.ndarray]]                # per-layer grad norms
    ghost: tuple[str, np.ndarray, np.ndarray] | None                # another run's loss, in gray
    incidents: list[IncidentRow]
    checks: list[CheckRow]
    read_s: float = 0.0           # the file read's seconds, for benchmarks/bench_tui.py


def first_view(log, result, others=(), read_s: float = 0.0, max_layers: int = 8) -> FirstView:
    """The panels of the largest incident's segment (a NaN, else the spike that rose the most);
    the first `max_layers` per-layer grad norms (a terminal shows a few)."""
    from postmortem.diagnose.models import worst
    largest = worst(result.incidents)
    first = result.incidents[largest] if result.incidents else None
    segment = first.segment if first else int(log.frame.segment.max())
    resumed = len(log.segments()) > 1
    history = segment_history(log, segment) if resumed else log.frame
    panels = [(panel, column, *series(history, column), log_scale) for panel, column, log_scale in PANELS
              if column in log.frame and log.frame[column].notna().any()]
    names = [name for name in log.metrics if name.startswith("grad_norm/")][:max_layers]
    layers = [(name, *series(history, name)) for name in names]
    incidents = [IncidentRow(i.step, i.kind, i.metric, i.segment, i.rise, i.symptoms.peak_step,
                             i.hypotheses[0].pattern if i.hypotheses else None,
                             i.hypotheses[0].score if i.hypotheses else None) for i in result.incidents]
    checks = [CheckRow(c.id, c.status, c.detail, c.leaf) for c in result.checks]
    return FirstView(log.run_id, resumed, largest, segment, panels, layers,
                     ghost(others[0]) if others else None, incidents, checks, read_s)


def segment_history(log, segment: int):
    """The run as the model lived it up to the end of `segment`: after a resume the rewound
    steps of the earlier segment are left out."""
    from postmortem.diagnose.series import effective_history
    return effective_history(log, segment)


def series(history, column: str) -> tuple[np.ndarray, np.ndarray]:
    """The steps and values of `column` in `history` (none there: empty)."""
    if column not in history:
        return np.array([], dtype=np.int64), np.array([])
    rows = history[history[column].notna()]
    return rows.step.to_numpy(), rows[column].to_numpy(dtype=float)


def ghost(other) -> tuple | None:
    """(run id, steps, loss) of another run as the model lived it to its end, if it logs loss."""
    frame = segment_history(other, int(other.frame.segment.max())) if len(other.frame) else other.frame
    if "loss" not in frame:
        return None
    return (other.run_id, *series(frame, "loss"))
