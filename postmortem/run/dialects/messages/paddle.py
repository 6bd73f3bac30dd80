"""PaddlePaddle's dynamic loss scaler (PaddleDetection, PaddleNLP, PaddleOCR train through it).

Read from PaddlePaddle/Paddle python/paddle/amp/grad_scaler.py (`AmpScaler._update`, and the
older python/paddle/fluid/dygraph/amp/loss_scaler.py): printed when the scale is decreased
after `decr_every_n_nan_or_inf` overflowing steps. The new scale is the product it prints,
not a number of its own: the message is a skipped step and the scale it was at.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

register(
    entry("paddle.decrease", "PaddlePaddle", "overflow",
          "PaddlePaddle/Paddle python/paddle/amp/grad_scaler.py (AmpScaler._update); "
          "python/paddle/fluid/dygraph/amp/loss_scaler.py",
          "print('Found inf or nan, current scale is: {}, decrease to: {}*{}'.format("
          "float(self._scale), float(self._scale), float(self._decr_ratio)))",
          r"Found inf or nan, current scale is: " + scale("prev_scale") + r", decrease to: "
          + r"[-+\d.e]+\*(?P<ratio>[\d.e-]+)",
          ("Found inf or nan, current scale is: 32768.0, decrease to: 32768.0*0.5",),
          ("Found inf or nan",)),
)
