"""BMTrain's loss-scaler message: the scale before and after its halving, `%lf` (six decimals).

Read from OpenBMB/BMTrain v0.1.x bmtrain/optim/optim_manager.py (`optim_step`: `except
OverflowError: print_rank(...)`), v0.2.x bmtrain/optim/optim_manager.py (`OptimManager.step`,
`if has_overflow:`; from v0.2.3 only while `loss_scale > min_loss_scale` is the scale halved,
the message printed all the same). The trainers built on it (CPM-Live, CPM-Bee, ModelCenter)
print it from rank 0 (`print_rank`).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

register(
    entry("bmtrain.overflow", "BMTrain", "overflow",
          "OpenBMB/BMTrain v0.1.8 bmtrain/optim/optim_manager.py (optim_step), v0.2.0..v0.2.3 "
          "bmtrain/optim/optim_manager.py (OptimManager.step)",
          'print_rank("Gradient overflow, change scale from %lf to %lf" % (self.loss_scale, '
          'self.loss_scale / self.loss_scale_factor))',
          r"Gradient overflow, change scale from " + scale("prev_scale") + r" to " + scale("scale"),
          ("Gradient overflow, change scale from %lf to %lf" % (65536.0, 32768.0),
           "Gradient overflow, change scale from %lf to %lf" % (1.0, 0.5)),
          ("Gradient overflow, change scale",)),
)
