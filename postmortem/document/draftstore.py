"""The draft store: one incident's unfinished post-mortem under `.postmortem/drafts/`, the
Markdown and beside it every input exactly as typed, restored when the editor opens again,
set aside as `.bak` on a start over and discarded once committed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from postmortem.document.markdown import read, render
from postmortem.document.model import PostMortem
from postmortem.errors import DocumentError
from postmortem.files import atomic_write


def draft_path(root: Path, pm: PostMortem) -> Path:
    return Path(root) / ".postmortem" / "drafts" / f"{pm.run_id}-{pm.spike_step}.md"


def typed_path(draft: Path) -> Path:
    """Beside the draft: every input exactly as typed, lines that do not parse yet included
    (the Markdown draft holds only what parses)."""
    return draft.with_suffix(".typed.json")


def figure_path(draft: Path) -> Path:
    """Beside the draft: the figure the editor draws (the committed one is a copy)."""
    return draft.with_suffix(".png")


def discard(draft: Path) -> None:
    """The draft, its typed inputs and its figure gone (the commit holds every word of them)."""
    for path in (draft, typed_path(draft), figure_path(draft)):
        path.unlink(missing_ok=True)


class DraftStore:
    """The draft of one incident's post-mortem, written only when it changed."""

    def __init__(self, root: Path, pm: PostMortem):
        self.path = draft_path(root, pm)
        self.saved: tuple = ()       # the draft and the typed inputs as last written

    @property
    def typed_path(self) -> Path:
        return typed_path(self.path)

    def restore(self) -> tuple[PostMortem | None, dict[str, str]]:
        """The saved document (None when there is none or it no longer parses) and the
        inputs as typed ({} when none were saved)."""
        if not self.path.exists():
            return None, {}
        try:
            pm = read(self.path)
        except DocumentError:
            pm = None
        try:
            typed = json.loads(self.typed_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            typed = {}
        return pm, typed if isinstance(typed, dict) else {}

    def save(self, pm: PostMortem, typed: dict[str, str]) -> bool:
        """Write the document and the typed inputs, atomically, when either changed since the
        last save; True when written."""
        text, inputs = render(pm), json.dumps(typed)
        if (text, inputs) == self.saved:
            return False
        atomic_write(self.path, text)
        atomic_write(self.typed_path, inputs)
        self.saved = (text, inputs)
        return True

    def set_aside(self) -> Path:
        """Move the draft and its typed inputs aside (`.bak`), not deleted; the next save
        writes afresh. Returns where the draft went."""
        for path in (self.path, self.typed_path):
            if path.exists():
                os.replace(path, path.with_name(path.name + ".bak"))
        self.saved = ()
        return self.path.with_name(self.path.name + ".bak")

    def discard(self) -> None:
        discard(self.path)
