"""Reading runs: every log format into one canonical RunLog."""

from postmortem.errors import RunReadError
from postmortem.run.discover import read_run
from postmortem.run.model import RunLog, RunManifest, Source

__all__ = ["RunLog", "RunManifest", "RunReadError", "Source", "read_run"]
