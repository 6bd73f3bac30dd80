"""Judging the NaN rows the fourth blind set's families lost while reading (their lines built
from the frameworks' own format strings in tests/run/test_nan_rows_families.py): each is a NaN
incident at its own step once read."""

import sys
from pathlib import Path

from postmortem.diagnose.analyze import analyze
from postmortem.run import read_run

sys.path.insert(0, str(Path(__file__).parents[1] / "run"))
from test_nan_rows_families import FUNASR_SKIP, YOLO_LOSSES, funasr_row, glpdepth_run, ppdet_row, wetts_line  # noqa: E402


def _nan_incidents(tmp_path, text):
    log = tmp_path / "train.log"
    log.write_text(text)
    found = analyze(read_run(log)).incidents
    return [(i.kind, i.metric, i.step) for i in found]


def test_ppdet_all_nan_row_is_the_nan_and_the_huge_first_row_no_spike(tmp_path):
    rows = [ppdet_row(0, 0, 800, dict(zip(YOLO_LOSSES, (10.9, 38.6, 45.0, 6.03, 30990.1, 55.9, 31146.6)))),
            ppdet_row(0, 20, 800, dict.fromkeys(YOLO_LOSSES, float("nan")))]
    assert _nan_incidents(tmp_path, "\n".join(["ppyolov2_r50:"] + rows) + "\n") == [("nan", "loss", 20)]


def test_funasr_skips_on_a_nan_grad_norm_are_a_nan_of_the_grad_norm(tmp_path):
    stats = {'loss_ctc': 24.181, 'loss_rich': 0.041, 'loss': 24.221, 'acc_rich': 1.0}
    lines = [FUNASR_SKIP.format(float("nan")), funasr_row(3, 24.221, stats), FUNASR_SKIP.format(float("nan"))]
    assert _nan_incidents(tmp_path, "\n".join(lines) + "\n") == [("nan", "grad_norm", 3)]


def test_wetts_train_nan_after_cv_nans_is_the_nan_at_its_batch(tmp_path):
    nan = float("nan")
    lines = [wetts_line(0, "CV", b, 341, nan, 0.3, 0.9, nan, nan) for b in range(290, 341, 10)]
    lines += ["Epoch {}/{}...".format(1, 10)]
    lines += [wetts_line(1, "TRAIN", b, 2754, nan if b == 20 else 0.61 + b / 1e3, 0.4, 0.9, nan if b == 20 else 0.6, 0.7)
              for b in (0, 10, 20)]
    assert _nan_incidents(tmp_path, "\n".join(lines) + "\n") == [("nan", "loss", 1 * 2754 + 20)]


def test_glpdepth_epoch_whose_bar_ends_nan_is_the_nan(tmp_path):
    nan = float("nan")
    losses = [[0.2 - e / 100 + b / 1e4 for b in range(50)] for e in range(2)] + [[0.13] * 10 + [nan] * 40]
    assert _nan_incidents(tmp_path, glpdepth_run(losses, term_width=80)) == [("nan", "loss", 3)]
