"""PaddlePaddle's consoles: the high-level API's ProgBarLogger and PaddleDetection's trainer.

Paddle python/paddle/hapi/callbacks.py (ProgBarLogger, 2.x) prints `Epoch %d/%d` and feeds
python/paddle/hapi/progressbar.py (ProgressBar, name='step', read at 059e84c): the count is
`(self.name + ' %' + str(numdigits) + 'd/%d') % (current, num)` (`step  10/100`: padded to the
total's digits), verbose=1 adds a `[===>...]` bar and `\r`-overwritten frames with ` - ETA: ..`;
each metric is `' - %s:' % k` then `' %.4f' % v` per value (`%.4e` when |v| <= 1e-3), then
`' - %.0fms/step'`; eval prints the same line after `Eval begin...`.
PaddleDetection ppdet/engine/callbacks.py (LogPrinter, release/2.6): `'Epoch: [{}] [{:>4}/{}]
learning_rate: {lr:.6f} {meters} eta: {eta} batch_cost: {btime} data_cost: {dtime} ips:
{ips:.4f} images/s'` with meters as `loss: 1.23 loss_cls: 0.4`. PaddleNLP's examples print
`"global step %d, epoch: %d, batch: %d, loss: %f, speed: %.2f step/s"` (some with `[TRAIN] ` in
front, `%.4f step/s`, or `, ips :%.2f sequences/s` after).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("paddle.progbar", "PaddlePaddle", "progress",
          "PaddlePaddle/Paddle 059e84c python/paddle/hapi/progressbar.py (ProgressBar.update); "
          "python/paddle/hapi/callbacks.py (ProgBarLogger)",
          "(self.name + ' %' + str(numdigits) + 'd/%d') % (current_num, self._num) [+ ' [' + bar + ']'] "
          "+ ' - %s:' % k + ' %.4f' % v ... [+ ' - ETA: %s'] + ' - %.0fms/%s' % (.., self.name)",
          r"^step\s+(?P<batch>\d+)(?:/\d+)?(?: \[[=>.]*\])? - (?P<fields>.*\bloss: .*)$",
          (("step %" + str(3) + "d/%d") % (10, 100) + "".join(" - %s: %.4f" % kv for kv in (("loss", 2.3456),
                                                                                         ("acc", 0.5012)))
           + " - %.0fms/%s" % (12, "step"),
           ("step %" + str(3) + "d/%d [") % (45, 100) + "=" * 12 + ">" + "." * 17 + "]" + " - %s: %.4f" % ("loss", 2.1)
           + " - ETA: %ds" % 3 + " - %.0fms/%s" % (12, "step")),
          ("step ",)),
    entry("paddle.detection", "PaddleDetection", "progress",
          "PaddlePaddle/PaddleDetection release/2.6 ppdet/engine/callbacks.py (LogPrinter.on_step_end)",
          "'Epoch: [{}] [{:>4}/{}] learning_rate: {lr:.6f} {meters} eta: {eta} batch_cost: {btime} "
          "data_cost: {dtime} ips: {ips:.4f} images/s'",
          r"\bEpoch: \[(?P<epoch>\d+)\] \[\s*(?P<batch>\d+)/\d+\] learning_rate: (?P<lr>\S+)",
          ("Epoch: [{}] [{:>4}/{}] learning_rate: {lr:.6f} {meters} eta: {eta} batch_cost: {btime} data_cost: "
           "{dtime} ips: {ips:.4f} images/s".format(3, 120, 500, lr=0.01, meters="loss: 1.234 loss_cls: 0.456",
                                                    eta="1:02:03", btime="0.4012", dtime="0.0101", ips=19.94),),
          ("learning_rate:",)),
    entry("paddle.nlp", "PaddleNLP", "progress",
          "PaddlePaddle/PaddleNLP examples (run_pretrain.py, run_glue.py; found by the format string in many "
          "copies, some with '[TRAIN] ' or ', ips :%.2f sequences/s')",
          '"global step %d, epoch: %d, batch: %d, loss: %f, speed: %.2f step/s"',
          r"\bglobal step (?P<step>\d+), epoch: (?P<epoch>\d+), batch: (?P<batch>\d+), loss: (?P<loss>\S+?),",
          ("global step %d, epoch: %d, batch: %d, loss: %f, speed: %.2f step/s" % (1200, 1, 200, 2.345, 4.2),
           "[TRAIN] global step %d, epoch: %d, batch: %d, loss: %f, speed: %.2f step/s" % (1210, 1, 210, 2.3, 4.2)),
          ("global step",)),
)
