"""One line's metrics: the name/value pairs, its counters, its stream, an overflow.

The shapes real loggers print: `name: v`, `name=v`, `name v |`, `| name v |`,
`name v,`, `'name': v` (Python/JSON dicts), `name: v (mean)` (the value is kept,
the running mean dropped), `Name is v.`, `v unit` glued (`12.3ms`, `40.1%`).
Every value keeps its span in the line, so the column reader can find the same
value in every line of the same shape without parsing it again.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import re
from dataclasses import dataclass, field

from postmortem.run.aliases import loss_scale_in_context
from postmortem.run.metriclines.clean import clean, is_fence
from postmortem.run.metriclines.code import is_code
from postmortem.run.metriclines.epochwords import epoch_words
from postmortem.run.metriclines.nanwords import said_nan
from postmortem.run.metriclines.overflow import find_event
from postmortem.run.metriclines.steps import STEP_KINDS
from postmortem.run.nonfinite import nonfinite

# A number as loggers print it; `nanms` is modded-nanogpt's NaN in milliseconds. The
# non-finite ones in every runtime's spelling (postmortem.run.nonfinite.NONFINITE): C99 / MSVC's
# `nan(ind)`, .NET's `∞`, MSVC's `1.#QNAN` (the digits leave its `1.#` to it).
NUM = re.compile(r"(?<![\w.])(?:[-+]?(?:\d{1,3}(?:,\d{3})+(?![\d.])|\d+(?!\.#)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
                 r"|[-+]?(?:nan(?:\(\w*\))?|inf(?:inity)?|\u221e)(?=ms|%|[^A-Za-z]|$)"
                 r"|[-+]?\d\.#(?:QNAN|SNAN|IND|INF)\d*)", re.I)
_UNIT = re.compile(r"(ms|%)(?![A-Za-z])|[A-Za-z/]+")
_WORD_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-()")


def _word_char(ch: str) -> bool:
    """A character of a metric name: ASCII word characters, and letters of any script
    (`précision`, `coût`, `损失`)."""
    return ch in _WORD_CHARS or ch.isalpha()


_FILLER_END = {"is", "are", "was", "so", "far", "of", "at", "=", "in", "to", "from", "by", "for", "with"}
_FILLER_START = {"current", "the"}
_NOT_METRIC = {"eta", "epoch", "epochs", "step", "steps", "iter", "iteration", "iterations",
               "global_step", "global step", "num_updates", "rank", "pid", "tid", "it", "line", "sample", "iters",
               "batch"}
# The launcher's facts, never metrics: torch.distributed.elastic's rendezvous `Result:` block
# (`  restart_count=1`, `  master_port=29500`, `  group_world_size=2`, one a line, api.py
# `_rendezvous`) and torchrun's launch configs (`  nproc_per_node   : 4`, launcher/api.py)
_LAUNCH_FACTS = {"restart_count", "master_addr", "master_port", "group_rank", "group_world_size",
                 "local_ranks", "role_ranks", "global_ranks", "role_world_sizes", "global_world_sizes",
                 "local_rank", "global_rank", "world_size", "local_world_size", "node_rank", "nnodes",
                 "nproc_per_node", "min_nodes", "max_nodes", "max_restarts", "monitor_interval",
                 "rdzv_endpoint", "rdzv_backend", "rdzv_configs", "rdzv_id", "run_id", "entrypoint",
                 "log_dir", "metrics_cfg", "event_log_handler"}
# a line that is one of them (`  rdzv_endpoint    : node-1:29400`, `  rdzv_configs : {'timeout': 900}`)
_LAUNCH_LINE = re.compile(r"^\s*(\w+)\s*[:=]")
_STREAMS = {"train": "train", "training": "train", "train_inner": "train", "eval": "val",
            "evaluation": "val", "val": "val", "valid": "val", "validation": "val",
            "test": "test", "testing": "test"}
# (possessive: `epoch` then a long run of blanks was O(n^4) here, 27 s for 500 blanks)
_LINE_STREAM = re.compile(r"\s*+[\[(]?\s*+(?:epoch\s*+\d*+\s*+/?\s*+\d*+\s*+/\s*+)?(train_inner|training|train|evaluation|eval"
                          r"|validation|valid|val|testing|test)\b", re.I)
_EPOCH_STREAM = re.compile(r"\bEpoch\((train|val|test)\)|\|\s*(valid|validation|test|eval)\b"
                           r"|^\s*(Test|Eval|Val):", re.I)
_CONFIG_LINE = re.compile(r'^\s*"[^"]+"\s*:\s*(?:[^\s{}\[\],"]+|"[^"]*")\s*,?\s*$'
                          r"|^\s*[\w.-]+ \.{3,} \S")
# A dict of the run's parameters (`{'iter_num': 100000, 'train_batch_size': 4, 'lr': 0.001,
# 'momentum': 0.9, 'snapshot': '50000'}`, `vars(args)`), told from a metrics dict (HF's
# `{'loss': ..., 'learning_rate': ..., 'epoch': ...}`, mmcv's `"mode": "train"`) by two keys
# that are hyper-parameters or two values that are words (strings, True/False/None; fairseq's
# json bar quotes its numbers: `"loss": "9.1"` is a number; ms-swift's `add_train_message` quotes
# its progress: `'global_step/max_steps': '601/2161'`, `'percentage': '27.81%'`, `'elapsed_time':
# '8h 8m 1s'`, LLaMA-Factory's `'0:01:00'`: a fraction, a percent, a duration are no words)
_QUOTED_NUMBER = (r"""[-+]?[\d.][\w.+-]*['"]|\d+\s*/\s*\d+['"]|[-+]?[\d.]+\s*%['"]"""
                  r"""|(?:\d+(?:\.\d+)?[dhms]\s*)+['"]|\d+(?::\d+)+(?:\.\d+)?['"]""")
