"""The guided editor: the seven sections of one incident's post-mortem, the lint live,
a draft saved every few seconds and on every change (a killed app loses seconds)."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Label, Static, TextArea

from postmortem.document.model import EvidenceRow, PostMortem, Verification, split_patterns

FIELDS = ("pattern", "evidence", "root_cause", "remediation", "verification", "lesson")
GUIDE = {
    "evidence": "one row a line: panel | observation | favors, ... | rules out, ...",
    "root_cause": "one sentence: what caused the incident",
    "remediation": "one change a line",
    "verification": "seed: N / epsilon: X / through step: T / expect: step N loss < X",
    "lesson": "one line for the lessons file",
}


def draft_path(root: Path, pm: PostMortem) -> Path:
    return root / ".postmortem" / "drafts" / f"{pm.run_id}-{pm.spike_step}.md"


class EditorScreen(Screen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="editor.back", tooltip="Back to the dashboard"),
                Binding("ctrl+s", "save", "Save draft", id="editor.save", tooltip="Save the draft now")]

    def __init__(self, pm: PostMortem, drafts_root: Path, run_log=None):
        super().__init__()
        self.pm, self.root, self.run_log = pm, drafts_root, run_log
        self.path = draft_path(drafts_root, pm)
        self.restored = False
        if self.path.exists():
            from postmortem.document.markdown import DocumentError, read
            try:
                self.pm, self.restored = read(self.path), True
            except DocumentError:
                pass

    def compose(self) -> ComposeResult:
        pm = self.pm
        with VerticalScroll(id="editor"):
            sym = "  ".join(f"{k}={v}" for k, v in pm.symptoms.model_dump().items() if v is not None)
            yield Static(f"[b]1. Symptoms[/b] (from the run)\n{escape(sym)}", id="symptoms")
            hyps = "\n".join(escape(f"{i}. {h.pattern} [{h.panel}] {h.observation}")
                             for i, h in enumerate(pm.hypotheses, 1))
            yield Static(f"[b]2. Hypotheses[/b]\n{hyps or '-'}", id="hypotheses")
            yield Label("pattern of the root cause")
            yield Input(pm.pattern or "", id="pattern")
            texts = {
                "evidence": "\n".join(f"{e.panel} | {e.observation} | {', '.join(e.favors)} | {', '.join(e.rules_out)}"
                                      for e in pm.evidence),
                "root_cause": pm.root_cause, "remediation": "\n".join(pm.remediation),
                "verification": "\n".join(pm.verification.lines()),
                "lesson": pm.lesson}
            for n, name in enumerate(("evidence", "root_cause", "remediation", "verification", "lesson"), 3):
                yield Label(f"{n}. {name.replace('_', ' ')}: {GUIDE[name]}")
                area = TextArea(texts[name], id=name)
                area.styles.height = 4 if name != "evidence" else 6
                yield area
        yield Static("", id="lint")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(5, self.action_save)
        if self.restored:
            self.notify(f"draft restored from {self.path}")
        self.relint()

    def on_text_area_changed(self, event) -> None:
        self._changed()

    def on_input_changed(self, event) -> None:
        self._changed()

    def _changed(self) -> None:
        # debounced: the lint and the save run once typing pauses
        if getattr(self, "_timer", None) is not None:
            self._timer.stop()
        self._timer = self.set_timer(0.5, self._settle)

    def _settle(self) -> None:
        self.action_save()
        self.relint()

    def collect(self) -> PostMortem:
        """The document as the inputs say it now (lines that do not parse are left out)."""
        get = {name: self.query_one(f"#{name}").text for name in
               ("evidence", "root_cause", "remediation", "verification", "lesson")}
        rows = []
        for line in get["evidence"].splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) >= 2 and parts[0]:
                parts += [""] * (4 - len(parts))
                rows.append(EvidenceRow(panel=parts[0], observation=parts[1],
                                        favors=split_patterns(parts[2]), rules_out=split_patterns(parts[3])))
        return self.pm.model_copy(update={
            "pattern": self.query_one("#pattern", Input).value.strip() or None, "evidence": rows,
            "root_cause": get["root_cause"].strip(), "lesson": get["lesson"].strip(),
            "remediation": [r.strip() for r in get["remediation"].splitlines() if r.strip()],
            "verification": Verification.from_lines(get["verification"].splitlines(), strict=False)})

    def action_save(self) -> None:
        from postmortem.document.markdown import render
        from postmortem.files import atomic_write
        self.pm = self.collect()
        atomic_write(self.path, render(self.pm))

    def relint(self) -> None:
        from postmortem.document.lint import check_text
        from postmortem.document.markdown import parse, render
        text = render(self.collect())
        problems = check_text(text, parse(text), self.run_log)
        sections = sorted({p.section for p in problems})
        self.query_one("#lint", Static).update(escape(
            "complete: ready to commit" if not problems else
            f"{len(problems)} problem(s) in: {', '.join(sections)} - {problems[0]}"))
        self.problems = problems
