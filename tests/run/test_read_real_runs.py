"""Every file in shared/real_runs reads, with the values INDEX.md describes."""

import math

import numpy as np
import pytest

from postmortem.run import read_run


def at(log, step, col, segment=None):
    f = log.frame
    rows = f[(f.step == step) & (f.segment == segment if segment is not None else True)]
    assert len(rows), f"no row at step {step}"
    return rows[col].iloc[-1]


# Runs of shared/real_runs that do not read yet, by the family of log they belong to.
# Strict: a run that starts reading fails here until it is taken off the list.
NOT_YET_READ = {
    # two different runs (steps 10..750 and 10..430 overlap): the directory names both, each
    # file reads (tests/run/test_text_log_families.py)
    "olmo-console-20m-zero-gradnorm-flatloss": "two OLMo runs in one directory: pass one file",
}


def _real_run_names() -> list[str]:
    from conftest import REAL_RUNS
    return sorted(p.name for p in REAL_RUNS.iterdir() if p.is_dir()) if REAL_RUNS.is_dir() else []


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=f"not read yet: {NOT_YET_READ[n]}"))
    if n in NOT_YET_READ else n for n in _real_run_names()])
def test_every_real_run_reads(real_runs, name):
    log = read_run(real_runs / name)
    assert len(log.frame) > 0 and log.metrics, name


def test_llmc(real_runs):
    log = read_run(real_runs / "llmc-modded-nanogpt-llmc")
    assert log.source.format == "llm.c"
    f = log.frame
    assert f.step.min() == 0 and f.step.max() == 19560
    assert f.loss.notna().sum() == 19560 and f.val_loss.notna().sum() == 80
    assert at(log, 7435, "grad_norm") == pytest.approx(1.44)
    assert at(log, 7435, "loss") == pytest.approx(3.7819)
    assert at(log, 9025, "grad_norm") == pytest.approx(2.02)
    assert at(log, 0, "grad_norm") == pytest.approx(15.37)
    assert math.isnan(at(log, 19560, "loss")) and at(log, 19560, "val_loss") > 0


def test_modded_nanogpt_nan_timing_is_not_a_loss_nan(real_runs):
    log = read_run(real_runs / "modded-nanogpt-muon" / "eb5659d0-fb6a-49e5-a311-f1f89412f726.txt")
    assert log.source.format == "modded-nanogpt"
    assert at(log, 919, "loss") == pytest.approx(5.0597)
    assert at(log, 947, "loss") == pytest.approx(5.28, abs=0.01)
    assert "step_avg_ms" in log.logged_nan and "loss" not in log.logged_nan
    assert at(log, 6200, "loss") == pytest.approx(3.2533)
    assert at(log, 6200, "val_loss") == pytest.approx(3.2785)
    soap = read_run(real_runs / "modded-nanogpt-soap")
    assert at(soap, 919, "loss") == pytest.approx(5.07, abs=0.01) and soap.frame.step.max() == 6000


def test_megatron_deepspeed_loss_scale_growth(real_runs):
    log = read_run(real_runs / "megatron-deepspeed-moe-0.125B")
    f = log.frame
    train = f[f.loss.notna()]
    assert len(train) == 213 and train.step.min() == 10 and train.step.max() == 2130
    assert "grad_norm" not in f
    assert at(log, 500, "loss_scale") == 2048 and at(log, 510, "loss_scale") == 4096
    assert sorted(f.loss_scale.dropna().unique()) == [2048, 4096, 8192, 16384, 32768]
    assert f.val_loss.notna().sum() == 21
    assert at(log, 10, "loss") == pytest.approx(10.69056)
    assert log.dtype == "fp16"
    assert any("NaN loss out of its line" in w for w in log.source.warnings)


