"""Lightning's bar carries the last eval's `val_loss` on every frame after the first eval: the
train metrics beside it are still the batch's own (not an eval's measure, as on nanoGPT's
`step N: train loss X, val loss Y`). Frames built with tqdm's own `format_meter` and Lightning's
postfix (`TQDMProgressBar.on_train_batch_end`: `set_postfix(get_metrics())`, `k=v` joined by
`, `, floats as `Tqdm.format_num`), and Rich's (`MetricsTextColumn`: `f"{k}: {round(v, 3)} "`)."""

import math

import pytest
from tqdm import tqdm

from postmortem.diagnose.analyze import analyze
from postmortem.run import read_run

N = 50


def _losses(seed: int, spike_at: int) -> list[float]:
    import random
    rnd = random.Random(seed)
    out = [2 * math.exp(-s / 200) + 0.5 + rnd.gauss(0, 0.02) for s in range(1, 6 * N + 1)]
    out[spike_at - 1] *= 6
    return out


def _tqdm_log(losses: list[float], name: str) -> str:
    lines = []
    for k, loss in enumerate(losses):
        epoch, i = divmod(k, N)
        post = {"v_num": 0, name: f"{loss:.3f}"}
        if epoch:      # the first eval ends epoch 0: from then on its value rides on every frame
            post |= {"val_loss": f"{0.6 + 0.1 * math.exp(-epoch):.3f}", f"{name}_epoch": "0.700"}
        postfix = ", ".join(f"{k}={v}" for k, v in post.items())
        lines.append(tqdm.format_meter(i + 1, N, 2.0 + i * 0.03, prefix=f"Epoch {epoch}", postfix=postfix,
                                       ncols=200))
    return "\n".join(lines) + "\n"


def _rich_log(losses: list[float]) -> str:
    lines = []
    for k, loss in enumerate(losses):
        epoch, i = divmod(k, N)
        metrics = {"v_num": 0, "train_loss": round(loss, 3)}
        if epoch:
            metrics["val_loss"] = round(0.6 + 0.1 * math.exp(-epoch), 3)
        text = "".join(f"{m}: {v} " for m, v in metrics.items())
        lines.append(f"Epoch {epoch}/5  {'━' * 20} {i + 1}/{N} 0:00:{i:02d} • 0:00:30 14.80it/s {text}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", ["train_loss_step", "train_loss"])
def test_the_train_loss_is_read_on_every_frame_after_the_first_eval(tmp_path, name):
    losses = _losses(7, spike_at=230)
    log = tmp_path / "train.log"
    log.write_text(_tqdm_log(losses, name))
    run = read_run(log)
    loss = run.frame.set_index("step")["loss"].dropna()
    assert len(loss) == 6 * N, len(loss)                 # the frames after epoch 0 too
    assert not any(c.startswith("eval_") for c in run.metrics)
    incidents = analyze(run).incidents
    assert [(i.kind, i.step) for i in incidents] == [("spike", 230)]


def test_rich_bar_keeps_the_train_loss_beside_the_last_eval(tmp_path):
    # Rich's bar: its `i/N` (BatchesProcessedColumn) is the batch of the epoch, the step e x N + i
    log = tmp_path / "train.log"
    log.write_text(_rich_log(_losses(7, spike_at=230)))
    run = read_run(log)
    loss = run.frame.set_index("step")["loss"].dropna()
    assert len(loss) == 6 * N and loss.index.max() == 6 * N, loss.index
    assert not any(c.startswith("eval_") for c in run.metrics)
    assert [(i.kind, i.step) for i in analyze(run).incidents] == [("spike", 230)]
