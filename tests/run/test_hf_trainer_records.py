"""The records of trainers built on HF's Trainer that write or print their own: LLaMA-Factory's
trainer_log.jsonl and ms-swift's logging.jsonl and console dicts, built from each release's code."""

import json
import math
from datetime import timedelta

import numpy as np
import pytest
from test_cli import pm

from postmortem.diagnose.analyze import analyze
from postmortem.run import read_run

SPIKE, NAN = 60, 80          # the step of the loss spike and of the NaN loss, in every run below


def _loss(step: int) -> float:
    if step == SPIKE:
        return 9.5
    if step == NAN:
        return math.nan
    return 2.5 - step / 200


def _hms(seconds: float) -> str:
    # LLaMA-Factory's LogCallback._timing: `str(timedelta(seconds=int(elapsed_time)))`
    return str(timedelta(seconds=int(seconds)))


def _llamafactory_v05(step: int, total: int, eval_loss: float | None = None) -> dict:
    # hiyouga/LLaMA-Factory v0.5.x src/llmtuner/extras/callbacks.py LogCallback.on_log: every key,
    # None where the record has none (an eval record: loss null), `json.dumps(logs)`
    return dict(current_steps=step, total_steps=total,
                loss=None if eval_loss is not None else _loss(step), eval_loss=eval_loss,
                predict_loss=None, reward=None, learning_rate=None if eval_loss is not None else 1e-4,
                epoch=round(step / total * 3, 2), percentage=round(step / total * 100, 2),
                elapsed_time=_hms(step * 2), remaining_time=_hms((total - step) * 2))


def _llamafactory_v09(step: int, total: int, eval_loss: float | None = None) -> dict:
    # src/llamafactory/train/callbacks.py LogCallback.on_log (v0.6+): `lr`, `throughput` and
    # `total_tokens` where tokens are counted, the None values left out
    logs = {"current_steps": step, "total_steps": total,
            "loss": None if eval_loss is not None else _loss(step), "eval_loss": eval_loss,
            "predict_loss": None, "accuracy": None, "lr": None if eval_loss is not None else 1e-4,
            "epoch": round(step / total * 3, 2), "percentage": round(step / total * 100, 2),
            "elapsed_time": _hms(step * 2), "remaining_time": _hms((total - step) * 2),
            "throughput": 1234.5, "total_tokens": step * 4096}
    return {k: v for k, v in logs.items() if v is not None}


def _write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("release", [_llamafactory_v05, _llamafactory_v09])
def test_llamafactory_trainer_log_steps_are_current_steps(tmp_path, release):
    total = 500
    records = []
    for step in range(5, total + 1, 5):
        records.append(release(step, total))
        if step % 100 == 0:
            records.append(release(step, total, eval_loss=2.0))
    log = read_run(_write_jsonl(tmp_path / "trainer_log.jsonl", records))
    f = log.frame
    assert f.step.tolist() == list(range(5, total + 1, 5))            # 100 rows, not one epoch
    assert len(log.segments()) == 1 and log.source.resumes == []
    assert log.source.extras["step_from"].startswith("current_steps")
    assert f.loss.iloc[0] == pytest.approx(2.475)
    assert f.loss[f.step == SPIKE].item() == 9.5
    # the eval record's null loss is "not logged": the train record's loss at that step stays
    assert f.loss[f.step == 100].item() == pytest.approx(2.0)
    assert f.val_loss.dropna().tolist() == [2.0] * 5
    assert log.nan_mask("loss")[f.step.to_numpy() == NAN].all() and log.nan_mask("loss").sum() == 1
    incidents = {(i.kind, i.step) for i in analyze(log).incidents}
    assert ("spike", SPIKE) in incidents and ("nan", NAN) in incidents


def test_llamafactory_info_says_where_the_step_came_from(tmp_path):
    p = _write_jsonl(tmp_path / "trainer_log.jsonl", [_llamafactory_v09(s, 100) for s in range(1, 101)])
    r = pm("info", p)
    assert r.returncode == 0, r.stderr
    assert "100 rows, steps 1..100, 1 segment" in r.stdout
    assert "step from current_steps" in r.stdout


def _swift_logs(step: int, total: int, release: str, **metrics) -> dict:
    """ms-swift's dict for one `on_log` (modelscope/ms-swift swift/trainers/callback.py
    `add_train_message`): 2.x/3.x add the percentage and `train_speed(iter/s)`; the later
    code drops the percentage and prints `train_speed(s/it)`."""
    elapsed = step * 48.7
    logs = {"loss": _loss(step), "grad_norm": 0.23, "learning_rate": 4.3e-05, **metrics,
            "epoch": round(step / total * 2, 2), "global_step/max_steps": f"{step}/{total}"}
    if release == "iter/s":
        logs["percentage"] = f"{step / total * 100:.2f}%"
    logs["elapsed_time"] = _swift_time(elapsed)
    logs["remaining_time"] = _swift_time(elapsed / step * (total - step))
    logs["memory(GiB)"] = 87.61
    if release == "iter/s":
        logs["train_speed(iter/s)"] = round(step / elapsed, 6)
    else:
        logs["train_speed(s/it)"] = round(elapsed / step, 6)
    return logs


