"""Apache MXNet's AMP dynamic loss scaler (`mxnet.contrib.amp`, MXNet 1.5..1.9).

Read from apache/mxnet at 22d69ef python/mxnet/contrib/amp/loss_scaler.py (`LossScaler.
has_overflow`, called by `amp.unscale` / the AMP trainer on every step): on an overflow the step
is skipped and the next scale halved, logged `logging.info("AMP: decreasing loss scale to %f",
...)`; after 2000 clean steps it doubles, `"AMP: increasing loss scale to %f"`. Root logger, so
`INFO:root:` in front under `basicConfig` (GluonNLP and the MXNet examples set INFO); Sockeye 2
(awslabs/sockeye 2.3.17 sockeye/train.py `amp.init()` under `--amp`, sockeye/log.py's verbose
format `[%(asctime)s:%(levelname)s:%(name)s:%(funcName)s] %(message)s`) prints it behind
`[...:INFO:root:has_overflow] `.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

_SCALER = "apache/mxnet 22d69ef (v1.x) python/mxnet/contrib/amp/loss_scaler.py (LossScaler.has_overflow)"

register(
    # the skip and the halving in one line: the scale printed is the next step's
    entry("mxnet.amp.overflow", "MXNet", "overflow", _SCALER,
          'logging.info("AMP: decreasing loss scale to %f", self._next_loss_scale)',
          r"AMP: decreasing loss scale to " + scale("scale"),
          ("INFO:root:AMP: decreasing loss scale to 32768.000000",
           "AMP: decreasing loss scale to 0.000488",
           "[2021-03-01:12:00:05:INFO:root:has_overflow] AMP: decreasing loss scale to 16384.000000"),
          ("AMP: decreasing loss scale",), prev_factor=2.0),
    entry("mxnet.amp.growth", "MXNet", "scale", _SCALER,
          'logging.info("AMP: increasing loss scale to %f", self._next_loss_scale)',
          r"AMP: increasing loss scale to " + scale("scale"),
          ("INFO:root:AMP: increasing loss scale to 131072.000000",),
          ("AMP: increasing loss scale",), prev_factor=0.5),
)
