"""Text logs: the general metric-line reader, refined per framework where that adds meaning.

Any line-oriented log is read by `metriclines` (column-wise, by line shape). The
family is named by evidence over the whole file (the lines of each shape count
once per line): a Megatron iteration line with its loss makes a Megatron log,
whatever DeepSpeed prints beside it. Refinements: Megatron's NaN loss that it
leaves out of its line, its argument dump, grad norms printed as 0.000 when not
computed, DeepSpeed's cumulative `skipped=` and its two engines, fairseq's JSON
lines and HF console dicts, which keep their own line readers.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from postmortem.errors import RunReadError
from postmortem.run import encodings, marianlog, tables
from postmortem.run.aliases import canonical_name
from postmortem.run.assemble import Collector, Series, segment_reason, to_number
from postmortem.run.dialects import progress
from postmortem.run.dialects.entries import NUM  # the catalogue's number, every NaN spelling
from postmortem.run.dialects.progress.darknet import LAUNCH as DARKNET_LAUNCH
from postmortem.run.metriclines import overflow as events
from postmortem.run.metriclines import reader as metriclines
from postmortem.run.metriclines import userloss
from postmortem.run.metriclines.columns import Group, read_groups
from postmortem.run.metriclines.reader import is_metric_log as _named_like_metrics
from postmortem.run.model import Source

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# torchrun's `--tee` label `3: ` is no rank where Darknet's own line starts with its iteration
# (`812: 1.234, 1.456 avg, ...`, `5989: loss=0.444, avg loss=...`: dialects/progress/darknet.py)
_RANK_PREFIX = re.compile(r"^\s*(?:\[default\d+\]:|\[rank\d+\]:|\[\d+\]:"
                          r"|\d+:(?=\s)(?!\s(?:loss=)?[-+\w.()]+, (?:avg loss=|[-+\w.()]+ avg\b)))\s*")

# The catalogue's patterns (run/dialects/progress/): the line readers below use their groups.
MEGATRON = progress.dialect("megatron.iteration").pattern
MEGATRON_ARG = re.compile(r"^\s*([a-z_0-9]+) \.{3,} (\S(?:.*\S)?)\s*$")   # greedy: linear on blanks
DS_STEP = progress.dialect("deepspeed.step").pattern
DS_PPL = progress.dialect("deepspeed.ppl").pattern
FAIRSEQ_JSON = progress.dialect("fairseq.json").pattern
FAIRSEQ_V09 = progress.dialect("fairseq.json_v09")
FAIRSEQ_SIMPLE = progress.dialect("fairseq.simple").pattern
HF_DICT = progress.dialect("hf-console.logs").pattern
PIPE_KV = progress.dialect("kv-pipe.step").pattern
MARIAN_UPDATES = tuple(progress.dialect(f"marian.{k}") for k in ("update_gnorm", "update_v1", "update"))
MARIAN_VALID = tuple(progress.dialect(f"marian.{k}") for k in ("valid", "valid_v1"))
MARIAN_SCALE = progress.dialect("marian.cost_scaling_start")
# the config dump (src/common/config.cpp `LOG(info, "[config] {}", line)`, the YAML a line):
# `precision:` then its items `  - float16`; the first is the type the model trains in
MARIAN_CONFIG = re.compile(r"\[config\] (?:(?P<key>[\w-]+):(?: (?P<value>\S.*))?|  - (?P<item>\S+))$")
# Darknet's lines, the newest shapes first (hank-ai's `loss=`, AlexeyAB's `avg loss`)
DARKNET = tuple(progress.dialect(f"darknet.{k}") for k in ("hank", "alexeyab", "detector", "classifier", "rnn"))
DARKNET_MAP = progress.dialect("darknet.map")
REWARD = re.compile(r"average reward score: (" + NUM + r")")

KV_COLON = re.compile(r"([A-Za-z_][\w./()\- ]*?):\s*(" + NUM + r")(ms|s|%)?(?=\s|$|\||,)")
KV_EQUALS = re.compile(r"([A-Za-z_][\w./]*)=(" + NUM + r")")

# family -> the patterns of its progress and eval lines, whose hits vote for it: the
# catalogue's (run/dialects/progress/, one module per framework); LINE_READERS keep a reader
# of their own, the other families are read by the general reader.
SNIFF = (*progress.family_names(), "metric-lines")


@functools.cache
def _sniff_table() -> dict[str, tuple[re.Pattern[str], ...]]:
    """SNIFF's patterns, compiled the first time a text log is sniffed (not at import)."""
    return {**progress.families(), "metric-lines": ()}
MIN_HITS = 3
# Dialects read by a line reader of their own; every other one by the general reader.
LINE_READERS = ("deepspeed", "fairseq", "hf-console", "kv-pipe", "marian", "darknet")


def is_metric_log(groups: list[Group]) -> bool:
    """A training log: metric-looking names (reader.is_metric_log), or a loss under a name only
    the alias table knows (llm.c's `s:N trl:X`, `tel:X`) on two lines or more."""
    if _named_like_metrics(groups):
        return True
    return sum(len(g.rows) for g in groups
               if any(canonical_name(c) in ("loss", "val_loss") for c in g.values)) >= 2


def clean(line: str) -> str:
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if line[:1] in "[0123456789 ":
        line = _RANK_PREFIX.sub("", line)
    return line.rstrip()


def iter_lines(path: Path) -> Iterator[str]:
    """Lines with tqdm's carriage-return overwrites split apart, prefixes and colours removed."""
    with encodings.open_text(path) as f:
        for raw in f:
            for part in raw.replace("\r\n", "\n").split("\r"):
                if part.strip():
                    yield clean(part)


_CACHE: dict[tuple, tuple[list[Group], str | None, int, list[int]]] = {}


def _grouped(path: Path) -> tuple[list[Group], str | None, int, list[int]]:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _CACHE:
        data, encoding = encodings.utf8_bytes(path)
        binary: list[int] = []
        banners: list[int] = []
        groups, _ = read_groups(data, binary, banners)   # type: ignore[arg-type]  # bytes or a read-only map
        if len(_CACHE) >= 8 or st.st_size > 64 << 20:
            _CACHE.clear()
        # binary bytes pasted in: the first such line; the launch banners' line numbers
        _CACHE[key] = groups, encoding, (min(binary) + 1 if binary else 0), banners
    return _CACHE[key]


