"""ParlAI's training log (facebookresearch/ParlAI parlai/scripts/train_model.py `TrainLoop.log`).

Each report is a line of the loop's counters and then the report as a table:
`log = '{}\\n{}\\n'.format(' '.join(logs), nice_report(train_report))`, logs being
`time:{:.0f}s`, `total_exs:{}`, `total_steps:{}` (v1.2.0 on), `epochs:{:.2f}`, `time_left:{:.0f}s`
(v0.8.0 to v1.7.2; `[ {} ]` around them with `time:{}s` of `np.floor` in the 2020 snapshots);
in 2019 (63be4f29e) the report followed as a dict on the same line, `[ {} ] {}`.
`nice_report` (parlai/utils/misc.py, the same from v0.8.0 to v1.7.2) prints a one-row pandas
frame, the metrics sorted by name (`_report_sort_key`), `to_string(na_rep="", float_format=
float_formatter, line_width=...)` with `\\n   ` before each line: a header of names, a row of
values right-justified under them, wrapped into more header/row pairs (each ending in ` \\`) when
wider than the terminal. `float_formatter` prints a NaN as "" ("so it shows blank in table"):
an empty cell under a name is a NaN (`metriclines.table.aligned`). The step is `total_steps`
(v1.2.0 on); `fp16_loss_scalar` (torch_agent.py `_add_metrics... self.optimizer.loss_scale`) is
the loss scale.
"""

import re

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

_SRC = "facebookresearch/ParlAI"
# what torch_agent.py and torch_generator_agent.py put in a training report (v1.x)
REPORT_KEYS = frozenset(("exs", "loss", "ppl", "token_acc", "token_em", "lr", "gnorm", "clip", "ups",
                         "updates", "total_train_updates", "fp16_loss_scalar", "ctpb", "ctps", "ctrunc",
                         "ctrunclen", "exps", "llen", "ltpb", "ltps", "ltrunc", "ltrunclen", "tpb", "tps",
                         "gpu_mem", "clen", "bsz", "nll_loss"))
# ...of which ParlAI's own (a `loss  lr` header is anyone's)
_OWN_KEYS = REPORT_KEYS - {"loss", "lr", "ppl", "clip", "bsz", "nll_loss", "updates"}
_NAME = re.compile(r"[A-Za-z][\w@-]*")
_WRAP = re.compile(r"\s\\\s*$")


def _logs(time: float, exs: int, steps: int | None, epochs: float, left: float | None) -> str:
    logs = [f"time:{time:.0f}s", f"total_exs:{exs}"]
    if steps is not None:
        logs.append(f"total_steps:{steps}")
    logs.append(f"epochs:{epochs:.2f}")
    if left is not None:
        logs.append(f"time_left:{max(0, left):.0f}s")
    return " ".join(logs)


register(
    entry("parlai.log", "ParlAI", "progress",
          f"{_SRC} v1.2.0..v1.7.2 parlai/scripts/train_model.py (TrainLoop.log: total_steps); v0.8.0..v1.1.0 "
          "without it; v0.1.20200409 `[ {} ]`",
          "logs.append(f'time:{self.train_time.time():.0f}s'); logs.append(f'total_exs:{self._total_exs}'); "
          "logs.append(f'total_steps:{self._train_steps}'); logs.append(f'epochs:{self._total_epochs:.2f}'); "
          "logs.append(f'time_left:{max(0,time_left):.0f}s'); ' '.join(logs)",
          r"(?<![\w:])time:[\d.]+s total_exs:\d+(?: total_steps:(?P<step>\d+))?(?: epochs:[\d.]+)?"
          r"(?: time_left:[\d.]+s)?(?: \]|$)",
          (_logs(10, 1600, 50, 0.01, 999.4),
           "12:00:01 | " + _logs(1234, 96000, 3000, 1.5, None),
           _logs(20, 3200, None, 0.02, None),
           "[ time:{}s total_exs:{} epochs:{} time_left:{}s ]".format(10.0, 1600, 0.01, 999.0)),
          ("time:",)),
)


def is_report_header(line: str) -> bool:
    """A header of `nice_report`'s table: names in ParlAI's order (sorted), two of them a
    training report's, one at least ParlAI's own (`exs`, `gnorm`, `ups`, ...)."""
    names = _WRAP.sub("", line).split()
    if len(names) < 2 or not all(_NAME.fullmatch(n) for n in names):
        return False
    return (names == sorted(names) and len(REPORT_KEYS.intersection(names)) >= 2
            and bool(_OWN_KEYS.intersection(names)))