def test_bloom_chronicles(real_runs):
    tr8 = read_run(real_runs / "bloom-tr8-104B-chronicles")
    assert len(tr8.segments()) == 3          # snippets pasted out of order
    assert at(tr8, 7010, "grad_norm") == pytest.approx(219645.978)
    assert at(tr8, 7010, "loss") == pytest.approx(11.42026)
    tr11 = read_run(real_runs / "bloom-tr11-176B-chronicles")      # [default7]: prefixes, bf16
    assert at(tr11, 31219, "grad_norm") == pytest.approx(960.351)
    assert at(tr11, 31219, "loss") == pytest.approx(5.098124)
    assert "loss_scale" not in tr11.frame
    assert at(tr11, 45000, "val_loss") == pytest.approx(2.327091)
    tr8b = read_run(real_runs / "bloom-tr8b-104B-chronicles")
    cascade = tr8b.frame[(tr8b.frame.step >= 17060) & (tr8b.frame.step <= 17068)].loss_scale
    assert cascade.max() == 1048576 and cascade.min() == 32768
    tr1 = read_run(real_runs / "bloom-tr1-13B-chronicles")
    # 0.000 on the normal lines = not computed; the one real value stays
    assert tr1.frame.grad_norm.notna().sum() == 1
    assert at(tr1, 43680, "grad_norm") == pytest.approx(17224.723)
    assert at(tr1, 29050, "loss") == pytest.approx(7.343709)
    assert at(tr1, 29060, "loss_scale") == 4096


def test_deepspeed_overflows_and_cumulative_skips(real_runs):
    log = read_run(real_runs / "deepspeed-chat-sft-opt1.3b")
    f = log.frame
    assert log.source.format == "deepspeed" and f.lr.notna().sum() == 736
    assert f.step.min() == 0 and f.step.max() == 7360   # the eval at step 0, then steps 10..7360
    assert f.overflows.sum() == 139 and f.skipped.sum() == 139
    assert f.skipped_total.iloc[-1] == 139
    assert f.loss_scale.min() == 2048
    assert at(log, 10, "skipped") == 6 and at(log, 10, "lr") == pytest.approx(9.649992967150629e-06)
    assert f.val_ppl.notna().sum() == 17


def test_deepspeed_rlhf_pipe_lines(real_runs):
    log = read_run(real_runs / "deepspeed-chat-rlhf-opt1.3b")
    f = log.frame
    assert len(f) == 477 and f.step.max() == 476
    assert at(log, 111, "act_loss") == pytest.approx(1.59, abs=0.01)
    assert at(log, 111, "cri_loss") == pytest.approx(0.95, abs=0.01)
    assert f.reward.notna().sum() > 400


def test_hf_trainer_state(real_runs):
    star = read_run(real_runs / "hf-trainer-star-gnspikes")
    assert len(star.frame) == 2000 and star.frame.step.max() == 40000
    assert at(star, 22360, "grad_norm") == pytest.approx(82.40977369003497)
    assert at(star, 22360, "lr") == pytest.approx(1e-4)            # `lr`, not learning_rate
    assert "remaining_time" not in star.frame
    tiny = read_run(real_runs / "hf-trainer-tinyllama-evalrows")
    assert tiny.frame.loss.notna().sum() == 186 and tiny.frame.val_loss.notna().sum() == 14
    assert at(tiny, 600, "loss") == pytest.approx(1.3183)
    assert at(tiny, 600, "val_loss") == pytest.approx(1.3565852642059326)
    viz = read_run(real_runs / "hf-trainer-viz-evalrows")
    assert viz.frame.loss.notna().sum() == 30
    assert at(viz, 0, "eval_g0_loss") == pytest.approx(5.741583347320557)
    cpt = read_run(real_runs / "hf-trainer-cpt-predictrows")
    assert len(cpt.source.extras["rows_without_step"]) == 10
    assert cpt.source.extras["summary"]["train_loss"] == pytest.approx(0.4479398911550831)
    assert cpt.frame.loss.max() < 5     # the run average never lands in the loss column