def banners_of(path: Path) -> list[int]:
    """The line numbers of the file's launch banners (`columns.LAUNCH_BANNER`)."""
    return _grouped(path)[3]


def groups_of(path: Path) -> list[Group]:
    """The file's lines grouped by shape; the last files' groups are kept for the read."""
    return _grouped(path)[0]


def encoding_of(path: Path) -> str | None:
    """What the file was read from when that was not UTF-8 (None: UTF-8)."""
    return _grouped(path)[1]


def _step_range(path: Path) -> tuple[float, float] | None:
    darknet = _darknet_steps(path)
    if darknet:            # its lines make no group of the shape reader (`_darknet_hits`)
        return float(min(darknet)), float(max(darknet))
    groups = [g for g in groups_of(path) if g.parsed.values or g.parsed.overflow]
    if not groups:
        return None
    lines = metriclines.place(groups, Source(format="", path=str(path)))
    steps = lines.step[lines.keep]
    return (float(steps.min()), float(steps.max())) if len(steps) else None


def pastes_of_one_run(files: list[Path]) -> list[Path] | None:
    """Text logs that are pieces of one run, in step order; None when they are different runs.
    A piece is a paste of a stretch (its steps after the last piece's), or a relaunch resumed
    into a new file (`train_resume.log`): it starts after the last piece started (from a
    checkpoint, before or at its last step) and goes beyond it. Two runs from the same first
    step (seeds, a sweep) are different runs."""
    ranges = []
    for f in files:
        r = _step_range(f)
        if r is None:
            return None
        ranges.append((r, f))
    ranges.sort(key=lambda x: x[0])
    for (a, _), (b, _) in zip(ranges, ranges[1:]):
        if b[0] <= a[1] and not (a[0] < b[0] and b[1] > a[1]):
            return None
    return [f for _, f in ranges]


def read_pastes(files: list[Path], source: Source, dialect: str) -> list[Series]:
    """Pieces of one run, read as one log in step order; a relaunch's piece goes back over the
    steps before it, and is a segment of its own (`assemble`)."""
    if dialect == "darknet":       # read by its own line reader: the pieces' lines in order
        source.warn(f"{len(files)} pieces of one run ({', '.join(f.name for f in files)}): read as one log")
        return _read_by_lines(files[0], source, dialect, (x for f in files for x in iter_lines(f)))
    joined = b"".join(bytes(encodings.utf8_bytes(f)[0]).rstrip(b"\n") + b"\n" for f in files)
    groups, _ = read_groups(joined)
    source.warn(f"{len(files)} pieces of one run ({', '.join(f.name for f in files)}): read as one log")
    return _read_groups(groups, files[0], source, dialect)


def _hits(groups: list[Group]) -> dict[str, int]:
    """Lines that match each dialect's patterns, over the whole file (a shape counts its lines)."""
    hits = dict.fromkeys(SNIFF, 0)
    hits["fairseq-json"] = 0
    for g in groups:
        line = clean(g.text)
        for dialect, patterns in _sniff_table().items():
            if any(p.search(line) for p in patterns):
                hits[dialect] += len(g.rows)
        if FAIRSEQ_JSON.search(line) or FAIRSEQ_V09.search(line):
            hits["fairseq-json"] += len(g.rows)
    return hits


def _metric_lines(groups: list[Group]) -> int:
    return sum(len(g.rows) for g in groups if g.parsed.values)


def _megatron_evidence(groups: list[Group]) -> bool:
    """Megatron iteration lines that carry metrics: the log is Megatron's, even when a
    DeepSpeed engine beside it prints more lines (Megatron-DeepSpeed thins its own)."""
    return any("iteration" in g.parsed.counters and g.parsed.values and MEGATRON.search(clean(g.text))
               for g in groups)


# megatron/arguments.py (_print_args) prints its argument dump between these lines, one
# `  name ..... value` a line; Megatron's own parallelism argument is in every dump
_MEGATRON_ARGS = (b"------------------------ arguments ------------------------",
                  b"-------------------- end of arguments ---------------------",
                  b"  tensor_model_parallel_size ...")


_BANNER_BYTES = 4 << 20          # where Megatron's argument dump is looked for


def _megatron_banner(head: bytes) -> bool:
    return any(marker in head for marker in _MEGATRON_ARGS)


def _marian_evidence(head: bytes) -> int:
    """Marian's display lines in the head: the general reading finds no metric in them
    (`Ep. 1 : Up. 500 : Sen. 64,000 : Cost 5.1 * 3,305 @ 3,412 after ...`), so the groups do
    not count them; one byte search first, the patterns only where it finds `: Up. `."""
    if b" : Up. " not in head:
        return 0
    text = head.decode("utf-8", "replace")
    return sum(1 for line in text.splitlines() if " : Up. " in line
               and any(d.search(line) for d in MARIAN_UPDATES))


