"""What F1 says: the focused panel first, then every panel of the screen, the charts included,
in the order they are drawn."""

from __future__ import annotations

from rich.markup import escape

from postmortem.tui.widgets.metric_panel import MetricPanel

CHART_KEYS = ("left/right move the cursor (shift: 10 steps), z zooms to the incident and back, [ and ] draw "
              "another segment of a resumed run (the status line says which is drawn), tab: next panel.")

# a panel's key (help_key) -> (its name, what it shows)
PANELS = {
    "chart:loss": ("loss chart", "The training loss over steps, on a log scale (the ticks are the loss "
                   "itself). Red: the incident marked; blue: the cursor; gray: another run over the same "
                   "data when --against gave one."),
    "chart:lr": ("learning-rate chart", "The learning rate set at each step. A jump or a restart near the "
                 "incident points at lr-discontinuity; a warm-up that never ends at schedule-misconfigured."),
    "chart:grad-norm": ("grad-norm chart", "The global gradient norm, on a log scale. A norm that spikes "
                        "before the loss points at the data or the optimizer; inf or NaN at numerics."),
    "chart:loss-scale": ("loss-scale chart", "The fp16 loss scale, on a log scale: each halving is a step "
                         "that overflowed (fp16-overflow when they crowd the incident)."),
    "chart:layer": ("per-layer grad-norm charts", "One layer's gradient norm each (the first layers the "
                    "terminal has room for): the layer that spikes first is where to look."),
    "incidents": ("incidents", "The incidents analyze found: step, kind, how much the loss rose, the top "
                  "cause. Enter marks the highlighted one on every chart; n and p step through them."),
    "causes": ("causes", "The highlighted incident's causes ranked by score, each with what the run shows "
               "for (+) and against (-) it, and first the experiments that tell the top two apart; c shows "
               "every cause on its own screen (at 80x24 the pane is left out: c is the way)."),
    "checks": ("checks", "What the reader noticed (warn: a cut last line, a column guessed), then tree A "
               "and tree B: every node pass (ok), FAIL (and the pattern it points to) or skipped (-), "
               "and why."),
    "row-detail": ("the row whole", "The highlighted incident or check, whole: the tables cut long rows."),
    "status": ("status line", "The incident marked, the cursor's step and every chart's value there."),
    "symptoms": ("1. Symptoms", "What the run shows at the incident, from the log; f5 derives it again."),
    "unusual_tokens": ("unusual tokens", "The tokens you saw in the batch; the log names none."),
    "hypotheses": ("2. Hypotheses", "Ranked by the diagnosis and the replay: shift+up/down reorder, ctrl+d "
                   "dismisses with a reason (again: restores), ctrl+n adds one as pattern | panel | observation."),
    "hypothesis-detail": ("the hypothesis whole", "The highlighted hypothesis, what the run shows for (+) "
                          "and against (-) it, and what would tell it apart."),
    "pattern": ("pattern of the root cause", "One of the catalog's patterns (tab completes); its usual "
                "remedies show under section 5."),
    "section": ("sections 3-7", "The post-mortem's own words, one section each; the line above says what "
                "it needs. ctrl+o opens the focused one in $EDITOR."),
    "remedies": ("usual remedies", "The usual remedies of the pattern you named: enter adds the highlighted "
                 "one to section 5."),
    "preview": ("preview", "The whole document as it will be committed (f2 hides it)."),
    "sections": ("sections line", "Each section ok, or x where the lint finds a problem."),
    "lint": ("lint line", "The first problem the lint finds; ctrl+g lists them all before a commit."),
    "arms": ("arms", "Each arm replays the same steps from the same checkpoint with one cause taken away; "
             "space toggles an arm, r runs the checked ones, escape cancels."),
    "replay-progress": ("progress", "The arm and step the replay is at, then the hypotheses re-ranked."),
    "evidence": ("evidence", "What the replay found, a row as it arrives: the panel, the causes it favors "
                 "and rules out. Escape takes them to the post-mortem."),
    "evidence-detail": ("the row whole", "The highlighted evidence row, whole."),
    "filter": ("filter", "Type to filter the lessons: pattern:x learner:y run:z and free text."),
    "lessons": ("lessons", "Every learner's lessons by pattern, biggest first; enter opens the post-mortem "
                "behind a lesson."),
    "similar": ("similar incidents", "Past post-mortems scored against this incident field by field; "
                "enter opens one."),
    "document": ("post-mortem", "The post-mortem behind a lesson; escape goes back."),
    "learner": ("learner", "Whose lessons file the lesson joins (learners/<name>/lessons.md)."),
    "commit-plan": ("commit plan", "The files the commit writes and its message; enter commits."),
    "commit-problems": ("problems", "What the lint found, by section: fix them in the editor first."),
}


def help_key(widget) -> str | None:
    """The PANELS key of a widget, or None for one F1 has nothing to say about."""
    if isinstance(widget, MetricPanel):
        key = f"chart:{widget.panel}"
        return key if widget.column.replace("_", "-") == widget.panel else "chart:layer"
    from textual.widgets import TextArea  # ~20 ms of Textual's: not before the first frame
    if isinstance(widget, TextArea) and widget.parent is not None and widget.parent.id == "editor":
        return "section"            # before the ids: the evidence section is not the replay's table
    wid = getattr(widget, "id", None)
    return wid if wid in PANELS else None


def describe(screen, focused) -> str:
    """The help of `screen` as markup: the focused panel (or the one it sits in) first, then
    every panel drawn on it, each once."""
    keys: list[str] = []
    for widget in screen.query("*"):
        key = help_key(widget)
        if key and key not in keys and widget.display:
            keys.append(key)
    mine = None
    node = focused
    while node is not None and mine is None:
        mine = help_key(node)
        node = node.parent
    lines = []
    if mine:
        name, text = PANELS[mine]
        lines += [f"[b]{escape(name)}[/b] (focused)", escape(text)]
        if mine.startswith("chart:"):
            lines.append(escape(CHART_KEYS))
        lines.append("")
    lines.append("[b]The other panels here[/b]" if mine else "[b]The panels here[/b]")
    for key in (k for k in keys if k != mine):
        name, text = PANELS[key]
        lines.append(f"[b]{escape(name)}[/b]: {escape(text)}")
    if any(k.startswith("chart:") for k in keys):
        lines.append(f"[b]on a chart[/b] (tab focuses one): {escape(CHART_KEYS)}")
    lines += ["", "Every key of this screen, and what it does: the palette (ctrl+p); t switches light and "
              "dark. escape or f1 closes this help."]
    return "\n".join(lines)
