"""Resumes: where the run restarted (a new segment, an epoch counter going back, a
wall-clock gap)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from postmortem.diagnose.detectors.windows import segment_ids
from postmortem.diagnose.thresholds import Thresholds
from postmortem.run import RunLog

EPOCHS = ("epoch", "epochs", "train/epoch")
EVAL_ONLY = ("loss", "grad_norm", "lr")


@dataclass(frozen=True)
class Resume:
    """A restart of the run: the first step after it, how it shows in the log, and the
    segment it is in."""

    step: int
    how: str
    segment: int


def segment_starts(log: RunLog) -> list[Resume]:
    """Each segment after the first as a restart, with how it shows: the steps going back
    (from the last step before to the first after), or a new log (a Lightning version_N
    directory of a resumed run, one file per segment) whose steps carry on."""
    segs = log.segments()
    files = log.source.files if len(log.source.files) == len(segs) else None
    said = log.source.extras.get("segment_starts", {})    # how the reader saw each start
    out = []
    for k in range(1, len(segs)):
        before, first = segs[k - 1]["last_step"], segs[k]["first_step"]
        if first <= before:
            how = f"steps went back from {before} to {first}"
        elif segs[k]["segment"] in said:
            how = f"{said[segs[k]['segment']]}: steps carry on from {before}"
        else:
            where = f", {Path(files[k]).name}" if files else ""
            how = f"resumed in a new log{where}: steps carry on from {before}"
        out.append(Resume(first, how, segs[k]["segment"]))
    return out


def resumes(log: RunLog, th: Thresholds) -> list[Resume]:
    """Where the run restarted: steps going back (a new segment), an epoch counter going
    back, or a wall-clock gap `resume_gap_factor` x the median time a step takes. A last
    row with no training metric (a final eval written after a pause) is not a restart."""
    out = segment_starts(log) + _epoch_back(log) + _wall_clock(log, th)
    out.sort(key=lambda r: (r.segment, r.step))
    return out


def _epoch_back(log: RunLog) -> list[Resume]:
    """An epoch counter going back within a segment."""
    f = log.frame
    epoch = next((c for c in EPOCHS if c in f and f[c].notna().any()), None)
    if not epoch:
        return []
    out = []
    seg_all = f.segment.to_numpy()
    ep = f[epoch].to_numpy(dtype=float, na_value=np.nan)
    for seg in segment_ids(seg_all):
        idx = np.flatnonzero((seg_all == seg) & np.isfinite(ep))
        # rounding (HF writes 2 decimals) never takes a counter back by half an epoch
        back = idx[1:][np.diff(ep[idx]) < -0.5]
        out += [Resume(int(f.step.iat[i]), f"{epoch} went back to {ep[i]:g}", int(seg)) for i in back]
    return out


def _wall_clock(log: RunLog, th: Thresholds) -> list[Resume]:
    """The wall clock going back (appended runs), or a gap `resume_gap_factor` x the median
    time a step takes, within a segment."""
    f = log.frame
    if "wall_time" not in f:
        return []
    out = []
    seg_all = f.segment.to_numpy()
    train = np.zeros(len(f), dtype=bool)
    for c in EVAL_ONLY:
        if c in f:
            train |= f[c].notna().to_numpy()
    wt_all = f.wall_time.to_numpy(dtype=float, na_value=np.nan)
    for seg in segment_ids(seg_all):
        idx = np.flatnonzero((seg_all == seg) & np.isfinite(wt_all))
        if len(idx) < 10:
            continue
        wt, st = wt_all[idx], f.step.to_numpy()[idx]
        dt = np.diff(wt)
        per_step = dt / np.maximum(np.diff(st), 1)
        typical = np.median(per_step[per_step > 0]) if (per_step > 0).any() else 0.0
        for i in np.flatnonzero(dt < -max(60.0, 100 * typical)):
            out.append(Resume(int(st[i + 1]), f"wall clock went back {-dt[i]:.0f}s (appended runs)", int(seg)))
        for i in np.flatnonzero(per_step > th.resume_gap_factor * max(typical, 1e-9)):
            last = i + 1 == len(idx) - 1 and not train[idx[i + 1]]
            if not last:
                out.append(Resume(int(st[i + 1]), f"wall-clock gap of {dt[i]:.0f}s", int(seg)))
    return out
