"""Source code printed into a log is not metric lines.

Scripts print their own source at the top of their log (modded-nanogpt dumps the whole
training script), and tracebacks and warnings quote lines of it. A line of code holds
`name=value` pairs and numbers (`Muon(..., lr=0.1*args.learning_rate)`, `g.size(0)`,
`{train_loss.item():.4f}`), but a metric value is a number a logger printed, never an
operand; a printed model (`(ff_out): Linear(in_features=1024, ...)`) is no metric either.
A line is code by its shape (`is_code`); a line of a dump that looks like a log line
(`val_loss = 0.0`) is code by where it sits: among lines of code (`dumps`).
"""

from __future__ import annotations

import re

import numpy as np

_NUM = r"(?<![\w.])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_CMP = r"(?<![=<>!])(?:==|!=|<=|>=)(?!=)"
# Each pattern is something a logger does not print; any one of them makes the line code.
_CODE = re.compile("|".join([
    # a statement: def, class, if/while/with ...:, for ... in, return, assert, import
    r"^\s*(?:def\s+\w+\s*\(|class\s+[A-Za-z_]\w*\s*(?:\([^)]*\))?\s*:\s*(?:#.*)?$"
    r"|(?:el)?if\s.*:\s*(?:#.*)?$|while\s.*:\s*(?:#.*)?$|with\s.*:\s*(?:#.*)?$"
    r"|for\s+[\w, ]+\s+in\s|return\b|assert\s|import\s+\w|from\s+[\w.]+\s+import\s|lambda\b)",
    # a number that is an operand: `0.1*args`, `4 * config`, `** 0.5`, `== 2`, `1.0 / (base`
    # (a comparison is two characters: `[==========  654/654 ====>]`, a progress bar's run of
    # `=` beside its count, compares nothing)
    _NUM + r"(?:\*\*?[\w(.]|\s+(?:\*\*?|//)\s+[\w(.]|\s*" + _CMP + r"|\s*/\s*\()",
    r"(?:[\w)]\*\*?|[\w)]\s+\*\*?\s+|" + _CMP + r"\s*)" + _NUM,
    # a method call: `g.size(0)`, `train_loss.item()`, `torch.arange(`
    r"(?<!\w)[A-Za-z_]\w*\.[A-Za-z_]\w*\(",
    # an f-string's field: `{val_loss:.4f}`, `{step}`, `{approx_time/timed_steps:.2f}`
    r"\{[A-Za-z_][\w.\[\]()+\-*/% ]*(?:![rsa])?(?::[<>^=]?[-+]?#?0?\d*[,_]?(?:\.\d+)?[a-zA-Z%]?)?\}",
    # an annotated field: `vocab_size : int = 50257`
    r"^\s*\w+\s*:\s*(?:int|float|str|bool)\s*=",
    # a call's keyword argument that is a name, not a value: `dict(lr=lr`, `(vocab_size=num_vocab`
    r"(?<!\w)[A-Za-z_]\w*\([^()]*\b\w+=(?!True\b|False\b|None\b)[A-Za-z_]",
    # a line of a printed torch module: `(ff_out): Linear(in_features=1024, out_features=256`
    r"^\s*\([\w.-]+\):\s*(?:\d+ x )?[A-Za-z_][\w.]*\(",
]))

# A dump: at least this many lines of code, each within this many lines of the next.
DUMP_LINES = 4
DUMP_GAP = 12


def is_code(text: str) -> bool:
    """Whether the (cleaned) line is a line of source code."""
    return _CODE.search(text) is not None


def dumps(code_rows: np.ndarray) -> list[tuple[int, int, int]]:
    """The stretches of the file that are dumped source code: (first line, last line,
    lines of code in it)."""
    rows = np.unique(code_rows)
    if len(rows) < DUMP_LINES:
        return []
    runs = np.split(rows, np.flatnonzero(np.diff(rows) > DUMP_GAP) + 1)
    return [(int(r[0]), int(r[-1]), len(r)) for r in runs if len(r) >= DUMP_LINES]


def inside(rows: np.ndarray, first: int, last: int) -> np.ndarray:
    """Which of `rows` lie in the stretch of lines first..last."""
    return (rows >= first) & (rows <= last)
