"""Loss-scale families of the second blind set (fresh2, family 3) read from the frameworks'
own format strings: PaddleNLP 2.x pretraining's `loss_scaling` column and mindyolo's
`overflow, still update` (a scale: the optimizer stepped) and `overflow, drop step` (a skip)."""

import pytest

from postmortem.run import read_run
from postmortem.run.aliases import canonical_name

_PADDLE_PREFIX = "[2022-11-23 09:46:28,799] [    INFO] - "


def _paddlenlp(step: int, scale: float, release: str) -> str:
    """PaddleNLP examples/language_model/ernie-1.0/run_pretrain.py (2.x): `"global step %d, loss: %.9f,
    lm_loss: %.6f, sop_loss: %.6f, speed: %.2f steps/s, ips: %.2f seqs/s, learning rate: %.5e"` then,
    with --use_amp, `" loss_scaling: %.1f, incr_count: %d, decr_count: %d" % (scaler._scale.numpy(),
    scaler._incr_count, scaler._decr_count)`; the paste in fresh2 prints all three `%.2f`
    (`loss_scaling: 262144.00, incr_count: 0.00`), behind paddlenlp's logger prefix."""
    head = ("global step %d, loss: %.9f, lm_loss: %.6f, sop_loss: %.6f, speed: %.2f steps/s, ips: %.2f seqs/s, "
            "learning rate: %.5e," % (step, 8.0 - step / 1e4, 7.3 - step / 1e4, 0.69, 2.88, 92.2, 5e-6))
    tail = {"dygraph": " loss_scaling: %.1f, incr_count: %d, decr_count: %d" % (scale, 70, 0),
            "static": " loss_scaling: %.2f, incr_count: %.2f, decr_count: %.2f" % (scale, 70, 0)}[release]
    return _PADDLE_PREFIX + head.rstrip(",") + ("," if release == "static" else "") + tail


@pytest.mark.parametrize("release", ["dygraph", "static"])
def test_paddlenlp_loss_scaling_is_the_loss_scale(release, tmp_path):
    p = tmp_path / "workerlog.0"
    scales = [131072.0, 131072.0, 65536.0, 262144.0]
    p.write_text("\n".join(_paddlenlp(s, sc, release) for s, sc in zip((1000, 2000, 3000, 4000), scales)) + "\n")
    f = read_run(p).frame
    assert f.step.tolist() == [1000, 2000, 3000, 4000]
    assert f.loss_scale.tolist() == scales
    # the scaler's running counts of clean / overflowing steps are no skip counter
    assert "skipped" not in f


def test_the_alias_and_what_is_not_one():
    assert canonical_name("loss_scaling") == "loss_scale"
    assert canonical_name("train/loss_scaling") == "loss_scale"
    assert canonical_name("decr_count") == "decr_count" and canonical_name("scaling") == "scaling"


def _mindyolo(step: int) -> str:
    """mindyolo's train log (mindyolo/utils/trainer_factory.py `train_step`: f"Epoch {cur_epoch}/{self.epochs},
    Step {cur_step}/{self.steps_per_epoch}, imgsize {size}" + f", {name}: {loss_item:.4f}"... + f", cur_lr:
    {cur_lr}"), behind mindyolo's logger prefix."""
    return (f"2025-04-10 16:49:32,284 [INFO] Epoch 1/300, Step {step}/1000, imgsize (640, 640), "
            f"loss: {2.5 - step / 1e3:.4f}, lbox: 0.1035, lobj: 0.0723, lcls: 0.1021, cur_lr: 0.008844999596476555")


def _mindyolo_log(tmp_path, message: str):
    lines = []
    for s in range(10, 110, 10):
        lines.append(_mindyolo(s))
        if s == 50:
            lines.append(f"2025-04-10 16:54:20,197 [WARNING] {message}")
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    return read_run(p)


def test_mindyolo_still_update_is_a_scale_not_a_skip(tmp_path):
    """`overflow_still_update` (mindyolo's default): the optimizer stepped on the overflowing grads."""
    run = _mindyolo_log(tmp_path, f"overflow, still update, loss scale adjust to {1024.0}")
    f = run.frame.set_index("step")
    assert f.loc[60, "loss_scale"] == 1024.0
    assert "overflows" not in f or not (f.overflows.fillna(0) > 0).any()
    assert not any("loss scale adjust" in m for m in run.metrics)


def test_mindyolo_drop_step_is_a_skip(tmp_path):
    run = _mindyolo_log(tmp_path, f"overflow, drop step, loss scale adjust to {32768.0}")
    f = run.frame.set_index("step")
    assert f.loc[60, "loss_scale"] == 32768.0 and f.loc[60, "overflows"] == 1
    assert f.overflows.fillna(0).sum() == 1