_DICT_ENTRY = re.compile(r"""['"]([\w./-]+)['"]\s*:\s*(['"](?!""" + _QUOTED_NUMBER + r""")|True\b|False\b|None\b)?""")
_PARAM_KEY = re.compile(r"(?:^|[_.])(?:batch_size|bs|weight_decay|wd|momentum|lr_decay|decay|snapshot|seed"
                        r"|num_workers|workers|max_iters?|max_epochs?|max_steps|iter_num|epoch_num|num_epochs"
                        r"|last_iter|last_epoch|start_iter|start_epoch|warmup\w*|betas?|eps|resume|pretrained"
                        r"|gamma|milestones|step_size|save_\w+|\w*_dir|\w*_path|image_size|img_size)$", re.I)
# argparse's `Namespace(...)`; DLLogger's StdOutBackend prints the parameters it is given with
# `step="PARAMETER"`: `DLL {time} - PARAMETER key : value key : value`
# NVIDIA dllogger's JSONStreamBackend.log: "DLLL {}".format(json.dumps(dict(timestamp=str(...),
# datetime=..., elapsedtime=..., type="LOG", step=step, data=data))) (progress/dllogger.py); a step
# given as a list or a number (nnUNet's epoch) is a step's record; "PARAMETER" is the run's parameters
# (config), but for BERT's
# loss scale after an overflow (messages/dllogger.py)
_DLLL_LOG = re.compile(r'"type": "LOG", "step": [\[\d]|"step": "PARAMETER", "data": \{"loss_scale": ')
_PARAM_LINE = re.compile(r"Namespace\(\w+=|(?:^|\s)PARAMETER\s+[\w./-]+\s+:\s")
# counts of the data or the model, printed once (`number of examples: 66620`, HF Trainer's
# `Num examples = 66,620`, `Total optimization steps = 1,000`), never a training metric
_SIZE = re.compile(r"(?:(?:total|trainable)\s+)?(?:number\s+of|num|n|#|total)[\s_]+(?:\w+[\s_]+){0,2}?"
                   r"(?:examples|samples|sequences|images|sentences|documents|params|parameters|files|classes"
                   r"|shards|batches|epochs|steps|words|gpus|devices|workers)$"
                   r"|(?:dataset|data|vocab|vocabulary|corpus)[\s_]size$", re.I)
# a validation table's row under its header: a name then bare numbers (Ultralytics' and YOLOv5's
# `pf = "%22s" + "%11i" * 2 + "%11.3g" * 4` % ("all", seen, instances, p, r, map50, map))
_TABLE_ROW = re.compile(r"\s*[A-Za-z][\w.-]*(?: [A-Za-z][\w.-]*)?(?:\s+[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?){3,}\s*$")
_COCO = re.compile(r"Average (Precision|Recall)\s+\((?:AP|AR)\) @\[[^\]]{0,120}\]\s*=\s*(-?\d+\.\d+)")
_LIBRARY_LOG = re.compile(r"\bNCCL (?:INFO|WARN|TRACE)\b|^\s*\S+:\d+:\d+ \[\d+\] NCCL\b")
_SKIP_LINE = re.compile(r"improved from|did not improve|[Ss]aving (?:model|checkpoint)|Namespace\(|"
                        r"Traceback|^\s*File \"|Warning:|[Ww]arnings?\.warn")

# A time as kuangliu's pytorch-cifar `format_time` writes it (utils.py `progress_bar`, copied by
# GLPDepth code/utils/logging.py and many repositories): up to two of `D`, `h`, `m`, `s`, `ms`
# glued to their numbers (`41m50s`, `35s649ms`, `10h28s`, `052ms`)
_TIME_UNIT = r"(?:D|h|m|s|ms)(?:\d|(?![A-Za-z]))"
# That `progress_bar`'s head: ` [====>....]  Step: 1s2ms | Tot: ...`, its ` %d/%d ` written over the
# bar's middle after `\b`s, or, on a terminal narrower than the line, over `Step: ..|` (` [==>]  St
# 6057/6057  Tot:`): the bar, the batch of the epoch and the last step's time, none a counter of
# the run (GLPDepth prints the epoch on a line of its own)
_CIFAR_BAR = re.compile(r"^\s*\[[=>.][^|\n]{0,200}?(?=\|?\s*Tot: )")     # bounded: no slow scan of a long line
_DURATION = re.compile(r"(?:D|h|m|s|ms)\d+(?:D|h|m|s|ms)(?![A-Za-z])")


