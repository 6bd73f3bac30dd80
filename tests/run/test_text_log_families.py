"""The general metric-line reader, family by family: real logs of shared/real_runs (values
checked against their raw text) and small logs shaped like each framework's own print."""

import math
from pathlib import Path

import numpy as np
import pytest

from postmortem.run import read_run

DATA = Path(__file__).parents[1] / "data" / "textlogs"


def at(log, step, col):
    f = log.frame
    rows = f[f.step == step]
    assert len(rows), f"no row at step {step}"
    return rows[col].iloc[-1]


def test_build_nanogpt_stdout(real_runs):
    log = read_run(real_runs / "buildnanogpt-stdout-124m-gnspikes")
    f = log.frame
    assert log.source.format == "build-nanogpt" and len(f) == 19073 and f.step.max() == 19072
    # `step  3370 | loss: 3.513508 | lr 5.7261e-04 | norm: 1.7533 | dt: 416.82ms | ...`
    assert at(log, 3370, "grad_norm") == 1.7533 and at(log, 3370, "loss") == 3.513508
    assert at(log, 3370, "lr") == pytest.approx(5.7261e-04) and at(log, 5317, "grad_norm") == 2.0416
    assert f.val_loss.notna().sum() == 78 and at(log, 0, "val_loss") == 10.9522
    assert at(log, 0, "dt_ms") == pytest.approx(23547.83)
    assert not any(" " in c and c[0].isupper() for c in f.columns)   # no printed sample


def test_build_nanogpt_log_txt(real_runs):
    log = read_run(real_runs / "buildnanogpt-logtxt-2.5epoch-timelimit")
    f = log.frame
    assert len(f) == 56047 and f.step.max() == 56046 and f.loss.notna().sum() == 56047
    assert f.val_loss.notna().sum() == 225 and f.hella.notna().sum() == 225
    assert at(log, 0, "loss") == 10.955011 and at(log, 56000, "val_loss") == 2.9752


def test_nanogpt_bracket_tags(real_runs):
    log = read_run(real_runs / "nanogpt-seis-bracket-prefix-ctx4k")
    f = log.frame
    assert f.loss.notna().sum() == 800 and f.val_loss.notna().sum() == 17
    assert at(log, 1400, "loss") == 3.1777 and at(log, 7000, "val_loss") == 2.2759
    assert at(log, 8000, "eval_train loss") == 1.9437       # `[eval] ... train X val Y`: not the loss


def test_megatron_core_bracketed_timestamp_pastes(real_runs):
    log = read_run(real_runs / "issue-megatron-bridge-4024-lora-gradnorm")   # two pastes, one run
    assert log.source.format == "megatron" and log.frame.step.tolist() == [2, 3, 29, 30]
    assert at(log, 2, "grad_norm") == 987.540 and at(log, 3, "grad_norm") == 1014.636
    assert at(log, 2, "loss") == pytest.approx(1.487698) and at(log, 29, "mtp_1 loss") == pytest.approx(1.115410)
    assert any("pieces of one run" in w for w in log.source.warnings)


def test_old_megatron_without_colons(real_runs):
    log = read_run(real_runs / "issue-chinese-transformer-xl-7-lossscale-nan")
    assert log.nan_mask("loss")[log.frame.step.tolist().index(700)]          # `lm loss NAN`
    assert at(log, 500, "loss_scale") == 8 and at(log, 800, "loss_scale") == 0.1
    assert at(log, 1000, "val_loss") == pytest.approx(4.503653)


@pytest.mark.slow
def test_megatron_deepspeed_stays_megatron(real_runs):
    log = read_run(real_runs / "megatron-deepspeed-moe-0.125B")
    assert log.source.format == "megatron" and log.frame.loss.notna().sum() == 213


def test_torchtitan_every_rank_once(real_runs):
    log = read_run(real_runs / "issue-torchtitan-2389-dup-rank-lines")
    f = log.frame
    assert f.step.tolist() == [4, 5, 9, 10] and f.loss.tolist() == [7.62585, 7.07623, 4.06968, 3.88978]
    assert f.grad_norm.tolist() == [26.625, 46.5, 8.0625, 12.0] and at(log, 4, "tps") == 10050
    assert any("repeat the step" in w for w in log.source.warnings)


