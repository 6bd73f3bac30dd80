"""`verify`: the Verification section's expectations, checked against a re-run."""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from postmortem.document.model import PostMortem
from postmortem.numbers import number
from postmortem.run.aliases import canonical_name

OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


@dataclass
class Outcome:
    expectation: str
    ok: bool
    measured: str


def _column(log, metric: str):
    """The metric over the last segment, by step: a logged NaN stays NaN, a step where it was
    not logged is left out (the two read alike in the frame; log.logged_mask tells them apart)."""
    name = canonical_name(metric)
    if name not in log.frame:
        return None
    last = (log.frame.segment == log.frame.segment.max()).to_numpy() & log.logged_mask(name)
    return log.frame[last].set_index("step")[name]


def verify(pm: PostMortem, new_log, baseline_log=None, no_baseline: str | None = None) -> list[Outcome]:
    """Each expectation against `new_log`; the epsilon one against `baseline_log`, or failed
    with `no_baseline`, why there is none (where the run was looked for)."""
    v = pm.verification
    out = []
    if v.through_step is not None and v.epsilon is not None:
        text = f"loss within {v.epsilon:g} of the baseline through step {v.through_step}"
        if baseline_log is None:
            out.append(Outcome(text, False, "no baseline run: " + (no_baseline or
                                                                     "front matter `run`, or --baseline")))
        else:
            a, b = _column(new_log, "loss"), _column(baseline_log, "loss")
            common = a.index.intersection(b.index)
            common = common[common <= v.through_step]
            if not len(common):
                out.append(Outcome(text, False, "no common steps"))
            else:
                new, old = a.loc[common].to_numpy(), b.loc[common].to_numpy()
                # a NaN or Inf on one side only is as far as can be; the same on both is no difference
                same = (new == old) | (np.isnan(new) & np.isnan(old))
                with np.errstate(invalid="ignore"):         # inf - inf: NaN, as meant
                    diff = np.where(same, 0.0, np.nan_to_num(np.abs(new - old), nan=np.inf))
                at = int(np.argmax(diff))
                worst = float(diff[at])
                out.append(Outcome(text, worst <= v.epsilon, f"max difference {number(worst)} at step {int(common[at])}"
                                   + (f" (loss {number(new[at])}, baseline {number(old[at])})"
                                      if not np.isfinite(worst) else "")))
    for e in v.expectations:
        p = e.parts
        metric = p["m1"] or p["m2"]
        col = _column(new_log, metric)
        if col is None:
            out.append(Outcome(e.text, False, f"the re-run has no {metric}"))
            continue
        if p["step"]:
            step = int(p["step"])
            if step not in col.index:
                out.append(Outcome(e.text, False, f"no {metric} at step {step}"))
                continue
            value = float(col.loc[step])         # NaN fails every comparison, and is said so
        else:
            window = col[(col.index >= int(p["lo"])) & (col.index <= int(p["hi"]))]
            if not len(window):
                out.append(Outcome(e.text, False, f"no {metric} in [{p['lo']}, {p['hi']}]"))
                continue
            nan_at = window.index[np.isnan(window.to_numpy())]
            if len(nan_at):           # a NaN in the window fails it, named with its step
                out.append(Outcome(e.text, False, f"{metric} = NaN at step {int(nan_at[0])}"))
                continue
            value = float(getattr(window, p["agg"])())
        out.append(Outcome(e.text, bool(OPS[p["op"]](value, float(p["value"]))), f"{metric} = {number(value)}"))
    return out