def is_marian_valid_log(path: Path) -> bool:
    """A Marian `--valid-log`: validation lines and no display line in its head."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 20)
    except OSError:
        return False
    return b"[valid] " in head and not _marian_evidence(head)


def sniff(path: Path) -> tuple[str | None, int]:
    """The family of the text log at `path` by evidence over the whole file, and its count."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
            if not encodings.looks_like_text(head):
                return None, 0
            # read once: the rest of the head, only for a text file, for the banner below
            head += f.read(_BANNER_BYTES - len(head))
    except OSError:
        return None, 0
    try:
        groups = groups_of(path)
    except (OSError, MemoryError):
        return None, 0
    hits = _hits(groups)
    if _megatron_evidence(groups):
        return "megatron", hits["megatron"]
    if not hits["megatron"] and _megatron_banner(head):
        return "megatron", 1      # cut before its first iteration line: read as what it is
    marian = _marian_evidence(head)
    if marian >= MIN_HITS:
        return "marian", marian
    darknet = _darknet_hits(path, head)
    if darknet >= max(hits.values()) and (darknet >= MIN_HITS or darknet and _darknet_launch(head)):
        return "darknet", darknet      # a run that died in its first steps, after its launch line
    if not groups:
        return None, 0
    ranked = sorted((d for d in SNIFF if d != "metric-lines"), key=lambda d: -hits[d])
    if hits["deepspeed"] >= MIN_HITS and hits[ranked[0]] and ranked[0] not in LINE_READERS:
        # the engine's step lines beside the script's own (a tqdm bar redrawn every step, a
        # print a step): the deepspeed reader reads both (`_deepspeed`), the general one would
        # take the engine's cumulative `skipped=` as per step and lose its lr list
        return "deepspeed", hits["deepspeed"]
    for dialect in ranked:
        n = hits[dialect]
        if n == 0:
            break
        if dialect in LINE_READERS and n < MIN_HITS and n < _metric_lines(groups):
            continue        # a few such lines among others; a dict pasted alone is its family's
        if dialect == "fairseq" and hits["fairseq-json"] >= MIN_HITS:
            return dialect, n
        if dialect in LINE_READERS and dialect != "fairseq" or is_metric_log(groups):
            return dialect, n
    if is_metric_log(groups):
        return "metric-lines", sum(len(g.rows) for g in groups if g.parsed.values)
    return None, 0


# Darknet's step line names none of its numbers (`812: 1.234, 1.456 avg, 0.001 rate, ...`):
# the shape reader keeps no group of them, so its lines are counted here, in a file whose head
# holds one of these words
_DARKNET_WORDS = (b" avg, ", b" avg loss, ", b", avg loss=")


def _darknet_hits(path: Path, head: bytes) -> int:
    """The Darknet step lines over the whole file (dialects/progress/darknet.py)."""
    return len(_darknet_steps(path, head))


def _darknet_launch(head: bytes) -> bool:
    """The head holds Darknet's launch line (`Learning Rate: %g, Momentum: %g, Decay: %g`)."""
    return any(DARKNET_LAUNCH.search(x) for x in head.decode("utf-8", "replace").splitlines()
               if x.startswith("Learning Rate: "))


def _darknet_steps(path: Path, head: bytes | None = None) -> list[int]:
    """The iterations of the file's Darknet step lines; a whole pass only for a file whose head
    holds one (a log that says ` avg, ` otherwise costs a look at its head)."""
    if head is None:
        try:
            with open(path, "rb") as f:
                head = f.read(_BANNER_BYTES)
        except OSError:
            return []
    if not any(w in head for w in _DARKNET_WORDS):
        return []
    lines = (clean(x) for x in head.decode("utf-8", "replace").splitlines() if " avg" in x)
    if not any(d.search(x) for x in lines for d in DARKNET):
        return []
    steps = []
    for line in iter_lines(path):
        if " avg" in line:
            m = next((m for d in DARKNET if (m := d.search(line))), None)
            if m:
                steps.append(int(m["step"]))
    return steps


def _pairs(text: str) -> dict[str, str]:
    """`key: value | key: value` -> {key: value}, units (ms, s, %) folded into the key."""
    out = {}
    for part in text.split("|"):
        if ":" not in part:
            continue
        key, _, value = part.partition(":")
        key, value = key.strip(), value.strip()
        if not key or not value:
            continue
        out[key] = value
    return out


def _kv_tokens(text: str, pattern: re.Pattern) -> dict[str, str]:
    out = {}
    for m in pattern.finditer(text):
        key = m.group(1).strip()
        unit = m.group(3) if pattern is KV_COLON and m.lastindex and m.lastindex >= 3 else None
        if unit == "ms":
            key += "_ms"
        elif unit == "%":
            key += "_pct"
        out[key] = m.group(2)
    return out


