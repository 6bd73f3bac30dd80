"""postmortem: the hour after a training run misbehaves."""

__version__ = "0.1.0"
