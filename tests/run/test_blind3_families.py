"""The reading families the third blind set found broken, each from the frameworks' own format
strings: counters the reader did not know (a C++ trainer's `[e|N]`, Learning-to-See's bare
`epoch cnt`, AllenNLP 0.2's `Batch i/N:` under its `Epoch e/E` line, YOLACT's `[ e] iteration ||`
with its one-letter losses); unknown formats (YANMTT's bare `ctr loss`, YOLOv5's table under its
header); TensorFlowTTS's named losses one a line, no total; torch-rnn's `Initializing from` as the
launch it is."""

import numpy as np
import pytest

from postmortem.run import read_run


def _read(tmp_path, lines, name="train.log"):
    log = tmp_path / name
    log.write_text("\n".join(lines) + "\n")
    return read_run(log)


def test_cpp_trainer_epoch_bar_and_setup_lines(tmp_path):
    # dreamilk/ANN (C++): printf("Training Epoches = %d LearningRate = %f BatchSize = %d Shuffle = %d\n", ...)
    # then printf("[%d|%d] TotalLoss %f Accuracy %f\n", epoch, epochs, loss, acc) (glibc prints NaN as `nan`)
    lines = ["train_image = 60000 train_lable = 60000", "test_image = 10000 test_lable = 10000",
             f"Training Epoches = 10 LearningRate = {0.1:f} BatchSize = 16 Shuffle = 1",
             "TrainDataSize = 60000 TestDataSize = 10000"]
    lines += [f"[{e}|10] TotalLoss {'nan' if e >= 3 else f'{2.3 / e:f}'} Accuracy {0.098:f}" for e in range(1, 6)]
    f = _read(tmp_path, lines).frame.set_index("step")
    assert list(f.index) == [1, 2, 3, 4, 5]
    assert f.loss.isna().tolist() == [False, False, True, True, True]
    assert f.Accuracy.tolist() == [0.098] * 5


def test_learning_to_see_epoch_and_count(tmp_path):
    # cchen156/Learning-to-See-in-the-Dark train_Sony.py:
    # print("%d %d Loss=%.3f Time=%.3f" % (epoch, cnt, np.mean(g_loss[np.where(g_loss)]), time.time() - st))
    lines = ["%d %d Loss=%.3f Time=%.3f" % (e, c, 0.04 if e == 332 else float("nan"), 0.04)
             for e in (332, 333) for c in range(1, 162)]
    f = _read(tmp_path, lines).frame.set_index("step")
    assert len(f) == 322 and f.index.is_monotonic_increasing
    # the log's own units: epoch x (the longest count + 1) + count, never the line's ordinal
    assert f.index[0] == 332 * 162 + 1 and f.index[161] == 333 * 162 + 1
    first_nan = f.index[f.loss.isna()][0]
    assert first_nan == f.index[161] and f.loss.iloc[:161].notna().all()


def test_allennlp_batches_under_their_epoch_line(tmp_path):
    # allenai/allennlp 0.2 allennlp/training/trainer.py: logger.info("Epoch %d/%d", epoch, num_epochs - 1),
    # then logger.info("Batch %d/%d: %s", batch_num, num_training_batches, description), the
    # description `accuracy: %.2f, loss: %.2f ||` (Tqdm's postfix)
    head = "2017-10-14 16:48:27,962 - INFO - allennlp.training.trainer - "
    lines = [head + "Epoch 0/139"]
    lines += [head + f"Batch {b}/17168: accuracy: {0.3 + b / 1e5:.2f}, loss: {1.5 - b / 1e5:.2f} ||"
              for b in (1, 567, 1134, 1701)]
    f = _read(tmp_path, lines).frame.set_index("step")
    assert list(f.index) == [1, 567, 1134, 1701]
    assert f.loss.notna().all()


def test_yolact_epoch_iteration_and_letter_losses(tmp_path):
    # dbolya/yolact train.py: print(('[%3d] %7d ||' + (' %s: %.3f |' * len(losses)) + ' T: %.3f || ETA: %s
    # || timer: %.3f') % tuple([epoch, iteration] + loss_labels + [total, eta_str, elapsed]), flush=True)
    def row(it, total):
        parts = ["B", 5.5, "C", 3.1, "M", 7.2, "S", 1.1]
        return ('[%3d] %7d ||' + (' %s: %.3f |' * 4) + ' T: %.3f || ETA: %s || timer: %.3f') % tuple(
            [1, it] + parts + [total, "196 days, 13:00:18", 0.31])
    lines = [row(it, float("nan") if it >= 1500 else 16.9) for it in range(1440, 1540, 10)]
    run = _read(tmp_path, lines)
    f = run.frame.set_index("step")
    assert list(f.index) == list(range(1440, 1540, 10))
    assert f.loss.isna().tolist() == [it >= 1500 for it in range(1440, 1540, 10)]