def test_same_run_in_two_formats(real_runs):
    d = real_runs / "hf-trainer-tb-serial-lain"
    js = read_run(d)
    tb = read_run(d, format="tensorboard")
    assert js.source.format == "hf-trainer-state" and tb.source.format == "tensorboard"
    assert any("TensorBoard" in w for w in js.source.warnings)
    both = js.frame.merge(tb.frame, on="step", suffixes=("_json", "_tb"))
    assert len(both) == 6
    # float32 in TensorBoard, 4 decimals in JSON: close, never equal by chance
    assert np.allclose(both.loss_json, both.loss_tb, atol=5e-5)
    assert at(tb, 500, "loss") == pytest.approx(0.4742000102996826, abs=0)
    assert at(tb, 3100, "val_loss") == pytest.approx(0.006221685, rel=1e-6)


def test_wandb(real_runs):
    log = read_run(real_runs / "wandb-alpaca-9am288wn")
    f = log.frame
    assert log.source.format == "wandb" and len(f) == 196
    assert f.step.min() == 1 and f.step.max() == 196      # train/global_step, not _step
    assert at(log, 43, "grad_norm") == pytest.approx(10.500962257385254)
    assert at(log, 1, "grad_norm") == pytest.approx(118.09644317626953)
    assert at(log, 1, "loss") == pytest.approx(4.4748)
    assert log.source.extras["config"]["_wandb"]["value"]["cli_version"] == "0.16.2"


def test_lightning_versions_join(real_runs):
    log = read_run(real_runs / "lightning-slm-training")
    segs = log.segments()
    assert [(s["first_step"], s["last_step"]) for s in segs] == [(49, 140739), (140749, 197035)]
    assert at(log, 49, "loss") == pytest.approx(7.628580570220947)
    assert at(log, 14073, "val_loss") == pytest.approx(4.132571697235107)
    assert at(log, 14073, "train_loss_epoch") == pytest.approx(4.776971817016602)
    hp = log.source.extras["hparams"]
    assert hp["version_0"]["num_epochs"] == 10 and hp["version_5"]["num_epochs"] == 20
    one = read_run(real_runs / "lightning-slm-training/lightning_logs/version_5/metrics.csv")
    assert one.frame.step.min() == 140749


def test_mlflow_file_store(real_runs):
    log = read_run(real_runs / "mlflow-deepcnn-filestore")
    assert log.source.format == "mlflow"
    assert at(log, 0, "loss") == pytest.approx(3.2727866172790527)
    assert any("never ended" in w for w in log.source.warnings)
    assert log.source.extras["params"]["EPOCHS"]


def test_trainer_state_streamed_row_by_row_reads_the_same(real_runs, monkeypatch, tmp_path):
    import postmortem.run.hf as hf
    from postmortem.run import RunReadError
    for name in ("hf-trainer-star-gnspikes", "hf-trainer-cpt-predictrows", "hf-trainer-viz-evalrows"):
        whole = read_run(real_runs / name)
        monkeypatch.setattr(hf, "_STREAM_FROM", 0)        # every file takes the streamed route
        streamed = read_run(real_runs / name)
        monkeypatch.setattr(hf, "_STREAM_FROM", 8 << 20)
        assert streamed.frame.equals(whole.frame), name
        assert streamed.source.extras.get("max_steps") == whole.source.extras.get("max_steps")
        assert streamed.source.extras.get("summary") == whole.source.extras.get("summary")
    monkeypatch.setattr(hf, "_STREAM_FROM", 0)
    data = (real_runs / "hf-trainer-star-gnspikes" / "trainer_state.json").read_bytes()
    cut = tmp_path / "trainer_state.json"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(RunReadError, match="truncated"):
        read_run(cut)