def _swift_time(seconds: float) -> str:
    # swift/utils format_time
    d, h = int(seconds // 86400), int(seconds % 86400 // 3600)
    m, s = int(seconds % 3600 // 60), int(seconds % 60)
    if d:
        return f"{d}d {h}h {m}m {s}s"
    if h:
        return f"{h}h {m}m {s}s"
    return f"{m}m {s}s" if m else f"{s}s"


@pytest.mark.parametrize("release", ["iter/s", "s/it"])
def test_swift_logging_jsonl_steps_are_the_numerator(tmp_path, release):
    total = 2161
    records = [_swift_logs(s, total, release, token_acc=0.81) for s in range(1, 121)]
    log = read_run(_write_jsonl(tmp_path / "logging.jsonl", records))
    f = log.frame
    assert f.step.tolist() == list(range(1, 121))
    assert len(log.segments()) == 1 and log.source.resumes == []
    assert "global_step/max_steps" in log.source.extras["step_from"]
    assert f.loss[f.step == SPIKE].item() == 9.5
    assert log.nan_mask("loss")[f.step.to_numpy() == NAN].all()
    incidents = {(i.kind, i.step) for i in analyze(log).incidents}
    assert ("spike", SPIKE) in incidents and ("nan", NAN) in incidents


def test_swift_logging_jsonl_of_four_records_is_one_segment(tmp_path):
    records = [_swift_logs(s, 1000, "iter/s") for s in (5, 10, 15, 20)]
    r = pm("info", _write_jsonl(tmp_path / "logging.jsonl", records))
    assert r.returncode == 0, r.stderr
    assert "4 rows, steps 5..20, 1 segment" in r.stdout


def _swift_console(total: int, release: str, grpo: bool = False) -> str:
    # ms-swift's ProgressCallbackNew.on_log: the dict through `self.training_bar.write(str(logs))`
    # (transformers' ProgressCallback), under its `Train:` bar counting the global step
    lines = []
    for step in range(1, 121):
        lines.append(f"Train:  {step * 100 // total:2d}%|▏         | {step}/{total} [01:02<07:40,  1.91it/s]")
        extra = {"rewards/AccuracyMix/mean": 0.69, "reward": 0.7, "reward_std": 0.16, "kl": 0.001,
                 "completions/mean_length": 330.0} if grpo else {"token_acc": 0.81}
        lines.append(str(_swift_logs(step, total, release, **extra)))
        if step % 40 == 0:
            lines.append(str({"eval_loss": 1.9, "eval_token_acc": 0.57, "eval_runtime": 20.39,
                              "eval_samples_per_second": 0.049, "eval_steps_per_second": 0.049,
                              "epoch": round(step / total * 2, 2), "global_step/max_steps": f"{step}/{total}",
                              "percentage": f"{step / total * 100:.2f}%", "elapsed_time": "1m 2s",
                              "remaining_time": "12s"}))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("release,grpo", [("iter/s", False), ("s/it", False), ("iter/s", True)])
def test_swift_console_dicts_take_their_own_step(tmp_path, release, grpo):
    p = tmp_path / "train.log"
    p.write_text(_swift_console(2161, release, grpo))
    log = read_run(p)
    f = log.frame
    assert log.source.format == "hf-console"
    assert f.step.tolist() == list(range(1, 121))
    assert len(log.segments()) == 1
    assert "global_step/max_steps" in log.source.extras["step_from"]
    assert f.loss[f.step == SPIKE].item() == 9.5
    assert log.nan_mask("loss")[f.step.to_numpy() == NAN].all()
    assert f.val_loss.dropna().tolist() == [1.9] * 3
    assert f.val_loss[f.step == 80].item() == 1.9
    if grpo:
        assert f.kl.dropna().iloc[0] == pytest.approx(0.001)
    incidents = {(i.kind, i.step) for i in analyze(log).incidents}
    assert ("spike", SPIKE) in incidents and ("nan", NAN) in incidents


def test_swift_console_resumed_from_a_checkpoint_is_two_segments(tmp_path):
    lines = [str(_swift_logs(s, 1000, "iter/s")) for s in range(5, 105, 5)]
    lines += [str(_swift_logs(s, 1000, "iter/s")) for s in range(55, 205, 5)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    log = read_run(p)
    assert [(s["first_step"], s["last_step"]) for s in log.segments()] == [(5, 100), (55, 200)]


def test_one_swift_console_dict_reads(tmp_path):
    # one line is enough, the percent and the times quoted beside each other
    p = tmp_path / "one.log"
    p.write_text(str({"loss": 0.66, "grad_norm": 0.23, "learning_rate": 4.3e-05, "epoch": 0.27,
                      "global_step/max_steps": "601/2161", "percentage": "27.81%",
                      "elapsed_time": "8h 8m 1s", "remaining_time": "21h 6m 44s",
                      "memory(GiB)": 87.61, "train_speed(iter/s)": 0.0205}) + "\n")
    log = read_run(p)
    assert log.frame.step.tolist() == [601] and log.frame.loss.tolist() == [0.66]


def test_a_quoted_percent_beside_a_quoted_word_is_no_config_dump(tmp_path):
    # a percent then another quoted string: once read as two words, a dict of parameters
    p = tmp_path / "one.log"
    p.write_text("{'loss': 2.01, 'grad_norm': 0.3, 'learning_rate': 1e-05, 'epoch': 0.005, 'a': '1%', 'b': 'x'}\n")
    log = read_run(p)
    assert log.frame.loss.tolist() == [2.01]
    # a dict of hyper-parameters stays one (two words, no metric)
    q = tmp_path / "params.log"
    q.write_text("{'iter_num': 100000, 'name': 'exp1', 'mode': 'train', 'lr': 0.001}\n" * 3)
    r = pm("info", q)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_a_step_of_its_total_in_a_csv_step_column(tmp_path):
    p = tmp_path / "metrics.csv"
    rows = ["global_step/max_steps,loss"] + [f"{s}/300,{2 - s / 1000}" for s in range(10, 310, 10)]
    p.write_text("\n".join(rows) + "\n")
    f = read_run(p).frame
    assert f.step.tolist() == list(range(10, 310, 10))
    assert np.allclose(f.loss, [2 - s / 1000 for s in range(10, 310, 10)])
