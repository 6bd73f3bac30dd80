"""The reading families the second blind set found broken, each from the frameworks' own format
strings: a NaN said only in words (TensorFlow's NanTensorHook, OpenNMT-tf), Paddle's `[v]`
values and WaveGlow's `step_N: loss_X`, epoch-summary counters (ESPnet2's reporter,
pytorch-kaldi's `ep=`), TensorFlow's speed lines (no step), PaddleNLP's eval rows behind its
prefix, LLaMA-Factory's copy of each logged dict, checkpoint loads as events."""

import math

import pytest

from postmortem.run import read_run


def _read(tmp_path, lines, name="train.log"):
    log = tmp_path / name
    log.write_text("\n".join(lines) + "\n")
    return read_run(log)


def _estimator(step, loss, prefix="INFO:tensorflow:"):
    # tensorflow/python/training/basic_session_run_hooks.py LoggingTensorHook / the estimator's
    # `"loss = %s, step = %s (%.3f sec)"`
    return f"{prefix}loss = {loss}, step = {step} ({46.707:.3f} sec)"


# NanTensorHook.after_run: logging.error("Model diverged with loss = NaN.") under tf.logging
# (TF 1.x), under absl (TF 1.14+ and 2.x: `E<date> <time> <tid> basic_session_run_hooks.py:760] `),
# and the traceback OpenNMT-tf 2.x ends with
_DIVERGED = [
    ["ERROR:tensorflow:Model diverged with loss = NaN."],
    ["E1108 10:00:00.123456 140213 basic_session_run_hooks.py:760] Model diverged with loss = NaN."],
    ["Traceback (most recent call last):",
     '  File "/usr/lib/python3/site-packages/opennmt/training.py", line 269, in _steps',
     '    raise RuntimeError("Model diverged with loss = NaN.")',
     "RuntimeError: Model diverged with loss = NaN."],
    ['  File "main.py", line 356, in <module>    main()  File "training.py", line 269, in _steps    raise '
     'RuntimeError("Model diverged with loss = NaN.")RuntimeError: Model diverged with loss = NaN.'],
]


@pytest.mark.parametrize("said", _DIVERGED, ids=["tf-logging", "absl", "traceback", "one-line-paste"])
def test_a_nan_said_only_in_words_is_a_nan_loss_after_the_last_logged_step(tmp_path, said):
    lines = [_estimator(s, f"{1.9 - s / 1e5:.4f}") for s in range(31001, 31700, 100)] + said
    run = _read(tmp_path, lines)
    f = run.frame.set_index("step")
    assert math.isnan(f.loc[31602, "loss"])
    assert f.loss.drop(31602).notna().all()
    assert "Model diverged with loss" not in run.metrics


def test_opennmt_tf_v2_loss_column_takes_the_nan(tmp_path):
    # OpenNMT/OpenNMT-tf v2 opennmt/training.py: "Step = %d ; steps/s = %.2f, ... ; Loss = %f"
    lines = [f"2022-03-02 22:27:20.229000: I runner.py:276] Step = {s} ; steps/s = 4.72, source words/s = 3185, "
             f"target words/s = 3187 ; Learning rate = 0.000162 ; Loss = {1.61 + s / 1e7:f}"
             for s in range(297000, 297700, 100)]
    lines.append("RuntimeError: Model diverged with loss = NaN.")
    f = _read(tmp_path, lines).frame.set_index("step")
    assert math.isnan(f.loc[297601, "loss"]) and f.loss.drop(297601).notna().all()


def test_paddle_prints_its_loss_as_a_one_element_list(tmp_path):
    # PaddleSlim 2.x demo trainers: _logger.info("Total iter: {}, epoch: {}, batch: {}, loss: {}".format(..., loss))
    lines = ["2022-12-08 17:57:32,672-INFO: Total iter: {}, epoch: 0, batch: {}, loss: {}".format(
        i, i, [float("nan")] if i >= 10 else [10.000229]) for i in range(0, 60, 10)]
    f = _read(tmp_path, lines).frame.set_index("step")
    assert f.loss.iloc[0] == pytest.approx(10.000229)
    assert f.loss.isna().tolist() == [False, True, True, True, True, True]


def test_glued_step_and_loss_pairs(tmp_path):
    # NVIDIA/waveglow train.py forks: print("step_{}:\tloss_{:.9f}".format(iteration, reduced_loss))
    lines = ["step_{}:\tloss_{:.9f}".format(s, 4191.68359375 if s == 78620 else -4.1 - s / 1e6)
             for s in range(78500, 78700, 20)]
    f = _read(tmp_path, lines).frame.set_index("step")
    assert f.index.tolist() == list(range(78500, 78700, 20))
    assert f.loc[78620, "loss"] == pytest.approx(4191.68359375)