# Counters (their kinds, in the order of preference for the step: steps.STEP_KINDS). A counter
# ends where no digit follows it, nor a decimal part (`step 30.5` is no step; `after step 30.`
# ends a sentence: it is).
_COUNTERS = [
    ("step", re.compile(r"\[(?:step|batch)=(\d+)(?:/(\d+))?")),       # OLMo, Composer headers
    # a float `global_step=99.0` too (Lightning loggers print their postfix values as floats)
    ("global_step", re.compile(r"\bglobal[_ ]step\b['\"]?\s*[:=]?\s*(\d+)(?:\.0+)?(?!\d|\.\d)", re.I)),
    # (never a duration: kuangliu's pytorch-cifar `progress_bar` prints `  Step: %s` % format_time(step_time),
    # `Step: 052ms`, the time of the last step)
    ("step", re.compile(r"(?:^\s*s:|\bstep\b['\"]?\s*[:=]?\s*)(\d+)(?!\d|\.\d|" + _TIME_UNIT + r")(?:\s*/\s*\d+)?",
                        re.I)),
    # `iteration 100/3877`, and the bracketed counter after the word (`Iter: [100/3877]`,
    # `Iteration [100/3877]`, mmcv's `Iter [100/3877]`, `iter [ 100/3877]`)
    ("iteration", re.compile(r"\biteration\b['\"]?\s*[:=]?\s*(?:\[\s*)?(\d+)(?!\d|\.\d)(?:\s*/\s*\d+)?", re.I)),
    ("iter", re.compile(r"\biter\b['\"]?\s*[:=]?\s*(?:\[\s*)?(\d+)(?!\d|\.\d)(?:\s*/\s*\d+)?", re.I)),
    # icefall's batch lines (k2-fsa/icefall egs/*/train.py `train_one_epoch`): `Epoch {e}, batch
    # {batch_idx}, ...` (the batch within the epoch), later also `global_batch_idx: {N}` (the run's)
    ("global_step", re.compile(r"\bglobal_batch_idx: (\d+)(?!\d|\.\d)")),
    ("iter", re.compile(r"\bEpoch \d+, batch (\d+)(?!\d|\.\d)")),
    # ESPnet2's reporter (espnet/espnet espnet2/train/reporter.py `log_message`):
    # `{epoch}epoch:{key}:{start}-{end}batch: ...`, the last batch of the interval within the epoch
    ("iter", re.compile(r"(?<!\d)\d+epoch:train:\d+-(\d+)batch:")),
    # ColossalAI's examples (hpcaitech/ColossalAI examples/language/gpt/gemini/train_gpt_demo.py,
    # examples/language/opt, ...): `logger.info(f"[{n + 1}/{NUM_STEPS}] Loss:{loss.item():.3f},
    # Step time: ..")`, the step leading the message, a name and its colon behind it
    ("iter", re.compile(r"(?:^\s*|:\s+)\[(\d+)/\d+\]\s+(?=[A-Za-z][\w ]*:)")),
    # AllenNLP 0.2 (allenai/allennlp allennlp/training/trainer.py): `logger.info("Batch %d/%d: %s",
    # batch_num, num_training_batches, description)` under an `Epoch %d/%d` line of its own
    ("iter", re.compile(r"\bBatch (\d+)/\d+: ")),
    ("num_updates", re.compile(r"\bnum_updates\b['\"]?\s*[:=]?\s*['\"]?(\d+)(?!\d|\.\d)")),
    # Lightning's RichProgressBar (rich_progress.py `BatchesProcessedColumn` then the elapsed
    # time, `•`, the time left): `450/1000 0:00:30 • 0:00:37`, the batch of the epoch
    # (`clean` blanks the times: both are read)
    ("iter", re.compile(r"(?<![\w./])(\d+)/(?:(\d+)|--)(?: {1,12}[\d:]{4,12})? {1,12}\u2022 ")),
    ("tqdm", re.compile(r"(?<![\w./])(\d+)/\d+\s*\[[\s\d:]*<")),     # the last bar: `_last_bar`
    ("lead", re.compile(r"^\s*(\d+)(?=\s*\||\s+[A-Za-z])")),
]
# `Epoch [e][i/N]`, `Epoch(train) [e][i/N]`, `epoch: [e]  [i/N]`, `| epoch e | i/ N batches`,
# `Train: e [i/N`, `Train: [e/E][i/N]`: the epoch and the batch within it.
_EPOCH_BATCH = [
    # (whole numbers: `[Epoch=000/020]` is epoch 0 of 20, never epoch 00 and batch 0/020)
    re.compile(r"\bepoch\b(?:\(\w+\))?\s*+[:=]?\s*+\[?\s*+(\d+)(?!\d)(?:\s*+/\s*+\d+(?!\d))?\s*+\]?\s*+[\[,|]?\s*+(\d+)\s*+/\s*+(\d+)",
               re.I),
    re.compile(r"\b(?:train|test|val|eval)\w*\s*:\s*\[?\s*(\d+)(?:\s*/\s*\d+)?\s*\]?\s*\[\s*(\d+)\s*/\s*(\d+)", re.I),
    re.compile(r"^\s*\[\s*(\d+)\s*\]\s*\[\s*(\d+)\s*/\s*(\d+)\s*\]"),    # `[3][120/500]` alone
    # PaddleFleetX's `[train] epoch: [%d/%d], batch: [%d/%d], loss: ...` (ppfleetx/core/module/basic_module.py,
    # the language modules' training_step_end)
    re.compile(r"\bepoch:\s*\[(\d+)/\d+\],\s*batch:\s*\[(\d+)/(\d+)\]"),
    # WeTTS's frontend (wenet-e2e/wetts wetts/frontend/train.py `train_or_cv`): `"Epoch {} [{}]
    # progress {}/{} loss {:.6f}".format(epoch, tag, batch, len(dataloader), ...)`, tag TRAIN or CV
    re.compile(r"\bEpoch (\d+) \[(?:TRAIN|CV)\] progress (\d+)/(\d+)"),
]
# A line that leads with its epoch and then its iteration, both bare: (epoch, iteration) spans.
_LEAD_EPOCH_ITER = [
    # Learning-to-See-in-the-Dark (cchen156/Learning-to-See-in-the-Dark train_Sony.py):
    # `print("%d %d Loss=%.3f Time=%.3f" % (epoch, cnt, ...))`, cnt from 1 in each epoch
    re.compile(r"^\s*(\d+) (\d+) (?=[A-Za-z]\w*=)"),
    # YOLACT (dbolya/yolact train.py): `('[%3d] %7d ||' + (' %s: %.3f |' * len(losses)) + ' T: %.3f
    # || ETA: %s || timer: %.3f') % ([epoch, iteration] + ...)`, the run's iteration
    re.compile(r"^\s*\[\s*(\d+)\]\s+(\d+) \|\|"),
]
# A C++ trainer's epoch of N (dreamilk/ANN): `[{epoch}|{epochs}] TotalLoss {loss} Accuracy {acc}`
_BAR_EPOCH = re.compile(r"^\s*\[(\d+)\|\d+\]\s+(?=[A-Za-z])")
_TQDM = dict(_COUNTERS)["tqdm"]
# MetricLogger.log_every's `{header}  [{i}/{N}]  eta:` (DeiT, DETR, dinov2, LAVIS); an eval's
# header (`Test:`) counts its own batches, never the run's steps
_LOGGER_BAR = re.compile(r"\[\s*(\d+)\s*/\s*\d+\s*\]\s+eta:")
_HEADER_WORD = re.compile(r"(\w*)\W*$")
_EVAL_HEADERS = {"test", "eval", "val", "valid", "validation", "evaluation", "testing"}
_EPOCH = re.compile(r"\bepoch\b['\"]?\s*+[:=]?\s*+\[?\s*+(\d+)(?!\d|\.\d)(?:\s*+/\s*+\d+)?", re.I)
# How the family counts its epochs when the text shows no epoch 0: mmengine / mmcv / mmdet
# (`Epoch [e][i/N]`, `Epoch(train) [e][i/N]`) and Composer (`[epoch=e]`) from 1; DeiT's
# MetricLogger (`Epoch: [e]`), Swin (`Train: [e/E]`) and timm (`Train: e [`) from 0.
_ONE_BASED = re.compile(r"\bEpoch(?:\(\w+\))?\s*\[\d+\]\s*\[|\[epoch=\d+\]")
_ZERO_BASED = re.compile(r"\bEpoch:\s*\[\d+\]|\b(?:Train|Test|Val|Eval)\w*:\s*\[?\s*\d+(?:/\d+)?\s*\]?\s*\[")
_KERAS_BAR = re.compile(r"^\s*(\d+)/(\d+)\s*(?:\[[=>.]*\]|[\u2500-\u257f]+)")   # Keras 2 and 3 bars
_PATH = re.compile(r"\.(?:py|cc|cpp|h|so|json|yaml|txt|log|pt|safetensors)\b|^/")
_FRACTION = re.compile(r"(?<![\w.])\d+\s*/\s*\d+(?![\w.])")