def test_deepspeed_overflow_glued_to_tqdm(real_runs):
    log = read_run(real_runs / "issue-gptneo-ft-7-deepspeed-zero3-overflow")
    f = log.frame
    # the first message's attempted scale (2^24) kept on the step before it
    assert f.step.tolist() == [8, 9, 10, 11, 12, 13] and f.overflows.fillna(0).tolist() == [0] + [1] * 5
    assert at(log, 8, "loss_scale") == 16777216
    assert at(log, 9, "loss_scale") == 8388608 and at(log, 13, "loss_scale") == 524288


def test_fairseq_train_inner_and_overflow(real_runs):
    log = read_run(real_runs / "issue-fairseq-2404-train-inner-overflow")
    assert at(log, 3600, "loss") == 0.439 and at(log, 3600, "grad_norm") == 3.952
    assert at(log, 3600, "loss_scale") == 1399 and at(log, 3600, "overflows") == 1


def test_apex_overflows_on_the_validation_step(real_runs):
    log = read_run(real_runs / "issue-apex-493-amp-overflow-valjump")
    assert at(log, 8416, "val_loss") == 0.711720 and at(log, 6312, "val_loss") == 0.149928
    # every halving of the cascade is its own step, the steps just before the line after them
    # and the scale before the first (apex amp prints the halved one: 2 x 256) on the step before
    scale = log.frame.dropna(subset=["loss_scale"])
    assert scale.step.tolist() == list(range(8408, 8417))
    assert scale.loss_scale.tolist() == [512.0, 256.0, 128.0, 64.0, 32.0, 16.0, 8.0, 4.0, 2.0]
    assert scale.overflows.fillna(0).tolist() == [0] + [1] * 8


def test_bigdl_loss_is_infinity(real_runs):
    log = read_run(real_runs / "issue-bigdl-1486-loss-infinity")
    assert at(log, 45457, "loss") == 1.2645824 and math.isinf(at(log, 45459, "loss"))
    assert at(log, 45459, "lr") == pytest.approx(0.046281366472703075)


def test_colossalai_tqdm_postfix(real_runs):
    log = read_run(real_runs / "issue-colossalai-1375-found-inf-loss-nan")
    assert log.frame.step.tolist() == [431, 432] and log.nan_mask("loss").all()
    assert at(log, 431, "lr") == 2.5e-5 and not any(".py" in c for c in log.frame.columns)


def test_arcface_global_step_and_grad_scale(real_runs):
    log = read_run(real_runs / "issue-insightface-2262-fp16-gradscale-zero")
    assert log.frame.step.tolist() == [20, 30, 40] and log.nan_mask("loss").all()
    # `Fp16 Grad Scale` is arcface_torch's grad_scaler.get_scale(): the loss scale
    assert log.frame["loss_scale"].tolist() == [0, 0, 0] and at(log, 30, "Speed") == 2183.37


def test_litgpt_optimizer_steps(real_runs):
    log = read_run(real_runs / "issue-litgpt-689-loss-flat")
    assert log.source.format == "litgpt" and (log.frame.loss == 10.8259).all()
    assert log.frame.step.min() == 38 and at(log, 39, "iter time_ms") == 214.40   # the first of step 39


def test_maxtext_completed_step(real_runs):
    log = read_run(real_runs / "issue-maxtext-4847-completed-step")
    assert log.frame.step.tolist() == [1, 2, 3] and log.frame.loss.tolist() == [12.979, 12.980, 12.979]
    assert at(log, 2, "perplexity") == 433463.719
    assert not any("Profiler" in c or "GFC" in c for c in log.frame.columns)


def test_metriclogger_value_not_running_mean(real_runs):
    lavis = read_run(real_runs / "issue-minigpt4-67-metriclogger-flat-loss")
    assert (lavis.frame.loss == 10.375).all() and lavis.frame.step.min() == 3950   # epoch 0
    simmim = read_run(real_runs / "issue-simmim-15-gradnorm-avg-nan")
    # `grad_norm 21.2195 (nan)`: the meter's mean is NaN, the value is not
    assert at(simmim, 6 * 1251 + 1000, "grad_norm") == 21.2195 and "grad_norm" not in simmim.logged_nan
    assert at(simmim, 6 * 1251 + 1000, "loss") == 0.4484 and at(simmim, 11 * 1251 + 100, "grad_norm") == 0.0052


