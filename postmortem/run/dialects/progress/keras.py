"""Keras's Progbar (keras/utils/generic_utils.py in Keras 2, keras/src/utils/progbar.py in 3).

Read at keras-team/keras 015af23 (Keras 3, keras/src/utils/progbar.py) and Keras 2's
generic_utils.Progbar (as vendored verbatim by other projects). verbose=1, Keras 2:
`("%" + str(numdigits) + "d/%d [") % (current, target)` + `=`/`>`/`.` + `]`, then ` - ETA: {eta}` or
` - {elapsed:.0f}s` + ` {ms:.0f}ms/step`, then ` - {k}: {avg:.4f}` (`.4e` when |avg| <= 1e-3) per metric.
Keras 3: `\x1b[1m{current}/{target}\x1b[0m ` + `━` * width (ANSI colours), ` {eta}` or ` {elapsed:.0f}s`,
` {ms:.0f}ms/step`, then the metrics. verbose=2 (one line an epoch, no bar): Keras 2 `{count} - {s:.0f}s -
{k}: {v:.4f} ... - {s:.0f}s/epoch - {ms:.0f}ms/step`; Keras 3 `{count} - {s:.0f}s - {ms:.0f}ms/step -
{k}: {v:.4f}`. Each verbose=1 frame ends in `\\r` until the epoch's last batch; `Epoch 3/10` opens
each epoch (the fit loop's own print).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("keras.progbar", "Keras", "progress",
          "keras-team/keras 015af23 (3.x) keras/src/utils/progbar.py (Progbar.update); Keras 2 "
          "keras/utils/generic_utils.py (Progbar.update)",
          "('%' + str(numdigits) + 'd/%d [') % (current, target) + bar + ']' + ' - %.0fs' + ' %.0fms/step' "
          "+ f' - {k}: {avg:.4f}'  |  verbose=2: count + f' - {now - start:.0f}s' + f' - {k}: {avg:.4f}'",
          r"^\s*(?P<batch>\d+)/\d+ (?:\[[=>.]+\]|[\u2500-\u257f]+|- \d+s) .*- (?P<fields>\w+: .*)$",
          ("%d/%d [" % (100, 100) + "=" * 30 + "]" + " - 2s 20ms/step" + " - %s: %.4f" % ("loss", 0.5123)
           + " - %s: %.4f" % ("accuracy", 0.8123),
           "%d/%d " % (100, 100) + "━" * 20 + " 2s 20ms/step - accuracy: 0.8123 - loss: 0.5123",
           "%3d/%d [" % (45, 100) + "=" * 12 + ">" + "." * 17 + "]" + " - ETA: 1s" + " - %s: %.4f" % ("loss", 0.6123),
           # verbose=2: Keras 2, then Keras 3
           "%d/%d" % (100, 100) + " - 2s" + " - %s: %.4f" % ("loss", 0.5123) + " - 2s/epoch - 20ms/step",
           "%d/%d" % (100, 100) + " - 2s - 20ms/step" + " - %s: %.4f" % ("loss", 0.5123)),
          ("/",)),
)
