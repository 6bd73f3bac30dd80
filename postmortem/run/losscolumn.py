"""Which column is the loss: the alias table first, then name rules, or the column --loss names.

The rules, in order, for the train loss (the eval loss the same way over val/eval/valid/test names):
1. a name the alias table knows (`loss`, `train_loss`, `lm_loss`, `loss_step`, `train/loss`, ...);
2. a total: `total_loss`, `mean_loss`, `avg_loss`, `loss_total`, `losses` (the sum of a
   `loss_dict` printed beside its terms), and the namespaced totals `train/loss/total`,
   `loss/train/total` (Composer), `losses/total`, ...; a mean over steps (`average_loss`,
   `avg_loss`) only when no step's own loss (`step_loss`, `batch_loss`) is beside it;
3. a cross-entropy / LM loss: `CrossEntropyLoss`, `ce_loss`, `nll_loss`, `lm_loss_avg`, ...;
4. one other `*loss*` column: that one;
5. several component losses under one namespace and no total (Ultralytics' `train/box_loss`,
   `train/cls_loss`, `train/dfl_loss`): their sum, since the trainer steps on the sum and a spike
   in any part is a spike of it; the parts keep their own columns;
6. several losses with no shared namespace (a GAN's `generator_loss` and `critic_loss`, RLHF's
   `act_loss` and `cri_loss`: two models): none is chosen, and a warning names them, unless the
   catalogue says the family steps on their sum (Ultralytics' console: box + cls + dfl), or
   the names are Ultralytics' own loss parts (`_SUMMED_PARTS`, a console pasted from mid-run);
7. only a perplexity (`ppl`, `Validation perplexity`): the loss is its log.
The choice is kept in `source.extras["loss_from"]` (and `val_loss_from`), which `info` prints.
"""

from __future__ import annotations

import re

import numpy as np

from postmortem.errors import RunReadError
from postmortem.run.aliases import normalize
from postmortem.run.assemble import canonical_order
from postmortem.run.dialects import catalogue
from postmortem.run.dialects.progress import LOSS_IS_SUM_OF_PARTS
from postmortem.run.metriclines.lettertotal import letter_total
from postmortem.run.model import RunLog

_EVAL = {"val", "valid", "validation", "eval", "evaluation", "test", "dev"}
_STREAMS = _EVAL | {"train", "training"}
_OTHER_METRIC = re.compile(r"grad|norm|acc|lr|rate|time|step|epoch|scale|count|ppl|perplex|tok|sample|mem|num")
_NOT_LOSS = re.compile(r"scale|scaler|weight|coef|_lr$|^lr|count|num_|_time|(?<![a-z])ratio")
_TOTAL = re.compile(r"^(?:train_?)?(?:total|tot|mean|avg|average|overall|sum)_?loss(?:_step)?$"
                    r"|^loss_?(?:total|mean|avg|sum)$|^objective$|^(?:total_?)?losses$")
# a mean over the steps (DLLogger BERT's `average_loss`, an AverageMeter's `avg_loss`): a total
# of the terms, but smoothed; the step's own loss beside it is the loss (a spike stays a spike)
_MEAN = re.compile(r"^(?:train_?)?(?:mean|avg|average)_?loss|^loss_?(?:mean|avg)$")
_STEP_LOSS = re.compile(r"^(?:train_?)?(?:step|batch|iter|iteration|cur|current)_?loss$")
# Ultralytics' trainers print their loss parts with no total (`self.loss_names`: detect
# "box_loss", "cls_loss", "dfl_loss"; segment + "seg_loss"; pose + "pose_loss", "kobj_loss";
# RT-DETR "giou_loss", "cls_loss", "l1_loss"; ultralytics/models/*/train.py get_validator) and
# step on their sum (`loss.sum() * batch_size`, utils/loss.py): these parts are summed even
# without a `train/` namespace or the console's own dialect (a paste from mid-run)
_SUMMED_PARTS = ({"box_loss", "cls_loss"}, {"giou_loss", "cls_loss", "l1_loss"})
# OpenNMT-py's `xent`, fairseq's and torch's `nll`: a cross-entropy under its own short name
_LOSS_NAMES = {"xent", "nll", "crossentropy", "cross_entropy"}
_CE = re.compile(r"^(?:train_?)?(?:cross_?entropy_?loss|crossentropy|cross_entropy|ce_?loss|nll_?loss|nll|xent"
                 r"|lm_?loss\w*"
                 r"|loss_?(?:ce|nll|lm))(?:_step)?$")


