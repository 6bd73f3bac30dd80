"""timm's train.py progress line and the DeiT / DINO / MAE / DETR MetricLogger.

timm train.py (v0.9, train_one_epoch): `f'Train: {epoch} [{update_idx:>4d}/{updates_per_epoch}
({100. * update_idx / last_idx:>3.0f}%)]  Loss: {losses_m.val:#.3g} ({losses_m.avg:#.3g})
Time: ...  LR: {lr:.3e}  Data: ...'`; older releases print `'Train: {} [{:>4d}/{} ({:>3.0f}%)]
Loss: {loss.val:>9.6f} ({loss.avg:>6.4f})'`. MetricLogger.log_every (facebookresearch/deit,
dino, mae util/misc.py; detr util/misc.py): `header + '  [{0:>n}/{1}]  eta: {eta}  {meters}
time: {time}  data: {data}  max mem: {memory:.0f}'`, each meter `f"{name}: {median:.4f}
({global_avg:.4f})"`: the value and its running mean, the header `Epoch: [e]`.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

_METER = "{median:.4f} ({global_avg:.4f})"

register(
    entry("timm.train", "timm", "progress",
          "huggingface/pytorch-image-models v0.9.16 train.py (train_one_epoch)",
          "f'Train: {epoch} [{update_idx:>4d}/{updates_per_epoch} ({100. * update_idx / last_idx:>3.0f}%)]  "
          "Loss: {losses_m.val:#.3g} ({losses_m.avg:#.3g})  ...  LR: {lr:.3e}  Data: ...'",
          r"Train: (?P<epoch>\d+) \[\s*(?P<batch>\d+)/\d+",
          (f"Train: {3} [{120:>4d}/{500} ({24.0:>3.0f}%)]  Loss: {2.3456:#.3g} ({2.4567:#.3g})  Time: 0.401s,  "
           f"638.45/s  (0.405s,  632.1/s)  LR: {1e-3:.3e}  Data: 0.010 (0.012)",)),
    entry("metriclogger.log_every", "MetricLogger", "progress",
          "facebookresearch/deit main utils.py; facebookresearch/dino main utils.py; facebookresearch/mae "
          "main util/misc.py (MetricLogger.log_every, SmoothedValue fmt)",
          "header + '  [{0:>n}/{1}]  eta: {eta}  {meters}  time: {time}  data: {data}  max mem: {memory:.0f}'",
          r"\]\s+eta: (?=.{0,600}?\bloss: [\d.]+)|Train: \[(?P<epoch>\d+)/\d+\]\[\s*(?P<batch>\d+)/\d+\]",
          ("Epoch: [{}]".format(3) + "  [{0:>3}/{1}]  eta: {eta}  {meters}  time: {time}  data: {data}  max mem: "
           "{memory:.0f}".format(120, 500, eta="0:01:02", meters="  ".join(
               f"{k}: " + _METER.format(median=a, global_avg=b) for k, a, b in (("lr", 1e-4, 1e-4),
                                                                               ("loss", 2.3456, 2.4567))),
               time="0.1234", data="0.0012", memory=1234),)),
)
