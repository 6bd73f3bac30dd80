"""Keras's Progbar (keras/utils/generic_utils.py in Keras 2, keras/src/utils/progbar.py in 3).

Keras 2: `'%d/%d [' + '=' * prog_width + '>' + '.' * ... + ']'` then ` - ETA: ` or
` - %ds %dms/step` and ` - %s: %.4f` per metric; Keras 3 draws the bar with box characters
(`━━━━`). Each frame ends in `\\r` until the epoch's last batch; `Epoch 3/10` opens each epoch.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.progress._entry import entry

register(
    entry("keras.progbar", "Keras", "progress",
          "keras-team/keras v2.13 keras/utils/generic_utils.py (Progbar.update); v3.3 keras/src/utils/progbar.py",
          "'%d/%d [' + bar + ']' + ' - %ds %dms/step' + ' - %s: %.4f' % (k, avg)",
          r"^\s*(?P<batch>\d+)/\d+ (?:\[[=>.]+\]|[\u2500-\u257f]+) .*- (?P<fields>\w+: .*)$",
          ("%d/%d [" % (100, 100) + "=" * 30 + "]" + " - 2s 20ms/step" + " - %s: %.4f" % ("loss", 0.5123)
           + " - %s: %.4f" % ("accuracy", 0.8123),
           "%d/%d " % (100, 100) + "━" * 20 + " 2s 20ms/step - accuracy: 0.8123 - loss: 0.5123"),
          ("/",)),
)
