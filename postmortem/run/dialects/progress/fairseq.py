"""fairseq's progress bars (fairseq/logging/progress_bar.py) and fairseq2's metric log.

Read at facebookresearch/fairseq v0.9.0 (fairseq/progress_bar.py), v0.10.2 and v0.12.2
(fairseq/logging/progress_bar.py; fairseq_cli/train.py). `--log-format json`: `log` prints
`json.dumps(stats)` (`epoch`, `update`, then the stats: `loss`, `nll_loss`, `ppl`, `lr`, `gnorm`,
`loss_scale`, `num_updates`), from v0.10 through the logger renamed to the tag (`train_inner`),
before as a bare `print`; `print` (the epoch's end) prefixes each key with the tag (`valid_loss`).
`simple`: `'{}:  {:5d} / {:d} {}'.format(prefix, i, size, postfix)` with `key=value, ` pairs
(prefix `epoch 001`; `| epoch 001` in v0.9). `tqdm`: the bar's description is the prefix and its
postfix the same pairs. `simple` and `tqdm` print the epoch's end as `'{} | {}'.format(prefix,
postfix)`, pairs `key value | ` (`epoch 001 | loss 7.4 | ... | num_updates 1000`; valid adds
`valid on 'valid' subset`): averages over the epoch, logged at the last update's step again.
fairseq2: `LogMetricRecorder` (src/fairseq2/metrics/recorder.py in v0.2, metrics/recorders/_log.py
later) writes `{Title} Metrics (step {N}) - Loss: 2.34 | Grad Norm: 1.2 | Learning Rate: 1e-4`.
"""

import json

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

_FAIRSEQ = "facebookresearch/fairseq v0.12.2 fairseq/logging/progress_bar.py"
_PAIRS = ("loss=7.132, nll_loss=6.011, ppl=64.49, wps=12040.1, ups=2.1, wpb=3000, bsz=64, num_updates=100, "
          "lr=0.0005, gnorm=1.09, loss_scale=64, train_wall=30, wall=100")
_END = [("loss", "7.45"), ("nll_loss", "6.0"), ("ppl", "64"), ("wps", "12000"), ("num_updates", "1000"),
        ("lr", "0.0005"), ("gnorm", "1.1"), ("loss_scale", "64"), ("train_wall", "300"), ("wall", "310")]


def _pipes(stats):
    return " | ".join(key + " " + v.strip() for key, v in stats)     # BaseProgressBar._str_pipes


_STATS = {"epoch": 1, "update": 0.5, "loss": "7.132", "nll_loss": "6.011", "ppl": "64.49", "wps": "12040.1",
          "lr": "0.0005", "gnorm": "1.09", "loss_scale": "64", "num_updates": "200"}

