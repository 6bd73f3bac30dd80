"""The families of the fourth blind set whose NaN rows were lost while reading, each built from
the framework's own format strings: PaddleDetection's LogPrinter row whose every value is `nan`
(read as prose: its `nan`s counted as words)."""

import math

import numpy as np
import pytest

from postmortem.run import read_run


def _read(tmp_path, lines, name="train.log"):
    log = tmp_path / name
    log.write_text("\n".join(lines) + "\n")
    return read_run(log)


def ppdet_row(epoch, step, steps_per_epoch, losses, space_fmt=None):
    # PaddlePaddle/PaddleDetection 2.1..2.5 ppdet/engine/callbacks.py (LogPrinter.on_step_end):
    # ' '.join(['Epoch: [{}]', '[{' + space_fmt + '}/{}]', 'learning_rate: {lr:.6f}', '{meters}',
    # 'eta: {eta}', 'batch_cost: {btime}', 'data_cost: {dtime}', 'ips: {ips:.4f} images/s']) with
    # space_fmt = ':' + str(len(str(steps_per_epoch))) + 'd' (release/2.6: '{:>4}'), meters from
    # ppdet/utils/stats.py TrainingStats.log(): ' '.join("{}: {}".format(k, format(median, '.6f')))
    space_fmt = space_fmt or ':' + str(len(str(steps_per_epoch))) + 'd'
    fmt = ' '.join(['Epoch: [{}]', '[{' + space_fmt + '}/{}]', 'learning_rate: {lr:.6f}', '{meters}',
                    'eta: {eta}', 'batch_cost: {btime}', 'data_cost: {dtime}', 'ips: {ips:.4f} images/s'])
    meters = ' '.join("{}: {}".format(k, format(v, '.6f')) for k, v in losses.items())
    line = fmt.format(epoch, step, steps_per_epoch, lr=step * 1.5e-7, meters=meters, eta="2 days, 10:30:59",
                      btime="{:.4f}".format(0.6293), dtime="{:.4f}".format(0.0067), ips=12.7126)
    # ppdet/utils/logger.py setup_logger: '[%(asctime)s] %(name)s %(levelname)s: %(message)s', '%m/%d %H:%M:%S'
    return "[07/01 17:48:%02d] ppdet.engine INFO: " % step + line


YOLO_LOSSES = ("loss_xy", "loss_wh", "loss_iou", "loss_iou_aware", "loss_obj", "loss_cls", "loss")


def test_ppdet_row_whose_every_loss_is_nan_is_a_row(tmp_path):
    nan = float("nan")
    for space_fmt in (None, ':>4'):
        rows = [ppdet_row(0, 0, 800, dict(zip(YOLO_LOSSES, (10.9, 38.6, 45.0, 6.03, 30990.1, 55.9, 31146.6))),
                           space_fmt),
                ppdet_row(0, 20, 800, dict.fromkeys(YOLO_LOSSES, nan), space_fmt)]
        f = _read(tmp_path, ["ppyolov2_r50:"] + rows).frame.set_index("step")
        assert list(f.index) == [0, 20], space_fmt
        assert f.loss.iloc[0] == 31146.6 and math.isnan(f.loss.iloc[1])
        assert np.isnan(f.loss_obj.iloc[1]) and f.lr.iloc[1] > 0