def test_espnet2_reporter_epoch_and_batch_range(tmp_path):
    # espnet/espnet espnet2/train/reporter.py (log_message): f"{self.epoch}epoch:{key}:{start}-{end}batch: " + means
    lines = [f"[PC] 2020-11-11 16:45:17,681 (trainer:486) INFO: {e}epoch:train:{b - 374}-{b}batch: iter_time=0.001, "
             f"forward_time=0.005, loss={1.5 - e / 100:.3f}, backward_time=0.005, lr_0=0.100, train_time=0.014"
             for e in (1, 2) for b in (375, 750, 1125)]
    run = _read(tmp_path, lines)
    steps = run.frame.step.tolist()
    assert steps[:3] == [375, 750, 1125]
    assert len(steps) == 6 and steps == sorted(set(steps))
    assert run.frame.segment.nunique() == 1


def test_pytorch_kaldi_epoch_summaries(tmp_path):
    # mravanelli/pytorch-kaldi run_exp.py res.res: "ep=%s tr=%s loss=%s err=%s " + " valid=%s loss=%s err=%s " ...
    lines = [f"ep={e} tr=['train_clean_100'] loss={'nan' if e == 23 else 0.671} err=0.218 valid=dev_clean "
             f"loss={'nan' if e == 23 else 0.693} err=0.212 lr_architecture1=6.25e-06 time(s)=17255"
             for e in (21, 22, 23)]
    f = _read(tmp_path, lines).frame.set_index("step")
    assert f.index.tolist() == [21, 22, 23]
    assert math.isnan(f.loc[23, "loss"]) and not math.isnan(f.loc[22, "loss"])


def test_tensorflow_speed_lines_carry_no_step(tmp_path):
    # tf.estimator's StepCounterHook: "global_step/sec: %g"; OpenNMT-tf v1 "words_per_sec/%s: %g" (`features:0`)
    lines = []
    for s in (1001, 1101, 1201):
        lines += [_estimator(s, 48.1 + s / 100), "INFO:tensorflow:global_step/sec: 2.09447",
                  "INFO:tensorflow:words_per_sec/features:0: 3275.1", "INFO:tensorflow:words_per_sec/labels:0: 3610.39"]
    run = _read(tmp_path, lines)
    assert run.frame.step.tolist() == [1001, 1101, 1201]
    assert run.frame.segment.nunique() == 1


def test_paddlenlp_valid_rows_stay_apart_from_the_training_loss(tmp_path):
    # PaddlePaddle/PaddleNLP model_zoo/ernie-1.0/run_pretrain_static.py: logger.info("global step %d, loss: %f, ...")
    # and its eval: "%s step %d, batch: %d, loss: %f, ..." % ("valid", ...); the logger's `[%(levelname)8s]`
    lines = []
    for s in (2000, 3000, 4000):
        lines += [f"[2022-11-23 09:46:28,799] [    INFO] - global step {s}, loss: {8.0 - s / 1e4:f}, lm_loss: "
                  f"{7.3 - s / 1e4:f}, sop_loss: 0.695985, speed: 2.88 steps/s, ips: 92.20 seqs/s, "
                  f"learning rate: 5.00000e-06",
                  f"[2022-11-23 09:46:31,176] [    INFO] - valid step {s}, batch: 10, loss: {9.4 - s / 1e4:f}, "
                  f"lm_loss: {8.7 - s / 1e4:f}, sop_loss: 0.702782, ips: 135 seqs/s"]
    run = _read(tmp_path, lines)
    f = run.frame.set_index("step")
    assert f.loss.max() < 8.0                            # never the eval's 9.x
    assert f.val_loss.min() > 8.0
    assert run.frame.segment.nunique() == 1


def test_llamafactory_copy_of_each_dict_is_one_step(tmp_path):
    # hiyouga/LLaMA-Factory v0.5.3 src/llmtuner/extras/callbacks.py LogCallback.on_log, then the Trainer's own dict
    lines = []
    for k in range(1, 5):
        lines += ["03/12/2024 11:24:33 - INFO - llmtuner.extras.callbacks - {'loss': %.4f, 'learning_rate': %2.4e, "
                  "'epoch': %.2f}" % (0.0, 0.05, k / 100),
                  "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': %r, 'epoch': %r}" % (0.0499987 - k / 1e5, k / 100)]
    run = _read(tmp_path, lines)
    assert run.frame.step.tolist() == [1, 2, 3, 4]
    assert run.frame.grad_norm.isna().all()
    # the logger's file alone (no Trainer dicts in it): each copy is its step
    alone = [line for line in lines if "llmtuner" in line]
    assert _read(tmp_path, alone, "alone.log").frame.step.tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("load, dialect", [
    # (torch-rnn's `Initializing from` is a launch marker since blind3: test_blind3_families)
    ("INFO:tensorflow:Restoring parameters from /tmp/t2t/model.ckpt-31622", "tensorflow.restore"),  # Saver.restore
])
def test_checkpoint_loads_are_events(tmp_path, load, dialect):
    # torch-rnn train.lua: 'Epoch %.2f / %d, i = %d / %d, loss = %f'
    lines = [load] + ["Epoch %.2f / %d, i = %d / %d, loss = %f" % (1 + i / 6723, 100, i, 672300, 0.09)
                      for i in (10, 20, 30)]
    run = _read(tmp_path, lines)
    assert run.frame.step.tolist() == [10, 20, 30]
    assert run.source.extras["checkpoints"] == [{"step": 10, "dialect": dialect}]
    assert run.frame.segment.nunique() == 1
