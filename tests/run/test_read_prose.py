"""Only training metrics in the table: NCCL's own log, dataset sizes, a Megatron log cut
before its first iteration line."""

import json

import pytest
from test_cli import assert_one_line_error, pm

ARGS = ["------------------------ arguments ------------------------",
        "  fp16 ............................................ True",
        "  lr .............................................. 0.0003",
        "-------------------- end of arguments ---------------------"]
NCCL = ["host-7:%d:%d [%d] NCCL INFO Channel 00/24 :    0   1   2   3" % (58799 + r, 60000 + r, r) for r in range(8)]
NCCL += ["host-7:%d:%d [%d] NCCL INFO comm 0x7fa324002fb0 rank %d nranks 8 cudaDev %d busId %d00000 - Init COMPLETE"
         % (58799 + r, 60000 + r, r, r, r, r + 1) for r in range(8)]
SIZES = ["> datasets target sizes (minimum size):", "    train:      439453125", "    validation: 43947520",
         "    test:       2560"]


def _iteration(i, loss):
    return (" iteration {:8d}/{:8d} |".format(i, 1000) + " learning rate: {:.3E} |".format(3e-4)
            + " lm loss: {:.6E} |".format(loss) + " loss scale: {:.1f} |".format(4096.0))


@pytest.mark.slow
def test_megatron_log_cut_before_its_first_iteration_is_an_error(tmp_path):
    p = tmp_path / "train.log"
    p.write_text("\n".join(ARGS + NCCL * 3 + SIZES) + "\n")
    assert_one_line_error(pm("info", p), "Megatron", "iteration")
    # its opening banner cut off too, DeepSpeed's engine lines after it: still Megatron's
    ds = ["[2022-10-28 22:57:01,564] [INFO] [logging.py:68:log_dist] [Rank 0] step=%d, skipped=0, "
          "lr=[0.0, 0.0], mom=[(0.9, 0.95), (0.9, 0.95)]" % s for s in (0, 10)]
    p.write_text("\n".join(ARGS[1:] + ["  tensor_model_parallel_size ...................... 1"] + NCCL + ds) + "\n")
    assert_one_line_error(pm("info", p), "Megatron", "iteration")