def test_epoch_indexed_tables(real_runs):
    keras = read_run(real_runs / "keras-csvlogger-tomato-earlystop")
    assert keras.frame.step.tolist() == list(range(29))          # epoch 0..28 is the step
    assert at(keras, 27, "loss") == pytest.approx(0.048188884)    # a 9-digit repr among 17-digit ones
    assert at(keras, 26, "val_loss") == pytest.approx(0.3359593451023102)
    assert keras.source.extras["step_from"].startswith("epoch")
    assert not keras.source.warnings
    yolo = read_run(real_runs / "yolov8-results-incomplete-91of100")
    f = yolo.frame
    assert f.step.min() == 1 and f.step.max() == 91 and len(f) == 91   # padded header and cells
    assert at(yolo, 90, "train/cls_loss") == pytest.approx(0.56337)
    # no total column: the loss is the sum of box, cls and dfl, and info says so
    assert at(yolo, 90, "loss") == pytest.approx(1.0611 + 0.56337 + 1.3314)
    assert at(yolo, 90, "val_loss") == pytest.approx(0.93336 + 0.43515 + 1.2771)
    assert "train/box_loss + train/cls_loss + train/dfl_loss" in yolo.source.extras["loss_from"]


def test_mae_log_txt_epoch_resumes(real_runs):
    log = read_run(real_runs / "mae-logtxt-pretrain-resumes")
    assert log.source.format == "jsonl"
    segs = log.segments()
    assert len(segs) == 6                                  # 5 backward epoch jumps = 5 resumes
    assert [s["first_step"] for s in segs] == [0, 561, 581, 621, 621, 621]
    assert segs[0]["last_step"] == 569 and segs[-1]["last_step"] == 799
    assert at(log, 569, "loss", segment=0) == pytest.approx(0.22519876282201465)
    assert at(log, 561, "loss", segment=1) == pytest.approx(0.2253963444249915)
    assert at(log, 621, "loss", segment=5) == pytest.approx(0.22297731667337284)
    assert at(log, 799, "lr") == pytest.approx(2.1366997976197385e-10)   # train_lr
    assert len(log.frame) == 831


def test_trainer_state_read_column_wise_reads_the_same(real_runs, monkeypatch, tmp_path):
    import json

    import postmortem.run.hf as hf
    names = ("hf-trainer-star-gnspikes", "hf-trainer-cpt-predictrows", "hf-trainer-viz-evalrows",
             "hf-trainer-tinyllama-evalrows", "hf-trainer-tb-serial-lain")
    # and one with NaN/Infinity, a string value, a float step row, a nested value: json.dumps, one line
    odd = tmp_path / "odd"
    odd.mkdir()
    rows = [{"step": s, "loss": 1.0 / (s + 1), "grad_norm": 0.5, "epoch": s / 10,
             "remaining_time": "1h"} for s in range(1, 50)]
    rows[20]["loss"], rows[20]["grad_norm"] = 0.0, float("nan")
    rows[30]["grad_norm"] = float("inf")
    rows.append({"step": 50, "eval_loss": 2.0, "epoch": 5.0})
    rows.append({"predict_loss": 3.0, "epoch": 5.0})
    rows.append({"step": 50, "train_loss": 0.9, "total_flos": 1e12, "train_runtime": 10.0})
    (odd / "trainer_state.json").write_text(json.dumps({"log_history": rows, "max_steps": 50}))
    nested = tmp_path / "nested"
    nested.mkdir()
    rows[5]["lrs"] = [{"group": 0, "lr": 0.1}, {"group": 1, "lr": 0.2}]
    (nested / "trainer_state.json").write_text(json.dumps({"log_history": rows}, indent=2))
    for run in [real_runs / n for n in names] + [odd, nested]:
        monkeypatch.setattr(hf, "_ARROW_FROM", 1 << 40)
        rowwise = read_run(run)
        monkeypatch.setattr(hf, "_ARROW_FROM", 0)
        columns = read_run(run)
        assert columns.frame.equals(rowwise.frame), run.name
        assert {k: list(v) for k, v in columns.logged_nan.items()} == \
            {k: list(v) for k, v in rowwise.logged_nan.items()}, run.name
        assert columns.source.warnings == rowwise.source.warnings, run.name
        for key in ("summary", "rows_without_step", "max_steps"):
            assert columns.source.extras.get(key) == rowwise.source.extras.get(key), (run.name, key)
    assert len(columns.frame) == 50 and np.isnan(at(columns, 21, "grad_norm"))
