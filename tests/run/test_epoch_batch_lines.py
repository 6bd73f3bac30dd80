"""An epoch and a batch (step) counter on one line, with words between them: the batch is the
step (e x N + i where N is printed, the batch itself where the log shows one epoch, the epoch
times the longest batch seen where it starts again), never the epoch. Lines built from each
framework's own format string (`metriclines/epochwords.py` names the sources), behind the
logger prefixes the frameworks print."""

import math

from postmortem.run import read_run


def _read(tmp_path, lines, name="train.log"):
    log = tmp_path / name
    log.write_text("\n".join(lines) + "\n")
    return read_run(log)


def _icefall_old(e, b, loss, scale=65536.0):
    # k2-fsa/icefall egs/librispeech/ASR/pruned_transducer_stateless7/train.py (2022-2023)
    return (f"2023-03-06 12:41:16,653 INFO [train.py:694] (2/4) Epoch {e}, batch {b}, "
            f"loss[loss={loss}, simple_loss=0.6511, pruned_loss=0.2501, over 19153.00 frames. ], "
            f"tot_loss[loss={loss}, simple_loss=0.5909, pruned_loss=0.2276, over 37589436.30 frames. ], "
            f"batch size: 130, lr: {2.73e-02:.2e}, grad_scale: {scale}")


def _icefall_new(e, b, g, loss):
    # icefall egs/*/zipformer/train.py (2024-2025): `global_batch_idx` is the run's counter
    return (f"2025-05-20 02:38:47,195 INFO [train.py:1056] (7/8) Epoch {e}, batch {b}, "
            f"global_batch_idx: {g}, batch size: 72, loss[loss={loss}, ctc_loss=0.4594, over 19153.00 frames. ], "
            f"tot_loss[loss={loss}, ctc_loss=0.4316, over 37589436.30 frames. ], cur_lr: {2.73e-02:.2e}, "
            f"grad_scale: 2.0")


def test_icefall_batch_is_the_step_and_its_nan_stays_at_its_batch(tmp_path):
    lines = [_icefall_old(1, b, "nan" if b >= 8500 else 0.61 - b / 1e5) for b in range(8000, 8700, 100)]
    f = _read(tmp_path, lines).frame
    assert f.step.tolist() == list(range(8000, 8700, 100))
    assert f.loc[f.loss.isna(), "step"].tolist() == [8500, 8600]
    assert f.segment.nunique() == 1


def test_icefall_batch_starts_again_at_each_epoch_one_segment(tmp_path):
    lines = [_icefall_old(e, b, 0.7 - e / 100 - b / 1e5) for e in (1, 2, 3) for b in range(0, 500, 100)]
    run = _read(tmp_path, lines)
    steps = run.frame.step.tolist()
    assert len(steps) == 15 and steps == sorted(set(steps))       # every line a step of its own, in order
    assert steps[:5] == [0, 100, 200, 300, 400]
    assert run.frame.segment.nunique() == 1


def test_icefall_global_batch_idx_is_the_step(tmp_path):
    lines = [_icefall_new(e, b, (e - 1) * 500 + b, 0.6) for e in (1, 2) for b in (0, 200, 400)]
    f = _read(tmp_path, lines).frame
    assert f.step.tolist() == [0, 200, 400, 500, 700, 900]


def test_ppasr_train_epoch_batch_of_n(tmp_path):
    # yeyupiaoling/PPASR train.py (2021): 'Train epoch: %d, batch: %d/%d, loss: %f, learning rate: %s, ...'
    lines = []
    for b in range(750, 840, 10):
        loss = "nan" if b >= 790 else f"{6.7 - b / 1e4:f}"
        lines += [f"[2021-07-14 02:12:37.086634] Train epoch: 0, batch: {b}/34799, loss: {loss}, "
                  f"learning rate: 0.0001, train time: 3.768s", f"完成第{b}的保存"]
    lines.append("[2021-07-15 02:12:37.086634] Train epoch: 1, batch: 10/34799, loss: nan, learning rate: "
                 "0.0001, train time: 3.768s")
    run = _read(tmp_path, lines)
    f = run.frame
    assert f.step.tolist()[:9] == list(range(750, 840, 10))
    assert f.step.tolist()[-1] == 34799 + 10
    assert f.loc[f.loss.isna(), "step"].min() == 790
    assert run.frame.segment.nunique() == 1