class _Parse:
    """Records of one file: (step, {metric: raw value}) in order, plus the frameworks' event
    messages (overflow, skipped step, scale, resume: `metriclines.overflow`), each a record
    of its own whose step is given once the step lines around it are known."""

    def __init__(self, path: Path, source: Source):
        self.path, self.source = path, source
        self.out = Collector(source)
        self.step: int | None = None
        self.steps_read = 0
        self.events: list[events.Event] = []
        self.around: list[list[float]] = []     # per event: [last step line's step, next one's]
        self.waiting: list[int] = []            # events whose next step line is not read yet
        self.ds_steps_seen: dict[int, int] = {}
        self.too_big: list[str] = []
        self.bars = _Bars()
        self.copy: tuple[str, dict] | None = None   # LLaMA-Factory's copy of a step's dict, held
        self.releasing = False
        self.glued: set[int] = set()            # events on the step of a line glued in front
        self.said: dict[str, set[str]] = {}     # catalogue entry -> the names its lines gave
        self.hf_epoch: float | None = None      # the last HF train dict's epoch
        self.hf_own_steps = 0                   # HF dicts that named their own step (ms-swift)
        self.engine_steps: list[int] = []       # DeepSpeed's step lines, in order
        self.user_rows: list[userloss.UserRow] = []   # the script's own loss lines beside them
        self.config_key: str | None = None      # Marian's config dump: the key its items are under
        self.marian_updates = MARIAN_UPDATES     # its release's display line first, once seen
        self.marian_launches = marianlog.Launches()

    def add(self, step: int, values: dict, dialect: str | None = None) -> None:
        if not 0 <= step < 1 << 40:
            # a step no run reaches (20 digits): the line is left out, the rest read
            self.too_big.append(str(step))
            return
        for k in self.waiting:
            self.around[k][1] = float(step)
        self.waiting = []
        self.out.add(step, values)
        self.step = step
        self.steps_read += 1
        if dialect:
            self.said.setdefault(dialect, set()).update(values)

    def attach(self, values: dict, dialect: str | None = None) -> None:
        """Values that belong to the current step (an eval, a reward) without moving it."""
        self.out.add(self.step or 0, values)
        if dialect:
            self.said.setdefault(dialect, set()).update(values)

    def say_dialects(self) -> None:
        """Which catalogue entries' lines each column came from (info's metrics[].dialect)."""
        by_name: dict[str, set[str]] = {}
        for dialect, names in self.said.items():
            for name in names:
                by_name.setdefault(canonical_name(name), set()).add(dialect)
        if "skipped_total" in by_name:        # DeepSpeed's counter, per interval (`_postprocess`)
            by_name.setdefault("skipped", set()).update(by_name["skipped_total"])
        said = self.source.extras.setdefault("series_dialects", {})
        for name, ids in by_name.items():
            said[name] = sorted(set(said.get(name, ())) | ids)

    def overflow(self, line: str, ev: dict, glued: int | None = None) -> None:
        """An event message: kept as a record of its own (its step placed at the end).
        `glued`: the step of the progress line printed in front of it on the same line
        (written at the same moment): the message's step when its own words give none."""
        value = {k: (events.number(line[ev[k][0]:ev[k][1]]) if ev[k] else math.nan)
                 for k in ("scale", "prev_scale", "ratio", "rank", "step")}
        if math.isnan(value["scale"]) and not ev["scale"]:      # Paddle's `decrease to: X*0.5`
            value["scale"] = events.product(value["prev_scale"], value["ratio"])
        if glued is None:
            self.bars.event(line, ev["start"])
        else:
            self.bars.of_event.append(math.nan)     # the frame in front went with the line's dict
            if math.isnan(value["step"]):
                value["step"] = float(glued)
                self.glued.add(len(self.events))
        record = self.out.count
        self.out.add(0, {})                 # its place in the file; the step comes later
        self.events.append(events.Event(record, ev["dialect"], ev["kind"], value["step"],
                                        value["scale"], value["prev_scale"], value["rank"],
                                        bool(ev["scale"]) and math.isnan(value["scale"]),
                                        events.said_norm(line[ev["norm"][0]:ev["norm"][1]])
                                        if ev.get("norm") else None))
        self.around.append([math.nan if self.step is None else float(self.step), math.nan])
        self.waiting.append(len(self.events) - 1)

    def event_series(self, present: set[str]) -> list[Series]:
        if not self.events:
            return []
        if self.bars.used:
            self.bars.place(self.events, self.around, self.glued)
        recs = [e.order for e in self.events]
        adjacent = [False] + [b == a + 1 for a, b in zip(recs, recs[1:])]
        kept, others, repeats = events.merge_repeats(self.events, adjacent)
        index = {id(e): k for k, e in enumerate(self.events)}
        last = [self.around[index[id(e)]][0] for e in kept]
        nxt = [self.around[index[id(e)]][1] for e in kept]
        placed = events.place(kept, nxt, last)
        good = [(e, s) for e, s in zip(kept, placed) if 0 <= s < 1 << 40]
        events.say(self.source, kept, placed, others, repeats, self.steps_read > 0,
                   events.trailing(kept, nxt))
        if not good:
            return []
        orders = np.array([e.order for e, _ in good], dtype=np.int64)
        steps = np.array([s for _, s in good], dtype=np.float64)
        scales = np.array([e.scale for e, _ in good], dtype=np.float64)
        return events.series_of(orders, steps, scales, [e.kind for e, _ in good],
                                [e.dialect for e, _ in good], self.source, present,
                                np.array([e.said_nan for e, _ in good], dtype=bool),
                                np.array([e.prev for e, _ in good], dtype=np.float64),
                                [e.norm for e, _ in good])


# tqdm's frame `{n}/{total} [{elapsed}<{remaining}, {rate}]` (tqdm/std.py format_meter)
TQDM_FRAME = re.compile(r"(?<![\d/.])(\d+)/(\d+) \[[\d:]+<")


class _Bars:
    """HF Trainer's console: ProgressCallback's training bar counts the global step
    (`on_step_end`: `training_bar.update(state.global_step - self.current_step)`, total
    `state.max_steps`) and `on_log` writes each dict with `training_bar.write` (the bar is
    cleared, the dict printed, the bar redrawn): the frame in front of a dict is its step.
    The evaluation bar has another total (`len(eval_dataloader)`) and is not the step."""

    def __init__(self) -> None:
        self.last: tuple[int, int] | None = None   # the last frame seen: (n, total)
        self.fresh = False                         # seen since the last train dict
        self.total: int | None = None              # the training bar's total
        self.of_dict: list[int | None] = []        # per train dict: its frame's counter
        self.of_event: list[float] = []            # per message: a frame glued in front of it
        self.used = False

    def frames(self, text: str) -> None:
        for m in TQDM_FRAME.finditer(text):
            self.last, self.fresh = (int(m.group(1)), int(m.group(2))), True

    def _mine(self) -> int | None:
        if not self.fresh or self.last is None:
            return None
        if self.total is None:
            self.total = self.last[1]
        return self.last[0] if self.last[1] == self.total else None

    def train_dict(self, line: str, start: int) -> None:
        self.frames(line[:start])
        self.of_dict.append(self._mine())
        self.fresh = False

    def event(self, line: str, start: int) -> None:
        glued = TQDM_FRAME.findall(line[:start])
        self.frames(line[:start])
        total_ok = glued and (self.total is None or int(glued[-1][1]) == self.total)
        self.of_event.append(float(glued[-1][0]) if total_ok else math.nan)

    def renumber(self, steps) -> None:
        """Rows' ordinals -> the bar's counters, when every train dict had its frame and they
        never go back (else ordinals stay, and the reader says so)."""
        if not self.of_dict or any(n is None for n in self.of_dict):
            return
        got = [n for n in self.of_dict if n is not None]
        if any(b < a for a, b in zip(got, got[1:])):
            return
        by_ordinal = dict(enumerate(got, start=1))
        for i, s in enumerate(steps):
            if s in by_ordinal:
                steps[i] = by_ordinal[s]
        self.by_ordinal, self.used = by_ordinal, True

    def place(self, events: list, around: list[list[float]], glued: set[int]) -> None:
        """Messages between dicts: their neighbours' steps become counters; a message glued
        to a frame is on that frame's step (written at the same moment), one glued behind a
        dict on that dict's (`glued`: their indexes, on the dict's ordinal so far)."""
        for k, pair in enumerate(around):
            around[k] = [float(self.by_ordinal.get(int(x), x)) if x == x else x for x in pair]
        for k in glued:
            events[k].step = float(self.by_ordinal.get(int(events[k].step), events[k].step))
        for e, n in zip(events, self.of_event):
            if n == n and math.isnan(e.step):
                e.step = n


