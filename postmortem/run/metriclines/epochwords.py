"""An epoch and the batch within it said in words on one line, and epoch-summary counters.

The general reading (`pairs._EPOCH_BATCH`) wants the batch's `i/N` right after the epoch;
these lines put a word (`batch`, `Batch`, `Step`) or other values between them, or count
the epoch's progress in a percent. Read from the frameworks' format strings:

- icefall (k2-fsa/icefall egs/*/ASR/*/train.py, 2021-2025 recipes; lhotse-speech/vall-e v0.4.0
  copies it): f"Epoch {params.cur_epoch}, batch {batch_idx}, " then `loss[...]`; newer recipes
  add f"global_batch_idx: {params.batch_idx_train}, " (the run's own counter: the step).
- PPASR (yeyupiaoling/PPASR train.py, 2021): 'Train epoch: %d, batch: %d/%d, loss: %f, ...'.
- monodepth2 (nianticlabs/monodepth2 trainer.py `log_time`): "epoch {:>3} | batch {:>6} |
  examples/s: {:5.1f} | loss: {:.5f} | ..."; Lite-Mono adds `lr` and `lr_p` between them.
- MXNet Speedometer (apache/mxnet 0.9 python/mxnet/callback.py): 'Epoch[%d] Batch [%d]\\tSpeed:
  %.2f samples/sec\\tTrain-%s=%f'; 1.x prints 'Epoch[%d] Batch [%d-%d]\\tSpeed: ...' (the batch
  range since the last line: the later one is the batch).
- PyTorch-GAN (eriklindernoren/PyTorch-GAN implementations/*.py, GracoNet): "[Epoch %d/%d]
  [Batch %d/%d] [D loss: %f] [G loss: %f]".
- PaddleSlim 2.x demos: "Total iter: {}, epoch: {}, batch: {}, loss: {}".
- mindyolo (mindspore-lab/mindyolo mindyolo/utils/trainer_factory.py, 0.2-0.5): f"Epoch {cur_epoch}/
  {epochs}, Step {cur_step}/{self.steps_per_epoch}, " + `imgsize ..., loss: ...` or `step time: ...`
  (the `/N` is the epoch's length: a constant `Step 4/4` is each epoch's last step).
- "Epoch {} complete [{:.0f}%]\\tLoss: {:.6f}" (MUSIC-AVQA engine.py): a percent of the epoch.
- ESPnet2's reporter (espnet/espnet espnet2/train/reporter.py `log_message`, v0.9.0 to
  v202402): f"{self.epoch}epoch:{key}:{start}-{end}batch: " + the means: the epoch and the
  last batch of the range.
- torch-rnn (jcjohnson/torch-rnn train.lua): 'Epoch %.2f / %d, i = %d / %d, loss = %f': `i`
  counts the run's iterations (a fractional epoch beside it).
- pytorch-kaldi (mravanelli/pytorch-kaldi run_exp.py, `res.res`): "ep=%s tr=%s loss=%s err=%s
  " + the validation's: one line per epoch.

The batch without `/N` is a counter of kind `batch` (the last in `steps.STEP_KINDS`): the
step where the log shows one epoch, epoch x N + i where it starts again at an epoch.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from postmortem.run.metriclines.steps import STEP_KINDS

if TYPE_CHECKING:
    from postmortem.run.metriclines.pairs import Parsed

# (possessive blanks: a long run of them is crossed once)
_BATCH = re.compile(r"(?<![\w.])batch\b\s*+[:=]?\s*+\[?\s*+(?:\d+\s*+-\s*+)?(\d+)(?!\d|\.\d)(?:\s*+/\s*+(\d+)(?!\d))?",
                    re.I)
_GLOBAL_BATCH = re.compile(r"\bglobal_batch_idx\s*[:=]\s*(\d+)(?!\d|\.\d)")
_ESPNET2 = re.compile(r"(?<![\w.])(\d+)epoch:\w+:\d+-(\d+)batch:")
_EP = re.compile(r"^\s*ep=(\d+)\s")
_PERCENT = re.compile(r"[\[(]\s*(\d{1,3})\s*%\s*[\])]")
_OF_N = re.compile(r"\s*+/\s*+(\d+)(?!\d)")
_TORCH_RNN = re.compile(r"\bEpoch \d+\.\d+ / \d+, i = (\d+) / \d+,")
_EPOCH_OF = re.compile(r"\bepoch\s*+[:=]?\s*+\[?\s*+(\d+)\s*+/\s*+(\d+)(?!\d)", re.I)


def epoch_words(text: str, out: Parsed, taken: list[tuple[int, int]]) -> None:
    """The batch (or percent) said after the line's epoch; ESPnet2's and pytorch-kaldi's
    epoch counters; the `/N` of a step counter on an epoch's line (the epoch's length)."""
    m = _GLOBAL_BATCH.search(text)
    if m and "global_step" not in out.counters:
        out.counters["global_step"] = m.span(1)
        taken.append(m.span())
    m = _TORCH_RNN.search(text)
    if m and not out.counters:
        out.counters["iteration"] = m.span(1)
        taken.append(m.span())
    if out.epoch is None:
        _summary_epoch(text, out, taken)
        return
    if out.batch is None:
        _batch_after(text, out, taken)
    kind = out.step_kind
    if kind is not None and kind != "batch" and out.period is None and out.counters[kind][0] > out.epoch[1]:
        t = _OF_N.match(text, out.counters[kind][1])
        if t and int(t.group(1)) > 0:
            out.period = t.span(1)          # `Epoch 36/300, Step 4/4`: 4 steps an epoch
    if out.epoch_base is None:
        e = _EPOCH_OF.search(text)
        if e and e.group(1) == e.group(2) and e.group(1) != "0":
            out.epoch_base = 1              # `[Epoch 11/11]`: the last epoch is numbered E
    return


def _batch_after(text: str, out: Parsed, taken: list[tuple[int, int]]) -> None:
    assert out.epoch is not None
    m = _BATCH.search(text, out.epoch[1])
    if m:
        if any(a <= m.start(1) < b for a, b in taken):
            return
        if m.group(2):
            out.batch = (m.span(1), m.span(2))
        elif not any(k in out.counters for k in STEP_KINDS):
            out.counters["batch"] = m.span(1)
        taken.append(m.span())
        return
    if not out.counters:
        p = _PERCENT.search(text, out.epoch[1])
        if p:
            out.percent = p.span(1)
            taken.append(p.span())


def _summary_epoch(text: str, out: Parsed, taken: list[tuple[int, int]]) -> None:
    m = _ESPNET2.search(text)
    if m:
        out.epoch, out.epoch_base = m.span(1), 1        # ESPnet2 counts epochs from 1
        if not any(k in out.counters for k in STEP_KINDS):
            out.counters["batch"] = m.span(2)
        taken.append(m.span())
        return
    m = _EP.match(text)
    if m:
        out.epoch = m.span(1)
        taken.append(m.span())
