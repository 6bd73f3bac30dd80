"""The catalogue of what frameworks print: one entry per dialect, each naming its source.

A dialect is one shape of line a framework's own code prints, read from that code (the
repository, the release, the file and the format string), not from an example log:
a progress line (step, loss, LR, grad norm, loss scale), an overflow / skipped-step /
loss-scale message, a resume or checkpoint-load message, an eval line. Entries live in
one module per framework under `progress/` (progress and eval lines) and `messages/`
(events: overflow, skip, scale, resume); each module builds its entries with
`dialects.entries` (`entry`, and the numbers a pattern captures) and calls `register` at
import, and adding a dialect touches that module and its test.

`catalogue()` imports every module once; readers ask it, never a module directly.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

Kind = Literal["progress", "eval", "overflow", "scale", "skipped", "resume", "checkpoint",
               "eval_boundary", "nan_loss"]   # eval_boundary: the words around an eval, no values of
# their own; nan_loss: a NaN loss said only in words (TensorFlow's NanTensorHook), no number


@dataclass(frozen=True)
class Dialect:
    """One shape of line, as a framework's source prints it."""

    id: str                       # "deepspeed.overflow", "megatron.iteration"
    framework: str                # "DeepSpeed"
    kind: Kind
    source: str                   # "microsoft/DeepSpeed v0.14.0 deepspeed/runtime/fp16/loss_scaler.py"
    format: str                   # the format string as the source writes it
    regex: str                    # what matches a line it printed (named groups carry the values)
    flags: int = 0                # the regex's flags
    keywords: tuple[str, ...] = ()   # a cheap test before the pattern: one of them is in the line
    examples: tuple[str, ...] = field(default=())  # lines built from `format`, for the tests
    # a scaler message that prints only the scale after its change: the one before it is this
    # times that (apex amp halves: `self._loss_scale/2.`); None: not known, or printed (`prev_scale`)
    prev_factor: float | None = None
    # the framework prints it from one rank only (rank 0's logger, `ranks=[0]`): the same words
    # said again right after themselves are the next skipped steps, not the other ranks'
    one_rank: bool = False
    # printed after the step line of its own step (DeepLearningExamples' BERT logs the scale
    # after the step's progress line), not before the next one as a scaler's words are
    after_step_line: bool = False

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """`regex` compiled, the first time a reader asks: the catalogue's ~100 patterns cost
        tens of milliseconds to compile, and a run that is no text log needs none of them."""
        return re.compile(self.regex, self.flags)

    def search(self, line: str) -> re.Match[str] | None:
        if self.keywords and not any(k in line for k in self.keywords):
            return None
        return self.pattern.search(line)


_REGISTRY: dict[str, Dialect] = {}
_LOADED = False


def register(*dialects: Dialect) -> None:
    for d in dialects:
        if d.id in _REGISTRY:
            raise ValueError(f"dialect {d.id} registered twice")
        _REGISTRY[d.id] = d


def catalogue(kind: Kind | None = None) -> list[Dialect]:
    """Every dialect (of one kind), in registration order; imports the modules once."""
    global _LOADED
    if not _LOADED:
        for sub in ("progress", "messages"):
            pkg = importlib.import_module(f"{__name__}.{sub}")
            for mod in pkgutil.iter_modules(pkg.__path__):
                importlib.import_module(f"{pkg.__name__}.{mod.name}")
        _LOADED = True
    return [d for d in _REGISTRY.values() if kind is None or d.kind == kind]