def _deepspeed(p: _Parse, line: str) -> None:
    m = DS_STEP.search(line)
    if m:
        step = int(m.group(1))
        # Two engines (RLHF actor and critic) print the same step: keep them apart.
        k = p.ds_steps_seen[step] = p.ds_steps_seen.get(step, 0) + 1
        prefix = "" if k == 1 else f"engine{k}/"
        lrs = [x for x in m.group(3).split(",") if x.strip()]
        values = {f"{prefix}skipped_total": m.group(2)}
        if lrs:
            values[f"{prefix}lr"] = lrs[0]
        p.add(step, values, "deepspeed.step")
        p.engine_steps.append(step)
        return
    m = DS_PPL.match(line)
    if m:   # the eval before any training step counts as step 0
        p.attach({"val_ppl": m.group(1)}, "deepspeed.ppl")
        return
    if "loss" in line.lower():
        # the training script's own loss line: a record now, its step once the engine's are known
        got = userloss.loss_values(line)
        if got is not None:
            p.user_rows.append(userloss.UserRow(p.out.count, got[1], len(p.engine_steps)))
            p.out.add(p.step or 0, got[0])


def _place_user_rows(p: _Parse, source: Source) -> None:
    """The script's loss rows on the engine's steps (`userloss.steps_of`), said once."""
    steps = userloss.steps_of(p.user_rows, p.engine_steps)
    for row, step in zip(p.user_rows, steps):
        p.out.steps[row.record] = step
    own = p.engine_steps and all(r.counter == s for r, s in zip(p.user_rows, steps))
    source.extras["user_loss_steps"] = ("the script's own step counter (it keeps to the engine's)" if own
                                        else "the engine's steps: the script's lines between two "
                                             "engine step lines spread evenly over that interval")


def _fairseq(p: _Parse, line: str) -> None:
    m = FAIRSEQ_JSON.search(line)
    if m:
        try:
            data = json.loads(m.group(2))
        except json.JSONDecodeError:
            return
        step = to_number(data.get("num_updates"))
        if step is None or step != step:
            return
        kind = m.group(1)
        if kind == "train":         # the epoch's averages: not a step value
            p.source.extras.setdefault("epoch_summaries", []).append(data)
            return
        drop = {"num_updates", "epoch", "update"}
        values = {(k if kind == "train_inner" else k if k.startswith("valid_") else f"valid_{k}"): v
                  for k, v in data.items() if k not in drop}
        p.add(int(step), values, "fairseq.json")
        return
    if FAIRSEQ_V09.search(line):
        _fairseq_v09(p, line)
        return
    m = FAIRSEQ_SIMPLE.search(line)
    if m:
        values = _kv_tokens(m.group(1), KV_EQUALS)
        step = to_number(values.pop("num_updates", None) or "nan")
        if step is not None and step == step:
            p.add(int(step), values, "fairseq.simple")


def _fairseq_v09(p: _Parse, line: str) -> None:
    """fairseq v0.9's bare JSON bar (`print(json.dumps(stats))`, no tag): `log`'s lines carry
    `num_updates`; `print`'s prefix every key with the tag (`valid_loss`, `valid_num_updates`),
    `train_` being the epoch's averages (kept aside, as the tagged reader does)."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return
    counter = next((k for k in data if k == "num_updates" or k.endswith("_num_updates")), None)
    step = to_number(data.get(counter)) if counter else None
    if counter is None or step is None or step != step:
        return
    tag = counter[:-len("num_updates")]
    if tag == "train_":
        p.source.extras.setdefault("epoch_summaries", []).append(data)
        return
    values = {(k if not tag or k.startswith("valid") else f"valid_{k}"): v
              for k, v in data.items() if k not in ("epoch", "update", counter)}
    p.add(int(step), values, "fairseq.json_v09")


def is_fairseq_v09_json(line: bytes) -> bool:
    """A first line of fairseq v0.9's bare JSON bar: a text log of its own (its steps are
    `num_updates`, its keys tagged), not a table of JSON lines."""
    return bool(FAIRSEQ_V09.search(line.decode("utf-8", "replace")))


_HF_PAIR = re.compile(r"'([^']+)':\s*(" + NUM + r"|'[^']*')")


# LLaMA-Factory's LogCallback (hiyouga/LLaMA-Factory v0.5.x src/llmtuner/extras/callbacks.py
# `on_log`, v0.6+ src/llamafactory/train/callbacks.py) logs `{'loss': {:.4f}, 'learning_rate':
# {:2.4e}, 'epoch': {:.2f}}` for the step whose dict the Trainer then prints itself: one step
_LF_COPY = re.compile(r"\b(?:llmtuner\.extras|llamafactory\.train)\.callbacks\b")


def _same_epoch(a: dict, b: dict) -> bool:
    try:
        return abs(float(a["epoch"]) - float(b["epoch"])) < 0.006     # printed `{:.2f}` in the copy
    except (KeyError, ValueError):
        return False


def _held_copy(p: _Parse, line: str, start: int, values: dict) -> bool:
    """True where the line is LLaMA-Factory's copy, held until the next dict says whether the
    Trainer printed the step's own (then the rounded copy is dropped) or not (then it is read)."""
    train = "loss" in values or "grad_norm" in values
    copy = train and _LF_COPY.search(line, 0, start) is not None
    if p.copy is not None:
        held, p.copy = p.copy, None
        if not (train and not copy and _same_epoch(held[1], values)):
            release_copy(p, held[0])
    if copy and not p.releasing:
        p.copy = (line, values)
        return True
    return False


def release_copy(p: _Parse, line: str) -> None:
    """A held copy read as its step (no Trainer dict after it: the logger's own file)."""
    p.releasing = True
    _hf_console(p, line)
    p.releasing = False


