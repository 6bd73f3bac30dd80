"""SpeechBrain's epoch line (FileTrainLogger: train_log.txt, and log.txt through its logger).

Read from speechbrain/speechbrain v0.5.13 / v1.1.0 speechbrain/utils/train_logger.py
(`FileTrainLogger.log_stats`): `string_summary = self._stats_to_string(stats_meta)` then
`" - " + self._stats_to_string(stats, dataset)` for train, valid and test, each item
`f"{key}: {value}"` with `f"{dataset} {key}"` and a float printed `{:.2f}` between 1 and 100,
`{:.2e}` elsewhere (precision 2): `epoch: 3, lr: 1.00e+00 - train loss: 2.45 - valid loss: 2.55,
valid CER: 12.20`. One line an epoch: the run is epoch-indexed; its `train loss` is the epoch's.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry


def _item(key: str, value: float | int, dataset: str | None = None) -> str:
    text = str(value) if isinstance(value, int) else f"{value:.2f}" if 1.0 < value < 100.0 else f"{value:.2e}"
    return f"{dataset} {key}: {text}" if dataset else f"{key}: {text}"


register(
    entry("speechbrain.epoch", "SpeechBrain", "progress",
          "speechbrain/speechbrain v0.5.13 / v1.1.0 speechbrain/utils/train_logger.py (FileTrainLogger.log_stats, "
          "_item_to_string)",
          'string_summary = self._stats_to_string(stats_meta); string_summary += " - " + '
          'self._stats_to_string(stats, dataset)  # each f"{dataset} {key}: {value}"',
          r"(?<![\w-])epoch: (?P<epoch>\d+)(?:, \w[\w ]*: \S+)* - (?:train|valid) \w+: ",
          (", ".join([_item("epoch", 3), _item("lr", 1.0)]) + " - " + _item("loss", 2.4512, "train") + " - "
           + ", ".join([_item("loss", 2.5534, "valid"), _item("CER", 12.2, "valid"), _item("WER", 20.01, "valid")]),
           "2024-05-02 10:11:12,345 - speechbrain.utils.train_logger - INFO - "
           + ", ".join([_item("epoch", 12), _item("lr", 8e-4)]) + " - " + _item("loss", 134.5, "train") + " - "
           + ", ".join([_item("loss", 0.0123, "valid"), _item("ACC", 0.91, "valid")])),
          ("epoch: ",)),
)
