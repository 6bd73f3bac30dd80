"""Reading runs: every log format into one canonical RunLog."""

from postmortem.run.model import RunLog, RunManifest, RunReadError, Source
from postmortem.run.discover import read_run

__all__ = ["RunLog", "RunManifest", "RunReadError", "Source", "read_run"]
