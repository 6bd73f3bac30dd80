"""JAX trainers: MaxText's metric logger and levanter's progress bar.

MaxText (AI-Hypercomputer/maxtext MaxText/train.py `write_metrics_to_tensorboard`, 2024; later
MaxText/metric_logger.py): `max_logging.log(f"completed step: {step}, seconds: {...:.3f}, TFLOP/s/device:
{...:.3f}, Tokens/s/device: {...:.3f}, total_weights: {...}, loss: {...:.3f}")`. levanter
(stanford-crfm/levanter releases/levanter/v1.1 src/levanter/callbacks.py `pbar_logger`; master 9263f81
src/levanter/callbacks/_metrics.py, the same through tqdm_loggable): `tqdm(desc="train",
total=num_train_steps)`, `pbar.update(step.next_step - pbar.n)`, `pbar.set_postfix(loss=...)`: the
bar's n is the step and the postfix holds the loss alone: `train:  12%|█▏ | 1200/10000
[12:00<1:28:00,  1.67it/s, loss=2.34]`. (tqdm_loggable's headless lines, once a minute, are not here.)
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import NUM, entry

register(
    entry("maxtext.step", "MaxText", "progress",
          "AI-Hypercomputer/maxtext MaxText/train.py (write_metrics); MaxText/metric_logger.py",
          'f"completed step: {step}, seconds: {...:.3f}, TFLOP/s/device: {...:.3f}, Tokens/s/device: {...:.3f}, '
          'total_weights: {...}, loss: {...:.3f}"',
          r"completed step: (?P<step>\d+)",
          ("I0801 10:00:00.000000 1 train.py:500] " + "completed step: {}, seconds: {:.3f}, TFLOP/s/device: {:.3f}, "
           "Tokens/s/device: {:.3f}, total_weights: {}, loss: {:.3f}".format(120, 1.234, 200.5, 25000.1, 393216,
                                                                            2.345),),
          ("completed step:",)),
    entry("levanter.pbar", "levanter", "progress",
          "stanford-crfm/levanter releases/levanter/v1.1 src/levanter/callbacks.py (pbar_logger); master 9263f81 "
          "src/levanter/callbacks/_metrics.py",
          "pbar = tqdm(desc='train', total=...); pbar.update(step.next_step - pbar.n); "
          "pbar.set_postfix(loss=jnp_to_python(step.loss))",
          r"^train:\s+\d+%\|.*\|\s*(?P<step>\d+)/\d+ \[.*\bloss=(?P<loss>" + NUM + r")",
          ("train:  12%|█▏        | 1200/10000 [12:00<1:28:00,  1.67it/s, loss=2.34]",),
          ("loss=",)),
)