# A line longer than this is a blob (a printed tensor, base64, a minified file), never
# a logger's metric line (a dict of a thousand per-layer norms is ~40 KB): not parsed.
LONGEST_LINE = 1 << 18


@dataclass
class Value:
    column: str
    start: int
    end: int
    const: float | None = None     # a value with no digits (nan, inf): the same on every line
    name_start: int | None = None  # where its name is printed (its digits name the column too)


@dataclass
class Parsed:
    """What one line holds; spans index the raw line."""

    values: list[Value] = field(default_factory=list)
    counters: dict[str, tuple[int, int]] = field(default_factory=dict)   # kind -> span
    epoch: tuple[int, int] | None = None
    epoch_base: int | None = None          # the family's first epoch, where its shape says it
    period: tuple[int, int] | None = None  # `[batch=i/N]`: N, the length of an epoch if i restarts
    batch: tuple[tuple[int, int], tuple[int, int]] | None = None          # (i, N) spans
    stream: str | None = None
    overflow: dict | None = None
    progress: tuple[tuple[int, int], tuple[int, int]] | None = None       # Keras bar (i, N)
    code: bool = False                     # a line of source code: no metric, no counter
    twice: tuple[str, ...] = ()            # names printed twice in the line (the later suffixed)
    percent: tuple[int, int] | None = None  # `Epoch 1 complete [10%]`: how far into the epoch
    next_step: bool = False                # a NaN said in words: at the step after the last logged
    total_letter: str | None = None        # YOLACT's `T`: the one letter its format prints the total under

    @property
    def step_kind(self) -> str | None:
        return next((k for k in STEP_KINDS if k in self.counters), None)

    @property
    def useful(self) -> bool:
        return bool(self.values or self.counters or self.epoch or self.batch or self.overflow
                    or self.code or self.percent)


def to_const(text: str) -> float:
    """A non-finite value as printed (`-nan(ind)`, `1.#QNAN`, `+Inf`, `nanms`)."""
    value = nonfinite(text)
    if value is not None:
        return value
    t = text.lower().lstrip("+")
    return float("nan") if "nan" in t else float("-inf") if t.startswith("-") else float("inf")


def is_const(text: str) -> bool:
    """A value with no number in it, the same on every line of its shape: `nan`, `1.#QNAN`."""
    return not any(c.isdigit() for c in text) or "#" in text


def _lead(text: str, k: int) -> int:
    """Where the token ending in the word at `k` starts: MSVC's `1.#QNAN` before its `QNAN`."""
    while k > 0 and text[k - 1] in "0123456789.#+-":
        k -= 1
    return k


def _word_before(text: str, k: int) -> str:
    """The word printed before position `k` ('' at the start of the line)."""
    m = re.search(r"(\S+)\s*$", text[max(0, k - 64):k])
    return m.group(1) if m else ""


# a Python list of (name, value) tuples printed whole: FunASR's trainer (modelscope/FunASR v1.3.2..
# v1.4.3 funasr/train_utils/trainer.py `log`) prints the model's stats as
# `[(k, round(v.item(), 3)) for k, v in stats.items()]`: `[('loss_ctc', 24.181), ('loss', 24.221)]`
_TUPLE_NAME = re.compile(r"\(['\"]([A-Za-z_][\w./-]*)['\"],\s*$")


