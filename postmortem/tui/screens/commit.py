"""Commit: the lint's problems by section, or the knowledge base, the learner, the files to be
written and the commit message; enter commits them with git (the knowledge base's `commit`).
Nothing goes into postmortem's own checkout unless it was named, nor as anybody not typed or
set (kb.settings); the first commit keeps both in the config file for the next time."""

from __future__ import annotations

import os
from pathlib import Path

from rich.markup import escape
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Label, Static

from postmortem.document.draftstore import discard
from postmortem.document.markdown import render
from postmortem.document.model import SECTIONS, PostMortem
from postmortem.errors import KBError, UserError
from postmortem.kb import settings
from postmortem.kb.commit import ATTRIBUTE, Committed, open_repo, plan, run_as_committed
from postmortem.kb.commit import commit as commit_to_kb
from postmortem.kb.settings import is_own_checkout

WHO = "who is writing? type your name: the post-mortem goes to learners/<name>/ (kept for next time)"


class CommitScreen(Screen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="commit.back", tooltip="Back to the editor"),
                Binding("f3", "init", "git init here", id="commit.init",
                        tooltip="Make a git repository in the knowledge-base folder")]

    def __init__(self, pm: PostMortem, problems: list, root: Path, draft: Path | None = None,
                 on_commit=None):
        super().__init__()
        self.pm, self.problems, self.root, self.draft = pm, problems, root, draft
        self.on_commit = on_commit or (lambda done: None)
        self.committed: Committed | None = None
        self.no_repository = False         # f3 (git init here) is offered only then

    def check_action(self, action: str, parameters) -> bool | None:
        """f3 is shown and acts only where there is no repository to commit to."""
        if action == "init":
            return self.no_repository and not self.problems and self.committed is None
        return True

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="commit"):
            if self.problems:
                yield Static(self._problems_text(), id="commit-problems")
            else:
                yield Label("knowledge base (a git repository: the post-mortem is committed there)")
                yield Input(str(self.root), id="kb")
                yield Label("learner (the lessons file is learners/<learner>/lessons.md)")
                yield Input(self.pm.learner, id="learner")
                yield Static("", id="commit-plan")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.title = "commit the post-mortem"
        if not self.problems:
            self.show_plan()
            self.query_one("#learner", Input).focus()

    def _problems_text(self) -> str:
        by_section: dict[str, list[str]] = {}
        for p in self.problems:
            by_section.setdefault(p.section, []).append(p.problem)
        lines = [f"[b]Not ready to commit: {len(self.problems)} problem(s)[/b]  (escape: back to the editor)", ""]
        for n, name in enumerate(SECTIONS, 1):
            if name in by_section:
                lines.append(f"[b]{n}. {name}[/b]")
                lines += [f"   - {escape(x)}" for x in by_section.pop(name)]
        for name, rest in by_section.items():
            lines.append(f"[b]{escape(name)}[/b]")
            lines += [f"   - {escape(x)}" for x in rest]
        return "\n".join(lines)

    def _learner(self) -> str:
        return self.query_one("#learner", Input).value.strip()

    def _kb(self) -> Path:
        """The knowledge-base folder as typed (~ expanded, relative to where the app started)."""
        typed = self.query_one("#kb", Input).value.strip()
        return Path(os.path.abspath(os.path.expanduser(typed))) if typed else self.root

    def _named(self) -> bool:
        """True when the folder is the knowledge base the settings named (--kb, the variable, the
        config file): only then may it be postmortem's own checkout."""
        session = getattr(self.app, "session", None)
        return bool(session is not None and session.kb_named and Path(session.kb_root) == self._kb())

    def _refusal(self) -> str | None:
        if not self._learner():
            return WHO
        if is_own_checkout(self._kb()) and not self._named():
            return (f"{self._kb()} is postmortem's own checkout, not a knowledge base: type the folder "
                    "of yours (f3 makes a git repository there)")
        return None

    def show_plan(self) -> None:
        out = self.query_one("#commit-plan", Static)
        try:
            refused = self._refusal()
            if refused:
                raise KBError(refused)
            todo = plan(self.pm, self._learner(), open_repo(self._kb()), self._figure() is not None)
        except KBError as err:
            self.set_no_repository("not in a git repository" in str(err))
            # here the way is f3, not the command line's `init` / `commit --init` the error names
            said = (f"{self._kb()} is not in a git repository  (f3 makes one there)" if self.no_repository
                    else str(err))
            out.update(f"[red]{escape(said)}[/red]")
            self.ready = False
            return
        self.set_no_repository(False)
        self.ready = True
        out.update("\n".join([
            "[b]Ready.[/b] Enter commits exactly these files:", "",
            f"  write   {escape(todo.postmortem)}",
            *([f"  write   {escape(todo.figure)}  (the figure)"] if todo.figure else []),
            f"  append  {escape(todo.lessons)}  (one row: the lesson)",
            *([f"  add     .gitattributes  (`{escape(ATTRIBUTE)}`: lessons files merge by union)"]
              if todo.attributes else []), "",
            f"in {escape(str(todo.root))}, with the message:", f"  {escape(todo.message)}"]))

    def set_no_repository(self, none: bool) -> None:
        if none != self.no_repository:
            self.no_repository = none
            self.refresh_bindings()

    def _figure(self) -> bytes | None:
        """The figure the draft shows, from beside the draft (the editor drew it there)."""
        if self.draft is None or not self.pm.figure:
            return None
        try:
            return (self.draft.parent / self.pm.figure).read_bytes()
        except OSError:
            return None

    def on_input_changed(self, event: Input.Changed) -> None:
        if self.committed is None:
            self.show_plan()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if self.committed is None and self.ready:
            self.commit()

    def commit(self) -> None:
        import git

        figure = self._figure()
        learner, run, root = self._learner(), self.pm.run, self._kb()     # the run as this process read it
        out = self.query_one("#commit-plan", Static)
        refused = self._refusal()
        if refused:
            out.update(f"[red]not committed: {escape(refused)}[/red]")
            return
        pm = self.pm.model_copy(update={
            "learner": learner, "figure": self.pm.figure_filename if figure else None,
            "run": run_as_committed(self.pm, learner, root, Path(run) if run and Path(run).exists() else None)})
        try:
            done = commit_to_kb(pm, render(pm), pm.learner, root, figure=figure)
        except KBError as err:
            out.update(f"[red]not committed: {escape(str(err))}[/red]")
            return
        except git.GitCommandError as err:
            last = (err.stderr or str(err)).strip().splitlines()[-1]
            out.update(f"[red]not committed: git: {escape(last)}[/red]")
            return
        self.committed = done
        kept = self._remember(root, learner)
        if kept:
            done.notes.append(kept)
        self.on_commit(done)
        if self.draft is not None:
            discard(self.draft)     # the committed file holds every word of it now
        shown = f"\n{done.figure}" if done.figure else ""
        out.update(escape(f"committed {done.sha[:10]}: {done.message}\n\n{done.postmortem}{shown}\n{done.lessons}"
                          + "".join(f"\n{note}" for note in done.notes))
                   + "\n\n[b]l[/b] opens the lessons, escape goes back")
        self.app.notify(f"committed {done.sha[:10]}")
        self.set_focus(None)              # l and escape act now, not the learner's input

    def _remember(self, root: Path, learner: str) -> str | None:
        """The first time the knowledge base or the learner is asked for, the answer is kept in
        the config file (kb.settings), and the session goes on with it."""
        try:
            now = settings.resolve()
            kb = root if not now.chosen else None
            who = learner if now.learner is None else None
            if kb is None and who is None:
                return None
            path = settings.remember(kb=kb, learner=who)
        except UserError as err:
            return f"not kept for next time: {err}"
        session = getattr(self.app, "session", None)
        if session is not None:
            session.kb_root, session.kb_named, session.learner = root, True, learner
        kept = " and ".join(x for x in (kb and f"the knowledge base {kb}", who and f"the learner {who}") if x)
        return f"kept {kept} in {path} for next time (postmortem init changes them)"

    def action_init(self) -> None:
        if self.problems or self.committed:
            return
        try:
            self._kb().mkdir(parents=True, exist_ok=True)
            open_repo(self._kb(), init=True)
        except (OSError, UserError) as err:
            self.query_one("#commit-plan", Static).update(f"[red]{escape(str(err))}[/red]")
            return
        self.show_plan()