def test_monodepth2_and_lite_mono_pipe_lines(tmp_path):
    # nianticlabs/monodepth2 trainer.py log_time; Lite-Mono adds the two learning rates
    mono = "epoch {:>3} | batch {:>6} | examples/s: {:5.1f} | loss: {:.5f} | time elapsed: {} | time left: {}"
    lite = ("epoch {:>3} | lr {:.6f} |lr_p {:.6f} | batch {:>6} | examples/s: {:5.1f} | loss: {:.5f} | "
            "time elapsed: {} | time left: {}")
    for shape, args in ((mono, lambda e, b: (e, b, 22.1, 0.13 - b / 1e5, "00h03m34s", "23h42m04s")),
                        (lite, lambda e, b: (e, 1e-4, 1e-4, b, 22.1, 0.13 - b / 1e5, "00h03m34s", "23h42m04s"))):
        lines = ["Training"] + [shape.format(*args(e, b)) for e in (0, 1) for b in (0, 250, 500)]
        run = _read(tmp_path, lines)
        steps = run.frame.step.tolist()
        assert len(steps) == 6 and steps == sorted(set(steps)), (shape, steps)
        assert steps[:3] == [0, 250, 500]
        assert run.frame.segment.nunique() == 1


def test_pytorch_gan_epoch_and_batch_in_brackets(tmp_path):
    # eriklindernoren/PyTorch-GAN implementations/*/*.py: "[Epoch %d/%d] [Batch %d/%d] [D loss: %f] [G loss: %f]"
    lines = ["[Epoch %d/%d] [Batch %d/%d] [D loss: %f] [G loss: %f]" % (e, 200, b, 938, 0.5, 1.2 + b / 1e4)
             for e in (0, 1) for b in (0, 400, 800)]
    f = _read(tmp_path, lines).frame
    assert f.step.tolist() == [0, 400, 800, 938, 1338, 1738]


def test_mxnet_speedometer_releases(tmp_path):
    # apache/mxnet 0.9 python/mxnet/callback.py Speedometer: 'Epoch[%d] Batch [%d]\tSpeed: %.2f samples/sec\tTrain-%s=%f'
    # 1.x: 'Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec' + '\t%s=%f' per metric
    old = ["INFO:root:Epoch[%d] Batch [%d]\tSpeed: %.2f samples/sec\tTrain-%s=%f" % (e, b, 12488.17, "accuracy", 0.95)
           for e in (0, 1) for b in range(100, 1000, 100)]
    new = ["INFO:root:Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec\t%s=%f\t%s=%f"
           % (e, b - 100, b, 14760.5, "accuracy", 0.95, "cross-entropy", 0.2 + b / 1e4)
           for e in (0, 1) for b in range(100, 1000, 100)]
    for lines in (old, new):
        run = _read(tmp_path, lines)
        steps = run.frame.step.tolist()
        assert len(steps) == 18 and steps == sorted(set(steps)), steps
        assert steps[:9] == list(range(100, 1000, 100))
        assert run.frame.segment.nunique() == 1


def test_mindyolo_last_step_of_each_epoch(tmp_path):
    # mindspore-lab/mindyolo mindyolo/utils/trainer_factory.py: f"Epoch {cur_epoch}/{epochs}, Step {cur_step}/
    # {self.steps_per_epoch}, imgsize {imgsize}, loss: {loss:.4f}, ..." then the step time line
    lines = []
    for e in range(35, 40):
        lines += [f"2025-04-10 16:49:32,284 [INFO] Epoch {e}/300, Step 4/4, imgsize (640, 640), loss: {0.28 - e / 1e4:.4f}, "
                  f"lbox: 0.1035, lobj: 0.0723, lcls: 0.1021, cur_lr: 0.008844999596476555",
                  f"2025-04-10 16:49:32,287 [INFO] Epoch {e}/300, Step 4/4, step time: 23330.36 ms",
                  f"2025-04-10 16:49:32,978 [INFO] Epoch {e}/300, epoch time: 1.57 min."]
    run = _read(tmp_path, lines)
    steps = run.frame.step.tolist()
    assert len(steps) == 5 and steps == sorted(set(steps)) and steps[1] - steps[0] == 4
    assert run.frame.segment.nunique() == 1
    assert not math.isnan(run.frame.loss.iloc[-1])


def test_percent_of_the_epoch(tmp_path):
    # MUSIC-AVQA engine.py: 'Epoch {} complete [{:.0f}%]\tLoss: {:.6f}'
    lines = ["[2024-07-06 06:41:25,455]-[engine.py line:78]:Epoch %d complete [%d%%]\tLoss: %f" % (e, p, 3 - p / 50)
             for e in (1, 2) for p in range(0, 100, 10)]
    run = _read(tmp_path, lines)
    steps = run.frame.step.tolist()
    assert steps[:3] == [0, 10, 20] and steps[10] == 100
    assert len(steps) == 20 and steps == sorted(set(steps))


def test_an_epoch_word_then_a_long_run_of_blanks_is_read_at_once(tmp_path):
    # a padded epoch column (`epoch` then hundreds of blanks): the stream pattern was O(n^4) on it
    import time

    from postmortem.run.metriclines.pairs import parse

    t = time.perf_counter()
    parsed = parse("epoch " + " " * 600 + "1/ x")
    assert time.perf_counter() - t < 2.0          # main: ~2.6 s for 400 blanks, ~13 s for 600
    assert parsed.epoch is not None and not parsed.values
