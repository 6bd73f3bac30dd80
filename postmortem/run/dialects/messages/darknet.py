"""Darknet's weights load: an event on the first step after it, no segment of its own.

pjreddie/darknet master src/parser.c `load_weights_upto`: `fprintf(stderr, "Loading weights
from %s...", filename)` then `Done!` (on the same line); AlexeyAB/darknet src/parser.c the
same, then `\\n seen 64, trained: %.0f K-images (%.0f Kilo-batches_64) \\n`; hank-ai/darknet
v6.0 src-lib/weights.cpp `"Loading weights from \\"" << filename << "\\"" << " (" << size << ")"`.
A launch prints it before its first step (`darknet detector train data cfg weights`); a
relaunch into the same log is told by its launch line (dialects/progress/darknet.py `LAUNCH`).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("darknet.load_weights", "Darknet", "checkpoint",
          "pjreddie/darknet f6afaabc src/parser.c (load_weights_upto); AlexeyAB/darknet 59596d78 "
          "src/parser.c; hank-ai/darknet v6.0 src-lib/weights.cpp",
          'fprintf(stderr, "Loading weights from %s...", filename)',
          r"\bLoading weights from (?P<path>\"[^\"]+\"|\S+?)(?:\.\.\.|\s|$)",
          ("Loading weights from backup/yolov3-voc.backup...Done!",
           "Loading weights from darknet53.conv.74...",
           'Loading weights from "/data/backup/animals_last.weights" (246.3 MiB)'),
          ("Loading weights from",)),
)
