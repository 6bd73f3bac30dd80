"""Chainer's and pytorch-pfn-extras' PrintReport: a fixed-width table under a header of names.

chainer/chainer v7.8.1 chainer/training/extensions/print_report.py (`PrintReport.__init__`,
`_print`; the same since v2) and pfnet/pytorch-pfn-extras v0.7 pytorch_pfn_extras/training/
extensions/print_report.py (`create_header_and_templates`, a copy): each entry's width is
`max(10, len(name))`; the header is `'  '.join('{:%d}' % w ...).format(*entries)`, a row
`'{:<%dg}  ' % w` of each value, and `' ' * (w + 2)` where the observation has no such entry
(the validation columns on a row without an evaluation). Each row is written after `\\033[J`
(erase below the cursor; not on Windows). The cells stand under their names: a row is read by
position (`metriclines.table.aligned`), its empty cells not logged. The step is `iteration`.
A value wider than its column (`{:<10g}` of -1.23457e+08) pushes the cells after it out of
place: such a row is not read.
"""

import re

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

# chainer/chainer examples/mnist/train_mnist.py's entries
ENTRIES = ["epoch", "iteration", "main/loss", "validation/main/loss", "main/accuracy", "elapsed_time"]
# the header: names two spaces apart or more, one of them the epoch or the iteration
HEADER = r"^(?=.*(?:^| )(?:epoch|iteration)(?: |$))[A-Za-z][\w/.@-]*(?: {2,}[A-Za-z][\w/.@-]*)+ *$"
_IS_HEADER = re.compile(HEADER)
_NAME = re.compile(r"\S+")


def header(entries: list[str]) -> str:
    """The header PrintReport prints for `entries` (its own expression)."""
    return "  ".join("{:%d}" % max(10, len(s)) for s in entries).format(*entries)


def row(entries: list[str], observation: dict[str, float]) -> str:
    """A row as `_print` writes it, after its `\\033[J`."""
    return "\033[J" + "".join(("{:<%dg}  " % max(10, len(e))).format(observation[e]) if e in observation
                              else " " * (max(10, len(e)) + 2) for e in entries)


register(
    entry("chainer.print_report", "Chainer", "progress",
          "chainer/chainer v7.8.1 chainer/training/extensions/print_report.py (PrintReport header); "
          "pfnet/pytorch-pfn-extras v0.7.0 pytorch_pfn_extras/training/extensions/print_report.py "
          "(create_header_and_templates)",
          "'  '.join(('{:%d}' % w for w in entry_widths)).format(*entries), w = max(10, len(s)); "
          "rows: '{:<%dg}  ' % w per value, ' ' * (w + 2) where none",
          HEADER,
          (header(ENTRIES),
           header(["iteration", "train/loss", "lr", "val/loss", "val/acc", "elapsed_time"]),
           header(["epoch", "main/loss", "validation/main/loss", "main/accuracy", "elapsed_time"])),
          ("epoch", "iteration")),
)


def is_print_report_header(line: str) -> bool:
    """The line is a PrintReport header: names each `max(10, len) + 2` wide, one of them the
    epoch or the iteration."""
    if "epoch" not in line and "iteration" not in line or not _IS_HEADER.search(line.strip()):
        return False
    names = [(m.group(), m.start()) for m in _NAME.finditer(line)]
    return all(b[1] - a[1] == max(10, len(a[0])) + 2 for a, b in zip(names, names[1:]))
