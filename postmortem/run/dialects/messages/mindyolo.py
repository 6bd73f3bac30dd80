"""mindyolo's (MindSpore YOLO) loss-scaler warnings: its trainer checks the grads after each step
and says what the scaler did with the scale.

Read from mindspore-lab/mindyolo mindyolo/utils/trainer_factory.py (`Trainer.train_step`;
mindyolo/utils/enginer.py in the first releases): `if not grads_finite:` then, with
`overflow_still_update` (the default: True) `logger.warning(f"overflow, still update, loss scale
adjust to {self.scaler.scale_value.asnumpy()}")` (the optimizer steps on the overflowing grads: no
skip), else `... f"overflow, drop step, loss scale adjust to {...}"` (the step is dropped). (With
gradient accumulation the dropped step is said inside an `Epoch {e}/{E}, Step {i}/{N}, accumulate:
{a}, this step grad overflow, drop. Loss scale adjust to {scale}` line (`Epoch {E}/{e}, Step {N}/{i}`
in the first releases, `Epoch: {e}, Step: {i}, accumulate: {a}, ` in others; the early train.py's
StaticCell `Epoch: {e}, Step: {i}, this step grad overflow, drop. Cur loss scale is {scale}`):
`mindyolo.accumulate_drop`, whose words begin at `this step`, so that the line's head is its
counters, read as the progress line's are.) The scale is `mindspore.amp.DynamicLossScaler.scale_value` (divided by
`scale_factor`, 2 by default, floor 1) or a `StaticLossScaler`'s (2^10 by default, never moved), a
0-d array printed `1024.0`: which of the two is not in the line, so the scale before is not known.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

_TRAINER = ("mindspore-lab/mindyolo mindyolo/utils/trainer_factory.py (Trainer.train_step); "
            "mindyolo/utils/enginer.py (Enginer.train_step, the first releases)")
_STILL = 'logger.warning(f"overflow, still update, loss scale adjust to {self.scaler.scale_value.asnumpy()}")'
_DROP = 'logger.warning(f"overflow, drop step, loss scale adjust to {self.scaler.scale_value.asnumpy()}")'

_ACCUMULATE = ("mindspore-lab/mindyolo mindyolo/utils/trainer_factory.py (Trainer.train_step, accumulate > 1); "
               "train.py (StaticCell, the first releases)")
_ACCUMULATE_FMT = ('logger.warning(f"Epoch {cur_epoch}/{self.epochs}, Step {cur_step}/{self.steps_per_epoch}, "'
                   ' f"accumulate: {self.accumulate}, this step grad overflow, drop. "'
                   ' f"Loss scale adjust to {self.scaler.scale_value.asnumpy()}")')

register(
    # the optimizer stepped on the overflowing grads: a scale, not a skipped step
    entry("mindyolo.still_update", "mindyolo", "scale", _TRAINER, _STILL,
          r"overflow, still update, loss scale adjust to " + scale("scale"),
          (f"overflow, still update, loss scale adjust to {1024.0}", f"overflow, still update, loss scale adjust to {32768.0}"),
          ("overflow, still update",)),
    entry("mindyolo.drop_step", "mindyolo", "overflow", _TRAINER, _DROP,
          r"overflow, drop step, loss scale adjust to " + scale("scale"),
          (f"overflow, drop step, loss scale adjust to {32768.0}",),
          ("overflow, drop step",)),
    # the accumulated step is dropped (the message part: the line's `Epoch e/E, Step i/N,
    # accumulate: a, ` head is the step it names, read as counters; tests/run/test_reader_leftovers.py)
    entry("mindyolo.accumulate_drop", "mindyolo", "overflow", _ACCUMULATE, _ACCUMULATE_FMT,
          r"this step grad overflow, drop\. (?:Loss scale adjust to|Cur loss scale is) " + scale("scale"),
          (f"this step grad overflow, drop. Loss scale adjust to {32768.0}",
           f"this step grad overflow, drop. Cur loss scale is {1024.0}"),
          ("this step grad overflow",)),
)
