"""WeNet's train and CV lines: `Batch {epoch}/{batch}`, the epoch first (not a batch of N).

Read from wenet-e2e/wenet v1.0.0 .. v2.2.1 wenet/utils/executor.py (`Executor.train`):
`log_str = 'TRAIN Batch {}/{} loss {:.6f} '.format(epoch, batch_idx, loss.item() * accum_grad)`,
then `'loss_att {:.6f} '`, `'loss_ctc {:.6f} '` (v2.2: `'{} {:.6f} '.format(name, value.item())`
for each part), `'lr {:.8f} rank {}'.format(lr, rank)`; `Executor.cv`: `'CV Batch {}/{} loss
{:.6f} '` ... `'history loss {:.6f}'` (v2: `' rank {}'`). v3.0.0 .. v3.1.0 and master
wenet/utils/train_utils.py (`log_per_step`): `'{} | '.format(tag)` + `'steps/sec {:.3f}| '` +
`'Batch {}/{} loss {:.6f} '.format(epoch, batch_idx + 1, ...)` + each part + (TRAIN) `'lr {}
grad_norm {:.6f} rank {}'` (v3.0: `'lr {:.8f} grad_norm ...'`; master `lrs_to_str`: `{:.4e}`
each); the tag is TRAIN or CV. Each behind wenet/bin/train.py's `logging.basicConfig(level=
logging.DEBUG, format='%(asctime)s %(levelname)s %(message)s')`. The batch counts from 0 again
at every epoch (master, with `save_interval`: `(step + 1) * accum_grad`, the run's count).
A non-finite grad norm skips the update without a word (`if torch.isfinite(grad_norm):
optimizer.step()`); the loss printed is NaN then.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

_V2 = "wenet-e2e/wenet v2.2.1 wenet/utils/executor.py (Executor.train / Executor.cv); v1.0.0 the same"
_V3 = "wenet-e2e/wenet v3.1.0 wenet/utils/train_utils.py (log_per_step); master (0154699) lrs_to_str"

register(
    entry("wenet.train", "WeNet", "progress", _V2 + "; " + _V3,
          "'TRAIN Batch {}/{} loss {:.6f} '.format(epoch, batch_idx, loss) + 'loss_att {:.6f} ' + "
          "'loss_ctc {:.6f} ' + 'lr {:.8f} rank {}'  |  v3: '{} | '.format(tag) + 'steps/sec {:.3f}| ' + "
          "'Batch {}/{} loss {:.6f} ' + ... + 'lr {} grad_norm {:.6f} rank {}'",
          r"\bTRAIN (?:\| (?:steps/sec [\d.]+\| ?)?)?Batch (?P<epoch>\d+)/(?P<step>\d+) loss ",
          ("2021-03-01 10:00:00,123 DEBUG " + 'TRAIN Batch {}/{} loss {:.6f} '.format(3, 400, 41.234567)
           + 'loss_att {:.6f} '.format(35.1) + 'loss_ctc {:.6f} '.format(55.3) + 'lr {:.8f} rank {}'.format(4e-4, 0),
           "2024-01-01 10:00:00,123 DEBUG " + 'TRAIN | ' + 'steps/sec {:.3f}| '.format(2.5)
           + 'Batch {}/{} loss {:.6f} '.format(0, 1000, 80.5) + '{} {:.6f} '.format("loss_ctc", 95.2)
           + 'lr {} grad_norm {:.6f} rank {}'.format("{:.4e}".format(1e-3), 12.3, 0)),
          ("Batch",)),
    entry("wenet.cv", "WeNet", "eval", _V2 + "; " + _V3,
          "'CV Batch {}/{} loss {:.6f} ' + 'loss_att {:.6f} ' + 'loss_ctc {:.6f} ' + 'history loss {:.6f}' + "
          "' rank {}'  |  v3: 'CV | ' + 'steps/sec {:.3f}| ' + 'Batch {}/{} loss {:.6f} ' + ...",
          r"\bCV (?:\| (?:steps/sec [\d.]+\| ?)?)?Batch \d+/\d+ loss ",
          ("2021-03-01 10:30:00,123 DEBUG " + 'CV Batch {}/{} loss {:.6f} '.format(3, 100, 38.5)
           + 'loss_att {:.6f} '.format(33.0) + 'loss_ctc {:.6f} '.format(51.2)
           + 'history loss {:.6f}'.format(39.1) + ' rank {}'.format(0),),
          ("Batch",)),
)
