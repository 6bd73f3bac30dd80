"""What tree B's detectors find: an Event, with what each kind measured in its Notes."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Notes:
    """What a detector measured beyond the Event's own fields. Each kind fills its own;
    the rest keep their defaults (None: not measured)."""

    # any kind: judged on too few points (a pasted snippet, a sparse log): low confidence
    sparse: bool = False
    points: int | None = None            # points in the window it was judged against
    # a loss spike: how far out of the window, and the series' step-to-step noise there
    z: float | None = None
    noise: float | None = None
    # a grad-norm spike: its peak over the baseline median
    ratio: float | None = None
    # a divergence: the smoothed loss's rise (a share of its level), the share of its steps
    # that went up, and the step where it was confirmed (half a window on, still rising)
    rise: float | None = None
    rising_share: float | None = None
    confirmed_at: int | None = None
    # a divergence on a log too short to smooth (`short_rise`): the loss and the validation
    # loss at its step, each over its lowest earlier value, and the rows the log has
    short_rise: tuple[float, float, float, float] | None = None     # (from, to, val from, val to)
    # a loss-scale cascade: the scale from and to, its halvings and skipped steps, whether it
    # fell across a hole in the log, the line before its first fall (None: dated by a skip)
    scale_from: float | None = None
    scale_to: float | None = None
    halvings: float | None = None
    skipped: float | None = None
    across_gap: bool = False
    after: int | None = None
    # a persistent overflow (scaler.persistent): "below-1", "floor" or "bled", whether the log began
    # there, the scale's floor, the step it was found at when it marks another cascade, and
    # the cascades counted on it while the scale stayed below 1
    persistent: str | None = None
    at_start: bool = False
    floor: float | None = None
    persistent_step: int | None = None
    later_cascades: int = 0
    # set by analyze: a loss spike that never came back (now a divergence), and the step it
    # was detected at before its onset moved it to a cause just before
    from_spike: bool = False
    detected_at: int | None = None


@dataclass
class Event:
    """Something tree B found: where, how big, and the window it was judged against."""

    kind: str                  # spike | divergence | nan | cascade
    metric: str                # loss | grad_norm | loss_scale
    step: int
    segment: int
    peak_step: int
    peak: float
    window_mean: float = float("nan")
    window_std: float = float("nan")
    notes: Notes = field(default_factory=Notes)
    # how far it stands out, in units of the series' own noise (comparable across metrics:
    # the detection threshold is `spike_sigma` for all of them)
    severity: float = 0.0
    # the last step of its span where that is not the peak (a divergence climbs on to the
    # end of the log, its peak may be anywhere before)
    end_step: int | None = None

    @property
    def last(self) -> int:
        """The last step of the event's span: what other events near it are matched to."""
        return max(self.step, self.peak_step if self.end_step is None else self.end_step)


def overlaps(a: Event, b: Event, margin: float = 20) -> bool:
    """Two events of one segment within `margin` steps of each other's span."""
    return a.segment == b.segment and a.step <= b.last + margin and b.step - margin <= a.last