def test_timm_console(real_runs):
    log = read_run(real_runs / "issue-timm-814-console-control")
    assert at(log, 1 * 5004 + 350, "loss") == 6.732388 and at(log, 2 * 5004 + 3550, "loss") == 5.239990
    assert at(log, 1 * 5004 + 350, "lr") == 2.133e-02 and len(log.frame) == 18


def test_mlx_lm_train_and_val(real_runs):
    log = read_run(real_runs / "issue-mlxlm-18-lora-control")
    assert at(log, 5, "loss") == 3.361 and at(log, 5, "val_loss") == 3.044 and at(log, 1, "val_loss") == 3.770
    assert at(log, 5, "lr") == 1e-5


def test_mmdet_and_mmengine(real_runs):
    mmdet = read_run(real_runs / "issue-mmdet-5911-intermittent-nan")
    # (e-1)*N+i: mm* counts epochs from 1, so `Epoch [1][150/5808]` is global iteration 150
    assert mmdet.frame.step.tolist() == [50, 100, 150, 200]
    assert mmdet.nan_mask("loss").tolist() == [False, False, True, False]
    assert at(mmdet, 150, "loss_cls") == 0.4035 and at(mmdet, 200, "loss") == 1.0595
    mme = read_run(real_runs / "issue-mmpretrain-1632-mmengine-text")
    assert at(mme, 147 * 351 + 100, "loss") == 0.4702 and at(mme, 147 * 351 + 100, "lr") == 2.3721e-03


def test_keras_fit_console(real_runs):
    log = read_run(real_runs / "issue-simclr-keras-14-console-nan")
    assert log.frame.step.tolist()[:3] == [1, 2, 3]                      # epochs, not batches
    assert at(log, 2, "loss") == 420.4594 and at(log, 2, "val_loss") == 342.7898
    assert list(log.frame.columns) == ["segment", "step", "loss", "val_loss"]


def test_olmo_headers_own_their_lines(real_runs):
    log = read_run(real_runs / "olmo-console-20m-zero-gradnorm-flatloss" / "train_fresh.log")
    assert log.source.format == "olmo" and len(log.frame) == 43 and log.frame.step.max() == 430
    assert (log.frame.grad_norm == 0).all()              # no learning: a real 0.0, kept
    assert log.frame.loss.between(10.29, 10.38).all()
    contrast = read_run(real_runs / "olmo-console-20m-zero-gradnorm-flatloss" / "train.log")
    assert at(contrast, 10, "loss") == 9.362 and at(contrast, 10, "grad_norm") == 0.9907
    assert contrast.frame.step.max() == 750


def test_plain_epoch_step_prints_restart_each_epoch(real_runs):
    log = read_run(real_runs / "paddle-prednet-custom-epoch-step")
    f = log.frame
    assert f.loss.notna().sum() == 750 and f.val_loss.notna().sum() == 150
    assert at(log, 25, "loss") == 0.10979227721691132 and len(log.segments()) == 1
    assert sorted(f.lr.dropna().unique()) == [0.0001, 0.001]


def test_word_language_model(real_runs):
    log = read_run(real_runs / "pytorch-wordlm-rnntanh-diverge-anneal")
    f = log.frame
    # `| epoch   1 |   200/ 2983 batches`: epochs from 1, so the first line is step 200
    assert f.loss.notna().sum() == 140 and at(log, 200, "loss") == 12.28
    assert at(log, 3 * 2983 + 2400, "loss") == 17.34                  # epoch 4's blow-up (INDEX.md)
    assert f.val_loss.dropna().tolist() == [18.46, 13.17, 12.32, 13.72, 7.74, 7.89, 6.77, 6.75, 6.64, 6.65]
    assert f.lr.dropna().unique().tolist() == [20, 5, 1.25]


