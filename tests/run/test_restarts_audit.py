"""Restarts audited against the frameworks' own format strings, and two false restarts:
fairseq's fp16 progress row printed again for an update the scaler skipped (num_updates
unchanged after `NOTE: overflow detected`) is the same update retried, no relaunch."""

import pytest

from postmortem.run import read_run


def _fairseq_row(i: int, updates: int, loss: float, scale: float) -> str:
    # fairseq v0.10.0 fairseq/logging/progress_bar.py SimpleProgressBar.log:
    # "{}:  {:5d} / {:d} {}".format(self.prefix, self.i + 1, self.n, postfix), prefix `epoch 001`,
    # behind fairseq_cli/train.py's "%(asctime)s | %(levelname)s | %(name)s | " (name train_inner)
    return (f"2020-08-01 12:00:{i % 60:02d} | INFO | train_inner | epoch 001:  {i:5d} / 400 "
            f"loss={loss:.3f}, nll_loss={loss - 1:.3f}, ppl=12.3, wps=8000, ups=2.6, wpb=3000, bsz=64, "
            f"num_updates={updates}, lr=1e-05, gnorm=3.{i % 7}, loss_scale={scale:g}, train_wall=1, wall={i}")


# fairseq v0.10.0 fairseq/trainer.py (train_step, on OverflowError): logger.info("NOTE: overflow
# detected, " + str(e)); fairseq/optim/dynamic_loss_scaler.py: "setting loss scale to: " + str(scale)
_OVERFLOW = "2020-08-01 12:00:01 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: {}"


