"""What the screens share: the run and its analysis, the incident picked, the replays kept,
the device to replay on and the knowledge base. Plain Python, no Textual: the dashboard, the
editor and the replay panel are handed it instead of reaching into the App.

The run, the analysis and a replay's result are typed with their classes, imported for the
type checker only: the app paints its first frame from the view before pandas or pydantic
are imported, and a session holds them only once the loader has handed them over."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from postmortem.document.runpath import run_id_of
from postmortem.files import atomic_write, safe_name
from postmortem.kb.settings import Settings, drafts_home
from postmortem.tui.loader import read_and_analyze

if TYPE_CHECKING:
    from postmortem.diagnose.models import Analysis, Incident
    from postmortem.replay.models import ReplayResult
    from postmortem.run.model import RunLog
    from postmortem.tui.view import FirstView


class KeptReplays(dict[int, "ReplayResult"]):
    """incident step -> the last replay's result, kept as JSON in `folder` keyed by run and
    step (`<run-id>-<step>.json`, beside the drafts), so that a replay is offered back in a
    later session from any folder. `run_id()`: the run's id, or None before it is read."""

    def __init__(self, folder: Path, run_id: Callable[[], str | None]):
        super().__init__()
        self.folder, self.run_id = Path(folder), run_id

    def _path(self, step: int) -> Path | None:
        rid = self.run_id()
        return None if rid is None else self.folder / f"{safe_name(rid)}-{int(step)}.json"

    def __setitem__(self, step: int, result: ReplayResult) -> None:
        super().__setitem__(step, result)
        path = self._path(step)
        if path is not None and result is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, result.model_dump_json())
            except OSError:
                pass            # kept for this session; a folder that cannot be written costs the next

    def get(self, step: int, default: ReplayResult | None = None) -> ReplayResult | None:  # type: ignore[override]
        # (dict.get's overloads promise the default's own type; a kept replay is one or None)
        if step not in self:
            path = self._path(step)
            if path is None or not path.is_file():
                return default
            from pydantic import ValidationError  # pydantic: not before the first frame

            from postmortem.replay.models import ReplayResult
            try:
                super().__setitem__(step, ReplayResult.model_validate_json(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, ValidationError):
                return default       # damaged, or of another version: as if never replayed
        return super().get(step, default)


@dataclass
class Session:
    run_path: str
    format: str | None = None
    against: list[str] = field(default_factory=list)    # other runs over the same data
    columns: dict[str, str] = field(default_factory=dict)   # read_run's --loss/--step-column/--run options
    device: str = "auto"                                 # where a replay runs
    kb_root: Path = field(default_factory=Path.cwd)      # post-mortems are committed there
    learner: str | None = None    # who writes (kb.settings); None: the commit screen asks
    drafts_home: Path | None = None   # whose .postmortem/ keeps the drafts; None: kb_root's
    kb_named: bool = False        # kb_root was named (--kb, POSTMORTEM_KB, config), not the folder here
    view: FirstView | None = None     # what the dashboard paints first
    log: RunLog | None = None         # the run, once the loader has handed it over
    analysis: Analysis | None = None  # its analysis, with it
    current: int = 0              # the incident picked (an index into the incidents)
    replays: dict[int, ReplayResult] = field(default_factory=dict)   # incident step -> the last replay's result
    error: str | None = None      # why the run could not be read

    @classmethod
    def read(cls, run: str, **kw) -> Session:
        """A session of a run read and analyzed here, in this process (tests and scripts
        hand it to the app: the app itself has the loader process read it)."""
        session = cls(run, **kw)
        session.log, session.analysis, session.view = read_and_analyze(
            run, session.format, session.against, session.columns)
        return session

    def use_settings(self, settings: Settings) -> None:
        """The knowledge base, the learner and the drafts' home of kb.settings.Settings."""
        self.kb_root, self.learner, self.kb_named = settings.kb, settings.learner, settings.chosen
        self.drafts_home = drafts_home(settings)
        kept = KeptReplays(self.drafts_root / ".postmortem" / "replays", self._run_id)
        kept.update(self.replays)
        self.replays = kept

    def _run_id(self) -> str | None:
        """The key of the replays kept: the post-mortem's run id (document.draft.run_id_of: a
        run of a store of several carries its id there, so two runs of one store never share
        one); before the run is handed over, the view's id, unless a run was picked in a store."""
        if self.log is not None:
            return run_id_of(self.log)
        if self.columns.get("run"):
            return None
        return self.view.run_id if self.view is not None else None

    @property
    def drafts_root(self) -> Path:
        """The folder whose .postmortem/drafts/ holds the drafts, keyed by run and incident."""
        return self.drafts_home or self.kb_root

    @property
    def read_s(self) -> float:
        return self.view.read_s if self.view is not None else 0.0

    @property
    def incident(self) -> Incident | None:
        """The incident picked (the analysis' Incident), or None: no incident, or the run is
        not handed over yet."""
        if self.analysis is None or not self.analysis.incidents:
            return None
        return self.analysis.incidents[self.current]

    def incident_at(self, step: int | None) -> Incident | None:
        if self.analysis is None:
            return None
        return next((i for i in self.analysis.incidents if i.step == step), None)

    def replay_of(self, step: int | None) -> ReplayResult | None:
        """The last replay of the incident at `step` (kept from an earlier session too); None
        when there is none, or no step (a post-mortem of no incident)."""
        return None if step is None else self.replays.get(step)