def test_torch_rnn_relaunch_from_a_checkpoint_is_a_resume(tmp_path):
    # jcjohnson/torch-rnn train.lua: print('Initializing from ', opt.init_from) at launch (Lua's print
    # puts a tab between its arguments), then 'Epoch %.2f / %d, i = %d / %d, loss = %f'; with
    # -reset_iterations 0 the second launch's i goes on from the checkpoint's (PR #73)
    def rows(first):
        return ["Epoch %.2f / %d, i = %d / %d, loss = %f" % (1 + i / 17800, 50, i, 17800, 3.07 - i / 1e3)
                for i in (first, first + 1)]
    lines = (["Running in CPU mode", "Initializing from \tcv/checkpoint_20.t7"] + rows(1)
             + ["Running in CPU mode", "Initializing from \tcv/checkpoint_20.t7"] + rows(21))
    run = _read(tmp_path, lines)
    assert run.frame.step.tolist() == [1, 2, 21, 22]
    assert run.frame.segment.tolist() == [0, 0, 1, 1]
    assert [r["step"] for r in run.source.extras["resumes"]] == [1, 21]


def test_yanmtt_bare_step_and_loss_lines(tmp_path):
    # prajdabre/yanmtt pretrain_nmt.py: `if ctr % 10 == 0 and rank % 8 == 0: print(ctr, lv)`, lv the loss as
    # a numpy float32 (str: `2.6496577`, `nan`); the script's own prints between them
    lines = [f"{c} {np.float32(2.6 + c / 1e6) if c < 76980 else np.float32('nan')}" for c in range(76900, 76990, 10)]
    lines += ["Saving the model", "Loading from checkpoint"] + [f"{c} {np.float32('nan')}" for c in (77000, 77010)]
    f = _read(tmp_path, lines).frame.set_index("step")
    assert list(f.index) == list(range(76900, 76990, 10)) + [77000, 77010]
    assert f.loss.isna().tolist() == [c >= 76980 for c in f.index]


def test_yolov5_table_under_its_header(tmp_path):
    # ultralytics/yolov5 train.py (v6.0-v6.2): LOGGER.info(('\n' + '%10s' * 7) % ('Epoch', 'gpu_mem', 'box', 'obj',
    # 'cls', 'labels', 'img_size')), then pbar.set_description(('%10s' * 2 + '%10.4g' * 5) % (
    # f'{epoch}/{epochs - 1}', mem, *mloss, targets.shape[0], imgs.shape[-1])) on each tqdm frame
    header = ('%10s' * 7) % ('Epoch', 'gpu_mem', 'box', 'obj', 'cls', 'labels', 'img_size')
    lines = []
    for epoch, loss in ((0, 0.05), (1, float("nan"))):
        row = ('%10s' * 2 + '%10.4g' * 5) % (f'{epoch}/99', '2.64G', loss, loss / 2, loss / 3, 4, 416)
        lines += [header, row + ": 100%|██████████| 7/7 [00:15<00:00,  2.27s/it]"]
    run = _read(tmp_path, lines)
    f = run.frame.set_index("step")
    assert f.loss.isna().tolist() == [False, True]
    assert f.loss.iloc[0] == pytest.approx(0.05 + 0.025 + 0.05 / 3, abs=1e-4)
    assert list(f.index) == [7, 14]          # epoch from 0 (`{epoch}/{epochs - 1}`) x 7 batches + 7


def test_tensorflowtts_losses_one_a_line_sum_to_the_loss(tmp_path):
    # TensorSpeech/TensorFlowTTS tensorflow_tts/trainers/base_trainer.py:
    # logging.info(f"(Step: {self.steps}) {key} = {value:.4f}."), under the logger's
    # '%(asctime)s (%(module)s:%(lineno)d) %(levelname)s: %(message)s'
    names = ("train_duration_loss", "train_f0_loss", "train_energy_loss", "train_mel_loss_before",
             "train_mel_loss_after")
    lines = []
    for step in (95200, 95300, 95400):
        for k, key in enumerate(names):
            value = float("nan") if step == 95400 and "mel" in key else 0.05 + k / 100
            lines.append(f"2020-09-10 11:52:14,449 (base_trainer:831) INFO: (Step: {step}) {key} = {value:.4f}.")
    run = _read(tmp_path, lines)
    f = run.frame.set_index("step")
    assert f.loss.isna().tolist() == [False, False, True]
    assert "train_duration_loss" in run.source.extras["loss_from"]


def _keras_frame(current, target, eta, values, width=30):
    # keras-team/keras 1.x/2.x keras/utils/generic_utils.py Progbar.update (verbose=1): the bar
    # `'%%%dd/%d [' % (numdigits, target)`, `'=' * (prog_width - 1) + '>'`, `'.' * (width - prog_width) + ']'`,
    # then `' - ETA: %ds' % eta` and `' - %s: %.4f' % (k, avg)` for each value (a running mean)
    digits = len(str(target))
    prog_width = int(width * current / target)
    bar = ('%%%dd/%d [' % (digits, target)) % current + ('=' * (prog_width - 1) + '>' if prog_width else '')
    bar += '.' * (width - prog_width) + ']'
    return bar + ' - ETA: %ds' % eta + ''.join(' - %s: %.4f' % kv for kv in values)


def test_keras_frames_from_within_one_epoch(tmp_path):
    # deep_qa (2017): a paste of the bar's frames only, each after a blank line, no epoch end
    lines = []
    for i in range(657, 662):
        lines += ["", _keras_frame(i, 1474, 6417 - i, [("loss", 4.80 + i / 1e5), ("span_begin_softmax_acc", 0.389)])]
    f = _read(tmp_path, lines).frame.set_index("step")
    assert list(f.index) == list(range(657, 662))
    assert f.loss.notna().all()