def _parts(name: str) -> list[str]:
    return [p for p in re.split(r"[/.]", normalize(name)) if p]


def _namespace_loss(parts: list[str]) -> int | None:
    """Where the loss word sits in a namespaced name whose leaf is not a loss (`loss/train/total`,
    `train/loss/total`, `losses/total`): the index of that part, else None."""
    if len(parts) < 2 or "loss" in parts[-1] or _OTHER_METRIC.search(parts[-1]):
        return None                    # `loss/grad_norm`, `losses/scale`: about the loss, not one
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in ("loss", "losses") or parts[i].endswith("_loss"):
            return i
        if parts[i] not in _STREAMS:
            return None                # `loss/grad/norm`: the leaf's own namespace is not a loss
    return None


def _stream(name: str) -> str | None:
    """'train' or 'eval' for a loss-like name, None for any other metric."""
    parts = _parts(name)
    if not parts:
        return None
    leaf = parts[-1]
    loss_word = ("loss" in leaf or _namespace_loss(parts) is not None
                 or re.sub(r"^(?:train|val|valid|eval|test)_", "", leaf) in _LOSS_NAMES)
    if not loss_word or _NOT_LOSS.search(leaf) or leaf.endswith("_epoch") and len(parts) == 1:
        return None
    words = set(parts[:-1]) | set(re.split(r"_", leaf))
    return "eval" if words & _EVAL else "train"


def _leaf(name: str) -> str:
    """The loss's own name without its namespace: train/loss/total, loss/train/total, losses/total
    -> loss_total (a total, whatever the order of the stream and loss parts)."""
    parts = _parts(name)
    at = _namespace_loss(parts)
    if at is not None:
        return f"{parts[at].removesuffix('es')}_{parts[-1]}"
    return parts[-1]


def _pick(names: list[str]) -> tuple[list[str], str | None]:
    """The column(s) that make the loss among loss-like names of one stream, and the rule."""
    means = [n for n in names if _MEAN.match(_leaf(n))]
    own = [n for n in names if _STEP_LOSS.match(_leaf(n))]
    if means and own and not any(_TOTAL.match(_leaf(n)) and n not in means for n in names):
        return own[:1], f"the step's own loss ({means[0]} beside it is a mean over steps)"
    for rule, pattern in (("a total loss", _TOTAL), ("a cross-entropy / LM loss", _CE)):
        hits = [n for n in names if pattern.match(_leaf(n))]
        if hits:
            return [min(hits, key=lambda n: (n in means, "epoch" in normalize(n), names.index(n)))], rule
    steps = [n for n in names if not normalize(n).endswith("_epoch")] or names
    if len(steps) == 1:
        return steps, "the only loss column"
    spaces = {tuple(_parts(n)[:-1]) for n in steps}
    if len(spaces) == 1 and spaces != {()}:
        return steps, "the sum of the component losses (no total column)"
    leaves = {_parts(n)[-1] for n in steps}
    if any(known <= leaves for known in _SUMMED_PARTS) and all(x.endswith("_loss") for x in leaves):
        return steps, "the sum of Ultralytics' loss parts (its trainer steps on their sum)"
    return steps, None


def _origin(log: RunLog, column: str) -> str:
    names = log.source.extras.get("names", {}).get(column)
    return " and ".join(names) if names else column


def choose(log: RunLog, override: str | None = None) -> None:
    """Make `loss` (and `val_loss`) the right column of `log.frame`, saying how it was chosen."""
    extras = log.source.extras
    if override:
        _use(log, override)
        return
    for canon, stream in (("loss", "train"), ("val_loss", "eval")):
        if canon in log.frame:
            origin = _origin(log, canon)
            extras[f"{canon}_from"] = canon if origin == canon else f"{origin} (the alias table)"
            continue
        names = [c for c in log.metrics if c not in ("loss", "val_loss") and _stream(c) == stream]
        if not names:
            continue
        chosen, rule = _pick(names)
        if rule is None and stream == "train" and _sum_by_family(extras.get("dialect")):
            rule = f"the sum of the component losses, as {extras['dialect']} steps on it"
        if rule is None:
            if stream == "eval":        # several eval sets (HF's eval_g0_loss ...): each its own
                continue
            log.source.warn(f"several losses and none a total ({', '.join(chosen[:4])}): none read "
                            f"as the {canon}; --loss COLUMN picks one")
            continue
        if len(chosen) == 1:
            _rename(log, chosen[0], canon)
        else:
            _sum(log, chosen, canon)
        extras[f"{canon}_from"] = f"{' + '.join(chosen)} ({rule})"
    if "loss" not in log.frame:
        _letter_total(log)
    for canon in ("loss", "val_loss"):
        if canon not in log.frame:
            _from_perplexity(log, canon)
    if "loss" not in log.frame and not any("--loss" in w for w in log.source.warnings):
        log.source.warn("no column looks like the loss; --loss COLUMN names it")