def funasr_row(step, loss, stats):
    # modelscope/FunASR v1.3.2..v1.4.3 funasr/train_utils/trainer.py (Trainer.log), logged through
    # logging.info (SenseVoice's hydra logging: '[%(asctime)s][%(name)s][%(levelname)s] - %(message)s')
    tag, rank, epoch, max_epoch, data_split_i, data_split_num, batch_idx, batch_num_epoch = \
        "train", 0, 0, 100, 0, 1, step - 1, 44
    loss_avg_epoch, acc_avg_epoch, lr = loss + 3.4, 0.0, 3e-07
    speed_stats = {'data_load': '1.313', 'forward_time': '0.201', 'backward_time': '0.158'}
    gpu_info = "GPU, memory: usage: {:.3f} GB, peak: {:.3f} GB, cache: {:.3f} GB, cache_peak: {:.3f} GB".format(
        0.918, 5.583, 6.035, 6.035)
    description = (
        f"{tag}, "
        f"rank: {rank}, "
        f"epoch: {epoch}/{max_epoch}, "
        f"data_slice: {data_split_i}/{data_split_num}, "
        f"step_in_slice: {batch_idx + 1}/{batch_num_epoch}, step_in_epoch: {step}, total step: {step}, "
        f"(loss_avg_rank: {loss:.3f}), "
        f"(loss_avg_slice: {loss_avg_epoch:.3f}), "
        f"(ppl_avg_slice: {math.exp(loss_avg_epoch):.3e}), "
        f"(acc_avg_slice: {acc_avg_epoch:.3f}), "
        f"(lr: {lr:.3e}), "
        f"{[(k, round(v, 3)) for k, v in stats.items()]}, "
        f"{speed_stats}, "
        f"{gpu_info}"
    )
    return f"[2025-10-29 23:59:0{step},779][root][INFO] - " + description


# FunASR trainer.py / trainer_ds.py and ESPnet2 espnet2/train/trainer.py: f"The grad norm is {grad_norm}.
# Skipping updating the model." (a 0-dim tensor formats as its item: `nan`)
FUNASR_SKIP = "[2025-10-29 23:59:01,773][root][WARNING] - The grad norm is {}. Skipping updating the model."


def test_funasr_row_reads_the_step_loss_from_its_stats_tuples(tmp_path):
    rows = [funasr_row(s, 24.221 - s / 10, {'loss_ctc': 24.181, 'loss_rich': 0.041, 'loss': 24.221 - s / 10,
                                             'acc_rich': 1.0}) for s in (1, 2, 3)]
    log = _read(tmp_path, rows)
    f = log.frame.set_index("step")
    assert list(f.index) == [1, 2, 3]
    assert f.loss.round(3).tolist() == [24.121, 24.021, 23.921]
    assert log.source.extras["loss_from"] == "loss" and f.loss_ctc.iloc[0] == 24.181


def test_a_skip_on_a_nan_grad_norm_is_that_grad_norm_at_its_step(tmp_path):
    stats = {'loss_ctc': 24.181, 'loss_rich': 0.041, 'loss': 24.221, 'acc_rich': 1.0}
    lines = [funasr_row(2, 24.3, stats), FUNASR_SKIP.format(float("nan")), funasr_row(3, 24.221, stats),
             FUNASR_SKIP.format(float("inf"))]
    log = _read(tmp_path, lines)
    f = log.frame.set_index("step")
    assert list(f.index) == [2, 3, 4]
    # what the message says: a non-finite grad norm on the step it was printed at
    assert np.isnan(f.grad_norm.loc[3]) and f.grad_norm.loc[4] == math.inf and np.isnan(f.grad_norm.loc[2])
    assert log.nan_mask("grad_norm").tolist() == [False, True, False]
    # no loss scale printed anywhere: no scaler's skip in evidence
    assert "skipped" not in f and "overflows" not in f


def test_espnet2_skip_under_a_printed_loss_scale_stays_a_skip_and_names_its_norm(tmp_path):
    # espnet/espnet v0.9.0..v202402 espnet2/train/trainer.py; under amp the reporter prints loss_scale
    warn = ("[gpu1] 2023-01-01 10:00:00,000 (trainer:640) WARNING: The grad norm is tensor(inf, "
            "device='cuda:0'). Skipping updating the model.")
    line = ("[gpu1] 2023-01-01 10:00:00,000 (trainer:732) INFO: 1epoch:train:{}-{}batch: iter_time=1.2e-04, "
            "loss={}, loss_scale={}")
    log = _read(tmp_path, [line.format(1, 100, 5.0, 65536.0), warn, warn, line.format(101, 200, 4.9, 16384.0)])
    f = log.frame.set_index("step")
    assert np.nansum(f.overflows.to_numpy(dtype=float, na_value=np.nan)) == 2
    assert (f.grad_norm.dropna() == math.inf).all() and f.grad_norm.notna().sum() == 2


