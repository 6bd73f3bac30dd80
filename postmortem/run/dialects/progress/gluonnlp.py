"""GluonNLP's scripts (dmlc/gluon-nlp, MXNet): BERT pre-training and the MT / LM training loops.

BERT (scripts/bert/run_pretraining.py v0.6.0; scripts/bert/pretraining_utils.py `log` and
`log_noacc` v0.7.0..v0.10.0): `logging.info('[step {}]\\tmlm_loss={:7.5f}\\tmlm_acc={:4.2f}\\t
nsp_loss={:5.2f}\\tnsp_acc={:5.2f}\\tthroughput={:.1f}K tks/s\\tlr={:.7f} time={:.2f}, latency=
{:.1f} ms/step')` (`ms/batch` before v0.9; v0.6.0 every value `{:.5f}`, nsp_acc `{:.3f}`, no
latency; `log_noacc` without the two accuracies). No total: the script steps on the sum,
`ls = ls1 + ls2` (run_pretraining.py `forward`, v0.6.0..v0.10.0, ls1 the MLM and ls2 the NSP
loss), so the loss is mlm_loss + nsp_loss.

MT (scripts/machine_translation/train_transformer.py, train_gnmt.py v0.6.0..v0.10.0):
`'[Epoch {} Batch {}/{}] loss={:.4f}, ppl={:.4f}, [gnorm={:.4f}, ]throughput={:.2f}K wps,
wc={:.2f}K'`; LM (scripts/language_model/word_language_model.py): `'[Epoch %d Batch %d/%d]
current loss %.2f, ppl %.2f, throughput %.2f samples/s, lr %.2f'`. The batch counts from 1
within each epoch (`batch_id + 1`), the epoch from 0.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import NUM, entry
from postmortem.run.dialects.progress import LOSS_IS_SUM_OF_PARTS

LOSS_IS_SUM_OF_PARTS.add("gluonnlp")

_SRC = "dmlc/gluon-nlp"
_BERT = ("[step {}]\tmlm_loss={:7.5f}\tmlm_acc={:4.2f}\tnsp_loss={:5.2f}\tnsp_acc={:5.2f}\t"
         "throughput={:.1f}K tks/s\tlr={:.7f} time={:.2f}, latency={:.1f} ms/step")
_BERT_NOACC = ("[step {}]\tmlm_loss={:7.5f}\tnsp_loss={:5.2f}\tthroughput={:.1f}K tks/s\tlr={:.7f} "
               "time={:.2f}, latency={:.1f} ms/step")
_BERT_V06 = ("[step {}]\tmlm_loss={:.5f}\tmlm_acc={:.5f}\tnsp_loss={:.5f}\tnsp_acc={:.3f}\t"
             "throughput={:.1f}K tks/s\tlr={:.7f} time={:.2f}")
_MT = "[Epoch {} Batch {}/{}] loss={:.4f}, ppl={:.4f}, throughput={:.2f}K wps, wc={:.2f}K"
_GNMT = "[Epoch {} Batch {}/{}] loss={:.4f}, ppl={:.4f}, gnorm={:.4f}, throughput={:.2f}K wps, wc={:.2f}K"
_LM = "[Epoch %d Batch %d/%d] current loss %.2f, ppl %.2f, throughput %.2f samples/s, lr %.2f"

register(
    entry("gluonnlp.bert_step", "GluonNLP", "progress",
          f"{_SRC} v0.6.0 scripts/bert/run_pretraining.py; v0.7.0..v0.10.0 scripts/bert/pretraining_utils.py "
          "(log, log_noacc)",
          _BERT,
          # (cleaned, a line's tabs are spaces)
          r"\[step (?P<step>\d+)\]\s+mlm_loss=\s*" + NUM + r"\s+(?:mlm_acc=\s*" + NUM + r"\s+)?nsp_loss=\s*" + NUM,
          (_BERT.format(1000, 7.12345, 12.5, 0.69, 51.2, 45.3, 0.0001, 12.5, 125.0),
           "INFO:root:" + _BERT_NOACC.format(2000, float("nan"), 0.35, 44.0, 0.0000999, 12.1, 121.0),
           _BERT_V06.format(20, 10.34567, 0.01234, 0.70123, 0.5, 30.1, 0.0000125, 3.41),
           _BERT.format(1000, 7.12345, 12.5, 0.69, 51.2, 45.3, 0.0001, 12.5, 125.0).replace("ms/step", "ms/batch")),
          ("[step ",)),
    entry("gluonnlp.epoch_batch", "GluonNLP", "progress",
          f"{_SRC} v0.6.0..v0.10.0 scripts/machine_translation/train_transformer.py, train_gnmt.py; "
          "scripts/language_model/word_language_model.py",
          f"{_MT}  |  {_GNMT}  |  {_LM}",
          r"\[Epoch (?P<epoch>\d+) Batch (?P<batch>\d+)/\d+\] (?:current )?loss[= ]" + NUM
          + r", ppl[= ]" + NUM,
          (_MT.format(0, 100, 3421, 7.5123, 1831.2, 21.35, 98.7),
           _GNMT.format(3, 200, 1500, float("nan"), float("nan"), 3.21, 18.1, 80.2),
           _LM % (1, 200, 2983, 5.61, 273.14, 1524.3, 20.0)),
          ("[Epoch ",)),
)