def test_trl_dicts(real_runs):
    log = read_run(real_runs / "issue-trl-3452-grpo-loss-zero")
    assert (log.frame.loss == 0).all() and at(log, 1, "grad_norm") == 0.08656957000494003


# Shaped like the frameworks' own logging code.

def test_gpt_neox_lm_loss():
    log = read_run(DATA / "gpt-neox.log")
    assert log.frame.loss.tolist() == [10.7742, 10.123, 9.5541]
    assert log.frame.loss_scale.tolist() == [65536, 32768, 32768] and "samples/sec" in log.frame


def test_llama2c_console():
    log = read_run(DATA / "llama2c.log")
    assert log.frame.step.tolist() == [0, 1, 2, 3] and log.nan_mask("loss").tolist() == [False] * 3 + [True]
    assert at(log, 0, "val_loss") == 10.4031 and at(log, 2, "loss") == 10.2011


def test_fairseq_old_pipes_and_overflow():
    log = read_run(DATA / "fairseq-old.log")
    assert log.frame.step.tolist() == [33400, 33500, 34560]
    assert at(log, 33500, "overflows") == 1 and at(log, 33500, "loss_scale") == 4
    # the end-of-epoch print: the epoch's means (epoch_*), not update 34560's own loss
    assert at(log, 34560, "epoch_loss") == 3.976 and at(log, 34560, "val_loss") == 4.123
    assert np.isnan(at(log, 34560, "loss"))


def test_deit_metriclogger_nan_value_is_logged():
    log = read_run(DATA / "deit-metriclogger.log")
    assert log.frame.step.tolist() == [0, 10, 20, 30]
    assert log.nan_mask("loss").tolist() == [False, False, True, False]     # `loss: nan (nan)`
    assert at(log, 30, "loss") == 6.9102                                   # `6.9102 (nan)`


def test_quoted_fenced_paste_of_epoch_prints():
    log = read_run(DATA / "quoted-epoch-prints.md")
    assert log.frame.step.tolist() == [1, 2, 3] and log.nan_mask("loss").tolist() == [False, False, True]
    assert log.frame.acc.tolist() == [0.61, 0.70, 0.10]


def test_olmo_header_lines():
    log = read_run(DATA / "olmo-tiny.log")
    assert log.frame.grad_norm.tolist() == [0.9907, 1.655] and log.frame.loss.tolist() == [9.362, 8.243]
    assert log.frame["train/Perplexity"].tolist() == [11633, 3799]


@pytest.mark.parametrize("piece, cast_slice", [(None, None), (300, 64)])
def test_column_wise_equals_line_by_line(tmp_path, monkeypatch, piece, cast_slice):
    """Every line of one shape read by cutting the digits: the same as parsing each line; also
    when the text is scanned in many pieces on the thread pool and the casts are sliced."""
    from postmortem.run.metriclines import columns
    from postmortem.run.metriclines.columns import read_groups
    from postmortem.run.metriclines.pairs import parse, to_const
    if piece:
        monkeypatch.setattr(columns, "_CHUNK", piece)
        monkeypatch.setattr(columns, "_CAST_SLICE", cast_slice)
        monkeypatch.setattr(columns, "_workers", lambda: 3)
    rng = np.random.default_rng(0)
    lines = [f"[rank{r}]: iteration {i:>6}/ 100000 | lm loss: {x:.6E} | grad norm: {g:.3f} | "
             f"loss scale: {2.0 ** k:.1f} |"
             for i, (r, x, g, k) in enumerate(zip(rng.integers(0, 9, 500), rng.lognormal(size=500),
                                                  rng.lognormal(size=500), rng.integers(0, 20, 500)))]
    lines[7] = lines[7].replace("grad norm: ", "grad norm: -")
    groups, _ = read_groups(("\n".join(lines) + "\n").encode())
    got = {}
    for g in groups:
        for name, col in g.values.items():
            for row, v in zip(g.rows, col):
                got[(row, name)] = v
    for row, line in enumerate(lines):
        for v in parse(line).values:
            text = line[v.start:v.end]
            want = to_const(text) if v.const is not None else float(text)
            assert got[(row, v.column)] == want or (math.isnan(want) and math.isnan(got[(row, v.column)]))


