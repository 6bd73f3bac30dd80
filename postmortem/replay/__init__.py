"""Replay: re-run the steps around an incident from a checkpoint, faithfully and in
counterfactual arms, with probes, to gather the evidence that tells the causes apart.

A run's factory returns a `Replayable` (postmortem/replay/protocol.py); no torch at import."""

from postmortem.replay.protocol import Replayable

__all__ = ["Replayable"]