register(
    entry("fairseq.json", "fairseq", "progress",
          _FAIRSEQ + " (JsonProgressBar.log, .print); v0.10.2 the same; fairseq_cli/train.py "
          "(progress.log(stats, tag='train_inner'), rename_logger)",
          "logger.info(json.dumps(stats))  # behind '| train_inner |', '| valid |', '| train |'",
          r"\|\s*(?P<stream>train_inner|valid|train)\s*\|\s*(?P<stats>\{[^{}]*\})\s*$",    # flat JSON: linear
          ("2021-03-01 10:00:00 | INFO | train_inner | " + json.dumps(_STATS),
           "2021-03-01 10:05:00 | INFO | valid | " + json.dumps({"epoch": 1, "valid_loss": "6.9",
                                                                 "valid_ppl": "119.4", "num_updates": "200"})),
          ("train", "valid")),
    entry("fairseq.json_v09", "fairseq", "progress",
          "facebookresearch/fairseq v0.9.0 fairseq/progress_bar.py (json_progress_bar.__iter__, .print: "
          "_format_stats, format_stat); train.py (progress.log(stats, tag='train'), progress.print(stats, "
          "tag='train' | subset), get_training_stats / get_valid_stats: stats['num_updates'])",
          "print(json.dumps(stats), flush=True)  # no logger, no tag; every stat a string ('{:g}', "
          "'{:.3f}'); print() prefixes each key with the tag: 'valid_loss', 'valid_num_updates'",
          # flat JSON, `epoch` first, then `update` (log) or the tagged keys (print): linear
          r'^\{"epoch": \d+, (?:"update": [\d.]+, |"(?P<tag>[a-z]\w*?_)(?=\w*": ))[^{}]*\}\s*$',
          (json.dumps({"epoch": 1, "update": 0.1, "loss": "7.132", "nll_loss": "6.011", "ppl": "64.49",
                       "wps": "12040", "lr": "0.0005", "gnorm": "1.09", "loss_scale": "64",
                       "num_updates": "100"}),
           json.dumps({"epoch": 1, "valid_loss": "6.9", "valid_nll_loss": "5.8", "valid_ppl": "55.71",
                       "valid_num_updates": "1000", "valid_best_loss": "6.9"}),
           json.dumps({"epoch": 1, "train_loss": "7.0", "train_nll_loss": "5.9", "train_ppl": "59.71",
                       "train_num_updates": "1000"})),
          ('{"epoch": ',)),
    entry("fairseq.simple", "fairseq", "progress",
          _FAIRSEQ + " (SimpleProgressBar.log); v0.10.2 the same; v0.9.0 fairseq/progress_bar.py (prefix '| epoch 001')",
          "'{}:  {:5d} / {:d} {}'.format(self.prefix, self.i + 1, self.size, postfix)  "
          "# postfix: ', '.join(key + '=' + stats[key].strip())",
          r"epoch \d+:\s+\d+\s*/\s*\d+\s+(?P<fields>(?=[^=\n]{0,200}=).*)$",
          ("2021-03-01 10:00:00 | INFO | train_inner | " + "{}:  {:5d} / {:d} {}".format("epoch 001", 100, 1234, _PAIRS),
           "{}:  {:5d} / {:d} {}".format("| epoch 001", 100, 1234, _PAIRS)),        # v0.9: print(), no logger
          ("epoch",)),
    entry("fairseq.tqdm", "fairseq", "progress", _FAIRSEQ + " (TqdmProgressBar: tqdm(iterable, self.prefix); "
          "log: self.tqdm.set_postfix(self._format_stats(stats)))",
          "tqdm desc 'epoch {:03d}', postfix key=value, ... (tqdm's own set_postfix format)",
          r"^\|? ?epoch \d+:\s+\d+%\|.*\|\s*(?P<batch>\d+)/\d+ \[[^\]]*?\bnum_updates=(?P<step>\d+)",
          ("epoch 001:  10%|\u2589         | 100/1000 [00:30<04:30,  3.30it/s, " + _PAIRS + "]",),
          ("num_updates=",)),
    entry("fairseq.summary", "fairseq", "eval", _FAIRSEQ + " (SimpleProgressBar.print, TqdmProgressBar.print); "
          "fairseq_cli/train.py progress.print(stats, tag='train' | subset)",
          "logger.info('{} | {}'.format(self.prefix, postfix))  # postfix ' | '.join(key + ' ' + value)",
          # the epoch's averages (train) and the validation (valid): neither is one update's value
          r"\bepoch (?P<epoch>\d+) \| (?:valid on '[^']*' subset \| )?loss (?P<loss>[-+\w.]+) \|",
          ("2021-03-01 10:05:01 | INFO | train | " + "{} | {}".format("epoch 001", _pipes(_END)),
           "2021-03-01 10:05:00 | INFO | valid | " + "{} | {}".format("epoch 001 | valid on 'valid' subset",
                                                                      _pipes(_END[:5])),
           "{} | {}".format("| epoch 001", _pipes(_END))),                  # v0.9
          ("epoch",)),
    entry("fairseq2.metrics", "fairseq2", "progress",
          "facebookresearch/fairseq2 v0.2 src/fairseq2/metrics/recorder.py; v0.4 "
          "src/fairseq2/metrics/recorders/_log.py (LogMetricRecorder.record_metrics)",
          "self.logger.info(f'{run} Metrics (step {step_nr}) - {s}')  |  "
          "m = f'{title} Metrics (step {step_nr})' [+ f' - {subsection}']; log.info('{} - {}', m, s)",
          r"\b[A-Z]\w* Metrics \(step (?P<step>\d+)\)(?: - [\w/.-]+)? - (?P<fields>.*)$",
          ("Train Metrics (step 100) - Loss: 2.345 | Grad Norm: 1.21 | Learning Rate: 3e-05 | Elapsed Time: 10s",
           "Validation Metrics (step 100) - Loss: 2.401 | Perplexity: 11.03"),
          ("Metrics (step",)),
)