def _name_and_start(text: str, p: int) -> tuple[str, int]:
    """The metric name printed before the value at `p` ('' when there is none), and where
    its words start."""
    tup = _TUPLE_NAME.search(text, max(0, p - 80), p)
    if tup:
        return tup.group(1), tup.start(1)
    j = start = p
    while j > 0 and text[j - 1] in " :='\"":
        j -= 1
    words: list[str] = []
    while j > 0 and len(words) < 7:
        k = j
        while k > 0 and _word_char(text[k - 1]):
            k -= 1
        word = text[k:j]
        if not word or not any(c.isalpha() for c in word) or word[-1] in ".,-/" or word[0].isdigit():
            break
        if words and _is_unit(word):
            break                                # `19.9 images/s loss: 1.2`: the unit ends a value
        if (word.startswith("(") and (words or NUM.fullmatch(word.strip("()")))
                or NUM.fullmatch(word) and re.search(r"[:=]\s*$", text[max(0, k - 4):k])):
            break                                # `(nan) mem`: a mean before the next name
        if words and word.lower() in ("nan", "-nan", "inf", "-inf") and _METRIC_WORD.search(_word_before(text, k)):
            break                                # `TotalLoss nan Accuracy 0.098`: the loss's value, no name
                                                 # (`number of nan iterations` keeps its word)
        if not words and not text[j:p].strip() and NUM.fullmatch(text[_lead(text, k):j]):
            break                                # `210  nan  0.0001`: a value in a row, no name
        words.append(word.strip("()") if word.startswith("(") and word.endswith(")") and words else word)
        start = k
        if k >= 2 and text[k - 1] == " " and _word_char(text[k - 2]) and text[k - 2] not in ".-":
            j = k - 1
            continue
        break
    words.reverse()
    while words and words[-1].lower() in _FILLER_END:
        words.pop()
    while words and words[0].lower() in _FILLER_START:
        words.pop(0)
    if len(words) == 2 and words[0].lower() in _STREAMS and "/" in words[1]:
        words = words[1:]                        # Composer's `Train loss/train/total`
    name = " ".join(words).strip("(")
    if name.startswith("[") or name.startswith("-"):
        name = name.lstrip("[-")
    return name, start


_METRIC_WORD = re.compile(r"loss|acc|norm|lr|learning|ppl|perplex|reward|grad|scale|time|rate|mem"
                          r"|throughput|tok|sample|speed|mfu|tflop|epoch|iter|step", re.I)


def _name_like(name: str) -> bool:
    """Not a fragment of a sentence: `How to Learn Spanish 2`, `Overriding filters for GFC 0`."""
    words = name.split()
    if name.count("(") != name.count(")"):
        return False                             # `clipping enabled (window=100`: a message
    if len(words) < 2 or _METRIC_WORD.search(name) or "(" in name or name.startswith("number of"):
        return True
    if len(words) > 4 or any(re.search(r"[a-z][A-Z]", w) and "/" not in w for w in words):
        return False
    return not any(w[:1].isupper() for w in words[1:])


_NEXT_WORD = re.compile(r"\s+([A-Za-z][\w/]*)")
_UNIT_WORDS = {"gb", "mb", "kb", "gib", "mib", "kib", "tb", "b", "s", "ms", "sec", "secs", "seconds",
               "min", "mins", "minutes"}


def _is_unit(word: str) -> bool:
    low = word.lower()
    return low in _UNIT_WORDS or low.endswith(("/s", "/sec", "/second"))


def _counts_something(text: str, e: int) -> bool:
    """`53 steps`, `99 shards for ...`, `447.2 records/second.`: a count in a sentence, unless
    the next word is the next metric's name (`time: 1.03 data_time: 0.03`)."""
    m = _NEXT_WORD.match(text, e)
    if not m or _is_unit(m.group(1)):
        return False                # a unit: `4.20 step/s`, `812 images/s`, `1.2 GB`
    rest = text[m.end():m.end() + 40]
    if re.match(r"\s*[:=]\s*\{", rest):
        return False                # the next name's value is a dict (InternEvo's `grad_norm={'0_default': ..}`)
    return not re.match(r"\s*['\"]?\s*[:=]?\s*['\"]?\s*[-+(]?(?:\d|\.\d|nan|inf)", rest, re.I) and \
        not re.match(r"(?:\s+\(?[A-Za-z][\w/]*+\)?){0,3}\s*['\"]?\s*[:=]?\s*[-+]?(?:\d|nan|inf)", rest, re.I)


def _unit_after(text: str, e: int) -> str:
    m = _UNIT.match(text, e)
    if not m:
        return ""
    return {"ms": "_ms", "%": "_pct"}.get(m.group(1) or "", "")


def _consumed(spans: list[tuple[int, int]], s: int, e: int) -> bool:
    return any(a <= s and e <= b for a, b in spans)


class _Taken:
    """Spans already read, asked "is s..e inside one of them?" in log time: a line with
    thousands of fractions (`1/2 1/2 ...`) stays linear."""

    def __init__(self, spans: list[tuple[int, int]]):
        spans = sorted(spans)
        self.starts = [a for a, _ in spans]
        self.reach = list(itertools.accumulate((b for _, b in spans), max))

    def __contains__(self, span: tuple[int, int]) -> bool:
        i = bisect.bisect_right(self.starts, span[0])
        return i > 0 and self.reach[i - 1] >= span[1]


def parse(raw: str) -> Parsed:
    """The metrics, counters, stream and overflow of one raw line."""
    out = Parsed()
    text = _text_of(raw)
    if text is None:
        return out
    text = _unglue(text)
    if said_nan(text, out, Value):
        return out
    ov = find_event(text)
    if _done_before_counters(text, ov, out):
        return out
    taken: list[tuple[int, int]] = []
    _counters(text, ov, out, taken)
    _epoch_and_bars(text, out, taken)
    epoch_words(text, out, taken)
    if ov is not None:
        out.overflow = ov
        if text[:ov["start"]].strip():
            # a message glued behind a progress frame: the frame's metrics are read too (the
            # words after it are the message's, never metrics); `split_event` parts them
            _metrics(text[:ov["start"]], out, taken)
        if ov.get("loss"):
            # a message that is the run's own metric line (MindSpore's loss-scale callbacks):
            # the loss it names is the row's (its other words stay the message's)
            s, e = ov["loss"]
            out.values.append(Value("loss", s, e, to_const(text[s:e]) if is_const(text[s:e]) else None))
        return out
    _metrics(text, out, taken)
    _drop_what_is_no_row(text, out)
    for v in out.values:
        if v.column == out.total_letter:
            v.column = "total_loss"          # `B: | C: | M: | S: | T:`: T is the sum it prints
    return out


