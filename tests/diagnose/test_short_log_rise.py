"""A log of 2-7 rows (under `short_log_points`): a divergence only where two series agree (blind
set fresh4: fastai #1736, train 2.76 -> 6.23 with valid 2.76 -> 6.22; nnU-Net #2290, train 0.36,
0.12, 0.60 with val 0.33, 0.48, 3.64). The loss at least doubles its lowest earlier value, above
every earlier one, and stays; the validation loss at that row does the same. One series alone
is "cannot tell" in B4, with its numbers; learning curves of several seeds and noise levels,
and a validation loss rising while the train loss falls (overfitting), stay quiet.

Lines are the frameworks' own: nnU-Net v2 nnunetv2/training/nnUNetTrainer/nnUNetTrainer.py
(`on_epoch_end`: `self.print_to_log_file('train_loss', np.round(..., decimals=4))`, then
'val_loss'; `on_epoch_start`: `self.print_to_log_file(f'Epoch {self.current_epoch}')`;
`print_to_log_file` writes `"%s:" % datetime` and each argument followed by a space), and
fastai v1's fit table as fastprogress writes it to a console (`epoch	train_loss	valid_loss	accuracy`,
tab separated)."""

import numpy as np
import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.run import read_run


def _nnunet(train, val) -> str:
    out = []
    for e, (t, v) in enumerate(zip(train, val)):
        ts = f"2024-06-12 18:{20 + e:02d}:21.593942:"
        out += [f"{ts}  ", f"{ts} Epoch {e} ", f"{ts} Current learning rate: {np.round(0.01 * (1 - e / 1000), 5)} ",
                f"{ts} train_loss {np.round(t, 4)} ", f"{ts} val_loss {np.round(v, 4)} ",
                f"{ts} Pseudo dice {[0.0, 0.0]} ", f"{ts} Epoch time: 354.87 s "]
    return "\n".join(out) + "\n"


def _fastai(train, valid) -> str:
    rows = [f"{e}\t{t:.6f}\t{v:.6f}\t{0.44:.6f}" for e, (t, v) in enumerate(zip(train, valid), start=1)]
    return "Total time: 110:29:25\nepoch\ttrain_loss\tvalid_loss\taccuracy\n" + "\n".join(rows) + "\n"


def _analyze(tmp_path, text):
    p = tmp_path / "train.log"
    p.write_text(text)
    return analyze(read_run(p))


def _b4(report):
    return next(c for c in report.checks if c.id == "B4")


@pytest.mark.parametrize("write,train,val,step", [
    (_nnunet, [0.3602, 0.1213, 0.5986], [0.3339, 0.4789, 3.6355], 2),
    (_fastai, [2.760716, 6.228361], [2.756633, 6.220452], 2),
    (_nnunet, [0.9, 0.7, 0.6, 0.55, 1.4, 1.6], [0.95, 0.8, 0.7, 0.66, 1.9, 2.2], 4),
])
def test_the_loss_and_the_validation_loss_rising_together_is_a_divergence(write, train, val, step, tmp_path):
    report = _analyze(tmp_path, write(train, val))
    found = [i for i in report.incidents if i.kind == "divergence"]
    assert [i.step for i in found] == [step], report.incidents
    assert found[0].confidence == "low"
    b4 = _b4(report)
    assert b4.status == "fail" and "two series agreeing" in b4.detail, b4.detail


@pytest.mark.parametrize("write,train,val", [
    (_nnunet, [0.3602, 0.1213, 0.5986], [0.3339, 0.3100, 0.3000]),     # the val loss does not follow
    (_fastai, [2.760716, 6.228361], [2.756633, 2.70]),
])
def test_one_series_alone_cannot_tell(write, train, val, tmp_path):
    report = _analyze(tmp_path, write(train, val))
    assert [i for i in report.incidents if i.kind == "divergence"] == []
    b4 = _b4(report)
    assert b4.status == "skipped" and "cannot tell" in b4.detail and "x" in b4.detail, b4.detail


def test_a_train_loss_without_validation_cannot_tell(tmp_path):
    lines = ["epoch\ttrain_loss\taccuracy", "1\t2.760716\t0.442434", "2\t6.228361\t0.076458"]
    report = _analyze(tmp_path, "\n".join(lines) + "\n")
    assert [i for i in report.incidents if i.kind == "divergence"] == []
    assert "cannot tell" in _b4(report).detail


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("noise", [0.02, 0.08, 0.2])
@pytest.mark.parametrize("write", [_nnunet, _fastai])
def test_learning_curves_and_overfitting_stay_quiet(seed, noise, write, tmp_path):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 8))
    e = np.arange(n)
    train = (0.3 + 2.0 * np.exp(-e / 2)) * (1 + noise * rng.standard_normal(n))
    # overfitting in half of them: the validation loss turns up while the train loss falls
    val = (0.4 + 2.0 * np.exp(-e / 2) + (0.3 * e if seed % 2 else 0)) * (1 + noise * rng.standard_normal(n))
    report = _analyze(tmp_path, write(np.abs(train), np.abs(val)))
    assert [i for i in report.incidents if i.kind == "divergence"] == [], (train, val)