def _use(log: RunLog, column: str) -> None:
    frame = log.frame
    names = log.source.extras.get("names", {})
    target = column if column in frame else next(
        (canon for canon, orig in names.items() if column in orig), None)
    if target is None or target in ("segment", "step"):
        shown = ", ".join(log.metrics[:8]) + (" ..." if len(log.metrics) > 8 else "")
        raise RunReadError(log.source.path, f"no column {column!r} for --loss; columns: {shown}")
    if target != "loss":
        if "loss" in frame:
            was = [n for n in names.get("loss", []) if n != "loss"]
            _rename(log, "loss", was[0] if was and was[0] not in frame else "loss_not_chosen")
        _rename(log, target, "loss")
    log.source.extras["loss_from"] = f"{column} (--loss)"


def _rename(log: RunLog, old: str, new: str) -> None:
    cols = canonical_order([new if c == old else c for c in log.metrics])
    log.frame = log.frame.rename(columns={old: new})[["segment", "step", *cols]]
    if old in log.logged_nan:
        log.logged_nan[new] = log.logged_nan.pop(old)
    said = log.source.extras.get("series_dialects", {})
    if old in said:                    # the catalogue entry whose lines made it goes with it
        said[new] = said.pop(old)


def _sum(log: RunLog, parts: list[str], new: str) -> None:
    frame = log.frame
    values = frame[parts].to_numpy(dtype=np.float64).sum(axis=1)
    logged = np.all([log.logged_mask(p) for p in parts], axis=0)
    values[~logged] = np.nan                      # a part not logged: no total at that row
    frame[new] = values
    nan_rows = np.flatnonzero(logged & np.isnan(values))
    if len(nan_rows):
        log.logged_nan[new] = nan_rows
    log.frame = frame[["segment", "step", *canonical_order(list(log.metrics))]]


def _letter_total(log: RunLog) -> None:
    """A loss logged under one letter (`L: 2.31`, `l=2.31`) is the loss only beside its parts,
    printed on its lines (`l_ce`, `L_aux`, `LX`: the terms of the total the trainer steps on,
    `metriclines.lettertotal`); alone, `L` could be anything and is left as it is."""
    found = letter_total(log.metrics)
    if found is None:
        return
    total = [found[0]]
    at = log.logged_mask(total[0])
    parts = [c for c in found[1] if (log.logged_mask(c) & at).sum() * 2 >= at.sum() > 0]
    if not parts:
        return
    _rename(log, total[0], "loss")
    log.source.extras["loss_from"] = f"{total[0]} (a one-letter total beside its parts {', '.join(parts)})"


_PPL = {"loss": re.compile(r"^(?:train_?)?(?:ppl|perplexity)$"),
        "val_loss": re.compile(r"^(?:val|valid|validation|eval|test)_?(?:ppl|perplexity)$")}


def _from_perplexity(log: RunLog, canon: str) -> None:
    """Only the perplexity logged (OpenNMT-py's `ppl` without `xent`, `Validation perplexity`):
    the loss is its log, the cross-entropy it is the exponential of."""
    names = [c for c in log.metrics if _PPL[canon].match(normalize(c).split("/")[-1])]
    if len(names) != 1:
        return
    values = log.frame[names[0]].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = np.log(values)
    loss[values < 0] = np.nan                     # no perplexity is negative: not a loss
    log.frame[canon] = loss
    log.frame = log.frame[["segment", "step", *canonical_order(list(log.metrics))]]
    if names[0] in log.logged_nan:
        log.logged_nan[canon] = log.logged_nan[names[0]]
    log.source.extras[f"{canon}_from"] = f"log({names[0]}) (only the perplexity is logged)"


def _sum_by_family(dialect: str | None) -> bool:
    """Whether the catalogue says this family's loss is the sum of the parts it prints."""
    if not dialect:
        return False
    catalogue()                       # the modules register themselves on first use
    return dialect in LOSS_IS_SUM_OF_PARTS
