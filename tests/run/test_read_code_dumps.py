"""Source code printed into a text log (a script's own source at the top of its log, a
traceback's quoted lines) is not read as metrics; the log lines after it are."""

import pytest

from postmortem.run import read_run
from postmortem.run.metriclines.code import is_code

SCRIPT = '''\
import torch
def zeropower(G, steps=10, eps=1e-7):
    assert len(G.shape) == 2
    X = G.bfloat16() / (G.norm() + eps)
    return X
class Hyperparameters:
    num_iterations : int = 6200
    learning_rate : float = 0.0036
args = Hyperparameters()
model = GPT(GPTConfig(vocab_size=num_vocab, n_layer=12, n_head=12, n_embd=768))
optimizer = Muon(model.parameters(), lr=0.1*args.learning_rate, momentum=0.95)
for step in range(args.num_iterations + 1):
    if step == 10:
        training_time_ms = 0
    if args.val_loss_every > 0 and step % args.val_loss_every == 0:
        val_loss = 0.0
        print(f"step:{step} val_loss:{val_loss:.4f}")
    scale = g.size(1)**0.5
    print(f"step:{step+1} train_loss:{train_loss.item():.4f} lr:{lr:.2e}")
'''


def _log(tmp_path, script: str = SCRIPT):
    lines = ["=" * 40, *script.splitlines(), "=" * 40]
    for step in range(1, 41):
        lines.append(f"step:{step} train_loss:{5 - step / 20:.4f} lr:{1e-3:.2e}")
        if step % 10 == 0:
            lines.append(f"step:{step} val_loss:{5.1 - step / 20:.4f}")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_dumped_script_is_not_read_as_metrics(tmp_path):
    log = read_run(_log(tmp_path))
    f = log.frame
    assert set(log.metrics) == {"loss", "lr", "val_loss"}
    assert f.step.min() == 1 and f.step.max() == 40
    # nothing of the script at a step: no `lr=0.1*...`, no `val_loss = 0.0`, no `.item()`
    assert set(f.lr.dropna()) == {1e-3} and f.val_loss.dropna().tolist() == [4.6, 4.1, 3.6, 3.1]
    assert not any("logged again" in w for w in log.source.warnings)


def test_modded_nanogpt_script_dump(real_runs):
    """modded-nanogpt prints its training script before its log: `Muon(..., lr=0.1*args...)`
    once made an `lr` of 0.1 at step 0 (the dashboard's LR panel, `lr=0.1` at every step)."""
    for run, val_loss_at_0 in (("modded-nanogpt-muon", 10.9264), ("modded-nanogpt-soap", 11.0149)):
        log = read_run(real_runs / run)
        names = set(log.metrics)
        assert not any("(" in n or "." in n for n in names), names
        assert "lr" not in names and "args.val_loss_every" not in names
        # step 0's val_loss is the log's `step:0/6200 val_loss:...`, not the script's `val_loss = 0.0`
        assert log.frame.val_loss.dropna().iloc[0] == val_loss_at_0
        assert not any("logged again" in w for w in log.source.warnings)


@pytest.mark.parametrize("line", [
    "optimizer2 = Muon(raw_model.transformer.h.parameters(), lr=0.1*args.learning_rate, momentum=0.95)",
    "    def __init__(self, params, lr=3e-4, momentum=0.95, nesterov=True):",
    "        print(f'step:{step}/{args.num_iterations} val_loss:{val_loss:.4f}')",
    "                    scale = g.size(1)**0.5",
    "        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))",
    "    vocab_size : int = 50257",
    "    if step == 10:",
])
def test_lines_of_code(line):
    assert is_code(line)


@pytest.mark.parametrize("line", [
    "step:13/6200 train_loss:6.5125 train_time:641ms step_avg:213.66ms",
    " iteration       10/ 1716613 | consumed samples: 2560 | lm loss: 1.097906E+01 | loss scale: 2048.0 |",
    "Epoch(train) [1][ 50/625]  lr: 1.0000e-04  eta: 0:10:12  time: 0.2  loss: 2.3 (2.4)",
    "    optim/total_grad_norm=0.0",
    "{'loss': 2.3456, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.01}",
    '{"lr": 0.001, "loss": 5.02, "epoch": 1, "step": 10}',
    "10/100 [==>...........] - ETA: 1:02 - loss: 0.5 - accuracy: 0.8",
    "Loss scale *grows* 2048 at iteration 510",
    "[Rank 0] step=10, skipped=0, lr=[9.65e-06, 9.65e-06], mom=[(0.9, 0.95), (0.9, 0.95)]",
])
def test_lines_of_a_log(line):
    assert not is_code(line)
