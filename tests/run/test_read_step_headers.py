"""Which counter is the step, from the frameworks' own format strings: a bracketed counter
after `Iter`/`Iteration`, MetricLogger headers with no epoch, two tqdm bars on one line,
and a section header that is no metric."""

import numpy as np

from postmortem.run import read_run

LOSSES = [2.0, 1.9, 1.8, 1.7, 1.6]


def _read(tmp_path, lines):
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    return read_run(p)


def _steps(log):
    return [int(s) for s in log.frame["step"]]


def test_bracketed_counter_after_iter_is_the_step(tmp_path):
    # custom trainers' `'Iter: [{}/{}]'.format(i, N)`, `Iteration [{}/{}]`, `iter [{:4d}/{}]`,
    # behind a logging prefix and a `[rank3]:` tag
    fmts = ["[2023-05-01 10:00:00,000 INFO] [rank3]:   Iter: [{i}/3877]   Freq {f:.1f}   Loss {l:.4f}",
            "Iteration [{i}/3877] loss: {l:.4f} lr: 0.001",
            "iter [{i:4d}/3877] loss={l:.4f}"]
    for fmt in fmts:
        log = _read(tmp_path, [fmt.format(i=i, f=12.3, l=l) for i, l in zip(range(100, 600, 100), LOSSES)])
        assert _steps(log) == [100, 200, 300, 400, 500], fmt
        assert np.allclose(log.frame["loss"], LOSSES)


def test_epoch_header_with_a_stage_is_no_metric(tmp_path):
    lines = []
    for e in range(2):
        lines.append("[Epoch=%03d/020] Stage 1" % e)
        lines += ["  Iter: [%d/500]   Loss %.4f" % (i, 2 - e - i / 1000) for i in range(100, 400, 100)]
    log = _read(tmp_path, lines)
    assert "Stage" not in log.frame.columns
    assert "loss" in log.frame.columns or "Loss" in log.frame.columns


def test_metric_logger_header_without_epoch(tmp_path):
    # dinov2 logging/helpers.py MetricLogger.log_every: [header, "[{0:>N}/{1}]", "eta: {eta}",
    # "{meters}", "time: {time}", "data: {data}", "max mem: {memory:.0f}"] joined by two spaces;
    # dinov2's log format "%(levelname).1s%(asctime)s %(process)s %(pathname)s:%(lineno)s] "
    fmt = ("I20230401 10:00:{s:02d} 4711 /src/dinov2/logging/helpers.py:103] Training  [{i:>7}/5000000]  "
           "eta: 1 day, 2:03:04  lr: 0.0001 (0.0001)  total_loss: {l:.4f} ({l:.4f})  time: 0.5123 (0.5123)  "
           "data: 0.0100 (0.0100)  max mem: 12345")
    log = _read(tmp_path, [fmt.format(s=k, i=i, l=l) for k, (i, l) in enumerate(zip(range(0, 50, 10), LOSSES))])
    assert _steps(log) == [0, 10, 20, 30, 40]
    # an eval header (`Test:`) counts its own batches: never the run's step
    test = ["Test:  [  %d/313]  eta: 0:01:00  loss: 1.2000 (1.2000)  time: 0.1  data: 0.01  max mem: 100" % i
            for i in (0, 10)]
    log = _read(tmp_path, [fmt.format(s=k, i=i, l=l) for k, (i, l) in enumerate(zip(range(0, 50, 10), LOSSES))]
                + test)
    assert 0 < len(log.frame) and max(_steps(log)) == 40
    # LAVIS runner_base / base_task: header "Train: data epoch: [{}]", then log_every's "[{i}/{N}]  eta:"
    fmt = "Train: data epoch: [{e}]  [{i:>4}/5000]  eta: 0:10:00  lr: 0.000100  loss: {l:.4f}  time: 0.5000"
    log = _read(tmp_path, [fmt.format(e=0, i=i, l=l) for i, l in zip(range(3900, 4000, 20), LOSSES)])
    assert _steps(log) == [3900, 3920, 3940, 3960, 3980]


def test_two_bars_on_one_line_take_the_outer_bar(tmp_path):
    # trlx: an inner rollout bar, then the training bar whose description carries the stats,
    # both tqdm frames `{desc}: {percentage:3.0f}%|{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}]`
    fmt = ("\r[rollout 128 / 128]: 100%|##########| 128/128 [00:10<00:00, 12.00it/s]"
           "[losses/total_loss: {l:.2f} | lr: 0.0001]:  {p:2d}%|#         | {n}/6400 [10:00<50:00,  1.70it/s]")
    log = _read(tmp_path, [fmt.format(l=l, p=n * 100 // 6400, n=n) for n, l in zip(range(1040, 1050, 2), LOSSES)]
                + ["[losses/total_loss: 1.50 | lr: 0.0001]:  16%|#         | 1050/6400 "
                   "[10:00<50:00,  1.70it/s] [RANK 0] OVERFLOW! Skipping step. Attempted loss scale: 128, "
                   "reducing to 64", ""])
    steps = _steps(log)
    assert steps[:5] == [1040, 1042, 1044, 1046, 1048]
    assert 128 not in steps


def test_a_zero_padded_epoch_of_total_is_one_number(tmp_path):
    # `'[Epoch={:03d}/{:03d}]'.format(epoch, total)`: epoch 12 of 20, never epoch 01 and batch 2/020
    log = _read(tmp_path, ["==>>[2020-04-17 18:03:46] [Epoch=%03d/020] loss: %.4f" % (e, l)
                           for e, l in zip(range(10, 15), LOSSES)])
    assert _steps(log) == [10, 11, 12, 13, 14]
