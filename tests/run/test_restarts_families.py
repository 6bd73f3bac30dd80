"""A restart is kept, in the families that leave it in their own shape: HF Trainer's console
dicts (no step printed: the epoch going back is the relaunch), torchtitan's checkpoint load
(`Loading the checkpoint at step N.`, the steps carrying on from N), a relaunch resumed into
a new file of the same folder, two CSV logs joined with their headers. The run keeps two
segments and the resume, and the diagnosis sees it (a loss bump right after a resume is the
optimizer-reset pattern's)."""

import math

import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.errors import RunReadError
from postmortem.run import read_run


def _hf_dict(loss: float, epoch: float) -> str:
    # transformers' ProgressCallback.on_log: `self.training_bar.write(str(logs))`; the Trainer's
    # `_maybe_log_save_evaluate` rounds the loss to 4 digits and logs `epoch` (state.epoch)
    return str({"loss": round(loss, 4), "grad_norm": 1.0, "learning_rate": 5e-05, "epoch": round(epoch, 2)})


def _hf_relaunched(tmp_path, bump: float = 0.0):
    lines = [_hf_dict(3 * math.exp(-i / 80) + 1.0, i / 100) for i in range(1, 201)]
    lines.append("***** Running training *****")
    lines += [_hf_dict(3 * math.exp(-i / 80) + 1.0 + bump * math.exp(-(i - 150) / 8), i / 100)
              for i in range(150, 301)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_hf_console_relaunched_into_the_same_log_is_two_segments(tmp_path):
    run = read_run(_hf_relaunched(tmp_path))
    assert [s["rows"] for s in run.segments()] == [200, 151]
    assert len(run.source.resumes) == 1 and len(run.frame) == 351
    # one launch's dicts: the epoch repeats (rounded to 2 digits), never goes back
    one = tmp_path / "one.log"
    one.write_text("\n".join(_hf_dict(3 - i / 100, i // 10 / 10) for i in range(1, 101)) + "\n")
    run = read_run(one)
    assert len(run.segments()) == 1 and run.source.resumes == []


def test_a_loss_bump_after_an_hf_relaunch_is_seen_as_the_restart(tmp_path):
    analysis = analyze(read_run(_hf_relaunched(tmp_path, bump=1.5)))
    assert analysis.incidents
    first = analysis.incidents[0].hypotheses[0]
    assert first.pattern == "optimizer-reset"


def _titan(step: int, loss: float) -> str:
    # torchtitan train.py: f"step: {step:2}  loss: {loss:7.4f}  memory: ..." behind its logger's prefix
    return (f"[rank0]:[titan] 2025-03-01 10:00:00,000 - root - INFO - step: {step:2}  loss: {loss:7.4f}  "
            f"memory: 10.00GiB(20.00%)  tps: 1,234  mfu: 30.00%")


def test_torchtitan_checkpoint_load_opens_a_segment(tmp_path):
    lines = [_titan(s, 3 - s / 200) for s in range(1, 301)]
    lines.append("[rank0]:[titan] 2025-03-01 11:00:00,000 - root - INFO - Loading the checkpoint at step 300.")
    lines += [_titan(s, 1.5 - s / 1000) for s in range(301, 401)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    run = read_run(p)
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(1, 300), (301, 400)]
    assert run.source.extras["resumes"] == [{"step": 300, "dialect": "torchtitan.load"}]
    # step 0 is the seed checkpoint (the initial weights only): a start, no resume
    seed = tmp_path / "seed.log"
    seed.write_text("\n".join([lines[300].replace("step 300.", "step 0.")] + lines[:300]) + "\n")
    run = read_run(seed)
    assert len(run.segments()) == 1 and run.source.resumes == []


def _kv(step: int, loss: float) -> str:
    return f"step {step} | loss {loss:.4f} | lr 0.0001"


def test_a_run_resumed_into_a_new_file_in_the_same_folder(tmp_path):
    """The relaunch from the step-300 checkpoint writes `train_resume.log`: one run, two
    segments; two runs from the same first step (seeds) stay two runs."""
    (tmp_path / "train.log").write_text("".join(_kv(s, 3 - s / 1000) + "\n" for s in range(10, 410, 10)))
    (tmp_path / "train_resume.log").write_text("".join(_kv(s, 2.8 - s / 1000) + "\n" for s in range(300, 510, 10)))
    run = read_run(tmp_path)
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(10, 400), (300, 500)]
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for seed in (1, 2):
        (seeds / f"seed{seed}.log").write_text("".join(_kv(s, 3 - s / 1000 * seed) + "\n" for s in range(10, 410, 10)))
    with pytest.raises(RunReadError, match="2 different runs"):
        read_run(seeds)


@pytest.mark.parametrize("second", [range(10, 210, 10), range(300, 510, 10), range(410, 610, 10)])
def test_two_csv_logs_joined_header_and_all(tmp_path, second):
    """`cat first.csv second.csv` (or a relaunch appending with its own header): the header
    again starts a segment, whether the steps go back or carry on."""
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss,lr\n" + "".join(f"{s},{3 - s / 1000},0.0001\n" for s in range(10, 410, 10))
                 + "step,loss,lr\n" + "".join(f"{s},{2.8 - s / 1000},0.0001\n" for s in second))
    run = read_run(p)
    assert [s["rows"] for s in run.segments()] == [40, len(second)]
    assert run.frame.loss.notna().all() and run.source.resumes == [40]


def _bar(epoch: int, batch: int, loss: float) -> str:
    # Lightning 2.x TQDMProgressBar: desc f"Epoch {trainer.current_epoch}", the batch n/total,
    # the postfix get_metrics() (tqdm_progress.py)
    return (f"Epoch {epoch}:  {batch // 10:3d}%|████▌     | {batch}/1000 [00:30<00:37, 14.8it/s, v_num=1, "
            f"train_loss_step={loss:.3f}]")


def test_lightning_bar_relaunched_from_an_earlier_epoch(tmp_path):
    """The bar's counter starts again each epoch (step = epoch x N + n); a relaunch from the
    epoch-3 checkpoint after epoch 5 is one segment more, not one segment per epoch."""
    lines = [_bar(e, b, 3 - e / 10 - b / 10000) for e in range(6) for b in range(100, 1001, 100)]
    lines.append("Restored all states from the checkpoint at /runs/ckpt/epoch=2.ckpt")
    lines += [_bar(e, b, 2.8 - e / 10 - b / 10000) for e in (3, 4) for b in range(100, 1001, 100)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    run = read_run(p)
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(100, 6000), (3100, 5000)]


def _megatron(it: int, loss: float) -> str:
    # megatron/training.py training_log: ' iteration {:8d}/{:8d} |' ... ' {}: {:.6E} |'
    return (f" iteration {it:8d}/    1000 | consumed samples: {it * 8:12d} | elapsed time per iteration (ms): "
            f"123.4 | learning rate: 1.000000E-04 | global batch size:     8 | lm loss: {loss:.6E} | "
            f"loss scale: 65536.0 | grad norm: 1.234 | number of skipped iterations:   0 | "
            f"number of nan iterations:   0 |")


# megatron/arguments.py _print_args: the dump a launch prints before its first iteration
MEGATRON_ARGS = ["------------------------ arguments ------------------------",
                 "  lr .............................................. 0.0001",
                 "  seed ............................................ 1234",
                 "-------------------- end of arguments ---------------------"]


def test_a_second_launch_banner_mid_file_is_a_relaunch(tmp_path):
    """A relaunch appended to the same log whose steps carry on (its checkpoint was the last
    step): no step goes back, its banner (Megatron's argument dump, argparse's `print(args)`)
    is what shows it."""
    meg = tmp_path / "megatron.log"
    meg.write_text("\n".join(MEGATRON_ARGS + [_megatron(s, 3 - s / 1000) for s in range(10, 410, 10)]
                             + MEGATRON_ARGS + [_megatron(s, 2.5 - s / 2000) for s in range(410, 610, 10)]) + "\n")
    run = read_run(meg)
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(10, 400), (410, 600)]
    assert run.source.extras["segments_from"] == "2 segments, from a launch banner again"
    args = "Namespace(batch_size=8, lr=0.0001, max_steps=1000, seed=1)"
    plain = tmp_path / "plain" / "train.log"
    plain.parent.mkdir()
    plain.write_text("\n".join([args] + [_kv(s, 3 - s / 1000) for s in range(10, 410, 10)]
                               + [args] + [_kv(s, 2.5 - s / 2000) for s in range(410, 610, 10)]) + "\n")
    assert [s["rows"] for s in read_run(plain).segments()] == [40, 20]
    # the banner only before the first metric line: one launch
    plain.write_text("\n".join([args, args] + [_kv(s, 3 - s / 1000) for s in range(10, 410, 10)]) + "\n")
    assert len(read_run(plain).segments()) == 1