def test_detectron2_events():
    log = read_run(DATA / "detectron2.log")
    assert log.frame.step.tolist() == [19, 39, 59] and log.nan_mask("loss").tolist() == [False, False, True]
    assert at(log, 39, "loss_box_reg") == 0.31 and at(log, 59, "lr") == 0.00059941


def test_lightning_progress_bar_restarts_each_epoch():
    log = read_run(DATA / "lightning-tqdm.log")
    assert log.frame.step.tolist() == [5, 10, 15, 20] and len(log.segments()) == 1
    assert log.frame.loss.tolist() == [2.31, 2.21, 2.01, 1.91]


def test_keras3_bar():
    log = read_run(DATA / "keras3.log")
    assert log.frame.step.tolist() == [1, 2] and log.frame.val_loss.tolist() == [342.7898, 280.5]


def test_composer_headers_own_their_lines():
    log = read_run(DATA / "composer.log")
    assert log.frame.step.tolist() == [10, 20] and log.frame["loss"].tolist() == [7.23, 6.91]
    assert log.source.extras["loss_from"].startswith("loss/train/total")


# Issue 12's leftovers: epochs counted from 1, namespaced total losses, preambles, encodings.

def test_composer_epochs_and_namespaced_total_loss():
    """Composer's ConsoleLogger in epoch mode: `[epoch=e][batch=i/N]` with i counted in the epoch
    from 1, so the step is (e-1)*N+i; `loss/train/total` is the loss beside its parts."""
    log = read_run(DATA / "composer-epochs.log")
    f = log.frame
    assert f.step.tolist() == [50, 100, 150, 200]
    assert f["time/batch"].tolist() == [49, 99, 149, 199]          # Composer's own count, from 0
    assert f.loss.tolist() == [6.1234, 5.5, 9.8765, 5.1] and "loss/train/total" not in f
    assert log.source.extras["loss_from"] == "loss/train/total (a total loss)"
    assert f["loss/train/ce"].tolist() == [6.0234, 5.41, 9.7, 5.02]
    assert at(log, 100, "val_metrics/eval/LanguageCrossEntropy") == 5.61
    assert at(log, 200, "lr") == 0.0004                            # lr-DecoupledAdamW/group0
    # the printed config is the run's config, not columns
    assert "global_train_batch_size" not in f and log.source.extras["preamble"]["rank_zero_seed"] == 17


@pytest.mark.parametrize("total, parts", [
    ("train/loss/total", ["train/loss/ce", "train/loss/aux"]),
    ("loss/train/total", ["loss/train/ce", "loss/train/aux"]),
    ("losses/total", ["losses/ce", "losses/aux"]),
])
def test_namespaced_total_loss_is_the_loss(tmp_path, total, parts):
    p = tmp_path / "metrics.csv"
    p.write_text(f"step,{parts[0]},{total},{parts[1]}\n1,2.0,2.5,0.5\n2,1.8,2.2,0.4\n")
    log = read_run(p)
    assert log.frame.loss.tolist() == [2.5, 2.2] and log.frame[parts[0]].tolist() == [2.0, 1.8]
    assert log.source.extras["loss_from"] == f"{total} (a total loss)"


def test_a_metric_about_the_loss_under_its_namespace_is_no_loss(tmp_path):
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss/grad_norm,losses/scale,train/loss/total\n1,0.5,1024,2.5\n2,0.4,2048,2.2\n")
    log = read_run(p)
    assert log.frame.loss.tolist() == [2.5, 2.2] and log.frame["loss/grad_norm"].tolist() == [0.5, 0.4]


def test_namespaced_eval_total_is_the_val_loss(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1, "loss/train/total": 3.0, "loss/val/total": 3.5}\n'
                 '{"step": 2, "loss/train/total": 2.0, "loss/val/total": 2.75}\n')
    log = read_run(p)
    assert log.frame.loss.tolist() == [3.0, 2.0] and log.frame.val_loss.tolist() == [3.5, 2.75]