def _hf_console(p: _Parse, line: str) -> None:
    m = HF_DICT.search(line)
    if not m:
        if "/" in line:
            p.bars.frames(line)
        return
    values = {k: v.strip("'") for k, v in _HF_PAIR.findall(m.group(0))}
    if _held_copy(p, line, m.start(), values):
        return
    if "train_runtime" in values:
        p.source.extras["summary"] = values
        return
    own = _hf_own_step(values)
    p.hf_own_steps += own is not None
    # Transformers' dicts carry no step: train dicts are counted (the bar's frames give the
    # global step at the end, `_Bars`); eval dicts join the last one. ms-swift's carry theirs.
    if "loss" in values or "grad_norm" in values:
        p.bars.train_dict(line, m.start())
        _hf_relaunch(p, to_number(values.get("epoch")))
        p.add((p.step or 0) + 1 if own is None else own, values, "hf-console.logs")
    elif own is not None and own != p.step:
        p.add(own, {k: v for k, v in values.items() if k != "epoch"}, "hf-console.logs")
    else:
        p.attach({k: v for k, v in values.items() if k != "epoch"}, "hf-console.logs")


# ms-swift (modelscope/ms-swift 2.x/3.x swift/trainers/callback.py `add_train_message`) adds
# `logs['global_step/max_steps'] = f'{state.global_step}/{state.max_steps}'` to each dict it
# prints: the dict's own step, its numerator
_HF_STEP_KEYS = ("global_step/max_steps",)


def _hf_own_step(values: dict) -> int | None:
    """The step a console dict names itself (taken out of its values), else None."""
    for key in _HF_STEP_KEYS:
        if key in values:
            n = tables.step_number(values.pop(key))
            if n is not None and n == n and n == int(n):
                return int(n)
    return None


def _hf_relaunch(p: _Parse, epoch: float | None) -> None:
    """A train dict whose epoch is below the last one's: the Trainer was launched again into
    the same log (the epoch, `state.epoch`, never goes back within one launch; the dicts have
    no step of their own to show it). The dict opens a segment (`Source.resumes`)."""
    if epoch is None or math.isnan(epoch):
        return
    last = p.hf_epoch
    p.hf_epoch = epoch
    if last is not None and epoch < last - 1e-6:
        p.source.resumes.append(p.out.count)


def _kv_pipe(p: _Parse, line: str) -> None:
    m = PIPE_KV.search(line)
    if m:
        values = _pairs(m.group(2))
        p.add(int(m.group(1)), values, "kv-pipe.step")
        return
    m = REWARD.search(line)
    if m and p.step is not None:
        p.attach({"reward": m.group(1)})


def _marian(p: _Parse, line: str) -> None:
    """Marian's display line (the update and the display window's mean cost), its validation,
    the cost scaling's first factor and its config dump (`precision`); a `Training started`
    after updates were read is a relaunch (every launch prints it; the updates go on)."""
    if "Up. " in line:
        for d in p.marian_updates:
            m = d.search(line)
            if m:
                if d is not p.marian_updates[0]:    # `Cost nan` fits two releases' shapes: keep the file's
                    p.marian_updates = (d, *(x for x in MARIAN_UPDATES if x is not d))
                names = m.re.groupindex
                values = {k: m.group(k) for k in ("loss", "lr", "grad_norm") if k in names and m.group(k)}
                p.add(int(m.group("step")), values, d.id)
                return
    if "[valid] " in line:
        for d in MARIAN_VALID:
            m = d.search(line)
            if m:
                p.add(int(m.group("step")), {f"val_{m.group('metric')}": m.group("value")}, d.id)
                return
    m = MARIAN_SCALE.search(line)
    if m:       # the factor this launch starts from: the scale at the last update read (0: none)
        p.out.add(p.step or 0, {"loss_scale": m.group("loss_scale")})
        p.said.setdefault(MARIAN_SCALE.id, set()).add("loss_scale")
        return
    if "[config] " in line:
        _marian_config(p, line)
    elif line.endswith("Training started"):
        restored = any(p.events[k].kind == "resume" for k in p.waiting)
        p.marian_launches.launch(p.steps_read, restored, math.nan if p.step is None else float(p.step))
        if not p.steps_read or restored:    # the first launch, or a restore message said it
            return
        at = p.out.count
        p.source.resumes.append(at)
        segment_reason(p.source, "Marian's `Training started` again", [at], "a relaunch (Training started)")


MARIAN_SKIP = progress.dialect("marian.skip_nan_loss").pattern


def _marian_skipped(p: _Parse, line: str) -> None:
    """`skipping {}-th update due to loss being {}` (1.9.0, 1.10.0) names the updates done
    (`numberOfBatches()`): the skipped one is the next, and its loss is the one printed."""
    m = MARIAN_SKIP.search(line)
    if m:
        step = int(m.group("done")) + 1
        p.events[-1].step = float(step)
        p.out.add(step, {"loss": m.group("cost")})


def _marian_config(p: _Parse, line: str) -> None:
    """`precision:` and its first item, or `fp16: true`: the dtype the run trains in."""
    m = MARIAN_CONFIG.search(line)
    if not m:
        return
    if m.group("key"):
        p.config_key = m.group("key")
        if m.group("key") == "fp16" and m.group("value") == "true":
            _marian_dtype(p, "fp16", "fp16: true")
        return
    if p.config_key == "precision":
        p.config_key = None             # the first item only: the type of the forward pass
        item = m.group("item")
        dtype = {"float16": "fp16", "float32": "fp32", "bfloat16": "bf16"}.get(item)
        if dtype:
            _marian_dtype(p, dtype, f"precision: {item} first")


def _marian_dtype(p: _Parse, dtype: str, said: str) -> None:
    if "dtype" not in p.source.extras:
        p.source.extras["dtype"] = dtype
        p.source.extras["dtype_from"] = f"Marian's config dump ({said})"


