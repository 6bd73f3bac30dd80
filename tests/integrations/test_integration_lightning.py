"""The Lightning integration, as a user meets it: examples/lightning/train.py trains a tiny GPT
with a cause injected, `analyze` finds the incident, `replay` reproduces the logged losses bit
for bit from Lightning's own .ckpt files and ranks the cause first; bad input is one line."""

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import assert_one_line_error

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "lightning" / "train.py"
STEPS = 400
WHERE = {"long-tail-token": (250, 250), "lr-discontinuity": (250, 256),   # the LR jumps at 250
         "optimizer-reset": (200, 206),          # the crash before 245 resumes from the step-200 checkpoint
         "fp16-overflow": (250, 250)}            # the first overflow: NaN, 12 skipped steps

# found, not imported: importing lightning (and torch) is seconds of every collection
pytestmark = pytest.mark.skipif(importlib.util.find_spec("lightning") is None,
                                reason="lightning is not installed (the `lightning` extra)")


def pm(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def train(out: Path, cause: str, *more: str, steps: int = STEPS) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLE), "--out", str(out), "--inject", cause, "--steps", str(steps),
                           *more], capture_output=True, text=True, timeout=600, cwd=ROOT)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each cause trained once for the module."""
    made: dict[str, Path] = {}

    def get(cause: str) -> Path:
        if cause not in made:
            out = tmp_path_factory.mktemp("lightning") / cause
            r = train(out, cause)
            assert r.returncode == 0, r.stderr[-3000:]
            if "skipped:" in r.stderr:
                pytest.skip(r.stderr.strip().splitlines()[-1])
            made[cause] = out
        return made[cause]
    return get


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def manifest(run: Path):
    from postmortem.run.model import RunManifest
    return RunManifest.model_validate_json((run / "manifest.json").read_text())


# -- each cause, trained, found and replayed ---------------------------------------------------------

# Every arm for two causes; for the other two the arm that tests the cause and one that does not
# (every arm on each was checked by hand: the same first cause; the file stays a few CPU minutes).
ARMS = {"long-tail-token": (), "optimizer-reset": (), "lr-discontinuity": ("--arms", "scheduled-lr,swap-batch"),
        "fp16-overflow": ("--arms", "fp32,swap-batch")}


@pytest.mark.slow
@pytest.mark.parametrize("cause", list(ARMS))
def test_the_injected_cause_is_found_replayed_bit_for_bit_and_ranked_first(runs, cause):
    run = runs(cause)
    r = pm("analyze", run, "--json")
    assert r.returncode == 0, r.stderr
    incidents = json.loads(r.stdout)["incidents"]
    assert incidents and WHERE[cause][0] <= incidents[0]["step"] <= WHERE[cause][1], incidents
    r = pm("replay", run, "--json", *ARMS[cause])
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout)
    assert result["faithful"] and result["faithful_max_diff"] == 0.0, result["faithful_max_diff"]   # bit for bit
    assert result["hypotheses"][0]["pattern"] == cause, [(h["pattern"], h["score"]) for h in result["hypotheses"]]
    if cause == "fp16-overflow":      # the probe names the first overflowing module as the module does
        assert any("forward pass: model.blocks.0.mlp.proj output" in e["observation"] for e in result["evidence"])


@pytest.mark.slow
def test_a_clean_run_has_no_incident(tmp_path):
    r = train(tmp_path / "clean", "none", steps=120)
    # quiet, as a script should be: no banner, tip or warning, only its steps (tinydata.Steps)
    said = r.stderr.strip().splitlines()
    assert r.returncode == 0 and said and all(line.startswith("training: step ") for line in said), r.stderr[-3000:]
    out = pm("analyze", tmp_path / "clean", "--json")
    assert json.loads(out.stdout)["incidents"] == [], out.stdout[:2000]


@pytest.mark.slow
def test_the_record_holds_what_a_post_mortem_needs(runs):
    run = runs("optimizer-reset")
    logged = rows(run)
    # the crashed run's steps, then the resumed one's from its checkpoint: as a resumed log reads
    assert [r["step"] for r in logged] == list(range(245)) + list(range(200, STEPS))
    assert all({"loss", "grad_norm", "lr", "batch_hash"} <= set(r) for r in logged)
    assert "grad_norm/model.blocks.0.mlp.fc" in logged[50] and "adam_v_norm/model.wte" in logged[50]
    # the resume draws the batches the crashed run drew (a seeded order per epoch)
    assert [r["batch_hash"] for r in logged[200:245]] == [r["batch_hash"] for r in logged[245:290]]
    m = json.loads((run / "manifest.json").read_text())
    c = m["config"]
    assert (c["lr_max"], c["min_lr"], c["warmup_steps"], c["schedule"]) == (5e-2, 5e-3, 150, "cosine")
    assert (c["total_steps"], c["batch_size"], c["clip"], c["precision"]) == (STEPS, 16, 1.0, "32-true")
    assert (c["optimizer"], c["betas"], c["accumulate_grad_batches"]) == ("adamw", [0.9, 0.95], 1)
    assert m["dtype"] == "fp32" and m["vocab_size"] == 512 and m["seed"] == 1234
    assert m["versions"]["lightning"] and m["versions"]["cpu_capability"]
    assert m["replay"]["entrypoint"] == "postmortem.integrations.lightning:make_replay"
    assert m["replay"]["factory"] == "train:build" and m["replay"]["checkpoints"] == "checkpoints/"
    assert m["replay"]["factory_dir"] == str(EXAMPLE.parent) and m["replay"]["hparams"]["inject"] == "optimizer-reset"


@pytest.mark.slow
def test_fp16_logs_the_loss_scale_and_the_skipped_steps(runs):
    run = runs("fp16-overflow")           # skipped, saying why, where this CPU has no fp16 autocast
    assert manifest(run).dtype == "fp16"
    logged = {r["step"]: r for r in rows(run)}
    assert all("loss_scale" in r and "skipped" in r for r in logged.values())
    assert [logged[s]["skipped"] for s in range(248, 264)] == [0, 0] + [1] * 12 + [0, 0]
    assert logged[262]["loss_scale"] == logged[250]["loss_scale"] / 2 ** 12


@pytest.mark.slow
def test_the_replay_draws_the_batch_the_run_trained_on(runs):
    """The factory's seeded dataloader, walked epoch by epoch, gives each step the batch whose
    hash the callback logged; the junk of step 250 is rare tokens only."""
    from postmortem.integrations.lightning import make_replay
    from postmortem.run.record import batch_hash
    run = runs("long-tail-token")
    logged = {r["step"]: r["batch_hash"] for r in rows(run)}
    r = make_replay(manifest(run), run)
    for step in (299, 3, 250, 251, 0, 49, 50):
        assert batch_hash(r.inputs_of(r.batch_at(step))) == logged[step], step
    assert int(r.batch_at(250)[0].min()) >= 448


@pytest.mark.slow
def test_accumulation_and_bf16_replay_bit_for_bit(tmp_path):
    """accumulate_grad_batches=3 over 50-batch epochs (a short step at each epoch's end, its loss
    divided by 3 as Lightning does) under bf16-mixed: the steps from a checkpoint are the logged ones."""
    run = tmp_path / "acc"
    r = train(run, "none", "--accumulate", "3", "--precision", "bf16-mixed", steps=60)
    assert r.returncode == 0, r.stderr[-3000:]
    import torch

    from postmortem.integrations.lightning import make_replay
    from postmortem.replay.checkpoints import checkpoints
    m = manifest(run)
    assert m.dtype == "bf16" and m.config.accumulate_grad_batches == 3
    logged = {r["step"]: r for r in rows(run)}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)          # as the run did
    try:
        rep = make_replay(m, run)
        rep.load(checkpoints(m, run)[50])
        assert len(rep.batch_at(50)) == 2          # step 50 ends epoch 2: 50 = 3 * 16 + 2 micro-batches
        for step in range(50, 60):
            row = rep.train_step(step)
            assert (row["loss"], row["grad_norm"], row["lr"]) == \
                (logged[step]["loss"], logged[step]["grad_norm"], logged[step]["lr"]), step
    finally:
        torch.set_num_threads(threads)


# -- bad input: one line each ---------------------------------------------------------------------

def copy_run(runs, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(runs("long-tail-token"), run)
    return run


def edit_manifest(run: Path, section: str = "replay", **values) -> None:
    m = json.loads((run / "manifest.json").read_text())
    m[section].update(values)
    (run / "manifest.json").write_text(json.dumps(m))


def replay_error(run: Path) -> str:
    """The one-line ReplayError a replay of `run` stops with (in this process; the CLI's exit 2
    is the first test below)."""
    from postmortem.diagnose.analyze import analyze as diagnose
    from postmortem.errors import ReplayError
    from postmortem.replay.engine import Replayer
    from postmortem.run import read_run
    log = read_run(run)
    with pytest.raises(ReplayError) as err:
        Replayer(log, diagnose(log).incidents[0], "cpu").replay(("faithful",))
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message, message
    return message


@pytest.mark.slow
def test_a_factory_that_cannot_be_imported_is_one_line(runs, tmp_path):
    run = copy_run(runs, tmp_path)
    edit_manifest(run, factory="no_such_train:build", factory_dir=str(tmp_path))
    assert_one_line_error(pm("replay", run), "cannot import the factory no_such_train:build", after_progress=True)


@pytest.mark.slow
def test_a_factory_that_raises_is_one_line(runs, tmp_path):
    run = copy_run(runs, tmp_path)
    (tmp_path / "broken_lit.py").write_text("def build(**hparams):\n"
                                            "    raise FileNotFoundError('data/train.bin: no such file')\n")
    edit_manifest(run, factory="broken_lit:build", factory_dir=str(tmp_path))
    assert "the factory broken_lit:build failed: FileNotFoundError: data/train.bin" in replay_error(run)


@pytest.mark.slow
def test_a_checkpoint_of_another_model_names_the_first_tensor(runs, tmp_path):
    run = copy_run(runs, tmp_path)
    edit_manifest(run, hparams={**manifest(run).replay.hparams, "n_embd": 64})    # the factory builds a wider model
    assert "epoch=3-step=200.ckpt: the checkpoint is of another model: model.wte.weight is (512, 48) there, " \
           "(512, 64) in the model the factory built" in replay_error(run)


@pytest.mark.slow
def test_no_checkpoint_before_the_incident_is_one_line(runs, tmp_path):
    run = copy_run(runs, tmp_path)
    for n in (50, 100, 150, 200, 250):
        (run / "checkpoints" / f"epoch={n // 50 - 1}-step={n}.ckpt").unlink()
    assert "no checkpoint at or before step 249 (have: 300, 350, 400)" in replay_error(run)


@pytest.mark.slow
def test_a_checkpoint_that_needs_unpickling_is_refused(runs, tmp_path):
    import argparse

    import torch
    run = copy_run(runs, tmp_path)
    ckpt = run / "checkpoints" / "epoch=3-step=200.ckpt"
    state = torch.load(ckpt, weights_only=True)
    torch.save({**state, "hyper_parameters": argparse.Namespace(inject="long-tail-token")}, ckpt)
    assert "epoch=3-step=200.ckpt: refused: the checkpoint needs unsafe unpickling" in replay_error(run)


@pytest.mark.slow
@pytest.mark.parametrize("config, said", [
    ({"precision": "16-true"}, "precision '16-true' cannot be replayed"),
    ({"world_size": 4}, "cannot replay this run: it trained on 4 processes"),
])
def test_what_cannot_be_replayed_is_said_in_one_line(runs, tmp_path, config, said):
    run = copy_run(runs, tmp_path)
    edit_manifest(run, "config", **config)
    assert said in replay_error(run)


@pytest.mark.slow
def test_a_module_without_a_per_token_loss_is_one_line(runs, tmp_path):
    run = copy_run(runs, tmp_path)
    (tmp_path / "plain_lit.py").write_text(
        f"import sys\nsys.path.insert(0, {str(EXAMPLE.parent)!r})\nimport train\n\n"
        "class Plain(train.LitGPT):\n    per_token_loss = None\n\n"
        "def build(**hparams):\n    return Plain(**hparams), train.TinyData(hparams['inject'])\n")
    edit_manifest(run, factory="plain_lit:build", factory_dir=str(tmp_path))
    assert "Plain has no per_token_loss(batch[, step])" in replay_error(run)


@pytest.mark.slow
def test_another_data_order_is_refused_in_one_line(runs, tmp_path):
    run = copy_run(runs, tmp_path)
    (tmp_path / "reseeded_lit.py").write_text(
        f"import sys\nsys.path.insert(0, {str(EXAMPLE.parent)!r})\nimport train\n\n"
        "def build(**hparams):\n    module, data = train.build(**hparams)\n    data.seed = 7\n"
        "    return module, data\n")
    edit_manifest(run, factory="reseeded_lit:build", factory_dir=str(tmp_path))
    assert "is not the one the run logged" in replay_error(run)


@pytest.mark.slow
def test_analyzing_a_run_the_callback_recorded_imports_neither_lightning_nor_torch(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "loss": 3 - s / 100}) + "\n"
                                                    for s in range(60)))
    (tmp_path / "manifest.json").write_text(json.dumps({"replay": {
        "entrypoint": "postmortem.integrations.lightning:make_replay", "factory": "train:build"}}))
    code = ("import contextlib, io, sys\nfrom postmortem.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()): main(['analyze', {str(tmp_path)!r}])\n"
            "print(sorted(m for m in ('torch', 'lightning') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout


@pytest.mark.slow
def test_the_callback_refuses_a_factory_that_is_not_module_colon_function():
    from postmortem.integrations.lightning import PostmortemCallback
    with pytest.raises(ValueError, match="expected 'module:function'"):
        PostmortemCallback(factory="train.build")


def test_a_second_save_of_a_step_is_that_step_and_the_later_one_wins(tmp_path):
    """ModelCheckpoint names a second save of a step (a resumed run's) epoch=4-step=250-v1.ckpt."""
    from postmortem.replay.checkpoints import checkpoints
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for name in ("epoch=3-step=200.ckpt", "epoch=4-step=250.ckpt", "epoch=4-step=250-v1.ckpt", "last.ckpt"):
        (folder / name).write_bytes(b"")
    found = {step: path.name for step, path in checkpoints(None, tmp_path).items()}
    assert found == {200: "epoch=3-step=200.ckpt", 250: "epoch=4-step=250-v1.ckpt"}


@pytest.mark.slow
def test_a_batch_of_another_shape_is_logged_without_a_hash_and_training_goes_on():
    import torch

    from postmortem.integrations.lightning import _hash
    from postmortem.run.record import batch_hash
    x = torch.arange(12).view(3, 4)
    assert _hash((x, x + 1)) == _hash({"input_ids": x}) == batch_hash(x)
    assert _hash({"pixels": x.float()}) is None and _hash(["a caption"]) is None


@pytest.mark.slow
def test_an_epoch_scheduler_steps_at_the_epochs_end_in_the_replay(tmp_path, monkeypatch):
    """configure_optimizers() returning ([opt], [StepLR]) steps the LR once an epoch (Lightning's
    default interval): the replay across the epoch's end at step 50 is the logged one."""
    import lightning.pytorch as pl

    from postmortem.integrations.lightning import PostmortemCallback, make_replay
    from postmortem.replay.checkpoints import checkpoints
    (tmp_path / "epoch_lit.py").write_text(
        f"import sys\nsys.path.insert(0, {str(EXAMPLE.parent)!r})\nimport torch\nimport train\n\n"
        "class EpochLR(train.LitGPT):\n"
        "    def configure_optimizers(self):\n"
        "        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr_max)\n"
        "        return [opt], [torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)]\n\n"
        "def build(**hparams):\n    return EpochLR(**hparams), train.TinyData()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import epoch_lit
    run = tmp_path / "run"
    module, data = epoch_lit.build(steps=70)
    keep = pl.callbacks.ModelCheckpoint(dirpath=run / "checkpoints", every_n_train_steps=40, save_top_k=-1)
    pl.Trainer(max_steps=70, default_root_dir=run, callbacks=[PostmortemCallback("epoch_lit:build"), keep],
               accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
               num_sanity_val_steps=0).fit(module, data)
    logged = {r["step"]: r for r in rows(run)}
    assert logged[50]["lr"] == logged[49]["lr"] / 2 == logged[0]["lr"] / 2
    m = manifest(run)
    assert m.replay.factory_dir == str(tmp_path) and m.config.scheduler_interval == "epoch"
    rep = make_replay(m, run)
    rep.load(checkpoints(m, run)[40])
    for step in range(40, 70):
        row = rep.train_step(step)
        assert (row["loss"], row["lr"]) == (logged[step]["loss"], logged[step]["lr"]), step