def wetts_line(epoch, tag, batch, n, loss, ploss, pacc, sloss, sacc):
    # wenet-e2e/wetts wetts/frontend/train.py (train_or_cv), the same string at 94d8508 and ba8734f
    logstr = "Epoch {} [{}] progress {}/{} loss {:.6f}".format(epoch, tag, batch, n, loss)
    logstr += " polyphone_loss {:.6f} polyphone_acc {:.6f}".format(ploss, pacc)
    logstr += " prosody_loss {:.6f} prosody_acc {:.6f}".format(sloss, sacc)
    return logstr


def test_wetts_train_progress_is_the_batch_of_its_epoch_and_cv_is_validation(tmp_path):
    nan = float("nan")
    lines = ["Epoch {}/{}...".format(0, 10)]
    lines += [wetts_line(0, "TRAIN", b, 2754, 0.9 - b / 1e4, 0.5, 0.8, 0.9, 0.7) for b in range(0, 2754, 900)]
    lines += [wetts_line(0, "CV", b, 341, nan, nan if b >= 300 else 0.3, 0.9, 0.5, 0.7) for b in range(0, 341, 100)]
    lines += ["Epoch {}/{}...".format(1, 10)]
    lines += [wetts_line(1, "TRAIN", b, 2754, nan if b == 20 else 0.61, 0.4, 0.9, nan if b == 20 else 0.6, 0.7)
              for b in (0, 10, 20)]
    log = _read(tmp_path, lines)
    f = log.frame
    train = f[f.loss.notna() | log.nan_mask("loss")]
    # e x N + i: the batch within its epoch, never a restart at each epoch or at each CV pass
    assert train.step.tolist() == [0, 900, 1800, 2700, 2754, 2764, 2774]
    assert f.segment.nunique() == 1
    assert train.loss.isna().tolist() == [False] * 6 + [True]
    # the CV rows are validation: never the training loss
    assert log.nan_mask("val_loss").sum() == 4 and log.nan_mask("loss").sum() == 1


def _format_time(seconds):
    # kuangliu/pytorch-cifar utils.py format_time, copied by vinvino02/GLPDepth code/utils/logging.py
    days = int(seconds / 3600 / 24)
    seconds = seconds - days * 3600 * 24
    hours = int(seconds / 3600)
    seconds = seconds - hours * 3600
    minutes = int(seconds / 60)
    seconds = seconds - minutes * 60
    secondsf = int(seconds)
    seconds = seconds - secondsf
    millis = int(seconds * 1000)
    f, i = '', 1
    for value, unit, width in ((days, 'D', 1), (hours, 'h', 1), (minutes, 'm', 2), (secondsf, 's', 2),
                               (millis, 'ms', 3)):
        if value > 0 and (i <= 2 or unit == 'D'):
            f += str(value).zfill(width) + unit
            i += 1
    return f or '0ms'


def _progress_bar(out, current, total, epochs, cur_epoch, step_time, tot_time, msg=None, term_width=120):
    # vinvino02/GLPDepth code/utils/logging.py progress_bar (kuangliu/pytorch-cifar utils.py's, with the
    # epochs): the bar, `  Step: | Tot: | Rem: | msg`, padded, then `\b` back to the bar's middle for
    # ' %d/%d ', then `\r` (the next frame overwrites it) or `\n` after the last batch
    total_bar_length = 30.
    cur_len = int(total_bar_length * current / total)
    rest_len = int(total_bar_length - cur_len) - 1
    out.append(' [' + '=' * cur_len + '>' + '.' * rest_len + ']')
    remain_time = step_time * (total - current) + (epochs - cur_epoch) * step_time * total
    L = ['  Step: %s' % _format_time(step_time), ' | Tot: %s' % _format_time(tot_time),
         ' | Rem: %s' % _format_time(remain_time)]
    if msg:
        L.append(' | ' + msg)
    msg = ''.join(L)
    out.append(msg + ' ' * (term_width - int(total_bar_length) - len(msg) - 3))
    out.append('\b' * (term_width - int(total_bar_length / 2) + 2))
    out.append(' %d/%d ' % (current + 1, total))
    out.append('\r' if current < total - 1 else '\n')