def _darknet(p: _Parse, line: str) -> None:
    """Darknet's console (dialects/progress/darknet.py): a step a line, its loss, `avg_loss`
    and LR; the mAP of the step's validation joins that step; a launch line after steps is a
    relaunch into the same log (a segment, whether the iteration goes on or starts again)."""
    if "avg" in line:
        for d in DARKNET:
            m = d.search(line)
            if m:
                values = {"loss": m["loss"], "avg_loss": m["avg"], "lr": m["lr"]}
                if "epoch" in m.re.groupindex and m["epoch"] is not None:
                    values["epoch"] = m["epoch"]
                p.add(int(m["step"]), values, d.id)
                return
    if "mAP@" in line:
        m = DARKNET_MAP.search(line)
        value = to_number(m["map"]) if m else None
        if m and value is not None and p.steps_read:
            # V4+ hank-ai prints a percent, the others a fraction: read as the fraction
            p.attach({f"val_mAP@{m['iou']}": value / 100 if m["pct"] else value}, DARKNET_MAP.id)
        return
    if p.steps_read and DARKNET_LAUNCH.search(line):
        segment_reason(p.source, "Darknet's launch line again", [p.out.count],
                       "Darknet's launch line again (`Learning Rate: ..., Momentum: ..., Decay: ...`): "
                       "a relaunch into the same log")
        p.source.resumes.append(p.out.count)


PARSERS = {"deepspeed": _deepspeed, "fairseq": _fairseq, "hf-console": _hf_console, "kv-pipe": _kv_pipe,
           "marian": _marian, "darknet": _darknet}


def _dtype_from_args(args: dict[str, str]) -> str | None:
    if args.get("bf16") == "True":
        return "bf16"
    if args.get("fp16") == "True":
        return "fp16"
    if args.get("fp16") == "False" and args.get("bf16") == "False":
        return "fp32"
    return None


def read_text_log(path: Path, source: Source, dialect: str) -> list[Series]:
    if dialect in LINE_READERS and not (dialect == "fairseq" and not _has_fairseq_json(path)):
        return _read_by_lines(path, source, dialect)
    return _read_general(path, source, dialect)


def _has_fairseq_json(path: Path) -> bool:
    return _hits(groups_of(path))["fairseq-json"] > 0


def _read_general(path: Path, source: Source, dialect: str) -> list[Series]:
    return _read_groups(groups_of(path), path, source, dialect, banners=True)


def _banner_resumes(banners: list[int], rows: np.ndarray, source: Source) -> None:
    """A launch banner (`columns.LAUNCH_BANNER`, at line numbers `banners`) between metric
    lines (`rows`, sorted) opens a segment at the next metric line (`Source.resumes`); a
    run's own banners, before its first metric line, do not."""
    last = -1
    for line in sorted(banners):
        i = int(np.searchsorted(rows, line))
        if 0 < i < len(rows) and i != last:       # metric lines before and after; one per stretch
            source.resumes.append(int(rows[i]))          # the relaunch's first metric line
            segment_reason(source, "a launch banner again", [int(rows[i])], "a launch banner again (a relaunch)")
            last = i


def _read_groups(groups: list[Group], path: Path, source: Source, dialect: str,
                 banners: bool = False) -> list[Series]:
    omitted: list[int] = []
    if dialect == "megatron":
        # the DeepSpeed engine's own step lines beside Megatron's say nothing Megatron's do not
        groups = [g for g in groups if "iteration" in g.parsed.counters or g.parsed.overflow]
        for g in groups:
            _megatron_nan_loss(g, omitted)
    if dialect == "megatron" and not any("iteration" in g.parsed.counters for g in groups):
        raise RunReadError(path, "a Megatron log with no iteration line (its arguments are printed, "
                                 "then it ends before the first `iteration N/M |` line)")
    if not groups or not is_metric_log(groups):
        raise RunReadError(path, f"no {dialect} metric lines")
    lines = metriclines.place(groups, source)
    if banners:
        _banner_resumes(banners_of(path), np.sort(lines.rows[lines.keep]), source)
    series = metriclines.series(lines, source)
    _say_dialects(groups, source)
    if not series:
        raise RunReadError(path, f"no {dialect} metric lines")
    source.extras["dialect"] = dialect
    _say_encoding(path, source)
    if dialect == "megatron":
        args = _megatron_args(path)
        if args:
            source.extras["args"] = args
            dtype = _dtype_from_args(args)
            if dtype:
                source.extras["dtype"] = dtype
        source.warn("Megatron leaves a NaN loss out of its line (it averages over non-NaN "
                    "iterations): see nan_iterations")
        if omitted:
            source.warn(f"{sum(omitted)} iteration line(s) without a loss")
    return _postprocess(series, source)


def _say_dialects(groups: list[Group], source: Source) -> None:
    """Which catalogue entries' lines each column came from (info's metrics[].dialect)."""
    by_name: dict[str, set[str]] = {}
    for g in groups:
        d = progress.of_line(clean(g.text)) if g.parsed.values else None
        if d is None:
            continue
        for name in g.values:
            by_name.setdefault(canonical_name(name), set()).add(d.id)
    said = source.extras.setdefault("series_dialects", {})
    for name, ids in by_name.items():
        said[name] = sorted(set(said.get(name, ())) | ids)


def _say_encoding(path: Path, source: Source) -> None:
    encoding = encoding_of(path) if path.is_file() else None
    if encoding:
        source.extras["encoding"] = encoding
        source.warn(f"{path.name} is not UTF-8: read as {encoding}; bytes that read as "
                    f"neither are shown as \ufffd")
    if path.is_file():
        line = _grouped(path)[2]
        if line:
            source.warn(f"{path.name} holds binary bytes (NULs, from line {line}): the lines that "
                        f"hold them were skipped")


def _megatron_nan_loss(g: Group, omitted: list[int]) -> None:
    """An iteration line without its loss: NaN where Megatron counted NaN iterations."""
    if g.parsed.stream == "val" or "iteration" not in g.parsed.counters or g.parsed.overflow:
        return
    names = [c.lower() for c in g.values]
    if any(c.endswith("loss") for c in names):
        return
    omitted.append(len(g.rows))
    nan_iters = next((v for c, v in g.values.items() if c.lower() == "number of nan iterations"), None)
    if nan_iters is not None and (nan_iters > 0).any():
        g.values["lm loss"] = np.full(len(g.rows), np.nan)
        g.masks["lm loss"] = nan_iters > 0


def _megatron_args(path: Path, limit: int = 20_000) -> dict[str, str]:
    args: dict[str, str] = {}
    with encodings.open_text(path) as f:
        for i, line in enumerate(f):
            if i >= limit or MEGATRON.search(line):
                break
            m = MEGATRON_ARG.match(clean(line))
            if m:
                args[m.group(1)] = m.group(2)
    return args


