"""WeTTS's text frontend trainer (polyphone and prosody): its train and CV lines.

wenet-e2e/wetts wetts/frontend/train.py (`train_or_cv`, read at 94d8508 2023-08, 9e06b0b and
ba8734f 2025-11, the same string in each): every `log_interval` batches
`"Epoch {} [{}] progress {}/{} loss {:.6f}".format(epoch, tag, batch, len(dataloader), loss.item())`
+ `" polyphone_loss {:.6f} polyphone_acc {:.6f}"` + `" prosody_loss {:.6f} prosody_acc {:.6f}"`,
tag `TRAIN` (the batch within the epoch: the step is e x N + i) or `CV` (the validation pass
after each epoch's training, its own batch counter); `main` prints `"Epoch {}/{}..."` first.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

_SOURCE = "wenet-e2e/wetts ba8734f (and 94d8508) wetts/frontend/train.py (train_or_cv)"
_FORMAT = ('"Epoch {} [{}] progress {}/{} loss {:.6f}".format(epoch, tag, batch, len(dataloader), loss.item()) '
           '+ " polyphone_loss {:.6f} polyphone_acc {:.6f}" + " prosody_loss {:.6f} prosody_acc {:.6f}"')


def _line(epoch: int, tag: str, batch: int, n: int, loss: float) -> str:
    logstr = "Epoch {} [{}] progress {}/{} loss {:.6f}".format(epoch, tag, batch, n, loss)
    logstr += " polyphone_loss {:.6f} polyphone_acc {:.6f}".format(loss * 0.7, 0.9)
    logstr += " prosody_loss {:.6f} prosody_acc {:.6f}".format(loss * 1.3, 0.75)
    return logstr


register(
    entry("wetts.train", "WeTTS", "progress", _SOURCE, _FORMAT,
          r"^Epoch (?P<epoch>\d+) \[TRAIN\] progress (?P<batch>\d+)/\d+ loss ",
          (_line(1, "TRAIN", 20, 2754, 0.610886),), ("[TRAIN] progress",)),
    entry("wetts.cv", "WeTTS", "eval", _SOURCE, _FORMAT,
          r"^Epoch \d+ \[CV\] progress \d+/\d+ loss ",
          (_line(0, "CV", 290, 341, 0.497509),), ("[CV] progress",)),
)
