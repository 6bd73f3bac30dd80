"""Logs of the three table families, written with each framework's own format strings:
Chainer's / pytorch-pfn-extras' PrintReport table and LogReport `log` (chainer/chainer v7.8.1
chainer/training/extensions/print_report.py, log_report.py), ParlAI's training log
(facebookresearch/ParlAI v1.7.2 parlai/scripts/train_model.py `TrainLoop.log`,
parlai/utils/misc.py `nice_report`, parlai/utils/fp16.py), GluonNLP's BERT pre-training lines
and its fp16 scaler's warning (dmlc/gluon-nlp v0.10.0 scripts/bert/pretraining_utils.py `log`,
scripts/bert/fp16_utils.py)."""

from __future__ import annotations

import json
import math
import re
from collections import OrderedDict

# --- shapes of a loss ------------------------------------------------------------------


def wobble(i: int) -> float:
    """A deterministic noise of about 1% of the loss."""
    return 0.01 * math.sin(i * 1.7) + 0.006 * math.sin(i * 0.37)


def smooth(i: int, n: int) -> float:
    return 3.0 * math.exp(-i / (n / 3)) + 1.0 + wobble(i)


# --- Chainer -----------------------------------------------------------------------------

ENTRIES = ["epoch", "iteration", "main/loss", "validation/main/loss", "main/accuracy", "elapsed_time"]


def print_report(observations: list[dict], entries: list[str] = ENTRIES) -> str:
    """PrintReport's output: `__init__`'s header, then `_print` of each observation after `\\033[J`."""
    entry_widths = [max(10, len(s)) for s in entries]
    header = "  ".join(("{:%d}" % w for w in entry_widths)).format(*entries) + "\n"
    templates = [(e, "{:<%dg}  " % w, " " * (w + 2)) for e, w in zip(entries, entry_widths)]
    out = header
    for obs in observations:
        out += "\033[J"
        for entry, template, empty in templates:
            out += template.format(obs[entry]) if entry in obs else empty
        out += "\n"
    return out


def log_report(observations: list[dict]) -> str:
    """LogReport's `log`: `json.dump(self._log, f, indent=4)`."""
    return json.dumps(observations, indent=4)


