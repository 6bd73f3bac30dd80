"""Why no cause has support: said where every hypothesis scores 0, so that the catalog's
order at 0.0 is not read as a ranking by evidence (issue 25)."""

from __future__ import annotations

from collections.abc import Sequence

from postmortem.diagnose.context import Context
from postmortem.diagnose.detectors.event import Event
from postmortem.diagnose.models import Hypothesis

# what tells the causes apart, in the user's words: the columns the catalog reads most
SIGNALS = (("lr", "LR"), ("grad_norm", "grad norm"), ("loss_scale", "loss scale"))


def _listed(words: list[str], last: str) -> str:
    """'a', 'a or b', 'a, b or c'."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" {last} " + words[-1]


def history_said(ctx: Context, ev: Event) -> str:
    """What went non-finite at a NaN incident, and how much finite loss the log has before
    it to judge from ('' for other incidents)."""
    if ev.kind != "nan":
        return ""
    before = 0
    if "loss" in ctx.frame:
        steps, _ = ctx.finite("loss", ev.segment)
        before = int((steps < ev.step).sum())
    what = {"grad_norm": "grad norm", "nan_iterations": "iteration count"}.get(ev.metric, ev.metric)
    until = "to the log's last row" if ev.last >= int(ctx.frame.step.iloc[-1]) else f"to step {ev.last}"
    had = "no finite loss before it" if not before else f"{before} finite loss row{'s' if before != 1 else ''} before it"
    return f"the {what} is not a number from step {ev.step} {until}" + (f", with {had}" if "loss" in ctx.frame else "")


def why_no_cause(ctx: Context, ev: Event, hypotheses: Sequence[Hypothesis]) -> str | None:
    """Why none of the hypotheses is supported (None where one is): what the log lacks
    among the LR, the grad norm and the loss scale, or holds only non-finite."""
    if any(h.score > 0 for h in hypotheses):
        return None
    # (a run known to be in another dtype than fp16 has no loss scale to log)
    signals = [(name, word) for name, word in SIGNALS if name != "loss_scale" or ctx.facts.dtype in (None, "fp16")]
    absent = [word for name, word in signals if name not in ctx.frame]
    broken = [word for name, word in signals if name in ctx.frame and not len(ctx.finite(name, ev.segment)[0])]
    said = []
    if "loss" not in ctx.frame:
        said.append("no loss was logged")
    if absent:
        said.append(f"no {_listed(absent, 'or')} was logged")
    if broken:
        said.append(f"the {_listed(broken, 'and')} {'is' if len(broken) == 1 else 'are'} never finite")
    kept = [word for _, word in signals if word not in absent + broken]
    if not kept:
        why = "nothing here tells the causes apart"
    else:
        why = f"the logged {_listed(kept, 'and')} support{'s' if len(kept) == 1 else ''} none of the causes"
    points = len(ctx.history(ev.segment))
    few = f" (the log has {points} line{'s' if points != 1 else ''})" if points < ctx.th.spike_min_points else ""
    missing = (["loss"] if "loss" not in ctx.frame else []) + absent
    if ctx.facts.dtype is None and "loss scale" in missing:
        missing[missing.index("loss scale")] = "loss scale (in fp16)"
    log = f"; log the {_listed(missing, 'and')} to tell them apart" if missing else ""
    history = history_said(ctx, ev)
    return (history + "; " if history else "") + (", ".join(said) + ": " if said else "") + why + few \
        + "; the hypotheses stand unranked at 0.0 (what the log contradicts last), not ranked by evidence" + log
