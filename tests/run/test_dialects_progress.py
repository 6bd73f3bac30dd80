"""The catalogue's progress and eval lines: each entry names its source, its examples are built
from its format string and match its pattern, alone and in the composite lines consoles make
(logger prefixes, `[rankN]:`, tqdm frames with `\\r`), and a log of them is named its family."""

import pytest

from postmortem.run import readers, textlogs
from postmortem.run.dialects import catalogue
from postmortem.run.dialects.progress import families, family, of_line

ENTRIES = catalogue("progress") + catalogue("eval")
PREFIXES = ["", "[rank3]: ", "[2024-05-01 10:00:00,123] [INFO] [file.py:181:fn] ",
            "2024-05-01 10:00:00,123 - INFO - "]


def test_every_framework_of_the_brief_has_an_entry():
    named = {d.framework for d in ENTRIES}
    for fw in ("Megatron-LM", "DeepSpeed", "GPT-NeoX", "ColossalAI", "fairseq", "fairseq2", "HF Trainer",
               "Lightning", "torchtune", "litgpt", "mmengine", "detectron2", "PaddlePaddle",
               "PaddleDetection", "OpenNMT-py", "Keras", "timm", "Ultralytics", "MetricLogger", "llm.c",
               "nanoGPT", "OLMo", "levanter", "MaxText", "loguru", "Marian"):
        assert fw in named, fw


@pytest.mark.parametrize("d", ENTRIES, ids=lambda d: d.id)
def test_entry_names_its_source_and_matches_its_examples(d):
    assert d.source and d.format and d.examples
    for line in d.examples:
        m = d.search(line)
        assert m, line
        for name in ("step", "loss", "epoch", "batch"):
            if name in m.re.groupindex and m.group(name) is not None:
                float(m.group(name))


@pytest.mark.parametrize("d", ENTRIES, ids=lambda d: d.id)
def test_examples_behind_prefixes_and_in_tqdm_frames(d, tmp_path):
    if d.pattern.pattern.startswith("^"):
        prefixes = ["", "[rank3]: "]          # anchored: only what textlogs.clean takes off
    else:
        prefixes = PREFIXES
    for line in d.examples:                  # every wording the source printed, not only the first
        for prefix in prefixes:
            p = tmp_path / "a.log"
            # a tqdm frame overwritten by `\r`, then the line, as a console capture holds them
            p.write_text(" 10%|█         | 1/10 [00:01<00:09,  1.0it/s]\r" + prefix + line + "\n")
            assert any(d.search(x) for x in textlogs.iter_lines(p)), (prefix, line)


def test_family_names_are_not_formats_of_other_readers():
    others = {"jsonl", "csv", "parquet", "hf-trainer-state", "lightning", "tensorboard", "mlflow",
              "mlflow-db", "wandb"}
    assert not others & set(families())
    assert set(families()) <= set(readers.formats())


def test_of_line_names_the_dialect():
    for d in ENTRIES:
        found = of_line(d.examples[0])
        assert found is not None and family(found) == family(d) or found.id == d.id or d.kind == "eval", d.id


_STEP_FAMILIES = {"megatron", "deepspeed", "nanogpt", "llm.c", "modded-nanogpt", "torchtitan", "olmo",
                  "mmengine", "litgpt", "mlx-lm", "metriclogger", "timm", "maxtext", "gpt-neox",
                  "opennmt", "torchtune", "detectron2", "paddle", "colossalai", "kv-pipe", "fairseq2",
                  "loguru", "build-nanogpt", "fairseq", "hf-console", "marian"}


@pytest.mark.parametrize("fam", sorted(_STEP_FAMILIES))
def test_a_log_of_the_family_is_named_so(fam, tmp_path):
    lines = [x for d in ENTRIES if family(d) == fam and d.kind == "progress" for x in d.examples]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines * 4) + "\n")
    # GPT-NeoX prints Megatron's `iteration N/M |` line: read by the Megatron refinements
    assert textlogs.sniff(p)[0] == ("megatron" if fam == "gpt-neox" else fam)


@pytest.mark.slow
def test_info_names_each_series_dialect(tmp_path):
    import json

    from test_cli import pm
    d = next(x for x in ENTRIES if x.id == "megatron.iteration")
    p = tmp_path / "train.log"
    p.write_text("\n".join(d.examples[:2]) + "\n")
    r = pm("info", p, "--json")
    assert r.returncode == 0, r.stderr
    metrics = {m["name"]: m for m in json.loads(r.stdout)["metrics"]}
    assert metrics["loss"]["dialect"] == ["megatron.iteration"] and metrics["loss"]["from"] == ["lm loss"]
    assert metrics["grad_norm"]["dialect"] == ["megatron.iteration"]