# WaveGlow forks' `print("step_{}:\tloss_{:.9f}".format(i, loss))`: each name glued to its value
# by `_`; only a line made of such pairs is read so (`top_5: 0.9` keeps its name)
_GLUED_LINE = re.compile(r"\s*+(?:[A-Za-z]++_[-+]?\d++(?:\.\d++)?(?:[eE][-+]?\d++)?\s*+(?:[:,|;]\s*+)?){2,}")
_GLUE = re.compile(r"(?<=[A-Za-z])_(?=[-+]?\d)")


def _unglue(text: str) -> str:
    """`step_78620:  loss_4191.68` as `step 78620:  loss 4191.68` (same length: spans hold)."""
    if "_" not in text or not _GLUED_LINE.fullmatch(text):
        return text
    return _GLUE.sub(" ", text)


def _text_of(raw: str) -> str | None:
    """The line cleaned, or None where it can hold nothing: a fence, a line too long to be a
    logger's, a blank one, NCCL's own log (host:pid:tid, ranks, channels; never a metric)."""
    if is_fence(raw) or len(raw) > LONGEST_LINE:
        return None
    text = clean(raw)
    if not text.strip() or _LIBRARY_LOG.search(text):
        return None
    return text


def _done_before_counters(text: str, ov: dict | None, out: Parsed) -> bool:
    """Lines read whole before any counter: code, a config (one entry a line or a dump of the
    run's parameters), pycocotools' summary. True where `out` is final."""
    # a framework's own message is never code, whatever its words look like (Paddle's
    # `decrease to: 32768.0*0.5`): the code test sees the line without it
    rest = text if ov is None else text[:ov["start"]] + " " * (ov["end"] - ov["start"]) + text[ov["end"]:]
    if is_code(rest) or _CONFIG_LINE.match(rest):
        # code, or a config printed one entry a line (DeepSpeed's `"loss_scale": 0,`, its
        # `name ...... value`): kept, as code, only to find the dump around it (`columns.without_code`)
        out.code = True
        return True
    if _config_dump(rest) and not ("DLLL {" in text and _DLLL_LOG.search(text)):
        # the run's parameters printed mid-log: config, never a row (a message in it, DLLogger's
        # `PARAMETER loss_scale : 32768.0`, is read: the words around it are the test); DLLogger's
        # JSON record of a step is none (its `timestamp`, `type` are strings)
        return True
    coco = _COCO.search(text)
    if coco:
        # pycocotools' summary: the headline AP (IoU 0.50:0.95, all areas, 100 detections) is the
        # eval's number; the other eleven rows are its breakdown, not metrics of the run
        if coco.group(1) == "Precision" and re.search(r"IoU=0\.50:0\.95 \| area=\s*all \| maxDets=\s*100", text):
            out.values.append(Value("val_coco_mAP", coco.start(2), coco.end(2)))
            out.stream = "val"
        return True
    return False


def _counters(text: str, ov: dict | None, out: Parsed, taken: list[tuple[int, int]]) -> None:
    """The step counters of each kind (the first match of each, none inside another's span)."""
    bar = _CIFAR_BAR.match(text)
    if bar:
        taken.append(bar.span())      # its count is the batch of the epoch, its `Step:` a time
    for pattern in _LEAD_EPOCH_ITER:
        m = pattern.match(text)
        if m:
            out.epoch, out.counters["iter"] = m.span(1), m.span(2)
            out.total_letter = "T" if m.group(0).rstrip().endswith("||") else None
            taken.append(m.span())
            break
    for kind, pattern in _COUNTERS:
        if kind in out.counters:
            continue
        m = _last_bar(text, ov) if kind == "tqdm" else pattern.search(text)
        if m and not _consumed(taken, *m.span(1)):
            out.counters[kind] = m.span(1)
            if (m.lastindex or 0) >= 2 and m.group(2):
                out.period = m.span(2)
            taken.append(m.span())


def _epoch_and_bars(text: str, out: Parsed, taken: list[tuple[int, int]]) -> None:
    """The epoch (with its batch i/N), its first number, a MetricLogger bar's i, a Keras bar."""
    m = _BAR_EPOCH.match(text) if out.epoch is None else None
    if m:
        out.epoch = m.span(1)
        taken.append(m.span())
    for pattern in _EPOCH_BATCH if out.epoch is None else ():
        m = pattern.search(text)
        if m:
            out.epoch, out.batch = m.span(1), (m.span(2), m.span(3))
            taken.append(m.span())
            break
    if out.epoch is None:
        m = _EPOCH.search(text)
        if m:
            out.epoch = m.span(1)
            taken.append(m.span())
    if out.epoch is not None:
        out.epoch_base = 1 if _ONE_BASED.search(text) else 0 if _ZERO_BASED.search(text) else None
    elif not out.counters:
        m = _LOGGER_BAR.search(text)
        word = _HEADER_WORD.search(text, max(0, m.start() - 40), m.start()) if m else None   # always matches
        if m and word and word.group(1).lower() not in _EVAL_HEADERS:
            # MetricLogger.log_every under a header with no epoch (dinov2's `Training  [  40/N]
            # eta:`): its i counts the run's iterations
            out.counters["iteration"] = m.span(1)
            taken.append(m.span())
    m = _KERAS_BAR.match(text)
    if m:
        out.progress = (m.span(1), m.span(2))
        taken.append(m.span())