def _fairseq_fp16(tmp_path, said: bool):
    lines = [_fairseq_row(1, 1, 15.2, 128)]
    for i, scale in ((2, 64.0), (3, 32.0)):
        if said:
            lines.append(_OVERFLOW.format(scale))
        lines.append(_fairseq_row(i, 1, 15.3 - i / 10, scale))
    lines += [_fairseq_row(i, i - 2, 10 - i / 100, 32) for i in range(4, 300)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_fairseq_rows_of_skipped_fp16_updates_are_no_relaunch(tmp_path):
    run = read_run(_fairseq_fp16(tmp_path, said=True))
    assert len(run.segments()) == 1
    assert run.frame["step"].tolist() == list(range(1, 298))
    assert run.frame["overflows"].max() == 2       # both skipped updates counted, at update 1
    # the same rows with no overflow said between them: a launch logging update 1 again
    other = tmp_path / "other"
    other.mkdir()
    assert len(read_run(_fairseq_fp16(other, said=False)).segments()) > 1


def _ultralytics_epochs(epochs) -> list[str]:
    # ultralytics 8.x BaseTrainer._do_train: the header (progress_string) then tqdm frames whose
    # description is ('%11s' * 2 + '%11.4g' * (2 + loss_len)) % (f'{epoch + 1}/{self.epochs}', mem,
    # *losses, instances, imgsz), joined by `\r`
    out = []
    for e in epochs:
        out.append(("\n" + "%11s" * 7) % ("Epoch", "GPU_mem", "box_loss", "cls_loss", "dfl_loss", "Instances", "Size"))
        out.append("\r".join(("%11s" * 2 + "%11.4g" * 5) % (f"{e}/100", "2.51G", 1.5 - e / 10 - i / 100, 2.345,
                                                              1.456, 32, 640) + f": {i * 10:3d}%|#####| {i}/10 [00:05<00:00]"
                             for i in range(1, 11)))
    return out


@pytest.mark.parametrize("said", [
    # ultralytics 8.x engine/trainer.py resume_training
    "Resuming training runs/detect/train/weights/last.pt from epoch 4 to 100 total epochs",
    # ultralytics/yolov5 v7.0 utils/torch_utils.py smart_resume
    "Resuming training from runs/train/exp/weights/last.pt from epoch 4 to 100 total epochs",
])
def test_yolo_resume_whose_epochs_go_on_is_a_restart(tmp_path, said):
    p = tmp_path / "train.log"
    p.write_text("\n".join([*_ultralytics_epochs(range(1, 4)), said, *_ultralytics_epochs(range(4, 6))]) + "\n")
    run = read_run(p)
    assert len(run.segments()) == 2
    assert run.source.extras["resumes"][0]["dialect"] in ("ultralytics.resume", "yolov5.resume")
    # the same console with no resume said: one launch
    p.write_text("\n".join(_ultralytics_epochs(range(1, 6))) + "\n")
    assert len(read_run(p).segments()) == 1


def _ds_step(step: int) -> str:
    # DeepSpeed deepspeed/runtime/engine.py: log_dist(f"step={step}, skipped={self.skipped_steps}, lr={lr},
    # mom={mom}", ranks=[0]) behind its logger's prefix
    return (f"[2024-03-01 10:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, skipped=0, "
            f"lr=[2.5e-05, 2.5e-05], mom=[(0.9, 0.95), (0.9, 0.95)]")


@pytest.mark.parametrize("said", [
    # v0.7.0+ torch_checkpoint_engine.py TorchCheckpointEngine.load
    "[2024-03-01 11:00:00,000] [INFO] [torch_checkpoint_engine.py:27:load] [Torch] Loading checkpoint from "
    "/ckpt/global_step300/mp_rank_00_model_states.pt...",
    # v0.3.x engine.py _load_checkpoint
    "[2021-05-01 11:00:00,000] [INFO] [engine.py:1480:_load_checkpoint] rank: 0 loading checkpoint: "
    "/ckpt/global_step300/mp_rank_00_model_states.pt",
])
def test_deepspeed_checkpoint_load_after_steps_is_a_restart(tmp_path, said):
    lines = [_ds_step(s) for s in range(10, 301, 10)] + [said] + [_ds_step(s) for s in range(310, 401, 10)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    run = read_run(p)
    assert [s["rows"] for s in run.segments()] == [30, 10]
    assert run.source.extras["resumes"] == [{"step": 310, "dialect": "deepspeed.load_checkpoint"}]
    # the load before the first step (a fine-tune from a checkpoint) is the run's own start
    p.write_text("\n".join([said] + [_ds_step(s) for s in range(10, 401, 10)]) + "\n")
    assert len(read_run(p).segments()) == 1


def _pcc_log(epochs: int, announce: bool = True) -> str:
    # InterDigitalInc/PccAI pccai/pipelines/train.py (train_pccnet, train_one_epoch, validate_one_epoch):
    # 'Training at epoch {epoch} (total {total_epoch}) with lr {lr}', then '    batch count: %d/%d, iter: %d, '
    # % (batch_id, len_data, batch_id) + '%s: %f, ' per loss (the last ', ' cut), 'Epoch: %d/%d --- time: %f,
    # lr: %f, ' + 'avg_%s: %f, ', 'Validation at epoch %d', the eval's rows in the same shape, then
    # 'Validation --- ' + 'avg_val_%s: %f, '; each message + '\n' where the source adds it
    out = []
    for ep in range(epochs):
        out.append(f"Training at epoch {ep} (total {ep}) with lr 0.0001")
        for b in range(0, 100, 10):
            loss = 2.0 - ep * 0.3 - b / 500
            out.append(f"    batch count: {b}/100, iter: {b}, loss: {loss:f}, bpp_loss: {loss / 2:f}, xyz_loss: {loss / 3:f}")
        out.append(f"Epoch: {ep}/{ep} --- time: {12.5 * (ep + 1):f}, lr: {0.0001:f}, avg_loss: {1.9 - ep * 0.3:f}\n")
        if announce:
            out.append(f"Validation at epoch {ep}")
        for b in range(0, 20, 10):
            out.append(f"    batch count: {b}/20, iter: {b}, loss: {1.5 - ep * 0.2:f}, bpp_loss: {0.7:f}, xyz_loss: {0.5:f}")
        out.append(f"Validation --- avg_val_loss: {1.5 - ep * 0.2:f}, avg_val_bpp_loss: {0.7:f}\n")
    return "\n".join(out) + "\n"


def test_an_eval_announced_in_words_whose_counter_starts_at_0_is_no_restart(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(_pcc_log(3))
    run = read_run(p)
    assert len(run.segments()) == 1
    # the eval's rows are its own (val_loss at the epoch's last training step), not training steps
    assert run.frame["val_loss"].dropna().tolist() == [1.5, 1.3, 1.1]
    assert run.frame["loss"].notna().sum() == 30
    # the same rows with no words before them: the counter back to 0 is read as before (segments)
    p.write_text(_pcc_log(3, announce=False))
    assert len(read_run(p).segments()) > 1
    _words_of_an_eval_leave_a_counter_that_goes_on_or_a_relaunch_alone(tmp_path)


def _iter_row(i: int, loss: float) -> str:
    return f"    batch count: {i}/1000, iter: {i}, loss: {loss:f}"


def _words_of_an_eval_leave_a_counter_that_goes_on_or_a_relaunch_alone(tmp_path):
    p = tmp_path / "clean.log"
    # the counter goes on after the words: the rows are training steps
    p.write_text("\n".join([_iter_row(i, 2 - i / 1000) for i in range(0, 300, 10)] + ["Evaluating..."]
                           + [_iter_row(i, 2 - i / 1000) for i in range(300, 400, 10)]) + "\n")
    run = read_run(p)
    assert len(run.segments()) == 1 and run.frame["loss"].notna().sum() == 40 and "val_loss" not in run.frame
    # a relaunch back to 0 two lines after words that announce no eval: still a restart
    p.write_text("\n".join([_iter_row(i, 2 - i / 1000) for i in range(0, 300, 10)] + ["Training started"]
                           + [_iter_row(i, 2.5 - i / 1000) for i in range(0, 200, 10)]) + "\n")
    assert len(read_run(p).segments()) == 2


def _diffusers_bar(step: int, loss: float) -> str:
    # huggingface/diffusers examples/text_to_image/train_text_to_image.py: tqdm(..., desc="Steps") and
    # progress_bar.set_postfix(**{"step_loss": ..., "lr": ...}) (tqdm sorts the keys, format_num: '{:.3g}')
    return (f"Steps:  {step // 10:2d}%|███       | {step}/1000 [00:{step % 60:02d}<01:00,  1.50it/s, "
            f"lr=0.0001, step_loss={loss:.3g}]")


def test_accelerate_load_state_after_steps_is_a_restart(tmp_path):
    # the script's accelerator.print(f"Resuming from checkpoint {path}") then accelerate's load_state:
    # logger.info(f"Loading states from {input_dir}") (huggingface/accelerate accelerator.py), behind
    # the script's "%(asctime)s - %(levelname)s - %(name)s - %(message)s"
    lines = [_diffusers_bar(s, 0.5 - s / 2000) for s in range(1, 301)]
    lines += ["Resuming from checkpoint checkpoint-300",
              "05/01/2024 10:00:00 - INFO - accelerate.accelerator - Loading states from sd-model/checkpoint-300"]
    lines += [_diffusers_bar(s, 0.6 - s / 2000) for s in range(301, 401)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    run = read_run(p)
    assert [s["rows"] for s in run.segments()] == [300, 100]
    assert run.source.extras["resumes"] == [{"step": 301, "dialect": "accelerate.load_state"}]
