"""OpenNMT-py's Statistics.output (onmt/utils/statistics.py, v1.x to v3.x).

`logger.info(("Step %s; acc: %6.2f; ppl: %5.2f; xent: %4.2f; lr: %7.5f; %3.0f/%3.0f tok/s;
%6.0f sec") % (step_fmt, ...))` with step_fmt `"%2d/%5d"`; v3 adds `aux: ` and `sents`. The
loss is `xent` (cross-entropy per token); `ppl` is its exponential. Validation:
`Validation perplexity: %g`, `Validation accuracy: %g` (onmt/trainer.py).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("opennmt.step", "OpenNMT-py", "progress",
          "OpenNMT/OpenNMT-py v2.3.0 onmt/utils/statistics.py (Statistics.output)",
          '("Step %s; acc: %6.2f; ppl: %5.2f; xent: %4.2f; lr: %7.5f; %3.0f/%3.0f tok/s; %6.0f sec")',
          r"\bStep (?P<step>\d+)(?:/\s*\d+)?; acc: +\S+; ppl: +(?P<ppl>\S+); xent: +(?P<loss>\S+);",
          ("[2023-05-01 10:00:00,123 INFO] " + ("Step %s; acc: %6.2f; ppl: %5.2f; xent: %4.2f; lr: %7.5f; "
                                                 "%3.0f/%3.0f tok/s; %6.0f sec")
           % ("%2d/%5d" % (1000, 100000), 45.12, 23.45, 3.15, 0.00070, 8123, 7456, 312),),
          ("xent:",)),
    entry("opennmt.valid", "OpenNMT-py", "eval", "OpenNMT/OpenNMT-py v2.3.0 onmt/trainer.py (_report_step)",
          "logger.info('Validation perplexity: %g' % valid_stats.ppl())",
          r"\bValidation (?:perplexity|accuracy|xent): (?P<value>\S+)",
          ("[2023-05-01 10:05:00,123 INFO] " + "Validation perplexity: %g" % 21.3,
           "[2023-05-01 10:05:00,124 INFO] " + "Validation accuracy: %g" % 46.7),
          ("Validation",)),
)
