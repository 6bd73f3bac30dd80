"""`analyze`: the run summary, the checks walked so far and the incidents found."""

from __future__ import annotations

from postmortem.diagnose.models import Analysis, Check, RunSummary
from postmortem.diagnose.nan import nan_incidents
from postmortem.run import RunLog


def analyze(log: RunLog) -> Analysis:
    frame = log.frame
    checks = [Check(id="A0", question="Does the log have a training loss?",
                    status="pass" if "loss" in frame and log.logged_mask("loss").any() else "fail",
                    detail=(f"{int(log.logged_mask('loss').sum())} logged loss values"
                            if "loss" in frame else "no training loss column; the loss checks "
                            "are skipped"))]
    segs = log.segments()
    checks.append(Check(id="B0", question="Did the run resume (steps going backwards)?",
                        status="fail" if len(segs) > 1 else "pass",
                        detail=(f"{len(segs)} segments: " + ", ".join(
                            f"{s['first_step']}..{s['last_step']}" for s in segs[:6]))
                        if len(segs) > 1 else "one segment"))
    nan_check, incidents = nan_incidents(log)
    checks.append(nan_check)
    return Analysis(
        run=RunSummary(id=log.run_id, format=log.source.format, steps=len(frame),
                       metrics=log.metrics, dtype=log.dtype),
        checks=checks, incidents=incidents)