def _terminal(raw, width=120):
    """What a terminal shows of `raw` (a paste from it): `\\r` back to column 0, `\\b` one back."""
    lines, line, col = [], [], 0
    for c in raw:
        if c == '\n':
            lines.append(''.join(line).rstrip())
            line, col = [], 0
        elif c == '\r':
            col = 0
        elif c == '\b':
            col = max(0, col - 1)
        else:
            line[col:col + 1] = [c] if col < len(line) else [' '] * (col - len(line)) + [c]
            col += 1
    return '\n'.join(lines + [''.join(line)]) + '\n'


def glpdepth_run(losses, n=50, val_n=8, term_width=120):
    out = []
    for epoch, epoch_losses in enumerate(losses, 1):
        out.append('\nEpoch: %03d - %03d\n' % (epoch, 25))
        total = 0.
        for batch_idx in range(n):
            val = epoch_losses[batch_idx]
            total += val
            # long times first: each later frame is shorter and leaves the earlier one's tail
            step_time = 0.404 + (n - batch_idx) * 0.9
            _progress_bar(out, batch_idx, n, 25, epoch, step_time, 40 * 60 + batch_idx,
                          'Depth Loss: %.4f (%.4f)' % (val, total / (batch_idx + 1)), term_width)
        for batch_idx in range(val_n):
            _progress_bar(out, batch_idx, val_n, 25, epoch, 0.052, 35.6, term_width=term_width)
        # logging.display_result, printed
        result = dict(zip(['d1', 'd2', 'd3', 'abs_rel', 'sq_rel', 'rmse', 'rmse_log', 'log10', 'silog'],
                          [0.9085 - epoch / 100, 0.987, 0.9971, 0.1018, 0.0523, 0.3511, 0.1265, 0.0429, 0.1149]))
        line = "\n" + "=" * 100 + '\n' + "".join("{:>10} ".format(m) for m in result) + "\n"
        line += "".join("{:10.4f} ".format(v) for v in result.values()) + "\n" + "=" * 100 + '\n'
        out.append(line + '\n')
    return ''.join(out)


@pytest.mark.parametrize("term_width", [120, 80])
def test_glpdepth_bar_read_raw_and_as_a_terminal_shows_it(tmp_path, term_width):
    nan = float("nan")
    losses = [[0.2 - e / 100 + b / 1e4 for b in range(50)] for e in range(2)] + [[0.13] * 10 + [nan] * 40]
    raw = glpdepth_run(losses, term_width=term_width)
    pasted = _terminal(raw, term_width)
    # (80 columns: the message is wider than the terminal, the count lands in it and a shorter
    # frame leaves the longer one's tail behind: `Depth Loss: nan (nan)300)`, as GLPDepth #13 shows)
    assert "Depth Loss: nan (nan)" in pasted and "\b" not in pasted
    for name, text in (("raw", raw), ("pasted", pasted)):
        log_dir = tmp_path / name
        log_dir.mkdir()
        (log_dir / "train.log").write_text(text)
        log = read_run(log_dir / "train.log")
        f = log.frame.set_index("step")
        assert list(f.index) == [1, 2, 3], name
        # a frame of each epoch's bar (the paste shows the last one), nan in epoch 3
        assert np.isfinite(f.loss.iloc[:2]).all() and np.isnan(f.loss.loc[3]), name
        if name == "pasted":
            assert f.loss.iloc[:2].round(4).tolist() == [0.2049, 0.1949]
        assert log.nan_mask("loss").tolist() == [False, False, True], name
        # a time of two units (`Rem: 1h13m`) is no metric, `Step: 052ms` no step
        assert not {"Rem", "Step"} & set(f.columns), (name, list(f.columns))
        assert f.d1.round(4).tolist() == [0.8985, 0.8885, 0.8785], name