def _drop_what_is_no_row(text: str, out: Parsed) -> None:
    """Values and counters that are no metric row after all: a section header's numbers, a
    size at the end of a sentence, a counter in a sentence."""
    if out.values and (out.counters or out.epoch is not None) and _section_header(text, out):
        out.values = []
    if (out.values and not out.counters and out.epoch is None and all(_SIZE.match(v.column) for v in out.values)
            and len(_ALPHA_WORD.findall(text, 0, out.values[0].name_start or 0)) >= 2):
        # `Loading dataset ..., number of examples: 66620`: a size at the end of a sentence, no
        # metric (alone, `number of parameters: 10.65M` stays: the preamble's config reads it)
        out.values = []
    if not out.values and (out.counters or out.epoch is not None) and _sentence(text):
        out.counters, out.epoch, out.batch, out.period = {}, None, None, None


def _config_dump(text: str) -> bool:
    """The run's parameters printed as one line: an argparse Namespace, DLLogger's PARAMETER
    line, a dict of hyper-parameters."""
    if _PARAM_LINE.search(text):
        return True
    if "{'" not in text and '{"' not in text:
        return False
    params = words = 0
    for m in _DICT_ENTRY.finditer(text):
        params += bool(_PARAM_KEY.search(m.group(1)))
        words += m.group(2) is not None
        if params >= 2 or words >= 2:
            return True
    return False


def _last_bar(text: str, ov: dict | None) -> re.Match | None:
    """The last tqdm counter before the message: two bars printed on one line (an inner
    rollout bar, then the training bar and what it carries) are at the outer bar's step."""
    last = None
    for frame in _TQDM.finditer(text, 0, len(text) if ov is None else ov["start"]):
        last = frame            # (not a list: a 200 MB line of \r frames holds millions)
    return last


def _metrics(text: str, out: Parsed, taken: list[tuple[int, int]]) -> None:
    """The line's stream and its name/value pairs."""
    taken = taken + [m.span() for m in _FRACTION.finditer(text)]
    m = _EPOCH_STREAM.search(text) or _LINE_STREAM.match(text)
    if m:
        out.stream = _STREAMS[next(g for g in m.groups() if g).lower()]
    if _SKIP_LINE.search(text) or not out.counters and _TABLE_ROW.match(text):
        return
    m = _LAUNCH_LINE.match(text)
    if m and m.group(1).lower() in _LAUNCH_FACTS:
        return
    _values(text, out, taken)
    if out.values and _prose(text, out):
        out.values = []


def split_event(parsed: Parsed) -> list[Parsed]:
    """A line that is a metric frame and a message glued behind it, as two: the frame (its
    metrics, the counters printed before the message) and the message (the frame's counters
    kept: the step it was printed at). Any other line: itself."""
    ov = parsed.overflow
    if ov is None or not parsed.values:
        return [parsed]
    start = ov["start"]
    # the counters before the message, and the step the message names itself where it is the
    # run's own metric line (its loss read into the frame: `parse`)
    own = ov.get("step") if ov.get("loss") else None
    before = {k: s for k, s in parsed.counters.items() if s[1] <= start or s == own}
    epoch = parsed.epoch if parsed.epoch and parsed.epoch[1] <= start else None
    frame = dataclasses.replace(parsed, overflow=None, counters=before, epoch=epoch,
                                batch=parsed.batch if epoch else None,
                                epoch_base=parsed.epoch_base if epoch else None)
    message = dataclasses.replace(parsed, values=[], stream=None)
    return [frame, message]


def _section_header(text: str, out: Parsed) -> bool:
    """A counter's header naming a part of the run (`[Epoch=000/020] Stage 1`, `Epoch 3 Phase
    2`): whole numbers after a word with no `:` or `=`, none a metric's word."""
    return all(text[v.start:v.end].isdigit() and v.name_start is not None
               and not re.search(r"[:=]", text[v.name_start:v.start])
               and not _METRIC_WORD.search(v.column) for v in out.values)


_COUNTER_WORDS = {"step", "steps", "iter", "iters", "iteration", "epoch", "global", "batch", "num", "updates",
                  "s", "it"}


def _sentence(text: str) -> bool:
    """A counter in a sentence (`Test finish iter 3`, `Saving at step 500`, `Loaded from epoch
    2`), not a step header (`[step=10/100]`, `Epoch 3/10`, `iter 10:`): two other words."""
    return sum(1 for w in _ALPHA_WORD.findall(text) if w.lower() not in _COUNTER_WORDS) >= 2


_ALPHA_WORD = re.compile(r"(?<![\w.])[A-Za-z][a-z]+(?![\w.])")


def _prose(text: str, out: Parsed) -> bool:
    """A sentence with a few numbers in it (a generated sample, a banner), not a metric line."""
    named = sum(len(_ALPHA_WORD.findall(v.column)) for v in out.values)
    # a value is never a word of prose, even spelled in letters: a row whose every loss is
    # `nan` (PaddleDetection's `loss_xy: nan loss_wh: nan ... loss: nan`) stays a row
    spelled = sum(len(_ALPHA_WORD.findall(text, v.start, v.end)) for v in out.values)
    words = len(_ALPHA_WORD.findall(text)) - spelled
    return words - named > max(10, 3 * named)


