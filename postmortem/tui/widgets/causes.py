"""The ranked causes of one incident: each with what the run shows for (+) and against (-)
it, and first the experiment that tells the top two apart. A pane of the dashboard where the
terminal has room; the whole ranking on its own screen (c) at any size."""

from __future__ import annotations

from rich.markup import escape
from textual.containers import VerticalScroll
from textual.widgets import Static

from postmortem.tui import focus


def ranking(row, most: int | None = None) -> str:
    """The causes of `row` (a tui.view.IncidentRow, or None) as lines: the first `most` (all:
    None) with their evidence, and after the top two the experiment that tells them apart."""
    if row is None:
        return "no incident: no causes to rank"
    causes = row.causes
    lines = []
    if row.confidence == "low":
        lines.append("low confidence: the evidence is thin")
    ranked = any(c.score > 0 for c in causes)
    if not ranked:
        # the analysis says why where it can (what the log lacks), as `analyze` prints it;
        # the causes follow unnumbered: at 0.0 their order is no ranking
        lines.append(f"no convincing cause: {row.no_cause or 'none has support in the run'}")
        lines.append("not ranked (no evidence for any):")
    shown = causes if most is None else causes[:most]
    for rank, c in enumerate(shown, 1):
        lines.append(f"{rank}. {c.pattern}  {c.score:.2f}" if ranked else f"-  {c.pattern}  0.00")
        lines += [f"   + [{panel}] {seen}" for panel, seen in c.supported_by]
        lines += [f"   - [{panel}] {seen}" for panel, seen in c.contradicted_by]
        if rank == 2 and ranked:
            lines.append(apart(causes[0], causes[1]))
    if len(causes) > len(shown):
        lines.append(f"({len(causes) - len(shown)} more: c shows every cause)")
    return "\n".join(line for line in lines if line)


def apart(a, b) -> str:
    """The experiments that tell cause `a` from cause `b` (each one's `discriminate`)."""
    tell = "; ".join(d for d in (a.discriminate, b.discriminate) if d)
    return f"to tell {a.pattern} from {b.pattern}: {tell}" if tell else ""


def heading(row) -> str:
    return f"causes of the {row.kind} at step {row.step}" if row is not None else "causes"


class CausesPane(VerticalScroll):
    """The dashboard's pane: the highlighted incident's top causes (it scrolls when focused)."""

    MOST = 3

    def compose(self):
        yield Static("", id="causes-text")

    def show(self, row) -> None:
        focus.title(self, f"{heading(row)} (c: all)")
        text = self.query_one("#causes-text", Static)
        shown = escape(ranking(row, self.MOST))
        if str(text.content) != shown:
            text.update(shown)