def test_mindyolo_without_overflow_has_no_scale(tmp_path):
    """Control: mindyolo prints nothing of its scaler while no step overflows."""
    lines = [_mindyolo(s) for s in range(10, 110, 10)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    f = read_run(p).frame
    assert "loss_scale" not in f and "overflows" not in f and len(f) == 10


def _internlm(step: int, loss: float, scale: float, release: str) -> str:
    """InternLM's metrics line (InternLM/InternLM v0.2.x internlm/train/training_internlm.py and
    train.py `record_current_batch_training_metrics`: `line += f"{key}={value} "` over tflops, step,
    loss, `tgs (tokens/gpu/second)`, lr, loss_scale, grad_norm, ...; InternEvo the same keys, more
    after them), behind its logger's `%(asctime)s\\t%(levelname)s %(filename)s:%(lineno)s in
    %(funcName)s -- ` prefix."""
    keys = {"tflops": 180.5, "step": step, "loss": loss, "tgs (tokens/gpu/second)": 3012.45, "lr": 0.0003,
            "loss_scale": scale, "grad_norm": 1.2, "micro_num": 4, "num_consumed_tokens": step * 8192,
            "inf_nan_skip_batches": 0}
    if release == "internevo":
        keys.update({"num_samples_in_batch": 16, "largest_length": 2048, "largest_batch": 4, "smallest_batch": 4,
                     "adam_beta2": 0.95, "fwd_bwd_time": 1.1})
    line = "".join(f"{k}={v} " for k, v in keys.items())
    return f"2023-07-01 10:00:00,000\tINFO train.py:317 in record_current_batch_training_metrics -- {line}"


@pytest.mark.parametrize("release", ["v0.2", "internevo"])
def test_internlm_metrics_line_keeps_its_loss(release, tmp_path):
    """The name `tgs (tokens/gpu/second)` after the loss's value is the next metric's, not the
    loss's unit: the loss stays."""
    p = tmp_path / "train.log"
    losses = [7.25 - 0.05 * i for i in range(8)]
    p.write_text("\n".join(_internlm(10 * (i + 1), v, 65536.0, release) for i, v in enumerate(losses)) + "\n")
    f = read_run(p).frame
    assert f.step.tolist() == [10 * (i + 1) for i in range(8)]
    assert f.loss.tolist() == pytest.approx(losses)
    assert (f.loss_scale == 65536.0).all() and (f["tgs (tokens/gpu/second)"] == 3012.45).all()


def test_a_count_in_a_sentence_is_still_no_metric(tmp_path):
    """Control: `447.2 records/second (12.0 s)` style counts stay out as before."""
    p = tmp_path / "train.log"
    p.write_text("\n".join(f"step {s} loss {2.5 - s / 1e3:.4f} wrote 53 shards (tokens/gpu) to disk" for s in range(10, 90, 10)) + "\n")
    f = read_run(p).frame
    assert "loss" in f and not any("shard" in c or "wrote" in c for c in f.columns)


_BMTRAIN = {
    # OpenBMB CPM-Live cpm-live/pretrain_cpm_ant.py, CPM-Bee src/pretrain_cpm_bee.py (bmt.print_rank)
    "cpm": "| Iter: {:6d} | loss: {:.4f} | lr: {:.4e}, scale: {:10.4f} | time: {:.4f} |",
    # OpenBMB ModelCenter examples (bert/gpt2/t5 finetune_*.py): epoch and iteration of the epoch
    "modelcenter": "train | epoch {:3d} | Iter: {:6d}/{:6d} | loss: {:.4f} | lr: {:.4e}, scale: {:10.4f} | grad_norm: {:.4f} |",
    # OpenBMB BMTrain example/train.py (no counter of its own: the ordinal of each line)
    "example": "loss: {:.4f} | lr: {:.4e}, scale: {:10.4f} | grad_norm: {:.4f} |",
}


def _bmtrain(release: str, it: int, loss: float, scale: float) -> str:
    fmt = _BMTRAIN[release]
    if release == "cpm":
        return fmt.format(it, loss, 1e-4, int(scale), 0.8123)
    if release == "modelcenter":
        return fmt.format(1, it, 5000, loss, 1e-4, int(scale), 1.25)
    return fmt.format(loss, 1e-4, int(scale), 1.25)


@pytest.mark.parametrize("release", list(_BMTRAIN))
def test_bmtrain_scale_column_is_the_loss_scale(release, tmp_path):
    """`lr: {:.4e}, scale: {:10.4f}` with `int(optimizer.scale)`: the loss scale, a fall and
    BMTrain's own overflow message (optim_manager.py `Gradient overflow, change scale from %lf to %lf`)
    beside it."""
    scales = [32768.0] * 4 + [16384.0] * 4
    lines = []
    for i, sc in enumerate(scales):
        if i == 4:
            lines.append("Gradient overflow, change scale from 32768.000000 to 16384.000000")
        lines.append(_bmtrain(release, 10 * (i + 1), 3.2 - 0.01 * i, sc))
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    f = read_run(p).frame
    assert "scale" not in f
    assert f.loss_scale.dropna().tolist()[:8] == scales
    assert f.overflows.fillna(0).sum() == 1


def test_a_bare_scale_elsewhere_stays_what_it_is(tmp_path):
    """Control: `lr: 0.0001, scale: 0.5` (an augmentation's scale) in a line that is not BMTrain's."""
    p = tmp_path / "train.log"
    p.write_text("\n".join(f"step {10 * i} | loss: {3.2 - 0.01 * i:.4f} | lr: 0.0001, scale: 0.5 |" for i in range(1, 9)) + "\n")
    f = read_run(p).frame
    assert "loss_scale" not in f and (f.scale == 0.5).all()
