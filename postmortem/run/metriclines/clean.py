"""Line cleaning: what surrounds the metrics is blanked out, never cut out.

Every removed character becomes a space, so a position in the cleaned line is
the same position in the raw line: the column reader maps each value back to
the digits of the raw bytes with it.
"""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# Prefixes that carry no metric, tried again and again at the start of the line. Their
# spaces are possessive (`\s*+`): a long run of blanks is crossed once, not once per split.
_PREFIXES = [
    re.compile(r"\s*+(?:>\s?)+"),                                  # a quoted paste
    re.compile(r"\s*+```\w*\s*+$"),                                 # a Markdown fence
    re.compile(r"\s*+(?:\[default\d+\]|\[rank\s*+\d+\]|\[\d+\]|\d{1,4}(?=:\s))\s*+:"),
    re.compile(r"\s*+[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s++\d+\s++\S+:\d+\]"),   # absl / glog
    re.compile(r"\s*+\[?\d{2,4}[-/]\d{1,2}[-/]\d{1,4}[ T_]\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?"
               r"(?:\s*+[+-]\d\d:?\d\d|Z)?\]?\s*+-?"),                 # a date and time
    re.compile(r"\s*+\[?\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\]?"),      # a time alone
    re.compile(r"\s*+\[titan\]"),
    re.compile(r"\s*+\[?[\w.]+\]\s*+(?=\()"),                       # [simmim_pretrain] (file.py N):
    re.compile(r"\s*+\([\w.]+\.py \d+\)\s*+:"),
    re.compile(r"\s*+\[[\w./-]+\.(?:py|cc|cpp|h):\d+(?::\w+)?\]"),  # [logging.py:96:log_dist]
    # logger, level, logger: `mmdet - INFO - `, `| INFO | `, `INFO  DistriOptimizer$:295 - `
    re.compile(r"\s*+\|?\s*+(?:[\w.$-]+\s*+(?::\d+)?\s*+(?:-\s*+|\|\s*+))?\[?\s{0,8}(?:INFO|WARNING|WARN|DEBUG|ERROR"
               r"|CRITICAL|NOTICE)\]?:?\s*+(?:[-|]\s*+)?(?:[\w.$]+(?::\d+)?\s++-\s++)?"),
    re.compile(r"\s*+[\w.-]+:\d+\s++(?=[\w.]+:\d+\s++(?:INFO|WARN))"),   # OLMo's host:rank
    re.compile(r"\s*+[\w.]+:\d+\s++(?=INFO|WARN)"),
    re.compile(r"\s*+\[Rank 0\]\s*+(?=\S)"),
    # ESPnet's `[%(hostname)s] %(asctime)s (%(module)s:%(lineno)d) %(levelname)s: ` (espnet2/tasks/
    # abs_task.py): the host before the date, the module and line before the level
    re.compile(r"\s*+\[[\w.-]+\]\s*+(?=\d{4}-\d\d-\d\d[ T])"),
    re.compile(r"\s*+\([\w.]+:\d+\)\s*+(?=(?:INFO|WARNING|DEBUG|ERROR|CRITICAL)\b)"),
]
# Anywhere in the line: dates, clock times and durations are never metrics.
_DATETIME = re.compile(r"\d{2,4}[-/]\d{1,2}[-/]\d{1,4}[ T_]\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?")
_CLOCK = re.compile(r"(?<![\w.])\d+:\d\d(?::\d\d)?(?:\.\d+)?(?![\w.])")
_MARKUP = re.compile(r"\*\*|__(?=\s|$)")
# A key in brackets before its value (`[Loss] 2.34 | [step] 120 |`): the brackets are blanked
_BRACKET_KEY = re.compile(r"\[([A-Za-z][\w ./-]{0,40})\](?=\s*(?:[-+]?\.?\d|nan\b|inf\b))")

# A one-number tensor or array printed whole, not by `.item()`: torch `tensor(nan,
# device='cuda:0', grad_fn=<AddBackward0>)`, `tensor([2.31])`; TF `tf.Tensor(2.3, shape=(),
# dtype=float32)`; JAX `Array(nan, dtype=float32)`; numpy 2's `np.float32(2.3)`. All but the
# number is blanked, so that `loss: tensor(nan, ...)` reads as `loss: nan` (and `cuda:0` is no metric).
_TENSOR = re.compile(r"\b(?:tensor|tf\.Tensor|Array|array|DeviceArray|np\.float\d+|numpy\.float\d+)\(\[?"
                     r"(?P<v>[^\s,()\[\]]+)\]?(?:,\s*(?:device='[^']*'|dtype=[\w.]+|grad_fn=<\w+>"
                     r"|requires_grad=True|shape=\([\d, ]*\)|weak_type=True))*\)")


def _tensor_value(m: re.Match[str]) -> str:
    s, e = m.span("v")
    return " " * (s - m.start()) + m.group("v") + " " * (m.end() - e)


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + " " * (end - start) + text[end:]


def clean(line: str) -> str:
    """The line with colours, prefixes, dates, clock times and bold markup blanked."""
    if "\x1b" in line:
        line = _ANSI.sub(lambda m: " " * len(m.group()), line)
    line = line.replace("\t", " ")
    pos = 0
    for _ in range(8):
        for p in _PREFIXES:
            m = p.match(line, pos)
            if m and m.end() > pos:
                line = _blank(line, pos, m.end())
                pos = m.end()
                break
        else:
            break
    if ":" in line:
        line = _DATETIME.sub(lambda m: " " * len(m.group()), line)
        line = _CLOCK.sub(lambda m: " " * len(m.group()), line)
    if "(" in line and ("ensor(" in line or "rray(" in line or "float" in line):
        line = _TENSOR.sub(_tensor_value, line)
    if "]" in line:
        line = _BRACKET_KEY.sub(lambda m: " " + m.group(1) + " ", line)
    if "*" in line or "__" in line:
        line = _MARKUP.sub(lambda m: " " * len(m.group()), line)
    return line


def is_fence(line: str) -> bool:
    return line.lstrip(" >").startswith("```")