# What a framework prints in front of its message, left at the end of the text before it when
# the message is glued behind a progress line: DeepSpeed's logger (deepspeed/utils/logging.py
# "[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] "), fairseq's
# (fairseq_cli/train.py "%(asctime)s | %(levelname)s | %(name)s | "), its v0.6-v0.9 `| WARNING: ` and
# v0.10+ `NOTE: `, DeepSpeed's `[deepspeed] ` / `[deepscale] `, torchrun's `[rank3]:`.
_LEAD_IN = re.compile(r"(?:\s*(?:\[\d{4}-\d\d-\d\d [\d:,.]+\]\s*\[[A-Z]+\]\s*\[[\w.]+:\d+:\w+\]"
                      r"|\d{4}-\d\d-\d\d [\d:,.]+ \| [A-Z]+ \| [\w.]+ \|"
                      r"|\|\s*WARNING:|NOTE:|\[deep(?:speed|scale)\]|\[rank\d+\]:))+\s*$")
_LEAD_IN_AT_MOST = 200      # the prefixes are short: the search stays linear in the line


def _without_lead_in(head: str) -> str:
    """The text before a glued message without the message's own prefix (its logger's, its
    lead-in words), so that the progress line in front reads as printed alone."""
    tail = head[-_LEAD_IN_AT_MOST:]
    m = _LEAD_IN.search(tail)
    return head[:len(head) - len(tail) + m.start()] if m else head


def _read_by_lines(path: Path, source: Source, dialect: str,
                   lines: Iterator[str] | None = None) -> list[Series]:
    """The file's lines (or `lines`: pieces of one run, joined) through the dialect's reader."""
    parse = PARSERS[dialect]
    p = _Parse(path, source)
    for line in iter_lines(path) if lines is None else lines:
        ev = events.find_event(line)
        if ev is None:
            parse(p, line)
            continue
        # a progress line with a message glued behind it: the line's metrics first (read from
        # the text before the message, never the message's words), then the message on its step
        read = p.steps_read
        head = _without_lead_in(line[:ev["start"]])
        if head.strip():
            parse(p, head)
        p.overflow(line, ev, p.step if p.steps_read > read else None)
        if ev["dialect"] == "marian.skip_nan_loss":
            _marian_skipped(p, line)
        elif dialect == "marian":
            if ev["kind"] == "resume" and not p.steps_read:
                p.marian_launches.restored()
            p.marian_launches.message(len(p.events) - 1, ev["dialect"], line, p.steps_read)
    if p.too_big:
        source.warn(f"{len(p.too_big)} line(s) with a step out of range (e.g. {p.too_big[0][:24]}) "
                    f"were left out")
    if p.copy is not None:
        release_copy(p, p.copy[0])
    if p.user_rows:
        _place_user_rows(p, source)
    if not p.steps_read and not p.events and not p.user_rows:
        raise RunReadError(path, f"no {dialect} metric lines")
    source.extras["dialect"] = dialect
    _say_encoding(path, source)
    p.say_dialects()
    two_engines = any(k > 1 for k in p.ds_steps_seen.values())
    if two_engines:
        source.warn("two DeepSpeed engines print the same steps (e.g. RLHF actor and critic): "
                    "the second one's columns are prefixed engine2/; loss_scale left out")
        p.out.drop("loss_scale")
    if dialect == "hf-console" and not p.hf_own_steps:
        p.bars.renumber(p.out.steps)
    series = p.out.series()
    present = {canonical_name(s.name) for s in series} | ({"loss_scale"} if two_engines else set())
    if any(s.name.lower() == "skipped_total" for s in series):
        present.add("skipped")          # DeepSpeed's own counter says it (`_postprocess`)
    own = marianlog.updates(p.marian_launches, p.around) if dialect == "marian" else {}
    for k, step in own.items():
        p.events[k].step = step
    series = events.join_scale(series, p.event_series(present))
    if not series:
        raise RunReadError(path, f"no {dialect} metric lines")
    if own:
        source.extras["events_placed"] = (
            "Marian's cost-scaling messages on their own updates: the launch's first update plus the "
            "counts they print (`after N gradient updates`, reset at each change)")
    if dialect == "hf-console":
        if p.hf_own_steps:
            source.extras["step_from"] = ("each dict's own global_step/max_steps (ms-swift: its "
                                           "numerator, the Trainer's global step)")
        elif p.bars.used:
            source.extras["step_from"] = ("the training bar's counter (tqdm `n/total [..]`: the "
                                           "Trainer's global step) in front of each logged dict")
        else:
            source.warn("HF console lines carry no step: steps are the ordinal of each logged line")
    if dialect == "darknet":
        source.extras["step_from"] = ("the iteration in front of each Darknet line (get_current_batch / "
                                      "get_current_iteration: the optimizer step); the loss is the number "
                                      "after it, avg_loss its running mean")
    return _postprocess(series, source)


def _postprocess(series: list[Series], source: Source) -> list[Series]:
    out = []
    for s in series:
        name = s.name.lower()
        zero = s.value == 0 if s.value.dtype != object else np.zeros(len(s.value), bool)
        if (source.extras.get("dialect") == "megatron" and name in ("grad norm", "grad_norm", "norm")
                and len(s.value) and zero.mean() > 0.5):
            # Megatron prints 0.000 when it does not compute the norm: that is "not logged".
            source.warn(f"{s.name} is 0.000 on {int(zero.sum())} of {len(zero)} lines: not "
                        f"computed there; those zeros are left out")
            if zero.all():
                continue
            s = Series(s.name, s.order[~zero], s.step[~zero], s.value[~zero])
        if name in ("skipped_total",) and len(s.value):
            # DeepSpeed's counter is cumulative: the canonical column is per interval.
            per = np.diff(s.value, prepend=0.0)
            per[per < 0] = s.value[per < 0]
            out.append(Series("skipped", s.order, s.step, per))
        if name == "number of nan iterations":
            s = Series("nan_iterations", s.order, s.step, s.value)
        out.append(s)
    return out


def looks_like_text(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(8192)
    except OSError:
        return False
    return encodings.looks_like_text(head)
