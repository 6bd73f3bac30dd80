"""Loss-scale messages found by the audit of who prints a loss scale (docs/sessions/2026-11-27/
scaleaudit.md), each written with its framework's own format strings: a cascade that halves the
scale step after step until it is far below 1 is an fp16-overflow incident at its first skip; a
scaler growing, with an occasional single halving, is quiet."""

import json
import sys
from pathlib import Path

import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.run import read_run

sys.path.insert(0, str(Path(__file__).parents[1]))
from scale_logs import write  # noqa: E402

CASCADE = 300          # the first skip of the cascade below


def _torch_npu(step: int, skipped: bool, scale: float, grew: bool, loss: float) -> list[str]:
    """Ascend/pytorch torch_npu/npu/amp/grad_scaler.py's prints for one step, then, every 10 steps,
    the ImageNet example's ProgressMeter line the Ascend ModelZoo scripts print."""
    out = []
    if skipped:
        out += ["Gradient overflow. Skipping step", "Loss scaler reducing loss scale to {}".format(scale)]
    elif grew:
        out.append("Loss scaler increasing loss scale to {}".format(scale))
    if step % 10 == 0:
        out.append("Epoch: [0][{:3d}/500]\tTime  0.131 ( 0.135)\tData  0.002 ( 0.003)\tLoss {:.4e} ({:.4e})\t"
                   "Acc@1  40.62 ( 33.63)".format(step, loss, loss))
    return out


def _apex_closure(step: int, skipped: bool, scale: float, grew: bool, loss: float) -> list[str]:
    """NVIDIA/apex apex/fp16_utils/fp16_optimizer.py `_step_with_closure`: `print("OVERFLOW within
    closure! Skipping step, reducing loss scale to {}".format(self.loss_scaler.loss_scale()))` (its
    scaler says nothing on growth), then the ImageNet example's ProgressMeter line every 10 steps."""
    out = ["OVERFLOW within closure! Skipping step, reducing loss scale to {}".format(scale)] if skipped else []
    if step % 10 == 0:
        out.append("Epoch: [0][{:3d}/500]\tTime  0.131 ( 0.135)\tLoss {:.4e} ({:.4e})".format(step, loss, loss))
    return out


def _insightface(step: int, skipped: bool, scale: float, grew: bool, loss: float) -> list[str]:
    """deepinsight/insightface recognition/arcface_torch/utils/utils_callbacks.py CallBackLogging, every
    10 steps, behind its `Training: %(asctime)s-` logging format: `"Speed %.2f samples/sec   Loss %.4f
    LearningRate %.6f   Epoch: %d   Global Step: %d   Fp16 Grad Scale: %2.f   Required: %1.f hours"`
    (its scaler prints nothing; a scale below 0.5 prints ` 0`)."""
    if step % 10:
        return []
    return ["Training: 2023-03-14 09:08:47,984-Speed %.2f samples/sec   Loss %.4f   LearningRate %.6f   Epoch: %d   "
            "Global Step: %d   Fp16 Grad Scale: %2.f   Required: %1.f hours" % (2183.37, loss, 0.001, 0, step, scale, 144)]


def _apex_old_amp(step: int, skipped: bool, scale: float, grew: bool, loss: float) -> list[str]:
    """NVIDIA/apex's first amp API, apex/amp/handle.py AmpHandle.scale_loss: `logging.info('Gradient
    overflow, skipping update')` under the root logger's default format (the scale halves unsaid),
    then the ImageNet example's ProgressMeter line every 10 steps."""
    out = ["INFO:root:Gradient overflow, skipping update"] if skipped else []
    if step % 10 == 0:
        out.append("Epoch: [0][{:3d}/500]\tTime  0.131 ( 0.135)\tLoss {:.4e} ({:.4e})".format(step, loss, loss))
    return out


def _mxnet(step: int, skipped: bool, scale: float, grew: bool, loss: float) -> list[str]:
    """apache/mxnet python/mxnet/contrib/amp/loss_scaler.py LossScaler.has_overflow: `logging.info(
    "AMP: decreasing loss scale to %f", ...)` on a skip, `"AMP: increasing loss scale to %f"` on a
    growth (root logger under basicConfig), then a GluonNLP-style progress line every 10 steps."""
    out = []
    if skipped:
        out.append("INFO:root:AMP: decreasing loss scale to %f" % scale)
    elif grew:
        out.append("INFO:root:AMP: increasing loss scale to %f" % scale)
    if step % 10 == 0:
        out.append("INFO:root:[Epoch 0 Batch %d/500] loss=%.4f, lr=0.0001000" % (step, loss))
    return out


