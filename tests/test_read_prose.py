"""Only training metrics in the table: NCCL's own log, dataset sizes, a Megatron log cut
before its first iteration line."""

import json

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


def test_megatron_log_cut_before_its_first_iteration_is_an_error(tmp_path):
    p = tmp_path / "train.log"
    p.write_text("\n".join(ARGS + NCCL * 3 + SIZES) + "\n")
    assert_one_line_error(pm("info", p), "Megatron", "iteration")


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