@pytest.mark.slow
def test_ultralytics_rows_are_named_by_their_header(tmp_path):
    import json

    from test_cli import pm
    header = ("\n" + "%11s" * 7) % ("Epoch", "GPU_mem", "box_loss", "cls_loss", "dfl_loss", "Instances", "Size")
    frames = []
    for e in range(1, 4):
        frames.append(header)
        for i in range(1, 11):    # trainer.py's progress string, then tqdm's bar, frames joined by \r
            frames.append(("%11s" * 2 + "%11.4g" * 5) % (f"{e}/100", "2.51G", 1.5 - e / 10 - i / 100, 2.345, 1.456,
                                                         32, 640) + f": {i * 10:3d}%|##########| {i}/10 [00:05<00:00]")
    p = tmp_path / "train.log"
    p.write_text("\r".join(frames) + "\n")
    r = pm("info", p, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["run"]["format"] == "ultralytics" and data["steps"] == {"rows": 30, "first": 1, "last": 30}
    box = next(m for m in data["metrics"] if m["name"] == "box_loss")
    assert box["min"] == 1.1 and box["max"] == 1.39
    # the trainer steps on box + cls + dfl: the loss is their sum (the catalogue says so)
    assert data["read"]["loss"].startswith("box_loss + cls_loss + dfl_loss")
    assert next(m for m in data["metrics"] if m["name"] == "loss")["max"] == pytest.approx(1.39 + 2.345 + 1.456)


@pytest.mark.slow
def test_a_notebook_table_under_its_header(tmp_path):
    import json

    from test_cli import pm
    p = tmp_path / "train.log"     # HF's notebook table, as unsloth's notebooks show it
    p.write_text("Step\tTraining Loss\n" + "\n".join("%d\t%.6f" % (s, 2.5 - s / 100) for s in range(1, 31)) + "\n")
    r = pm("info", p, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["steps"] == {"rows": 30, "first": 1, "last": 30}
    assert next(m for m in data["metrics"] if m["name"] == "loss")["max"] == 2.49


def test_deepspeed_step_lines_with_a_patched_scalar_lr(tmp_path):
    import json

    from test_cli import pm
    # `log_dist(f"step={step}, skipped={self.skipped_steps}, lr={lr[0]}, mom={mom[0]}", ranks=[0])`
    lines = ["[2023-05-01 10:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] "
             + f"step={s}, skipped={0}, lr={[1e-4 * s / 100][0]}, mom={[(0.9, 0.95)][0]}" for s in range(10, 60, 10)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    r = pm("info", p, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["run"]["format"] == "deepspeed" and data["steps"] == {"rows": 5, "first": 10, "last": 50}
    assert next(m for m in data["metrics"] if m["name"] == "lr")["max"] == 5e-05


# families whose lines carry their own step (Keras and HF dicts count lines; DeepSpeed reads a
# step printed twice as a second engine)
_RANKED = sorted(_STEP_FAMILIES - {"hf-console", "deepspeed"})


@pytest.mark.parametrize("fam", _RANKED)
def test_every_rank_printing_reads_as_one(fam, tmp_path):
    from postmortem.run import read_run
    lines = [x for d in ENTRIES if family(d) == fam and d.kind == "progress" for x in d.examples]
    one, many = tmp_path / "one.log", tmp_path / "many.log"
    one.write_text("\n".join(lines) + "\n")
    many.write_text("\n".join(f"[rank{r}]: {x}" for x in lines for r in range(4)) + "\n")
    a, b = read_run(one), read_run(many)
    assert textlogs.sniff(many)[0] == textlogs.sniff(one)[0]
    assert list(a.frame["step"]) == list(b.frame["step"])


def test_nemo_bar_global_step_is_the_step_not_the_bar(tmp_path):
    import json

    from test_cli import pm
    lines, g = [], 0
    for e in range(2):       # NeMo's postfix, through Lightning's TQDM bar: the bar's i/N restarts
        for i in range(1, 6):
            g += 1
            lines.append(f"Epoch {e}: {i * 20:3d}%|#    | {i}/5 [00:50<07:30, 2.00it/s, v_num=0, "
                         f"reduced_train_loss={2.5 - g / 100:.3f}, global_step={g - 1:.1f}, "
                         f"consumed_samples={g * 512:.1f}, train_step_timing in s=0.5]")
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    r = pm("info", p, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["steps"] == {"rows": 10, "first": 0, "last": 9}
    assert "global_step" not in {m["name"] for m in data["metrics"]}


def _info(tmp_path, text):
    import json

    from test_cli import pm
    p = tmp_path / "train.log"
    p.write_text(text)
    r = pm("info", p, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_llmc_stdout_of_every_release_is_read_with_its_step_and_loss(tmp_path):
    # llm.c train_gpt2.cu's printf0 (today's wording, with z-scores), through a torchrun `[rank0]:` prefix,
    # with the `val loss %f` line printf0 writes between them
    fmt = "step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s"
    lines = ["[rank0]: " + fmt % (s, 74, 11 - s / 2, -0.5, 15 - s, 0.1, s * 1e-6, 120.0, 10.0, 43690)
             for s in range(1, 6)]
    lines.insert(3, "[rank0]: val loss %f" % 9.9)
    data = _info(tmp_path, "\n".join(lines) + "\n")
    assert data["run"]["format"] == "llm.c" and data["steps"] == {"rows": 5, "first": 1, "last": 5}
    m = {x["name"]: x for x in data["metrics"]}
    assert m["loss"]["min"] == 8.5 and m["loss"]["max"] == 10.5 and m["loss"]["dialect"] == ["llm.c.stdout"]
    assert m["grad_norm"]["min"] == 10 and m["lr"]["max"] == 5e-06
    # the oldest wording (2024-04): `step N/M: train loss X (acc Y) (...)`
    old = "step %4d/%d: train loss %f (acc %f) (%f ms, %d tok/s)"
    data = _info(tmp_path, "\n".join(old % (s, 74, 11 - s / 2, 11 - s / 2, 120.5, 43690) for s in range(1, 6)) + "\n")
    assert data["steps"] == {"rows": 5, "first": 1, "last": 5}
    assert next(x for x in data["metrics"] if x["name"] == "loss")["max"] == 10.5


def test_modded_nanogpt_train_lines_without_a_loss_keep_their_val_loss(tmp_path):
    # since late 2024 train_gpt.py's train line carries no loss; only `val_loss:` does
    lines = []
    for s in range(1, 11):
        lines.append(f"step:{s}/{10} train_time:{s * 230:.0f}ms step_avg:{230.0:.2f}ms")
        if s % 5 == 0:
            lines.append(f"step:{s}/{10} val_loss:{5 - s / 10:.4f} train_time:{s * 230:.0f}ms step_avg:{230.0:.2f}ms")
    data = _info(tmp_path, "\n".join(lines) + "\n")
    assert data["run"]["format"] == "modded-nanogpt"
    val = next(x for x in data["metrics"] if x["name"] == "val_loss")
    assert val["min"] == 4.0 and val["max"] == 4.5


def _fairseq_simple_epoch(with_summary):
    """fairseq v0.12 `--log-format simple`: SimpleProgressBar.log lines, then (end of epoch) the
    valid and train `print` lines `'{} | {}'.format(prefix, postfix)`."""
    lines = []
    for u in range(100, 1100, 100):
        pairs = f"loss={8 - u / 1000:.3f}, nll_loss=6.011, ppl=64.49, num_updates={u}, lr=0.0005, gnorm=1.09"
        lines.append("2021-03-01 10:00:00 | INFO | train_inner | "
                     + "{}:  {:5d} / {:d} {}".format("epoch 001", u, 1000, pairs))
    if with_summary:
        lines.append("2021-03-01 10:05:00 | INFO | valid | " + "{} | {}".format(
            "epoch 001 | valid on 'valid' subset", "loss 6.9 | nll_loss 5.1 | ppl 34.3 | num_updates 1000"))
        lines.append("2021-03-01 10:05:01 | INFO | train | " + "{} | {}".format(
            "epoch 001", "loss 7.45 | nll_loss 6.0 | ppl 64 | num_updates 1000 | lr 0.0005 | gnorm 1.1"))
    return "\n".join(lines) + "\n"


def test_fairseq_tqdm_frames_are_fairseqs_with_num_updates_as_the_step(tmp_path):
    frames = [f"epoch 001:  {u * 5:3d}%|##        | {u * 10}/200 [00:30<04:30,  3.30it/s, loss={8 - u / 100:.3f}, "
              f"nll_loss=6.011, ppl=64.49, num_updates={u * 10 + 500}, lr=0.0005, gnorm=1.09, loss_scale=64]"
              for u in range(1, 21)]
    data = _info(tmp_path, "\r".join(frames) + "\n")
    assert data["run"]["format"] == "fairseq" and data["steps"] == {"rows": 20, "first": 510, "last": 700}
    assert next(x for x in data["metrics"] if x["name"] == "loss")["dialect"] == ["fairseq.tqdm"]


def test_fairseq_epoch_summaries_are_not_a_relaunch(tmp_path):
    data = _info(tmp_path, _fairseq_simple_epoch(True))
    assert data["read"]["segments"] is None
    assert next(x for x in data["metrics"] if x["name"] == "val_loss")["max"] == 6.9


def test_torchtitan_colored_console_with_its_validator(tmp_path):
    # metrics.py's colours (`{color.red}step: ...`, ANSI codes when the console is a terminal), every
    # rank printing behind `[rankN]:`, and the validator's `validate step:` line: an eval, not a step
    red, green, orange, reset = "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[39m"
    lines = []
    for s in range(1, 11):
        for r in range(2):
            lines.append(f"[rank{r}]:[titan] 2025-06-01 10:00:{s:02d},000 - root - INFO - "
                         f"{red}step: {s:2}  {green}loss: {9 - s / 10:7.4f}  {orange}grad_norm: {1.5:7.4f}  "
                         f"memory: {30.12:5.2f}GiB({38.01:.2f}%)  tps: {round(7123.4):,}  tflops: {312.71:,.2f}  "
                         f"mfu: {41.23:.2f}%{reset}")
        if s % 5 == 0:
            lines.append(f"[rank0]:[titan] 2025-06-01 10:00:{s:02d},500 - root - INFO - "
                         f"{orange}validate step: {s:2}  {green}loss: {8.9 - s / 10:7.4f}  memory: {30.12:5.2f}GiB"
                         f"({38.01:.2f}%){reset}")
    data = _info(tmp_path, "\n".join(lines) + "\n")
    assert data["run"]["format"] == "torchtitan" and data["steps"] == {"rows": 10, "first": 1, "last": 10}
    m = {x["name"]: x for x in data["metrics"]}
    assert m["loss"]["min"] == 8.0 and m["loss"]["max"] == 8.9
    assert m["val_loss"]["min"] == 7.9 and m["val_loss"]["max"] == 8.4


def test_gpt_neox_validation_results_line(tmp_path):
    from postmortem.run.dialects.progress import dialect
    d = dialect("gpt-neox.validation")
    line = f" {'validation'} results at {'iteration 1000'} | " + f"{'lm_loss'} value: {2.401:.6E} | "
    assert d.search(line).group("step") == "1000"
    assert of_line(line).id == "gpt-neox.validation"


def test_keras_verbose_2_epoch_lines_are_keras(tmp_path):
    # Progbar verbose=2 (Keras 3): `count - {s}s - {ms}ms/step - k: v`, after the fit loop's `Epoch e/E`
    lines = []
    for e in range(1, 6):
        lines += ["Epoch %d/%d" % (e, 5), "%d/%d" % (100, 100) + " - 2s - 20ms/step" + " - %s: %.4f" % ("loss", 1 - e / 10)
                  + " - %s: %.4f" % ("val_loss", 1.1 - e / 10)]
    data = _info(tmp_path, "\n".join(lines) + "\n")
    assert data["run"]["format"] == "keras" and data["steps"] == {"rows": 5, "first": 1, "last": 5}
    m = {x["name"]: x for x in data["metrics"]}
    assert m["loss"]["dialect"] == ["keras.progbar"] and m["loss"]["min"] == 0.5 and m["val_loss"]["max"] == 1.0


def test_lightning_15_rich_bar_without_max_epochs(tmp_path):
    # RichProgressBar 1.5: `Epoch N` padded to `Validation`'s width, `{completed}/--` for an infinite total
    lines = [f"{'Epoch ' + str(e):<11} " + "━" * 20 + f" {i}/-- 0:00:{i:02d} • -:--:-- 14.80it/s "
             + "".join(f"{k}: {round(v, 3) if isinstance(v, float) else v} " for k, v in (("loss", 2.5 - i / 100),
                                                                                        ("v_num", 0)))
             for e in range(2) for i in range(10, 60, 10)]
    data = _info(tmp_path, "\n".join(lines) + "\n")
    assert data["run"]["format"] == "lightning-bar"
    assert next(x for x in data["metrics"] if x["name"] == "loss")["dialect"] == ["lightning-bar.rich"]


def _paddle_hapi_fit(epochs=2):
    """Model.fit's console: ProgBarLogger's `Epoch e/E`, ProgressBar's `step %3d/%d - k: %.4f - Nms/step`
    (the count padded to the total's digits), the eval after `Eval begin...`."""
    lines = []
    for e in range(1, epochs + 1):
        lines.append("Epoch %d/%d" % (e, epochs))
        for i in range(10, 110, 10):
            lines.append(("step %" + str(3) + "d/%d") % (i, 100) + " - %s: %.4f" % ("loss", 2.5 - e / 10 - i / 1000)
                         + " - %s: %.4f" % ("acc", 0.5) + " - %.0fms/%s" % (12, "step"))
        lines += ["Eval begin...", "step %d/%d - loss: %.4f - acc: %.4f - 5ms/step" % (10, 10, 2.2, 0.6),
                  "Eval samples: 10000"]
    return "\n".join(lines) + "\n"


def test_paddle_progbar_count_is_padded_to_the_totals_digits():
    frame = ("step %" + str(3) + "d/%d") % (10, 100) + " - %s: %.4f" % ("loss", 2.3456) + " - %.0fms/%s" % (12, "step")
    assert frame.startswith("step  10/100") and of_line(frame).id == "paddle.progbar"
    bar = ("step %" + str(3) + "d/%d [") % (45, 100) + "=" * 12 + ">" + "." * 17 + "] - loss: 2.1000 - ETA: 3s - 12ms/step"
    assert of_line(bar).id == "paddle.progbar"


def test_paddle_hapi_fit_console_reads_as_one_run(tmp_path):
    data = _info(tmp_path, _paddle_hapi_fit())
    assert data["read"]["segments"] is None
    assert "Eval samples" not in {x["name"] for x in data["metrics"]}
    # epoch e's batch i is step (e - 1) x 100 + i; the eval's loss is at the epoch's last step
    assert data["steps"] == {"rows": 20, "first": 10, "last": 200}
    m = {x["name"]: x for x in data["metrics"]}
    assert m["loss"]["min"] == 2.2 and m["val_loss"]["max"] == 2.2


def test_loguru_default_format_with_the_utc_offset_of_master(tmp_path):
    # loguru master's LOGURU_FORMAT `{time:YYYY-MM-DD HH:mm:ss.SSS Z} | {level: <8} | {name}:{function}:{line} - `
    lines = ["{} | {: <8} | {}:{}:{} - {}".format(f"2025-02-01 10:00:{s:02d}.123 +00:00", "INFO", "__main__", "train",
                                                  42, f"step {s} | loss {2.5 - s / 100:.4f} | lr 1.0e-04")
             for s in range(1, 11)]
    data = _info(tmp_path, "\n".join(lines) + "\n")
    assert data["run"]["format"] == "loguru" and data["steps"] == {"rows": 10, "first": 1, "last": 10}
    assert next(x for x in data["metrics"] if x["name"] == "loss")["max"] == 2.49


def test_fairseq_09_bare_json_lines_read_by_update(tmp_path):
    import json
    # fairseq v0.9.0 fairseq/progress_bar.py json_progress_bar.log: stats formatted by format_stat (strings)
    lines = [json.dumps({"epoch": 1, "update": round(u / 1000, 3), "loss": f"{8 - u / 1000:.3f}", "nll_loss": "6.011",
                         "num_updates": str(u), "lr": "0.0005", "gnorm": "1.09", "loss_scale": "64"})
             for u in range(100, 1100, 100)]
    data = _info(tmp_path, "\n".join(lines) + "\n")
    assert data["steps"] == {"rows": 10, "first": 100, "last": 1000}


def test_fairseq_09_bare_json_epoch_with_its_validation_and_summary(tmp_path):
    import json
    # fairseq v0.9.0 json_progress_bar: `log` every log_interval (epoch, update, stats), then at the
    # epoch's end `print(stats, tag='train')` and `print(stats, tag='valid')` (train.py): tagged keys
    inner = [json.dumps({"epoch": e, "update": round(e - 1 + u / 500, 3), "loss": f"{8 - (e * 500 + u) / 1000:.3f}",
                         "num_updates": str((e - 1) * 500 + u), "lr": "0.0005", "loss_scale": "64"})
             for e in (1, 2) for u in range(100, 600, 100)]
    lines = inner[:5] + [
        json.dumps({"epoch": 1, "train_loss": "7.1", "train_num_updates": "500"}),
        json.dumps({"epoch": 1, "valid_loss": "6.9", "valid_ppl": "119.4", "valid_num_updates": "500"})] + inner[5:]
    data = _info(tmp_path, "\n".join(lines) + "\n")
    assert data["run"]["format"] == "fairseq"
    assert data["steps"] == {"rows": 10, "first": 100, "last": 1000}
    assert data["read"]["segments"] is None          # the epoch's averages are no relaunch
    m = {x["name"]: x for x in data["metrics"]}
    assert m["val_loss"]["max"] == 6.9 and m["loss"]["max"] == 7.4
    assert m["loss"]["dialect"] == ["fairseq.json_v09"]


def _ultralytics_console(losses, header, negative_epoch=None, prefix=""):
    """Ultralytics 8.x BaseTrainer._do_train: per epoch the header (progress_string:
    `('\\n' + '%11s' * (4 + len(self.loss_names))) % ('Epoch', 'GPU_mem', *loss_names, 'Instances',
    'Size')`), tqdm frames whose description is `('%11s' * 2 + '%11.4g' * (2 + loss_len)) %
    (f'{epoch + 1}/{self.epochs}', mem, *losses, instances, imgsz)` joined by `\\r`, then the
    validator's bar (`('%22s' + '%11s' * 6) % ('Class', 'Images', 'Instances', 'Box(P', 'R',
    'mAP50', 'mAP50-95)')`, as wide as a 3-loss row) and its row (`'%22s' + '%11i' * 2 + '%11.3g' * 4`)."""
    from postmortem.run.dialects.progress.ultralytics import LOSS_NAMES_BY_COUNT
    names = LOSS_NAMES_BY_COUNT[losses]
    out = []
    for ep in (12, 13, 14):
        if header:
            out.append(('\n' + '%11s' * (4 + losses)) % ('Epoch', 'GPU_mem', *names, 'Instances', 'Size'))
        frames = []
        for i in range(1, 21):
            first = (-0.2335 if ep == negative_epoch else 1.2) - i / 1000
            parts = [first] + [1.5e-05 if k == 1 else 0.9 + k / 10 for k in range(1, losses)]
            desc = ('%11s' * 2 + '%11.4g' * (2 + losses)) % (f'{ep}/300', '3.1G', *parts, 7, 640)
            frames.append(prefix + desc + f": {i * 5:3d}%|{'█' * (i // 2):10s}| {i}/20 [00:0{i // 4}<00:05,  5.41it/s]")
        out.append("\r".join(frames))
        out.append(('%22s' + '%11s' * 6) % ('Class', 'Images', 'Instances', 'Box(P', 'R', 'mAP50', 'mAP50-95)')
                   + ": 100%|██████████| 3/3 [00:01<00:00,  2.1it/s]")
        out.append(('%22s' + '%11i' * 2 + '%11.3g' * 4) % ('all', 128, 929, 0.72, 0.61, 0.66, 0.48))
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("losses", [1, 3, 4, 5])
@pytest.mark.parametrize("header", [True, False])
def test_ultralytics_console_pasted_from_mid_run_keeps_its_epochs(tmp_path, losses, header):
    # with no header (a paste from mid-run) the trainer's own names by the count of loss cells;
    # a negative loss part and an exponent (`%11.4g`) are read; each epoch's batches are steps
    # of their own ((epoch - 1) x 20 + i), never one merged row per batch counter
    from postmortem.run.dialects.progress.ultralytics import LOSS_NAMES_BY_COUNT
    data = _info(tmp_path, _ultralytics_console(losses, header, negative_epoch=13))
    assert data["run"]["format"] == "ultralytics"
    assert data["steps"] == {"rows": 60, "first": 221, "last": 280}
    m = {x["name"]: x for x in data["metrics"]}
    first = LOSS_NAMES_BY_COUNT[losses][0]
    assert set(LOSS_NAMES_BY_COUNT[losses]) <= set(m) and "Class" not in m and "mAP50" not in m
    assert m[first]["min"] == pytest.approx(-0.2535) and m[first]["max"] == pytest.approx(1.199)


def test_ultralytics_rows_behind_a_rank_prefix_without_header(tmp_path):
    data = _info(tmp_path, _ultralytics_console(3, False, prefix="[rank0]: "))
    assert data["steps"] == {"rows": 60, "first": 221, "last": 280}
