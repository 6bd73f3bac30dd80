"""WeNet's checkpoint load: weights (and, from v3, the step and epoch in its yaml) loaded at
the start of a run that goes on from them (`--checkpoint`).

Read from wenet-e2e/wenet v1.0.0 .. v2.2.1 wenet/utils/checkpoint.py (`load_checkpoint`):
`logging.info('Checkpoint: loading from checkpoint %s for GPU' % path)` (`for CPU` without a
GPU); v3.0.0 .. v3.1.0 `logging.info('Checkpoint: loading from checkpoint %s' % path)`; master
(0154699) `logging.info('[Rank {}] Checkpoint: loading from checkpoint {}'.format(rank, path))`.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("wenet.load", "WeNet", "checkpoint",
          "wenet-e2e/wenet v2.2.1 / v3.1.0 / master (0154699) wenet/utils/checkpoint.py (load_checkpoint)",
          "logging.info('Checkpoint: loading from checkpoint %s for GPU' % path)  |  v3: "
          "logging.info('Checkpoint: loading from checkpoint %s' % path)  |  master: "
          "logging.info('[Rank {}] Checkpoint: loading from checkpoint {}'.format(rank, path))",
          r"Checkpoint: loading from checkpoint (?P<path>\S+)",
          ("Checkpoint: loading from checkpoint %s for GPU" % "exp/conformer/9.pt",
           "Checkpoint: loading from checkpoint %s" % "exp/conformer/avg_10.pt",
           "[Rank {}] Checkpoint: loading from checkpoint {}".format(0, "exp/conformer/epoch_9.pt")),
          ("Checkpoint: loading",)),
)
