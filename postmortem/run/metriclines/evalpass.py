"""An eval pass announced in words, whose rows count their own batches from 0.

Custom trainers print a line that says an eval starts, with no values, then the eval's rows in
the training rows' own shape, their counter the eval's batch (InterDigitalInc/PccAI
pccai/pipelines/train.py: `logger.log.info('Validation at epoch %d' % epoch)`, then
`validate_one_epoch`'s '    batch count: %d/%d, iter: %d, ' % (batch_id, len_data, batch_id)).
Read as training rows, the counter back to 0 is a relaunch. A counter back below the last
training row's, on the row right after such a line, is the eval's: those rows (while they
follow one another, counting up) are moved out of the steps. A counter that goes on after
the words, or goes back with no such line before it, is left as it is.
"""

from __future__ import annotations

import re

import numpy as np

from postmortem.run.metriclines.steps import STEP_KINDS

# A line of words only that announces an eval (`Validation at epoch 5`, `Evaluating...`,
# `Start testing`): the words first, an epoch / step number at most, no value
EVAL_SAID = re.compile(r"^\s*(?:(?:start(?:ing)?|begin(?:ning)?|running|run)\s+)?"
                       r"(?:validation|validating|evaluation|evaluating|eval|testing|test)\b"
                       r"(?:\s+(?:at|on|for|after|of)\s+(?:epoch|step|iter(?:ation)?)\s*\d+)?\s*[.:!]*\s*$",
                       re.IGNORECASE)
_NEAR = 2           # the eval's first row on the next line or the one after (a blank line between)


def eval_masks(groups, said: np.ndarray) -> list[np.ndarray | None]:
    """Per group, the rows that are an announced eval's (None: none): rows of one group on
    lines that follow one another from the line after the announcement (`said`, line numbers),
    the counter back below the last training row's before it and counting up from there."""
    out: list[np.ndarray | None] = [None] * len(groups)
    if not len(said):
        return out
    line, count, owner, at = [], [], [], []
    for k, g in enumerate(groups):
        name = next((c for c in STEP_KINDS if c in g.counters), None)
        if name is None or not g.values or g.parsed.stream in ("val", "test", "summary"):
            continue
        line.append(g.rows)
        count.append(np.asarray(g.counters[name], dtype=np.float64))
        owner.append(np.full(len(g.rows), k))
        at.append(np.arange(len(g.rows)))
    if not line:
        return out
    rows, counts = np.concatenate(line), np.concatenate(count)
    owners, ats = np.concatenate(owner), np.concatenate(at)
    srt = np.argsort(rows, kind="stable")
    rows, counts, owners, ats = rows[srt], counts[srt], owners[srt], ats[srt]
    for a in np.sort(said):
        i = int(np.searchsorted(rows, a, side="right"))
        if i == 0 or i >= len(rows) or rows[i] - a > _NEAR or not counts[i] < counts[i - 1]:
            continue
        j = i
        while (j + 1 < len(rows) and owners[j + 1] == owners[i] and rows[j + 1] - rows[j] <= _NEAR
               and counts[i] <= counts[j] <= counts[j + 1] < counts[i - 1]):
            j += 1
        for r in range(i, j + 1):
            k = int(owners[r])
            mask = out[k]
            if mask is None:
                mask = out[k] = np.zeros(len(groups[k].rows), dtype=bool)
            mask[ats[r]] = True
    return out
