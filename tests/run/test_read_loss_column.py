"""Which column is the loss when a log names it otherwise: `xent`, `nll`, `tot_loss`, the
perplexity alone; `info` says which name became the loss and why."""

import json
import math

import pytest
from test_cli import pm


def _info(path) -> dict:
    r = pm("info", path, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _loss(data):
    return next(m for m in data["metrics"] if m["name"] == "loss")


def _write(tmp_path, lines):
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.slow
def test_opennmt_xent_is_the_loss(tmp_path):
    # OpenNMT-py's Statistics.output format string
    fmt = "Step %s; acc: %6.2f; ppl: %5.2f; xent: %4.2f; lr: %7.5f; %3.0f/%3.0f tok/s; %6.0f sec"
    lines = ["[2023-05-01 10:00:00,123 INFO] " + fmt % ("%2d/%5d" % (s, 100000), 45.1, math.exp(3.2 - s / 1000),
                                                       3.2 - s / 1000, 0.0007, 8123, 7456, s)
             for s in range(100, 2100, 100)]
    data = _info(_write(tmp_path, lines))
    assert data["read"]["loss"].startswith("xent")
    assert _loss(data)["max"] == pytest.approx(3.1) and data["steps"]["first"] == 100


@pytest.mark.slow
@pytest.mark.parametrize("name", ["nll", "tot_loss", "xent"])
def test_short_names_of_the_loss(tmp_path, name):
    lines = [f"step {s} | {name} {3.2 - s / 1000:.3f} | loss_cls 1.0 | lr 1e-4" for s in range(100, 2100, 100)]
    data = _info(_write(tmp_path, lines))
    assert data["read"]["loss"].startswith(name)
    assert _loss(data)["min"] == pytest.approx(1.2)


@pytest.mark.slow
def test_perplexity_alone_gives_its_log(tmp_path):
    lines = [f"step {s} | ppl {math.exp(3.2 - s / 1000):.4f} | lr 1e-4" for s in range(100, 2100, 100)]
    data = _info(_write(tmp_path, lines))
    assert "only the perplexity" in data["read"]["loss"]
    assert _loss(data)["max"] == pytest.approx(3.1, abs=1e-3)


@pytest.mark.slow
def test_opennmt_validation_perplexity_gives_the_val_loss(tmp_path):
    fmt = "Step %s; acc: %6.2f; ppl: %5.2f; xent: %4.2f; lr: %7.5f; %3.0f/%3.0f tok/s; %6.0f sec"
    lines = []
    for s in range(100, 2100, 100):
        lines.append(fmt % ("%2d/%5d" % (s, 100000), 45.1, math.exp(3.2 - s / 1000), 3.2 - s / 1000, 0.0007,
                            8123, 7456, s))
        if s % 500 == 0:       # onmt/trainer.py's validation report
            lines.append("Validation perplexity: %g" % math.exp(3.3 - s / 1000))
    data = _info(_write(tmp_path, lines))
    assert "only the perplexity" in data["read"]["val_loss"]
    val = next(m for m in data["metrics"] if m["name"] == "val_loss")
    assert val["count"] == 4 and val["max"] == pytest.approx(2.8, abs=1e-3)


def test_the_chosen_loss_keeps_its_dialect(tmp_path):
    fmt = "Step %s; acc: %6.2f; ppl: %5.2f; xent: %4.2f; lr: %7.5f; %3.0f/%3.0f tok/s; %6.0f sec"
    lines = [fmt % ("%2d/%5d" % (s, 100000), 45.1, math.exp(3.2 - s / 1000), 3.2 - s / 1000, 0.0007, 8123, 7456, s)
             for s in range(100, 600, 100)]
    data = _info(_write(tmp_path, lines))
    assert _loss(data)["dialect"] == ["opennmt.step"]


LETTER_TOTAL = {
    "pipe line": "step {s} | L: {t:.4f} | l_ce: {c:.4f} | l_aux: {a:.4f} | lr: 0.0003",
    "key=value on [rank3]:": "[rank3]: step={s} l={t:.4f} l_ce={c:.4f} l_kl={a:.4f}",
    "logger prefix": "2024-01-01 10:00:00 | INFO | train | iter {s}: L={t:.4f}, L_ce={c:.4f}, L_aux={a:.4f}",
}


@pytest.mark.parametrize("fmt", list(LETTER_TOTAL.values()), ids=list(LETTER_TOTAL))
def test_a_one_letter_total_beside_its_parts_is_the_loss(tmp_path, fmt):
    from postmortem.run import read_run
    lines = [fmt.format(s=s, t=2.5 - s / 100, c=2.3 - s / 100, a=0.2) for s in range(10, 60, 10)]
    run = read_run(_write(tmp_path, lines))
    assert run.frame.loss.round(4).tolist() == [round(2.5 - s / 100, 4) for s in range(10, 60, 10)]
    assert "one-letter total" in run.source.extras["loss_from"]
    assert not any("--loss" in w for w in run.source.warnings)


@pytest.mark.parametrize("fmt", ["step {s} | L: {t:.4f} | acc: 0.5",             # no parts beside it
                                 "step {s} | l: {t:.4f} | loss_scale: 1024",
                                 "step {s} | L: {t:.4f} | loss: {c:.4f} | l_ce: {c:.4f}"])  # a loss of its own
def test_a_one_letter_name_without_its_parts_is_left(tmp_path, fmt):
    from postmortem.run import read_run
    lines = [fmt.format(s=s, t=2.5 - s / 100, c=2.3 - s / 100) for s in range(10, 60, 10)]
    run = read_run(_write(tmp_path, lines))
    assert "one-letter" not in str(run.source.extras.get("loss_from"))
    if "loss" in run.frame:
        assert run.frame.loss.round(4).tolist() == [round(2.3 - s / 100, 4) for s in range(10, 60, 10)]


def test_losses_beside_its_parts_is_the_total(tmp_path):
    # `losses = sum(loss_dict.values())` printed beside the terms (a detection/colour-LUT trainer)
    fmt = "Iter: {s}, lr: 0.000100, losses: {t}, loss_mn: {a:.4f}, loss_c: {a:.4f}, loss_s: {a:.4f}, loss_mse: {a:.4f}"
    lines = [fmt.format(s=s, t=("nan" if s >= 400 else f"{1.2 - s / 1000:.4f}"), a=0.3) for s in range(100, 600, 100)]
    data = _info(_write(tmp_path, lines))
    assert data["read"]["loss"].startswith("losses (a total loss)")
    assert _loss(data)["nan"] == 2 and _loss(data)["count"] == 5


def _dllogger(step: int, avg: float, own: float) -> str:
    # DLLogger's StdOutBackend: prefix "DLL {timestamp} - ", step_format str(step), then
    # "{} : {} {}".format(metric, value, unit) joined by " " (NVIDIA DeepLearningExamples BERT
    # run_pretraining.py logs average_loss, step_loss and learning_rate)
    metrics = " ".join("{} : {} {}".format(k, v, "") for k, v in
                       (("average_loss", avg), ("step_loss", own), ("learning_rate", 0.0001)))
    return "DLL 2020-03-10 10:00:00.123456 - {} {}".format(str((0, step)), metrics)


def test_a_mean_over_steps_is_not_preferred_over_the_steps_own_loss(tmp_path):
    lines = [_dllogger(s, 7.1 - s / 1e4, 9.5 if s == 1500 else 7.0 - s / 1e4) for s in range(1000, 2000, 100)]
    data = _info(_write(tmp_path, lines))
    assert data["read"]["loss"].startswith("step_loss (the step's own loss")
    assert _loss(data)["max"] == 9.5


def test_ultralytics_loss_parts_without_namespace_are_summed(tmp_path):
    # Ultralytics' console, its rows glued to the bar (BaseTrainer._do_train pbar.set_description),
    # here without the dialect's own match (a negative box loss, printed by %11.4g)
    hdr = ("%11s" * 7) % ("Epoch", "GPU_mem", "box_loss", "cls_loss", "dfl_loss", "Instances", "Size")
    lines = [hdr]
    for e in range(1, 6):
        frames = [("%11s" * 2 + "%11.4g" * 5) % (f"{e}/100", "2.51G", -0.2335, 2.0 - e / 10, 1.4, 32, 640)
                  + f": {100 * n // 787:3d}%|#####     | {n}/787 [00:05<00:00,  1.9it/s]" for n in (1, 400, 787)]
        lines.append("\r".join(frames))
    data = _info(_write(tmp_path, lines))
    assert "Ultralytics" in data["read"]["loss"]
    assert _loss(data)["min"] == pytest.approx(-0.2335 + 1.5 + 1.4)