def _values(text: str, out: Parsed, taken: list[tuple[int, int]]) -> None:
    last_end = -10
    pending_counter: tuple[str, tuple[int, int]] | None = None
    found: list[tuple[str, int, int, str, int]] = []
    inside = _Taken(taken)
    for m in NUM.finditer(text):
        s, e = m.span()
        if (s, e) in inside:
            last_end = e
            continue
        duration = _DURATION.match(text, e)
        if duration:
            last_end = duration.end()                # `Tot: 41m50s`: a time, no metric
            continue
        before = text[last_end:s]
        if before.strip() in ("(", "") and last_end >= 0 and "(" in before:
            last_end = _skip_paren(text, e)          # `value (running mean)`: the mean is dropped
            continue
        if (not any(c.isdigit() for c in m.group()) and re.search(r"[A-Za-z] $", text[max(0, s - 2):s])
                and re.match(r"\s+[A-Za-z][\w ]*:", text[e:e + 40])):
            continue                                 # `number of nan iterations: 0`: a word
        unit = _unit_after(text, e)
        # Paddle prints a one-element tensor or list: `loss: [7.1234]`, `loss: [nan]`
        boxed = s > 0 and text[s - 1] == "[" and text[e:e + 1] == "]"
        name, name_start = _name_and_start(text, s - 1 if boxed else s)
        if not name and pending_counter is not None and text[last_end:s].strip() == ":":
            # `Validation loss 8416:  0.7117`: the integer was the step, the name is the value's
            name = pending_counter[0]
            out.counters.setdefault("step", pending_counter[1])
            found = [f for f in found if f[1] != pending_counter[1][0]]
        pending_counter = None
        after = text[e:e + 1]
        if after == ":" and m.group().isdigit() and name and text[s - 1:s] != ":":
            # (`words_per_sec/features:0: 3275.1`: `:0` names a TensorFlow tensor, not a step)
            pending_counter = (name, (s, e))
        if (name and name.lower() not in _NOT_METRIC and name.lower() not in _LAUNCH_FACTS
                and not _PATH.search(name) and _name_like(name)
                and not _counts_something(text, e)):
            found.append((name, s, e, unit, name_start))
        unit_m = _UNIT.match(text, e)
        last_end = e + (len(unit_m.group()) if unit_m else 0)
    _name_columns(text, out, found)


def _skip_paren(text: str, e: int) -> int:
    close = text.find(")", e, e + 80)      # a running mean's bracket closes near its value
    return close + 1 if close >= 0 else e


def _clean_name(name: str) -> str:
    name = re.sub(r"\s+", " ", name).strip(" |,;")
    if name.endswith(" value"):              # Megatron's `lm loss value`
        name = name[: -len(" value")]
    return name


def _stream_of(name: str) -> str | None:
    first = re.split(r"[\s_/.]", name.lower(), maxsplit=1)[0]
    return _STREAMS.get(first)


# A progress bar's rate, after its `n/N` counter: tqdm's `450/1000 [00:30<00:37, 14.8it/s, ...`
# and Rich's `450/1000 0:00:30 • 0:00:37 14.80it/s ...` (Lightning's two bars; `clean` may have
# blanked the times); what follows it is the bar's postfix, the metrics as they stand at this batch.
_BAR_RATE = re.compile(r"(?<![\d.])\d{1,12}/(?:\d{1,12}|--)\s?(?:\[[^\]]{0,40}?|[ \d:]{1,40}\u2022[ \d:-]{1,40}?)"
                       r"(?<![\d.])\d{1,9}(?:\.\d{1,6})?\s?(?:it/s|s/it)")


def _name_columns(text: str, out: Parsed, found: list[tuple[str, int, int, str, int]]) -> None:
    names = [_clean_name(n) for n, *_ in found]
    lower = [n.lower() for n in names]
    has_loss = any("loss" in n for n in lower if _stream_of(n) not in ("val", "test"))
    has_val = any(_stream_of(n) in ("val", "test") for n in lower)
    # Lightning's bar carries the last eval's `val_loss` on every later frame: a train metric in
    # a bar's postfix is the batch's own, not one measured at an eval (nanoGPT's eval line)
    bar = _BAR_RATE.search(text) if has_val else None
    for (_raw_name, s, e, unit, name_start), name, low in zip(found, names, lower):
        stream = _stream_of(low)
        if low in _STREAMS and not any("loss" in n for n in lower if n != low) and not text[s:e].isdigit():
            name, stream = f"{name} loss", _STREAMS[low]                 # `250 val 3.2`
        elif low in _STREAMS:       # `train: 439453125`: a split's size, not its loss
            continue
        if out.stream in ("val", "test") and stream is None and low not in ("lr", "learning rate"):
            name = f"{out.stream}_{name}"
        elif stream == "train" and (has_val or out.stream in ("val", "test")) and not (
                out.epoch is not None and out.step_kind is None) and not (
                bar is not None and name_start >= bar.end() and out.stream is None):
            # the train loss measured at an eval (nanoGPT's `step N: train loss X, val loss Y`); on
            # an epoch's line with no step (SpeechBrain's `epoch: 3, lr: ... - train loss: X -
            # valid loss: Y`) it is the epoch's own train loss
            name = f"eval_{name}"
        elif stream is None and has_val and not has_loss and out.stream is None:
            name = f"val_{name}"                 # the timings of an eval line are the eval's
        if low == "scale" and loss_scale_in_context(text, name_start):
            name = "loss_scale"                  # BMTrain's `lr: 1.0000e-04, scale: 32768.0000` (aliases)
        value = text[s:e]
        const = to_const(value) if is_const(value) else None
        column = (name + unit).encode("utf-8", "replace").decode("utf-8")   # no stray bytes in names
        out.values.append(Value(column, s, e, const, name_start))
    _apart(out)


def _apart(out: Parsed) -> None:
    """A name printed twice in one line (`loss1: 2.1 | loss1: 3.4`, two heads' losses under one
    label) is two columns: the later one is `loss1_2` (as the tables read a repeated header),
    and the line says so (`twice`: the reader warns), never one value silently lost."""
    seen = {v.column for v in out.values}
    if len(seen) == len(out.values):
        return
    count: dict[str, int] = {}
    twice = []
    for k, v in enumerate(out.values):
        n = count[v.column] = count.get(v.column, 0) + 1
        if n > 1:
            column = f"{v.column}_{n}"
            while column in seen:
                column += "_"
            seen.add(column)
            twice.append(v.column)
            out.values[k] = dataclasses.replace(v, column=column)
    out.twice = tuple(dict.fromkeys(twice))
