"""PaddlePaddle's consoles: the high-level API's ProgBarLogger and PaddleDetection's trainer.

Paddle/python/paddle/hapi/callbacks.py (ProgBarLogger, v2.x): `Epoch 1/10` then
`step 10/100 - loss: 2.3456 - acc: 0.5 - 12ms/step` (metrics joined by ' - ').
PaddleDetection ppdet/engine/callbacks.py (LogPrinter, release/2.6): `'Epoch: [{}] [{:>4}/{}]
learning_rate: {lr:.6f} {meters} eta: {eta} batch_cost: {btime} data_cost: {dtime} ips:
{ips:.4f} images/s'` with meters as `loss: 1.23 loss_cls: 0.4`. PaddleNLP's examples print
`global step {}, epoch: {}, batch: {}, loss: {:.5f}, speed: {:.2f} step/s`.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.progress._entry import entry

register(
    entry("paddle.progbar", "PaddlePaddle", "progress",
          "PaddlePaddle/Paddle release/2.5 python/paddle/hapi/callbacks.py (ProgBarLogger)",
          "'step %d/%d' + ' - %s: %s' % (k, v) ... + ' - %dms/step'",
          r"^step (?P<batch>\d+)(?:/\d+)? - (?P<fields>.*\bloss: .*)$",
          ("step %d/%d" % (10, 100) + "".join(" - %s: %s" % kv for kv in (("loss", "2.3456"), ("acc", "0.5012")))
           + " - %dms/step" % 12,),
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
          "PaddlePaddle/PaddleNLP examples (run_pretrain.py, run_glue.py)",
          '"global step %d, epoch: %d, batch: %d, loss: %f, speed: %.2f step/s"',
          r"\bglobal step (?P<step>\d+), epoch: (?P<epoch>\d+), batch: (?P<batch>\d+), loss: (?P<loss>\S+?),",
          ("global step %d, epoch: %d, batch: %d, loss: %f, speed: %.2f step/s" % (1200, 1, 200, 2.345, 4.2),),
          ("global step",)),
)
