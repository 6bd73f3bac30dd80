"""PaddlePaddle's dynamic loss scaler (PaddleDetection, PaddleNLP, PaddleOCR train through it).

Read from PaddlePaddle/Paddle python/paddle/fluid/dygraph/amp/loss_scaler.py at 048bd89 (2.x,
`AmpScaler._update`) and python/paddle/amp/grad_scaler.py at 1bfb3e0 (the same method after
fluid's move, the same words): printed when the scale is decreased after
`decr_every_n_nan_or_inf` overflowing steps (GradScaler's default 2), then `self._scale =
self._scale * self._decr_ratio`. The new scale is printed as a product (`X*0.5`): the `ratio`
group makes it X times the ratio (X/2 for the default decr_ratio 0.5), so a run of these
messages is a cascade on the loss_scale series. Each message is placed as one skipped step
(the least it stands for: with the default 2 it stands for two).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

register(
    entry("paddle.decrease", "PaddlePaddle", "overflow",
          "PaddlePaddle/Paddle 048bd89 python/paddle/fluid/dygraph/amp/loss_scaler.py; "
          "1bfb3e0 python/paddle/amp/grad_scaler.py (AmpScaler._update)",
          "print('Found inf or nan, current scale is: {}, decrease to: {}*{}'.format("
          "float(self._scale), float(self._scale), float(self._decr_ratio)))",
          r"Found inf or nan, current scale is: " + scale("prev_scale") + r", decrease to: "
          + r"[-+\d.e]+\*(?P<ratio>[\d.e-]+)",     # new scale: prev_scale * ratio (events.product)
          ("Found inf or nan, current scale is: 32768.0, decrease to: 32768.0*0.5",),
          ("Found inf or nan",)),
)