def chainer_observations(losses: list[float], every: int = 100, val_every: int = 10) -> list[dict]:
    """LogReport's entries at a trigger of `every` iterations: the mean loss, and the validation
    loss where an Evaluator ran (every `val_every` reports)."""
    out = []
    for k, loss in enumerate(losses, 1):
        obs = {"main/loss": loss, "main/accuracy": 0.9 - 0.1 * math.exp(-k / 50),
               "epoch": k * every // 600, "iteration": k * every, "elapsed_time": k * 3.25}
        if k % val_every == 0:
            obs["validation/main/loss"] = loss * 1.05 if loss == loss else loss
        out.append(obs)
    return out


# --- ParlAI -------------------------------------------------------------------------------

def float_formatter(f: float | int) -> str:
    """parlai/utils/misc.py `float_formatter`, as it is."""
    if f != f:
        return ""
    if isinstance(f, int):
        return str(f)
    if f >= 1000:
        s = f"{f:.0f}"
    else:
        s = f"{f:.4g}"
    s = s.replace("-0.", "-.")
    if s.startswith("0."):
        s = s[1:]
    if s[0] == "." and len(s) < 5:
        s += "0" * (5 - len(s))
    return s


def _report_sort_key(report_key: str) -> tuple[str, str]:
    fields = report_key.split("/")
    main_key = fields.pop(-1)
    return ("/".join(fields) or "all", main_key)


def nice_report(report: dict, line_width: int = 88) -> str:
    """parlai/utils/misc.py `nice_report` with pandas, as it is (the terminal 88 wide)."""
    import pandas as pd

    output: OrderedDict = OrderedDict()
    for k in sorted(report.keys(), key=_report_sort_key):
        output[_report_sort_key(k)] = report[k]
    df = pd.DataFrame([output])
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    df = df.stack().transpose().droplevel(0, axis=1)
    result = "   " + df.to_string(na_rep="", line_width=line_width - 3, float_format=float_formatter,
                                  index=df.shape[0] > 1).replace("\n\n", "\n").replace("\n", "\n   ")
    return re.sub(r"\s+$", "", result)


def parlai_report(step: int, loss: float, scale: float | None = None) -> str:
    """One `TrainLoop.log` message behind ParlAI's console prefix (`%(asctime)s %(levelname).4s | `)."""
    report = {"clip": 1.0, "ctpb": 9622, "ctps": 19118.0, "exps": 2.077, "exs": 1600, "gnorm": 0.8 + wobble(step),
              "llen": 19.4, "loss": loss, "lr": 1e-05, "ltpb": 250.0, "ltps": 1497.0,
              "ppl": math.exp(loss) if loss == loss else loss, "token_acc": 0.4012,
              "total_train_updates": step, "tpb": 9872, "tps": 20615.0, "ups": 2.077}
    if scale is not None:
        report["fp16_loss_scalar"] = scale
    logs = [f"time:{step * 0.5:.0f}s", f"total_exs:{step * 32}", f"total_steps:{step}",
            f"epochs:{step / 1e4:.2f}", f"time_left:{max(0, 5000 - step * 0.5):.0f}s"]
    log = "{}\n{}\n".format(" ".join(logs), nice_report(report))
    clock = f"{10 + step // 3600 % 10:02d}:{step // 60 % 60:02d}:{step % 60:02d}"
    return f"{clock} INFO | {log}"


def parlai_overflow(scale: float) -> str:
    """parlai/utils/fp16.py: `logging.info(f'Overflow: setting loss scale to {self.scaler.loss_scale}')`."""
    return f"10:00:00 INFO | Overflow: setting loss scale to {scale}"


# --- GluonNLP -----------------------------------------------------------------------------

BERT = ("[step {}]\tmlm_loss={:7.5f}\tmlm_acc={:4.2f}\tnsp_loss={:5.2f}\tnsp_acc={:5.2f}\t"
        "throughput={:.1f}K tks/s\tlr={:.7f} time={:.2f}, latency={:.1f} ms/step")


def bert_line(step: int, mlm: float, nsp: float) -> str:
    """pretraining_utils.py `log`, through `logging.info` (the root logger's `INFO:root:`)."""
    return "INFO:root:" + BERT.format(step, mlm, 45.2, nsp, 78.5, 41.3, 0.0001, 12.5, 125.0)


def gluonnlp_overflow(scale: float) -> str:
    """fp16_utils.py `warnings.warn('DynamicLossScaler: overflow detected. set loss_scale = %s' % ...)`, as
    Python's warnings print it (the place, the category, the message, then the source line)."""
    return ("/home/ubuntu/gluon-nlp/scripts/bert/fp16_utils.py:162: UserWarning: "
            "DynamicLossScaler: overflow detected. set loss_scale = %s\n"
            "  warnings.warn('DynamicLossScaler: overflow detected. set loss_scale = %%s'%%" % scale)


def parlai_eval(step: int, loss: float, datatype: str = "valid") -> str:
    """`_run_eval`'s report: `logging.report(f'{datatype}:\\n{nice_report(report)}\\n')` (ParlAI's
    REPORT level), after `eval completed in {:.2f}s`."""
    report = {"accuracy": 0.0, "bleu-4": 0.0012, "exs": 7801, "f1": 0.1534, "loss": loss,
              "ppl": math.exp(loss) if loss == loss else loss, "token_acc": 0.3811, "total_train_updates": step,
              "ctpb": 9622, "tpb": 9872}
    return (f"10:00:00 INFO | eval completed in 12.31s\n"
            f"10:00:00 REPORT | {datatype}:\n{nice_report(report)}\n")
