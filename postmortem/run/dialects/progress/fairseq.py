"""fairseq's progress bars (fairseq/logging/progress_bar.py) and fairseq2's metric log.

fairseq: `--log-format json` prints `json.dumps(stats)` behind the `| train_inner |` tag of
fairseq_cli/train.py's logger (`epoch`, `update`, `loss`, `nll_loss`, `ppl`, `lr`, `gnorm`,
`loss_scale`, `num_updates`); `simple` prints `'{}:  {:5d} / {:d} {}'.format(prefix, i, size,
postfix)` with `key=value` pairs. Read at facebookresearch/fairseq v0.10.2 and v0.12.2.
fairseq2: `LogMetricRecorder` (src/fairseq2/metrics/recorder.py in v0.2, metrics/recorders/_log.py
later) writes `{Title} Metrics (step {N}) - Loss: 2.34 | Grad Norm: 1.2 | Learning Rate: 1e-4`.
"""

import json

from postmortem.run.dialects import register
from postmortem.run.dialects.progress._entry import entry

_STATS = {"epoch": 1, "update": 0.5, "loss": "7.132", "nll_loss": "6.011", "ppl": "64.49", "wps": "12040.1",
          "lr": "0.0005", "gnorm": "1.09", "loss_scale": "64", "num_updates": "200"}

register(
    entry("fairseq.json", "fairseq", "progress",
          "facebookresearch/fairseq v0.12.2 fairseq/logging/progress_bar.py (JsonProgressBar.log); "
          "fairseq_cli/train.py logger 'fairseq_cli.train'",
          "logger.info(json.dumps(stats))  # behind '| train_inner |', '| valid |', '| train |'",
          r"\|\s*(?P<stream>train_inner|valid|train)\s*\|\s*(?P<stats>\{[^{}]*\})\s*$",    # flat JSON: linear
          ("2021-03-01 10:00:00 | INFO | train_inner | " + json.dumps(_STATS),
           "2021-03-01 10:05:00 | INFO | valid | " + json.dumps({"epoch": 1, "valid_loss": "6.9",
                                                                 "valid_ppl": "119.4", "num_updates": "200"})),
          ("train", "valid")),
    entry("fairseq.simple", "fairseq", "progress",
          "facebookresearch/fairseq v0.10.2 fairseq/logging/progress_bar.py (SimpleProgressBar.log)",
          "'{}:  {:5d} / {:d} {}'.format(self.prefix, self.i + 1, self.size, postfix)",
          r"epoch \d+:\s+\d+\s*/\s*\d+\s+(?P<fields>(?=[^=\n]{0,200}=).*)$",
          ("{}:  {:5d} / {:d} {}".format("epoch 001", 100, 1234, "loss=7.132, nll_loss=6.011, ppl=64.49, "
                                         "wps=12040.1, lr=0.0005, gnorm=1.09, loss_scale=64, num_updates=100"),),
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