@pytest.mark.slow
def test_nccl_lines_and_dataset_sizes_are_no_metrics(tmp_path):
    p = tmp_path / "train.log"
    p.write_text("\n".join(ARGS + NCCL * 3 + SIZES + [_iteration(i, 3 - i / 100) for i in range(10, 60, 10)]) + "\n")
    r = pm("info", p, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    names = {m["name"] for m in data["metrics"]}
    assert not any("NCCL" in n or "host" in n or "nranks" in n for n in names), names
    assert "val_loss" not in names and "test loss" not in names
    assert data["steps"] == {"rows": 5, "first": 10, "last": 50}
    assert next(m for m in data["metrics"] if m["name"] == "loss")["max"] == 2.9


def _info(tmp_path, lines, name="train.log"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    r = pm("info", p, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _metric(data, name):
    return next(m for m in data["metrics"] if m["name"] == name)


MMDET = ("2021-05-01 10:00:00,000 - mmdet - INFO - Epoch [{e}][{i}/500]\tlr: 2.000e-02, eta: 1:02:03, "
         "time: 0.401, data_time: 0.010, memory: 3456, loss_cls: 0.4567, loss_bbox: 0.7778, loss: {loss:.4f}")
COCO = [" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.372",
        " Average Precision  (AP) @[ IoU=0.50      | area=   all | maxDets=100 ] = 0.581",
        " Average Precision  (AP) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = 0.211",
        " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets= 10 ] = 0.498"]


@pytest.mark.slow
def test_test_finish_and_coco_summary_stay_out_of_the_steps(tmp_path):
    first = [MMDET.format(e=1, i=i, loss=1.5 - i / 1000) for i in range(50, 550, 50)]
    second = [MMDET.format(e=2, i=i, loss=1.2 - i / 1000) for i in range(50, 550, 50)]
    data = _info(tmp_path, first + ["Test finish iter 3"] + COCO + second)
    assert data["steps"] == {"rows": 20, "first": 50, "last": 1000} and len(data["segments"]) == 1
    names = {m["name"] for m in data["metrics"]}
    assert not names & {"IoU", "maxDets", "area"}
    assert _metric(data, "val_coco_mAP")["max"] == 0.372 and _metric(data, "val_coco_mAP")["count"] == 1


@pytest.mark.slow
def test_dataset_sizes_and_parameter_counts_are_no_metrics(tmp_path):
    lines = ["Loaded 118287 images from train2017", "number of params: 41123456"]
    lines += ["iter: %d  total_loss: %.3f  loss_cls: 0.2  time: 0.4  lr: 0.02  max_mem: 3456M" % (i, 1.5 - i / 10000)
              for i in range(1000, 2000, 100)]
    data = _info(tmp_path, lines)
    assert data["steps"] == {"rows": 10, "first": 1000, "last": 1900}
    assert {m["name"] for m in data["metrics"]} == {"loss", "loss_cls", "time", "lr", "max_mem"}


@pytest.mark.slow
def test_bracketed_epoch_then_iteration(tmp_path):
    lines = ["[%d][%d/500]\tlr: 1.000e-02, loss: %.4f" % (e, i, 2.5 - e / 10 - i / 10000)
             for e in (1, 2) for i in range(0, 500, 100)]
    data = _info(tmp_path, lines)
    assert data["steps"] == {"rows": 10, "first": 0, "last": 900}


@pytest.mark.slow
def test_bracketed_keys(tmp_path):
    lines = ["[Loss] %.4f | [step] %d | [lr] 0.0001 |" % (2.5 - s / 1000, s) for s in range(10, 110, 10)]
    data = _info(tmp_path, lines)
    assert data["steps"] == {"rows": 10, "first": 10, "last": 100}
    assert _metric(data, "loss")["max"] == 2.49


@pytest.mark.slow
def test_a_single_dict_line_pasted_alone(tmp_path):
    data = _info(tmp_path, [str({"loss": 2.345, "grad_norm": 1.2, "learning_rate": 5e-05, "epoch": 0.1})])
    assert data["run"]["format"] == "hf-console" and _metric(data, "loss")["max"] == 2.345


@pytest.mark.slow
def test_torchtune_step_is_the_global_step_not_the_frame(tmp_path):
    # torchtune's `f"{curr_epoch + 1}|{self.global_step}|Loss: {loss_to_log}"` inside a tqdm frame
    lines, g = [], 0
    for e in (0, 1):
        for i in range(1, 6):
            g += 1
            lines.append(f"{e + 1}|{g}|Loss: {2.5 - g / 100}" + f":  24%|##   | {i}/5 [00:01<00:03]")
    data = _info(tmp_path, lines)
    assert data["steps"] == {"rows": 10, "first": 1, "last": 10} and len(data["segments"]) == 1


@pytest.mark.slow
def test_paddlenlp_batch_counter_is_no_metric(tmp_path):
    fmt = "global step %d, epoch: %d, batch: %d, loss: %f, speed: %.2f step/s"   # PaddleNLP's examples
    data = _info(tmp_path, [fmt % (s, 1, s % 50, 2.5 - s / 1000, 4.2) for s in range(10, 110, 10)])
    assert data["steps"] == {"rows": 10, "first": 10, "last": 100}
    names = {m["name"] for m in data["metrics"]}
    assert "loss" in names and not names & {"batch", "epoch"}


def test_a_config_dump_in_the_middle_of_a_log_is_no_metric(tmp_path):
    # DeepSpeed's config print (runtime/config.py print: `name ...... value`, then the JSON)
    dump = ["[2023-05-01 10:00:00,000] [INFO] [config.py:982:print]   dynamic_loss_scale_args ...... "
            "{'init_scale': 2048, 'scale_window': 500}", "{", '    "train_batch_size": 256, ', '    "fp16": {',
            '        "enabled": true, ', '        "loss_scale": 0, ', '        "loss_scale_window": 500, ',
            '        "min_loss_scale": 1, ', "    }, ", '    "gradient_clipping": 1.0', "}"]
    lines = ["step %d | loss %.4f | lr 1e-4" % (s, 2.5 - s / 1000) for s in range(10, 60, 10)] + dump
    lines += ["step %d | loss %.4f | lr 1e-4" % (s, 2.5 - s / 1000) for s in range(60, 110, 10)]
    data = _info(tmp_path, lines)
    assert {m["name"] for m in data["metrics"]} == {"loss", "lr"}
    assert data["run"]["dtype"] is None        # no `"loss_scale": 0` read as a scale


def test_a_float_global_step_is_the_step(tmp_path):
    lines = [f"epoch {s // 5} batch {s % 5} | global_step={s:.1f} | loss={2.5 - s / 100:.3f}" for s in range(10)]
    data = _info(tmp_path, lines)
    assert data["steps"] == {"rows": 10, "first": 0, "last": 9}


def test_a_rate_unit_ends_a_value_and_is_no_name(tmp_path):
    # PaddleNLP's `speed: %.2f step/s`, PaddleDetection's `ips: %.4f images/s` before the next meter
    lines = ["global step %d, epoch: 1, batch: %d, loss: %f, speed: %.2f step/s" % (s, s, 2.5 - s / 100, 4.2)
             for s in range(1, 6)]
    lines += ["step %d ips: 19.9 images/s loss: %.3f" % (s, 2.4 - s / 100) for s in range(6, 11)]
    names = {m["name"] for m in _info(tmp_path, lines)["metrics"]}
    assert {"loss", "speed", "ips"} <= names and not any("images/s" in n for n in names)
