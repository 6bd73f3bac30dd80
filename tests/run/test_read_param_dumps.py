"""Parameter dumps and prose are no training metrics, from the frameworks' own format
strings: a dict of hyper-parameters printed at a relaunch, argparse's Namespace, DLLogger's
PARAMETER line, OpenNMT's dataset size, a validation table's `all` row."""

from postmortem.run import read_run


def _read(tmp_path, lines):
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    return read_run(p)


def _iters(steps, loss=2.0):
    return ["[iter %d] [total loss %.4f] [lr 0.001]" % (s, loss - s / 1e6) for s in steps]


def test_a_config_dict_at_a_relaunch_is_no_row(tmp_path):
    # `print(vars(args))` / `print(config)` of a custom trainer at its (re)start
    config = ("{'iter_num': 100000, 'train_batch_size': 4, 'last_iter': 0, 'lr': 0.001, 'lr_decay': 0.9, "
              "'weight_decay': 0.0005, 'momentum': 0.9, 'snapshot': '50000'}")
    log = _read(tmp_path, [config] + _iters(range(100, 600, 100)) + ["[rank3]: " + config]
                + _iters(range(600, 1100, 100)))
    assert not {"iter_num", "last_iter", "momentum", "snapshot", "train_batch_size"} & set(log.frame.columns)
    assert list(log.frame["step"]) == list(range(100, 1100, 100))
    assert log.frame["segment"].nunique() == 1
    # a metrics dict stays a metrics dict (HF Trainer's `self.log`, mmcv's json line with its mode)
    log = _read(tmp_path, ["{'loss': %.4f, 'learning_rate': 5e-05, 'epoch': %.2f, 'step': %d}" % (2 - s / 1e3, s / 1e3, s)
                           for s in range(10, 60, 10)])
    assert "loss" in log.frame.columns and len(log.frame) == 5


def test_namespace_and_dllogger_parameters_are_config(tmp_path):
    # argparse's repr; dllogger StdOutBackend: "DLL {timestamp} - " + step + " ".join("{} : {}")
    # (BERT run_pretraining.py: dllogger.log(step="PARAMETER", data={"checkpoint_step": global_step}))
    lines = ["Namespace(checkpoint_step=1785, iter=0, lr=0.001, max_steps=7038, seed=42)"]
    lines += ["DLL 2020-06-01 10:00:%02d.000000 - Training Epoch: 0 Training Iteration: %d  step_loss : %.4f  "
              "learning_rate : 0.006 " % (i, i, 9 - i / 10) for i in range(1, 6)]
    lines += ["DLL 2020-06-01 10:00:%02d.000000 - PARAMETER checkpoint_step : %d " % (9 + k, 5 + k) for k in range(2)]
    log = _read(tmp_path, lines)
    cols = set(log.frame.columns)
    assert not {c for c in cols if "checkpoint_step" in c or "max_steps" in c}
    assert list(log.frame["step"]) == [1, 2, 3, 4, 5]


def test_dataset_size_and_validation_row_are_no_metrics(tmp_path):
    # OpenNMT-py inputters: logger.info('Loading %s dataset from %s, number of examples: %d' ...),
    # its train report "Step %d/%5d; acc: %6.2f; ppl: %5.2f; xent: %4.2f; lr: %7.5f; ..."
    lines = ["[2019-03-01 10:00:00,000 INFO] Loading train dataset from data/demo.train.0.pt, "
             "number of examples: 66620"]
    lines += ["[2019-03-01 10:00:%02d,000 INFO] Step %d/100000; acc:  %5.2f; ppl: %5.2f; xent: %4.2f; "
              "lr: 1.00000; 8000/9000 tok/s;     %d sec" % (i, s, 10 + i, 500 - i, 6.2 - i / 10, i * 10)
              for i, s in enumerate(range(50, 300, 50))]
    # Ultralytics' validator: ("%22s" + "%11i" * 2 + "%11.3g" * 4) % ("all", seen, instances, p, r, map50, map)
    lines += [("%22s" + "%11s" * 6) % ("Class", "Images", "Instances", "Box(P", "R", "mAP50", "mAP50-95):"),
              ("%22s" + "%11i" * 2 + "%11.3g" * 4) % ("all", 1049, 1186, 0.512, 0.433, 0.455, 0.301)]
    log = _read(tmp_path, lines)
    cols = set(log.frame.columns)
    assert not {c for c in cols if "examples" in c or c in ("all", "val_all")}
    assert list(log.frame["step"]) == [50, 100, 150, 200, 250]