NANOGPT_HEAD = """Overriding config with config/train_shakespeare_char.py:
# train a miniature character-level shakespeare model
out_dir = 'out-shakespeare-char'
tokens per iteration will be: 491,520
found vocab_size = 65 (inside data/shakespeare_char/meta.pkl)
Initializing a new model from scratch
number of parameters: 10.65M
num decayed parameter tensors: 26, with 10,740,096 parameters
num non-decayed parameter tensors: 13, with 4,992 parameters
using fused AdamW: True
compiling the model... (takes a ~minute)
"""


def test_nanogpt_preamble_is_config_not_columns(tmp_path):
    """`name: value` lines printed once before the first step line say what the run is."""
    lines = [NANOGPT_HEAD, "step 0: train loss 4.2874, val loss 4.2823\n"]
    lines += [f"iter {i}: loss {4 - i / 100:.4f}, time 101.19ms, mfu 3.68%\n" for i in range(0, 250, 10)]
    lines += ["step 250: train loss 1.9622, val loss 2.0606\n", "saving checkpoint to out-shakespeare-char\n",
              "iter 250: loss 2.0359, time 14395.59ms, mfu 3.32%\n"]
    p = tmp_path / "train.log"
    p.write_text("".join(lines))
    log = read_run(p)
    f = log.frame
    assert sorted(f.columns) == sorted(["segment", "step", "loss", "val_loss", "eval_train loss",
                                        "time_ms", "mfu_pct"])
    assert at(log, 240, "loss") == 1.6 and at(log, 250, "val_loss") == 2.0606 and len(f) == 26
    pre = log.source.extras["preamble"]
    assert pre["tokens.per.iteration.will.be"] == 491520 and pre["number.of.parameters"] == 10.65
    assert log.manifest.vocab_size == 65                        # `found vocab_size = 65`


def test_a_metric_printed_every_step_from_the_first_line_is_no_preamble(tmp_path):
    p = tmp_path / "train.log"
    p.write_text("loss: 3.0\n" + "".join(f"step {i} loss: {3 - i / 10}\n" for i in range(1, 5)))
    log = read_run(p)
    assert log.frame.loss.notna().sum() >= 4 and "preamble" not in log.source.extras


@pytest.mark.parametrize("first, expected", [(1, [50, 100, 351 + 50, 351 + 100]), (0, [50, 100, 401, 451])])
def test_epoch_batch_counts_the_first_epoch_from_its_own_number(tmp_path, first, expected):
    """mmengine counts epochs from 1: `Epoch(train) [1][50/351]` is step 50; a log that
    shows an epoch 0 counts from 0 whatever its shape."""
    line = ("2023/06/09 22:01:21 - mmengine - INFO - Epoch(train) [{e}][{i}/351]  lr: 2.3721e-03  "
            "eta: 5 days, 23:51:50  time: 1.0365  data_time: 0.0310  memory: 48596  loss: {loss}\n")
    p = tmp_path / "train.log"
    p.write_text("".join(line.format(e=e, i=i, loss=0.5 - e / 100 - i / 10000)
                         for e in (first, first + 1) for i in (50, 100)))
    log = read_run(p)
    assert log.frame.step.tolist() == expected
    assert at(log, expected[-1], "loss") == pytest.approx(0.5 - (first + 1) / 100 - 0.01)


def _paddle_hapi_console(predicts):
    """Model.fit then Model.predict, as hapi's ProgBarLogger prints them (python/paddle/hapi/
    callbacks.py, progressbar.py): `Epoch e/E`, `step %3d/%d - k: %.4f - %.0fms/step`,
    `Eval begin...` .. `Eval samples: %d`, then `Predict begin...`, the prediction's bar lines
    and `Predict samples: %d` (on_test_end)."""
    lines = []
    for e in (1, 2):
        lines.append("Epoch %d/%d" % (e, 2))
        for i in range(10, 110, 10):
            lines.append(("step %" + str(3) + "d/%d") % (i, 100) + " - %s: %.4f" % ("loss", 2.5 - e / 10 - i / 1000)
                         + " - %.0fms/%s" % (12, "step"))
        lines += ["Eval begin...", "step %d/%d - loss: %.4f - 5ms/step" % (10, 10, 2.2), "Eval samples: %d" % 640]
    return "\n".join(lines + predicts) + "\n"