def _composer(step: int, skipped: bool, scale: float, grew: bool, loss: float) -> list[str]:
    """Composer's LossScaleMonitor (composer/callbacks/loss_scale_monitor.py: `logger.metric_batch(
    {f"loss_scale-{name}": scale})`) under its console logger's `[batch=i/N]:` block, every step."""
    return ["[batch=%d/500]:" % step, "\t Train time/batch: %d" % step,
            "\t Train loss/train/total: %.4f" % loss, "\t Train loss_scale-DecoupledAdamW: %.4f" % scale]


def _detectron2_json(step: int, skipped: bool, scale: float, grew: bool, loss: float) -> list[str]:
    """detectron2's JSONWriter (metrics.json) every 20 iterations, with AMPTrainer(log_grad_scaler=
    True)'s `storage.put_scalar("[metric]grad_scaler", self.grad_scaler.get_scale())`."""
    if step % 20:
        return []
    return [json.dumps({"[metric]grad_scaler": scale, "data_time": 0.01, "iteration": step - 1,
                        "loss_cls": loss / 2, "lr": 0.02, "time": 0.4, "total_loss": loss})]


WRITERS = {"torch_npu": _torch_npu, "apex_closure": _apex_closure, "insightface": _insightface,
           "apex_old_amp": _apex_old_amp, "mxnet": _mxnet, "composer": _composer,
           "detectron2_json": _detectron2_json}
# the file each family's logger writes (train.log unless said)
FILES = {"detectron2_json": "metrics.json"}


def _run(writer, cascade: bool) -> list[str]:
    """500 steps of a dynamic scaler (x2 every 50 clean steps, /2 on a skip): with `cascade`, every
    step from CASCADE to CASCADE+30 overflows (2**20 -> 2**-10, the loss climbing); without, an
    isolated skip every 150 steps between growths (net up: 16384 -> 524288)."""
    lines, scale, clean = [], 2.0 ** 14, 0
    for step in range(1, 501):
        skipped = (CASCADE <= step < CASCADE + 30) if cascade else step % 150 == 75
        grew = False
        if skipped:
            scale, clean = scale / 2, 0
        else:
            clean += 1
            if clean % 50 == 0:
                scale, grew = scale * 2, True
        loss = 2.0 - step * 1e-3 + (0.5 * (step - CASCADE) if cascade and step >= CASCADE else 0.0)
        lines += writer(step, skipped, scale, grew, loss)
    return lines


# the families whose messages say no scale: only their skips are read
SKIPS_ONLY = {"apex_old_amp"}


def _skips(log) -> float:
    f = log.frame
    return float(f["overflows" if "overflows" in f else "skipped"].sum())


def _incidents(log):
    return [(i.kind, i.step, i.hypotheses[0].pattern if i.hypotheses else None) for i in analyze(log).incidents]


@pytest.mark.parametrize("family", list(WRITERS))
def test_a_cascade_far_below_one_is_an_fp16_overflow(family, tmp_path):
    log = read_run(write(tmp_path, _run(WRITERS[family], cascade=True), FILES.get(family, "train.log")))
    if family in SKIPS_ONLY:
        # the same words on consecutive lines may be every rank's (apex prints on all ranks): one
        # skip per run of them, so at least one in each of the cascade's logging intervals
        assert _skips(log) >= 3
    else:
        assert log.frame.loss_scale.dropna().min() < 1e-2       # the scale read down to where it fell
    found = _incidents(log)
    assert len(found) == 1 and found[0][2] == "fp16-overflow", (family, found)
    assert CASCADE - 10 < found[0][1] <= CASCADE + 5, (family, found)


@pytest.mark.parametrize("family", list(WRITERS))
def test_a_growing_scaler_with_single_halvings_is_quiet(family, tmp_path):
    log = read_run(write(tmp_path, _run(WRITERS[family], cascade=False), FILES.get(family, "train.log")))
    if family in SKIPS_ONLY:
        assert _skips(log) == 3
    else:
        assert log.frame.loss_scale.dropna().max() > 2.0 ** 14      # it grew, and it was read
    assert _incidents(log) == [], family
