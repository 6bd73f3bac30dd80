"""The guided editor: the seven sections of one incident's post-mortem, the lint live by
section, a Markdown preview, the pattern's usual remedies, and a draft saved every few
seconds and on every change (a killed app loses seconds of typing at most)."""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.suggester import SuggestFromList
from textual.timer import Timer
from textual.widgets import Footer, Input, Label, Markdown, OptionList, Static, TextArea

from postmortem.diagnose.catalog import PATTERNS, remedies_for
from postmortem.document import sections
from postmortem.document.draftstore import DraftStore
from postmortem.document.lint import Problem, check_text
from postmortem.document.markdown import parse, render
from postmortem.document.model import SECTIONS, PostMortem
from postmortem.document.sections import AREAS, GUIDE, SECTION_OF, SHORT
from postmortem.errors import DocumentError
from postmortem.kb.commit import Committed, ignore_drafts_at
from postmortem.numbers import number
from postmortem.tui import focus
from postmortem.tui.dialogs import ConfirmScreen
from postmortem.tui.screens.commit import CommitScreen
from postmortem.tui.screens.replay import ReplayScreen
from postmortem.tui.session import Session
from postmortem.tui.widgets.hypotheses import HypothesesTable
from postmortem.tui.widgets.line_area import LineArea


class EditorScreen(Screen):
    # the footer: the workflow (commit, replay, preview, back) fits 80 columns; the rest is in
    # the palette, and F1 says where
    BINDINGS = [
        Binding("ctrl+g", "commit", "Commit", id="editor.commit",
                tooltip="Check the document, then commit it and its lesson with git"),
        Binding("ctrl+r", "replay", "Replay", id="editor.replay",
                tooltip="Replay the incident; its evidence fills section 3 and re-ranks section 2"),
        Binding("f2", "toggle_preview", "Preview", id="editor.preview", tooltip="The whole document as Markdown"),
        Binding("escape", "app.pop_screen", "Back", id="editor.back", tooltip="Back to the dashboard (saved)"),
        Binding("ctrl+s", "save", "Save draft", id="editor.save", show=False,
                tooltip="Save the draft now (it saves itself as you type)"),
        Binding("ctrl+o", "external_editor", "$EDITOR", id="editor.external", show=False,
                tooltip="Open the focused section in $EDITOR"),
        Binding("f5", "rederive", "Re-derive symptoms", id="editor.rederive", show=False,
                tooltip="Symptoms again from the run (your unusual tokens kept)"),
        Binding("f8", "start_over", "Start over", id="editor.start_over", show=False,
                tooltip="Set the restored draft aside (kept as .bak) and start again from the run"),
    ]

    def __init__(self, pm: PostMortem, session: Session):
        super().__init__()
        self.session = session
        self.pm, self.root, self.run_log = pm, session.kb_root, session.log
        self.fresh = pm              # the document as drafted from the run, for a start over
        self.store = DraftStore(session.drafts_root, pm)     # with the knowledge base, from any folder
        self.drafts_ignored = False
        self._timer: Timer | None = None     # the debounce of the save and the lint
        self.path = self.store.path
        self.problems: list[Problem] = []
        self.committed: Committed | None = None
        restored, self.typed = self.store.restore()
        self.restored = restored is not None
        self.pm = restored or pm

    def compose(self) -> ComposeResult:
        pm = self.pm
        with Horizontal(id="editor-body"):
            with VerticalScroll(id="editor"):
                yield Static(self._symptoms_text(), id="symptoms")
                yield Label("unusual tokens (yours to name; the run logs none)")
                tokens = Input(self.typed.get("unusual_tokens", pm.symptoms.unusual_tokens or ""),
                               id="unusual_tokens", placeholder="e.g. long runs of rare BPE pieces: 'ett', 'ten'")
                tokens.border_title = "unusual tokens"
                yield tokens
                yield Label("[b]2. Hypotheses[/b]: shift+up/down reorder, ctrl+d dismisses with a reason, "
                            "ctrl+n adds")
                table = HypothesesTable(pm.hypotheses, id="hypotheses")
                table.border_title = "2. Hypotheses"
                yield table
                yield Static("", id="hypothesis-detail")
                yield Label("pattern of the root cause")
                pattern = Input(self.typed.get("pattern", pm.pattern or ""), id="pattern",
                                suggester=SuggestFromList(PATTERNS),
                                placeholder=", ".join(PATTERNS[:4]) + ", ...")
                pattern.border_title = "pattern"
                yield pattern
                texts = {**sections.texts(pm), **{k: v for k, v in self.typed.items() if k in AREAS}}
                for n, name in enumerate(AREAS, 3):
                    yield Label(f"[b]{n}. {SECTION_OF[name]}[/b]: {escape(GUIDE[name])}")
                    # the lesson is one line: Enter moves on rather than adding a second
                    area = (LineArea if name == "lesson" else TextArea)(texts[name], id=name, soft_wrap=True)
                    area.border_title = f"{n}. {SHORT[SECTION_OF[name]]}"
                    area.styles.height = {"evidence": 8, "lesson": 3}.get(name, 5)
                    yield area
                    if name == "remediation":
                        remedies = OptionList(id="remedies")
                        remedies.border_title = "usual remedies"
                        yield remedies
            preview = Markdown("", id="preview")
            preview.display = False
            yield preview
        yield Static("", id="sections")
        yield Static("", id="lint")
        yield Footer(compact=True)

    def _symptoms_text(self) -> str:
        # as the document writes them (numbers.number: 4 significant digits)
        sym = "  ".join(f"{k}={number(v)}" for k, v in self.pm.symptoms.model_dump().items()
                        if v is not None and k != "unusual_tokens")
        return f"[b]1. Symptoms[/b] (from the run; f5 re-derives)\n{escape(sym)}"

    def on_mount(self) -> None:
        self.set_interval(5, self.action_save)
        if self.restored:
            when = time.strftime("%H:%M", time.localtime(self.path.stat().st_mtime))
            self.notify(f"your draft of {when} is back; f8 starts over from the run",
                        timeout=8)
        self.show_remedies()
        kept = self.session.replay_of(self.pm.spike_step)
        if kept:
            self.apply_replay(kept)      # a replay run from the dashboard before opening
        elif not (self.pm.figure and (self.path.parent / self.pm.figure).is_file()):
            # a restored draft keeps the figure it had: it may carry the arms of a replay
            # this session no longer holds
            self.draw_figure()
        self.relint()
        # the cursor where the writing starts: the first section still empty
        self.query_one(f"#{sections.first_empty(self.collect())}").focus()

    # -- changes ----------------------------------------------------------------------

    def on_text_area_changed(self, event) -> None:
        self._changed()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "pattern":
            self.show_remedies()
        if event.input.id in ("pattern", "unusual_tokens"):
            self._changed()

    def on_hypotheses_table_changed(self, event) -> None:
        self._changed()
        self.show_hypothesis()

    def on_data_table_row_highlighted(self, event) -> None:
        if event.data_table.id == "hypotheses":
            self.show_hypothesis()

    def show_hypothesis(self) -> None:
        """The highlighted hypothesis whole, with what the diagnosis (or the replay, once run)
        found for (+) and against (-) it, and what would tell it apart."""
        table = self.query_one("#hypotheses", HypothesesTable)
        detail = self.query_one("#hypothesis-detail", Static)
        if not 0 <= table.cursor_row < len(table.hypotheses):
            detail.update("")
            return
        h = table.hypotheses[table.cursor_row]
        dismissed = f"  (dismissed: {h.dismissed})" if h.dismissed else ""
        lines = [f"{h.pattern} [{h.panel}] {h.observation}{dismissed}"]
        found = self.diagnosed().get(h.pattern)
        if found:
            lines += [f" {sign} [{o.panel}] {o.observation}"
                      for sign, seen in (("+", found.supported_by), ("-", found.contradicted_by))
                      for o in seen if o.observation not in h.observation]   # the headline's: once
            if found.discriminate:
                lines.append(f" tells it apart: {found.discriminate}")
        detail.update(escape("\n".join(lines)))

    def diagnosed(self) -> dict:
        """pattern -> the run's Hypothesis: the replay's re-ranking when there is one, else analyze's."""
        kept = self.session.replay_of(self.pm.spike_step)
        if kept and kept.hypotheses:
            return {h.pattern: h for h in kept.hypotheses}
        inc = self.session.incident_at(self.pm.spike_step)
        return {h.pattern: h for h in inc.hypotheses} if inc else {}

    def _changed(self) -> None:
        # debounced: the save, the lint and the preview run once typing pauses
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(0.5, self._settle)

    def _settle(self) -> None:
        self._timer = None
        self.action_save()
        self.relint()

    def settle(self) -> None:
        """What the pause in typing would do, now: the pending save, lint and preview (tests
        call it rather than sleep out the debounce). It runs whether or not a timer is pending:
        text set from code reaches the screen's change handler only once the message queue
        turns, so a loaded machine may not have started the timer yet."""
        if self._timer is not None:
            self._timer.stop()
        self._settle()

    def show_remedies(self) -> None:
        pattern = self.query_one("#pattern", Input).value.strip()
        options = self.query_one("#remedies", OptionList)
        options.clear_options()
        options.add_options(remedies_for(pattern))
        options.highlighted = 0 if options.option_count else None
        focus.title(options, f"usual remedies of {pattern}: enter adds one" if pattern else "usual remedies")
        options.display = bool(remedies_for(pattern))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        area = self.query_one("#remediation", TextArea)
        line = str(event.option.prompt)
        if line not in area.text.splitlines():
            area.text = (area.text.rstrip("\n") + "\n" + line).lstrip("\n")

    # -- the document -------------------------------------------------------------------

    def collect(self) -> PostMortem:
        """The document as the inputs say it now (lines that do not parse are left out)."""
        return sections.collect(self.pm, {name: self.query_one(f"#{name}", TextArea).text for name in AREAS},
                                self.query_one("#hypotheses", HypothesesTable).hypotheses,
                                self.query_one("#pattern", Input).value,
                                self.query_one("#unusual_tokens", Input).value)

    def typed_inputs(self) -> dict[str, str]:
        """Every input exactly as typed, for the draft store."""
        return {**{n: self.query_one(f"#{n}", TextArea).text for n in AREAS},
                **{n: self.query_one(f"#{n}", Input).value for n in ("pattern", "unusual_tokens")}}

    def load(self, pm: PostMortem) -> None:
        """Put a document into the inputs (after a replay or a re-derivation)."""
        self.pm = pm
        for name, text in sections.texts(pm).items():
            area = self.query_one(f"#{name}", TextArea)
            if area.text != text:
                area.text = text
        table = self.query_one("#hypotheses", HypothesesTable)
        table.hypotheses = list(pm.hypotheses)
        table.fill(0)
        self.query_one("#pattern", Input).value = pm.pattern or ""
        self.query_one("#unusual_tokens", Input).value = pm.symptoms.unusual_tokens or ""
        self.query_one("#symptoms", Static).update(self._symptoms_text())

    @work(thread=True, exclusive=True, group="figure")
    def draw_figure(self) -> None:
        """The figure beside the draft (<draft>.png), with the replay's arms when there is one,
        drawn in a child process (the app never imports matplotlib, and typing does not wait on
        the drawing); the document shows it from then on. Without matplotlib the document goes
        without, said once."""
        from postmortem.document import figure
        if self.run_log is None or self.pm.spike_step is None:
            return
        path = self.path.with_suffix(".png")
        try:
            pic = figure.picture(self.run_log, self.pm.spike_step, self.session.replay_of(self.pm.spike_step),
                                 self.pm.incident)
            figure.write_in_child(path, pic)
        except DocumentError as err:
            self.app.call_from_thread(self.notify, f"no figure: {err}", severity="warning", timeout=6)
            return
        self.app.call_from_thread(self.figure_drawn, path.name)

    def figure_drawn(self, name: str) -> None:
        self.pm = self.pm.model_copy(update={"figure": name})
        if not self.committed:
            self._changed()

    def action_save(self) -> None:
        """Save the draft when it changed; not once committed (the commit holds it), nor
        while another screen is on top (nothing here changes then)."""
        if self.committed or not self.is_current:
            return
        self.pm = self.collect()
        if self.store.save(self.pm, self.typed_inputs()) and not self.drafts_ignored:
            self.drafts_ignored = False       # once a session: `git add -A` must not take drafts
            ignore_drafts_at(self.root)

    def relint(self) -> None:
        pm = self.collect()
        text = render(pm)
        # the lines that could not be read, numbered as the author sees them here
        read_back = parse(text).model_copy(update={"unreadable": pm.unreadable})
        problems = check_text(text, read_back, self.run_log, where=self.path.parent)
        bad = {p.section for p in problems}
        wide = self.size.width >= 100          # at 80 columns: the numbers only
        self.query_one("#sections", Static).update(" ".join(
            f"[{'red' if name in bad else 'green'}]{n}{' ' + SHORT[name] if wide else ''} "
            f"{'x' if name in bad else 'ok'}[/]" for n, name in enumerate(SECTIONS, 1)), layout=False)
        self.query_one("#lint", Static).update(escape(
            "complete: ready to commit (ctrl+g)" if not problems else
            f"{len(problems)} problem(s); first: {problems[0]}"), layout=False)
        self.problems = problems
        preview = self.query_one("#preview", Markdown)
        if preview.display:
            preview.update(previewed(text))

    # -- actions ------------------------------------------------------------------------

    def action_toggle_preview(self) -> None:
        preview = self.query_one("#preview", Markdown)
        preview.display = not preview.display
        self.relint()

    def action_start_over(self) -> None:
        """Offer to drop the restored draft: on yes it is moved aside (.bak), not deleted."""
        def answer(yes: bool | None) -> None:
            if not yes:
                return
            self.store.set_aside()
            self.restored = False
            self.load(self.fresh)
            kept = self.session.replay_of(self.pm.spike_step)
            if kept:
                self.apply_replay(kept)      # the replay's evidence is the run's too
            else:
                self.draw_figure()
            self.relint()
            self.notify(f"started over from the run; the old draft is in {self.path.name}.bak")
        self.app.push_screen(ConfirmScreen(f"Start over from the run? Your draft is kept as "
                                           f"{self.path.name}.bak"), answer)

    def action_rederive(self) -> None:
        if self.run_log is None:
            return
        from postmortem.document.draft import draft
        fresh = draft(self.run_log, self.pm.learner, self.pm.spike_step)
        tokens = self.query_one("#unusual_tokens", Input).value.strip() or None
        self.pm = self.collect().model_copy(update={
            "symptoms": fresh.symptoms.model_copy(update={"unusual_tokens": tokens})})
        self.query_one("#symptoms", Static).update(self._symptoms_text())
        self._changed()

    def apply_replay(self, result) -> None:
        """A replay's evidence into section 3, its ranking into section 2, the heavy tail's
        rarest tokens offered as unusual tokens when the author named none."""
        from postmortem.document.draft import apply_replay
        self.load(apply_replay(self.collect(), result))
        self._changed()
        self.draw_figure()               # again, with the replay's arms over the loss

    def action_replay(self) -> None:
        inc = self.session.incident_at(self.pm.spike_step)
        if inc is None or self.run_log is None:
            self.notify("no incident of this run to replay", severity="warning")
            return

        def done(result) -> None:
            if result:
                self.apply_replay(result)
                self.notify(f"{len(result.evidence)} evidence rows; section 3 and the ranking updated")
        self.app.push_screen(ReplayScreen(self.session, inc), done)

    def action_external_editor(self) -> None:
        """The focused section in $EDITOR (or $VISUAL); the app waits, then reads it back."""
        area = self.focused if isinstance(self.focused, TextArea) else None
        if area is None:
            self.notify("focus a section (3-7) first", severity="warning")
            return
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        with tempfile.NamedTemporaryFile("w", suffix=f"-{area.id}.md", delete=False, encoding="utf-8") as f:
            f.write(area.text)
        try:
            try:
                with self.app.suspend():
                    code = subprocess.call([*shlex.split(editor), f.name])
            except Exception as err:         # no terminal to hand over (headless): run it as is
                if type(err).__name__ != "SuspendNotSupported":
                    raise
                code = subprocess.call([*shlex.split(editor), f.name], stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if code != 0:
                self.notify(f"{editor} exited with {code}: the section is unchanged", severity="warning")
                return
            area.text = Path(f.name).read_text(encoding="utf-8").rstrip("\n")
        except OSError as err:
            self.notify(f"cannot run {editor}: {err}", severity="error")
        finally:
            Path(f.name).unlink(missing_ok=True)

    def action_commit(self) -> None:
        self.action_save()
        self.relint()

        def committed(done) -> None:
            self.committed = done
        self.app.push_screen(CommitScreen(self.pm, self.problems, self.root, self.path, committed))


def previewed(text: str) -> str:
    """The document as the preview shows it: the front matter as the YAML block it is (Markdown
    would run its lines together into one paragraph), the sections as they are."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 3)
        if end != -1:
            return f"```yaml\n{text[4:end]}\n```\n{text[end + 5:]}"
    return text
