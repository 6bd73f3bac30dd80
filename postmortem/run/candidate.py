"""A run found under a path, before it is read: its format and the files it spans."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Candidate:
    """One readable thing found under the path: a format and the files it spans."""

    format: str
    files: list[Path]
    root: Path
    companion: bool = False       # the same run in a second format: read only on request
    weak: bool = False            # a table with no step column: loses to any log that has one
    notes: list[str] = field(default_factory=list)
    run_id: str | None = None     # the store's own id of the run (MLflow, W&B); else its folder
    record: bool = False          # postmortem's own record of the run (metrics.jsonl + manifest.json)
    picked: str | None = None     # the listing's id of the run `--run` picked (a post-mortem records it)

    def label(self, base: Path) -> str:
        rel = self.root.relative_to(base) if self.root != base and base in self.root.parents else self.root.name
        return f"{rel} ({self.format})"
