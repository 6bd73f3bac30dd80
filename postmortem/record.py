"""The recorder's old address, kept for training scripts written before it moved to postmortem.run.record."""
from postmortem.run.record import Recorder, batch_hash, this_machine

__all__ = ["Recorder", "batch_hash", "this_machine"]     # the public old address: re-exported on purpose
