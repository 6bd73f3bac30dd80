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
]
# Anywhere in the line: dates, clock times and durations are never metrics.
_DATETIME = re.compile(r"\d{2,4}[-/]\d{1,2}[-/]\d{1,4}[ T_]\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?")
_CLOCK = re.compile(r"(?<![\w.])\d+:\d\d(?::\d\d)?(?:\.\d+)?(?![\w.])")
_MARKUP = re.compile(r"\*\*|__(?=\s|$)")
# A key in brackets before its value (`[Loss] 2.34 | [step] 120 |`): the brackets are blanked
_BRACKET_KEY = re.compile(r"\[([A-Za-z][\w ./-]{0,40})\](?=\s*(?:[-+]?\.?\d|nan\b|inf\b))")


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
    if "]" in line:
        line = _BRACKET_KEY.sub(lambda m: " " + m.group(1) + " ", line)
    if "*" in line or "__" in line:
        line = _MARKUP.sub(lambda m: " " * len(m.group()), line)
    return line


def is_fence(line: str) -> bool:
    return line.lstrip(" >").startswith("```")