@pytest.mark.parametrize("predicts", [
    # a bare bar (predict computes no loss), verbose=2 and verbose=1 (`\r` frames, ETA)
    ["Predict begin...", "step %d/%d - %.0fms/step" % (428, 428, 15), "Predict samples: %d" % 428],
    ["Predict begin...", "\r".join(("step %" + "4d/%d [%s] - ETA: %ds - %.0fms/step") % (i, 1108, "=" * (i // 40) + ">", 5, 15)
                                   for i in (100, 746)) + "\rstep 1108/1108 [%s] - 15ms/step" % ("=" * 30),
     "Predict samples: %d" % 1108],
    # a prediction with a metric of its own, the log cut before its end
    ["Predict begin...", "step %d/%d - loss: %.4f - acc: %.4f - 15ms/step" % (5, 10, 9.5, 0.1)],
])
def test_paddle_predict_section_stays_out_of_the_training_table(tmp_path, predicts):
    path = tmp_path / "train.log"
    path.write_text(_paddle_hapi_console(predicts))
    log = read_run(path)
    f = log.frame
    # the training steps as without the prediction: one segment, 20 steps, the last at 200
    assert len(f) == 20 and f.step.max() == 200 and f.segment.nunique() == 1
    assert f.loss.notna().sum() == 20 and f.loss.max() < 2.5 and at(log, 200, "val_loss") == 2.2
    assert not [c for c in f.columns if "Predict" in c or "samples" in c]
    if "test_loss" in f.columns:          # the prediction's own metric, beside the last train step
        assert at(log, 200, "test_loss") == 9.5 and f.test_loss.notna().sum() == 1


LETTER_FAMILY = {
    # parts glued to the letter, as a trajectory model prints its objective terms
    # (`'L: %.4f Lend: %.4f Lpre: %.4f LX: %.4f LY: %.4f' % metrics`), behind a step counter
    "glued parts": "iter %d | L: %.4f Lend: %.4f Lpre: %.4f LX: %.4f LY: %.4f",
    "capital parts": "step %d  L=%.4f  LCE=%.4f  LKL=%.4f  LX=%.4f  LY=%.4f",
    # namespaced as a writer's tags printed to the console (`train/L`, `train/L_rec`)
    "namespaced": "step %d train/L: %.4f train/L_rec: %.4f train/L_kl: %.4f train/L_x: %.4f train/L_y: %.4f",
    # names with a space, as a pipe-separated console prints them
    "spaced parts": "iter %d | L: %.4f | L box: %.4f | L cls: %.4f | L obj: %.4f | L dfl: %.4f",
}


@pytest.mark.parametrize("fmt", list(LETTER_FAMILY.values()), ids=list(LETTER_FAMILY))
def test_a_one_letter_total_beside_parts_named_after_it(tmp_path, fmt):
    path = tmp_path / "train.log"
    totals = [2.5 - s / 100 for s in range(10, 60, 10)]
    path.write_text("".join(fmt % (s, t, t - 0.4, 0.2, 0.1, 0.1) + "\n" for s, t in zip(range(10, 60, 10), totals)))
    run = read_run(path)
    assert run.frame.step.tolist() == list(range(10, 60, 10))
    assert run.frame.loss.round(4).tolist() == [round(t, 4) for t in totals]
    assert "one-letter total" in run.source.extras["loss_from"]


@pytest.mark.parametrize("fmt", [
    "iter %d | L: %.4f | Loss_x: %.4f | Lr: %.4f",       # words with an L of their own are no parts
    "iter %d | L: %.4f | loss: %.4f | Lambda: %.4f | Length: 7",
])
def test_a_letter_beside_words_that_start_with_it_is_no_total(tmp_path, fmt):
    path = tmp_path / "train.log"
    path.write_text("".join(fmt % (s, 9.0, 2.0 - s / 100, 0.5) + "\n" for s in range(10, 60, 10)))
    run = read_run(path)
    assert "one-letter" not in str(run.source.extras.get("loss_from"))
    assert run.frame.loss.round(4).tolist() == [round(2.0 - s / 100, 4) for s in range(10, 60, 10)]
