"""Marian NMT's display line and its validation lines, release by release.

Read from marian-nmt/marian-dev (the public marian-nmt/marian mirrors its releases) at
v1.0.0 .. 1.12.0, src/training/scheduler.h (`Scheduler::update`, `validate`, `formatLoss`).
Every line goes through spdlog with the pattern `[%Y-%m-%d %T] %v` (`[... mpi:N]` under MPI;
src/common/logging.cpp), the validator's with `[valid] ` in front of the text.

- v1.0.0-1.4.0: `Ep. {} : Up. {} : Sen. {} : Cost {:.2f} : Time {} : {:.2f} words/s[ : L.r.
  {:.4e}]`, the time `timer.format(2, "%ws")` (`12.34s`), the sentences a bare count.
- 1.5.0-1.7.0: `--disp-label-counts` shows the cost `{:.8f} * {labels} after {labels total}`
  (`utils::withCommas`); 1.7.0 writes the time `{:.2f}s`.
- 1.8.0-1.10.0: `formatLoss` writes the cost (`Cost ` then the value `std::fixed`, 8 digits;
  `ce-sum` with label counts adds ` * N[ @ batch labels] after T`); `Ep.` is the logical epoch
  from 1.10 (`{:.Nf}`, an integer for plain epochs).
- 1.11.0-1.12.0: `gNorm {:.4f}` (the running mean of the gradient norm) after the speed.
The cost is the display window's mean (`costSum / costCount`): the loss. A NaN prints `nan` /
`-nan` (glibc's `std::fixed`, fmt's `{:.2f}`).

Validation: v1.0.0-1.4.0 `[valid] {update} : {validator} : {value} : new best` / `stalled {} times`;
1.5.0-1.7.0 `[valid] Ep. {} : Up. {} : {} : {} : new best` / `stalled {} times`; 1.8.0+ adds
` (last best: {})`.

The cost scaling's first factor, at every launch (1.11.0, 1.12.0 src/training/graph_group.cpp
`GraphGroup::GraphGroup`; `factor: 2^{} = {}` in ba91b391 and the fp16 branch before it): the
loss scale the updates start with, before any message changes it (messages/marian.py).
The reader (run/textlogs.py `_marian`) reads these groups.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import NUM, entry, scale

_REPO = "marian-nmt/marian-dev"
_HEAD = (r"\bEp\. (?P<epoch>\d+(?:\.\d+)?) : Up\. (?P<step>\d+) : Sen\. (?P<samples>\d[\d,]*) : "
         r"Cost (?P<loss>" + NUM + r")")
# `{:.2f}`: two digits and no label counts; a NaN in any runtime's spelling (MSVC builds too)
_COST2 = r"(?P<loss>[-+]?\d+\.\d\d(?= : Time)|(?![-+]?\d+\.\d+ )" + NUM + r")(?= : Time)"
_LABELS = r"(?: \* (?P<labels>\d[\d,]*)(?: @ (?P<batch_labels>\d[\d,]*))? after (?P<labels_total>\d[\d,]*))?"
_TAIL = r" : Time (?P<time>[\d.]+)s : (?P<wps>" + NUM + r") words/s"
_LR = r"(?: : L\.r\. (?P<lr>" + NUM + r"))?"
_GNORM = r" : gNorm (?P<grad_norm>" + NUM + r")"

V1 = "Ep. {} : Up. {} : Sen. {} : Cost {:.2f} : Time {} : {:.2f} words/s : L.r. {:.4e}"
V15 = "Ep. {} : Up. {} : Sen. {} : Cost {:.8f} * {} after {} : Time {:.2f}s : {:.2f} words/s : L.r. {:.4e}"
V18 = "Ep. {} : Up. {} : Sen. {} : {} : Time {:.2f}s : {:.2f} words/s : L.r. {:.4e}"
V111 = "Ep. {} : Up. {} : Sen. {} : {} : Time {:.2f}s : {:.2f} words/s : gNorm {:.4f} : L.r. {:.4e}"
VALID_V1 = "{} : {} : {} : new best"
VALID = "Ep. {} : Up. {} : {} : {} : stalled {} times (last best: {})"

_TS = "[2019-03-05 10:12:14] "


def _cost(value: float, labels: int, batch: int | None, total: int) -> str:
    """`formatLoss` for `ce-sum` with `--disp-label-counts` (1.8.0+): `Cost v * n[ @ b] after t`."""
    at = f" @ {batch:,}" if batch is not None else ""
    return f"Cost {value:.8f} * {labels:,}{at} after {total:,}"


register(
    entry("marian.update_v1", "Marian", "progress",
          f"{_REPO} v1.0.0, 1.1.0 .. 1.4.0 src/training/scheduler.h (Scheduler::update); 1.5.0-1.7.0 "
          f"without --disp-label-counts",
          'LOG(info, "' + V1 + '", state_->epochs, state_->batches, state_->samples, '
          'state_->costSum / state_->samplesDisp, timer.format(2, "%ws"), ..., state_->eta)',
          _HEAD.replace("(?P<loss>" + NUM + ")", _COST2) + _TAIL + _LR,
          (_TS + V1.format(1, 500, 64000, 145.27, "35.46s", 8012.33, 3e-4),
           _TS + V1.rsplit(" : L.r.", 1)[0].format(2, 10000, 1280000, float("nan"), "35.12s", 8102.5)),
          ("Up. ",)),
    entry("marian.update_labels", "Marian", "progress",
          f"{_REPO} 1.5.0, 1.6.0 (Time {{}}), 1.7.0 src/training/scheduler.h (Scheduler::update, "
          f"dispLabelCounts)",
          'LOG(info, "' + V15 + '", state_->epochs, state_->batches, utils::withCommas(state_->samplesEpoch), '
          'state_->costSum / state_->costCount, utils::withCommas(state_->costCount), '
          'utils::withCommas(state_->labelsTotal), timer_.elapsed(), ..., state_->eta)',
          _HEAD + _LABELS + _TAIL + _LR,
          (_TS + V15.format(1, 1000, "1,280,000", 4.93871212, "3,305,233", "33,052,330", 71.52, 46213.37, 3e-4),),
          ("Up. ",)),
    entry("marian.update", "Marian", "progress",
          f"{_REPO} 1.8.0, 1.9.0, 1.10.0 src/training/scheduler.h (Scheduler::update, formatLoss)",
          'LOG(info, "' + V18 + '", formatLogicalEpoch(), state_->batches, '
          'utils::withCommas(state_->samplesEpoch), formatLoss(lossType, dispLabelCounts, batchLabels, '
          'state_), timer_.elapsed(), state_->wordsDisp / timer_.elapsed(), state_->eta)',
          _HEAD + _LABELS + _TAIL + _LR,
          (_TS + V18.format(1, 1000, "1,280,000", _cost(4.93871212, 3305233, 3412, 33052330), 71.52, 46213.37,
                            3e-4),
           _TS + V18.format("0.250", 2000, "2,560,000", f"Cost {3.1415:.8f}", 70.11, 47001.2, 3e-4),
           "[2021-02-01 10:00:00 mpi:0] " + V18.rsplit(" : L.r.", 1)[0].format(
               3, 3000, "3,840,000", f"Cost {float('nan'):.8f}", 70.0, 47000.0)),
          ("Up. ",)),
    entry("marian.update_gnorm", "Marian", "progress",
          f"{_REPO} 1.11.0, 1.12.0 src/training/scheduler.h (Scheduler::update, formatLoss; "
          f"state_->gradientNormAvg)",
          'LOG(info, "' + V111 + '", formatLogicalEpoch(), state_->batches, '
          'utils::withCommas(state_->samplesEpoch), formatLoss(...), timer_.elapsed(), '
          'state_->wordsDisp / timer_.elapsed(), state_->gradientNormAvg, state_->eta)',
          _HEAD + _LABELS + _TAIL + _GNORM + _LR,
          (_TS + V111.format(1, 1000, "1,280,000", _cost(4.93871212, 3305233, 3412, 33052330), 71.52,
                             46213.37, 1.2345, 3e-4),
           _TS + V111.rsplit(" : L.r.", 1)[0].format(1, 2000, "2,560,000", f"Cost {2.71828:.8f}", 70.2,
                                                      46800.1, 0.8123)),
          ("gNorm ",)),
    entry("marian.valid_v1", "Marian", "eval",
          f"{_REPO} v1.0.0 .. 1.4.0 src/training/scheduler.h (Scheduler::validate, LOG_VALID)",
          'LOG_VALID(info, "' + VALID_V1 + '", state_->batches, validator->type(), value)  '
          '|  "{} : {} : {} : stalled {} times"',
          r"\[valid\] (?P<step>\d+) : (?P<metric>[\w-]+) : (?P<value>" + NUM
          + r") : (?:new best|stalled (?P<stalled>\d+) times)",
          (_TS + "[valid] " + VALID_V1.format(5000, "cross-entropy", 152.631),
           _TS + "[valid] " + "{} : {} : {} : stalled {} times".format(10000, "translation", 21.43, 2)),
          ("[valid]",)),
    entry("marian.valid", "Marian", "eval",
          f"{_REPO} 1.5.0 .. 1.7.0 (no last best), 1.8.0 .. 1.12.0 src/training/scheduler.h "
          f"(Scheduler::validate, LOG_VALID)",
          'LOG_VALID(info, "' + VALID + '", ..., state_->batches, validator->type(), value, '
          'validator->stalled(), validator->lastBest())  |  "Ep. {} : Up. {} : {} : {} : new best"',
          r"\[valid\] Ep\. (?P<epoch>\d+(?:\.\d+)?) : Up\. (?P<step>\d+) : (?P<metric>[\w-]+) : (?P<value>"
          + NUM + r") : (?:new best|stalled (?P<stalled>\d+) times)",
          (_TS + "[valid] " + "Ep. {} : Up. {} : {} : {} : new best".format(1, 5000, "ce-mean-words", 2.40145),
           _TS + "[valid] " + VALID.format(2, 10000, "perplexity", 11.8123, 1, 11.0213),
           _TS + "[valid] " + "Ep. {} : Up. {} : {} : {} : stalled {} times".format(1, 6000, "bleu-detok", 27.3, 3)),
          ("[valid]",)),
    entry("marian.cost_scaling_start", "Marian", "progress",
          f"{_REPO} 1.11.0, 1.12.0 src/training/graph_group.cpp (GraphGroup::GraphGroup, LOG_ONCE); "
          f"ba91b391 (2021-01) and the fp16 branch (c91243e6, 2019-02): `factor: 2^{{}} = {{}}`",
          'LOG_ONCE(info, "Training with cost scaling - factor: {}, frequency: {}, multiplier: {}, minimum: {}", '
          'costScalingFactor_, costScalingFreq_, costScalingMultiplier_, costScalingFactorMinimum_)',
          r"\bTraining with cost scaling - factor: (?:2\^\S+ = )?" + scale("loss_scale")
          + r"(?:, frequency: (?P<freq>\d+), multiplier: (?P<multiplier>[\d.]+))?",
          (_TS + "Training with cost scaling - factor: 256, frequency: 1000, multiplier: 2, minimum: 1",
           _TS + "Training with cost scaling - factor: 2^15 = 32768, frequency: 2000, multiplier: 2, tolerance: "
           "0.05, range: 10, minimum: 1"),
          ("Training with cost scaling",)),
)
