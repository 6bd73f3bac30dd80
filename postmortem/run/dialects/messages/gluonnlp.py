"""GluonNLP's fp16 loss scaler (dmlc/gluon-nlp scripts/bert/fp16_utils.py, v0.7.0..v0.10.0).

`DynamicLossScaler.update_scale`: on an overflow past the tolerance `self.loss_scale /=
self.scale_factor` (2.0 by default) and, only once the scale is below 1, `warnings.warn(
'DynamicLossScaler: overflow detected. set loss_scale = %s' % self.loss_scale)`: Python's
warnings print it as `FILE:LINE: UserWarning: ...`, once per place unless the filter says
always (the source line under it, `%s` unfilled, is no message). The scale printed is after the cut. The other overflows are not printed.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

_FORMAT = "DynamicLossScaler: overflow detected. set loss_scale = %s"

register(
    entry("gluonnlp.overflow", "GluonNLP", "overflow",
          "dmlc/gluon-nlp v0.7.0..v0.10.0 scripts/bert/fp16_utils.py (DynamicLossScaler.update_scale)",
          f"warnings.warn('{_FORMAT}' % self.loss_scale)",
          # the warning's `FILE:LINE: UserWarning: ` is the message's too (glued behind a frame)
          r"(?:(?<!\S)\S+\.py:\d+: UserWarning: )?DynamicLossScaler: overflow detected\. set loss_scale = "
          + scale("scale"),
          ("/opt/gluon-nlp/scripts/bert/fp16_utils.py:162: UserWarning: " + _FORMAT % 0.5,
           _FORMAT % 0.0),
          ("DynamicLossScaler: overflow",), prev_factor=2.0),
)
