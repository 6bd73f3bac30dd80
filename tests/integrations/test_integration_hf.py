"""The Hugging Face Trainer integration, as a user meets it: examples/hf_trainer/train.py trains
a tiny GPT-2 with a cause injected, `analyze` finds the incident, `replay` reproduces the
logged losses bit for bit from the Trainer's own checkpoint and ranks the cause first; bad
input is one line."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import assert_one_line_error, pm

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "hf_trainer" / "train.py"
STEPS = 400
WHERE = {"long-tail-token": (250, 250), "lr-discontinuity": (250, 256),   # the LR jumps at 250
         "optimizer-reset": (200, 206)}          # the crash at 250 resumes from checkpoint-200
# The output directory as it is: the record (metrics.jsonl + manifest.json) wins over the
# Trainer's checkpoint-N/trainer_state.json (tests/run/test_discover_record.py).
READ = ()


def train(out: Path, cause: str, steps: int = STEPS, extra=()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLE), "--out", str(out), "--inject", cause, "--steps", str(steps),
                           *extra], capture_output=True, text=True, timeout=600, cwd=ROOT)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each cause trained once for the module."""
    made: dict[str, Path] = {}

    def get(cause: str) -> Path:
        if cause not in made:
            out = tmp_path_factory.mktemp("hf") / cause
            r = train(out, cause)
            if r.returncode == 2 and "skipped" in r.stderr:
                pytest.skip(r.stderr.strip().splitlines()[-1])
            assert r.returncode == 0, r.stderr[-3000:]
            made[cause] = out
        return made[cause]
    return get


def analyze(run: Path) -> dict:
    r = pm("analyze", run, "--json", *READ)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


# -- the three causes, trained, found and replayed -----------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("cause", ["long-tail-token", "lr-discontinuity", "optimizer-reset"])
def test_the_injected_cause_is_found_replayed_faithfully_and_ranked_first(runs, cause):
    run = runs(cause)
    incidents = analyze(run)["incidents"]
    spike = next(i for i in incidents if i["kind"] == "spike")
    assert WHERE[cause][0] <= spike["step"] <= WHERE[cause][1], incidents
    if cause == "long-tail-token":       # as a user types it; the others in this process (one import)
        r = pm("replay", run, "--json", *READ)
        assert r.returncode == 0, r.stderr[-3000:]
        result = json.loads(r.stdout)
    else:
        result = replay_result(run)
    assert result["faithful"] and result["faithful_max_diff"] == 0.0, result["faithful_max_diff"]  # bit for bit
    assert result["hypotheses"][0]["pattern"] == cause, [(h["pattern"], h["score"]) for h in result["hypotheses"]]


def replay_result(run: Path) -> dict:
    from postmortem.diagnose.analyze import analyze as diagnose
    from postmortem.document.draft import pick_incident
    from postmortem.replay.engine import Replayer
    from postmortem.run import read_run
    log = read_run(run)
    inc = pick_incident(diagnose(log).incidents, None, str(run))     # the one `replay` picks
    return json.loads(Replayer(log, inc, "cpu").replay().model_dump_json())


@pytest.mark.slow
def test_fp16_overflow_runs_where_accelerate_has_fp16_else_is_skipped_with_the_reason(runs):
    run = runs("fp16-overflow")          # skips on a CPU-only machine, saying why
    assert json.loads((run / "manifest.json").read_text())["dtype"] == "fp16"
    logged = rows(run)
    assert any(r.get("skipped") for r in logged if 250 <= r["step"] < 262)
    assert all("loss_scale" in r for r in logged)


@pytest.mark.slow
def test_the_record_holds_what_a_post_mortem_needs(runs):
    run = runs("long-tail-token")
    logged = rows(run)
    assert [r["step"] for r in logged] == list(range(STEPS))
    assert all({"loss", "grad_norm", "lr", "batch_hash"} <= set(r) for r in logged)
    assert "grad_norm/transformer.h.0.mlp.c_fc" in logged[50] and "adam_v_norm/transformer.wte" in logged[50]
    m = json.loads((run / "manifest.json").read_text())
    assert m["config"]["lr_max"] == 3e-3 and m["config"]["schedule"] == "cosine" and m["config"]["warmup_steps"] == 40
    assert m["config"]["batch_size"] == 16 and m["config"]["clip"] == 1.0 and m["config"]["total_steps"] == STEPS
    assert m["vocab_size"] == 512 and m["config"]["model"]["n_layer"] == 2 and m["dtype"] == "fp32"
    assert m["replay"]["entrypoint"] == "postmortem.integrations.hf:make_replay"
    assert m["replay"]["factory"] == "train:build_trainer" and m["replay"]["checkpoints"] == "."
    # the Trainer's own log of the same steps says the same numbers
    state = json.loads((run / "checkpoint-250" / "trainer_state.json").read_text())
    hf = {h["step"] - 1: h for h in state["log_history"] if "loss" in h}
    assert all(hf[s]["loss"] == logged[s]["loss"] and hf[s]["grad_norm"] == logged[s]["grad_norm"]
               for s in range(250))


@pytest.mark.slow
def test_the_replay_draws_the_batch_the_run_trained_on(runs):
    """The Trainer's seeded dataloader, rebuilt by the factory, gives every step the batch
    whose hash the callback logged; far steps are reached by skipping at the sampler."""
    from postmortem.integrations.hf import make_replay
    from postmortem.run.model import RunManifest
    from postmortem.run.record import batch_hash
    run = runs("long-tail-token")
    logged = {r["step"]: r["batch_hash"] for r in rows(run)}
    r = make_replay(RunManifest.model_validate_json((run / "manifest.json").read_text()), run)
    for step in (380, 3, 250, 251, 0, 399):
        assert batch_hash(r.inputs_of(r.batch_at(step))) == logged[step], step
    assert int(r.batch_at(250)["input_ids"].min()) >= 448       # the junk rows: rare tokens only


@pytest.mark.slow
def test_gradient_accumulation_and_bf16_replay_bit_for_bit(tmp_path):
    """Two micro-batches a step under bf16 autocast: the Trainer's own training_step (its
    num_items_in_batch normalisation) replayed from checkpoint-50 gives the logged loss, grad
    norm and LR exactly; the fp32 arm takes accelerate's autocast off."""
    from postmortem.integrations.hf import make_replay
    from postmortem.run.model import RunManifest
    from postmortem.run.record import batch_hash
    run = tmp_path / "ga"
    r = train(run, "none", steps=60, extra=("--accumulate", "2", "--bf16"))
    assert r.returncode == 0, r.stderr[-3000:]
    logged = {row["step"]: row for row in rows(run)}
    manifest = RunManifest.model_validate_json((run / "manifest.json").read_text())
    assert manifest.dtype == "bf16" and manifest.config.gradient_accumulation_steps == 2
    replay = make_replay(manifest, run)
    assert replay.dtype == "bf16" and replay.accumulate == 2 and len(replay.batch_at(50)) == 2
    replay.load(run / "checkpoint-50")
    for step in range(50, 56):
        assert batch_hash(replay.inputs_of(replay.batch_at(step))) == logged[step]["batch_hash"]
        row = replay.train_step(step)
        assert (row["loss"], row["grad_norm"], row["lr"]) == \
            (logged[step]["loss"], logged[step]["grad_norm"], logged[step]["lr"]), step
    fp32 = make_replay(manifest, run)
    fp32.load(run / "checkpoint-50")
    fp32.set_dtype("fp32")
    loss = fp32.train_step(50)["loss"]
    assert loss != logged[50]["loss"] and abs(loss - logged[50]["loss"]) < 0.05


@pytest.mark.slow
def test_a_module_of_the_same_name_from_elsewhere_is_not_taken_for_the_factory(runs, monkeypatch, tmp_path):
    """Another example's train.py already imported in this process (and first on sys.path):
    the factory still comes from the folder the run was trained from."""
    import types

    from postmortem.integrations.hf import make_replay
    from postmortem.run.model import RunManifest
    run = runs("long-tail-token")
    (tmp_path / "train.py").write_text("def build(**hparams):\n    return None\n")
    other = types.ModuleType("train")
    other.__file__ = str(tmp_path / "train.py")
    monkeypatch.setitem(sys.modules, "train", other)
    monkeypatch.syspath_prepend(str(tmp_path))
    replay = make_replay(RunManifest.model_validate_json((run / "manifest.json").read_text()), run)
    assert Path(sys.modules["train"].__file__) == EXAMPLE and replay.trainer is not None


# -- bad input: one line each -----------------------------------------------------------------------

def copy_run(runs, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(runs("long-tail-token"), run)
    return run


def edit_manifest(run: Path, **replay) -> None:
    m = json.loads((run / "manifest.json").read_text())
    m["replay"].update(replay)
    (run / "manifest.json").write_text(json.dumps(m))


@pytest.mark.slow
def test_a_factory_that_cannot_be_imported_is_one_line(runs, tmp_path):
    run = copy_run(runs, tmp_path)
    edit_manifest(run, factory="no_such_train:build_trainer", factory_dir=str(tmp_path))
    assert_one_line_error(pm("replay", run, *READ), "cannot import the trainer factory no_such_train:build_trainer", after_progress=True)


def replay_error(run: Path) -> str:
    """The one-line ReplayError a replay of `run` stops with (in this process: one
    transformers import for all of them; the CLI's exit 2 is the test above)."""
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
def test_a_factory_that_raises_is_one_line(runs, tmp_path):
    run = copy_run(runs, tmp_path)
    (tmp_path / "broken_train.py").write_text("def build_trainer(output_dir, **kw):\n"
                                              "    raise FileNotFoundError('data/train.bin: no such file')\n")
    edit_manifest(run, factory="broken_train:build_trainer", factory_dir=str(tmp_path))
    message = replay_error(run)
    assert "the trainer factory broken_train:build_trainer failed: FileNotFoundError: data/train.bin" in message


@pytest.mark.slow
def test_a_checkpoint_of_another_model_names_the_first_tensor(runs, tmp_path):
    from safetensors.torch import save_file
    from transformers import GPT2Config, GPT2LMHeadModel
    run = copy_run(runs, tmp_path)
    other = GPT2LMHeadModel(GPT2Config(vocab_size=512, n_positions=64, n_embd=64, n_layer=2, n_head=4))
    state = {k: v.contiguous() for k, v in other.state_dict().items() if k != "lm_head.weight"}
    save_file(state, str(run / "checkpoint-200" / "model.safetensors"))
    message = replay_error(run)
    assert "checkpoint-200: the checkpoint is of another model: transformer.wte.weight is (512, 64) there, " \
           "(512, 48) in the model the factory built" in message


@pytest.mark.slow
def test_no_checkpoint_before_the_incident_is_one_line(runs, tmp_path):
    run = copy_run(runs, tmp_path)
    for n in (50, 100, 150, 200, 250):
        shutil.rmtree(run / f"checkpoint-{n}")
    assert "no checkpoint at or before step 249 (have: 300, 350, 400)" in replay_error(run)


@pytest.mark.slow
def test_a_checkpoint_that_needs_unpickling_is_refused(runs, tmp_path):
    import argparse

    import torch
    run = copy_run(runs, tmp_path)
    torch.save({"state": argparse.Namespace(evil=True)}, run / "checkpoint-200" / "optimizer.pt")
    message = replay_error(run)
    assert "checkpoint-200/optimizer.pt: refused: the checkpoint needs unsafe unpickling" in message


@pytest.mark.slow
def test_what_cannot_be_replayed_is_said_in_one_line(runs, tmp_path):
    run = copy_run(runs, tmp_path)
    m = json.loads((run / "manifest.json").read_text())
    m["config"]["world_size"] = 4
    (run / "manifest.json").write_text(json.dumps(m))
    assert "cannot replay this run: it trained on 4 processes" in replay_error(run)


@pytest.mark.slow
def test_batches_that_are_not_the_logged_ones_are_refused(runs, tmp_path):
    run = copy_run(runs, tmp_path)
    edit_manifest(run, factory_kwargs={"inject": "long-tail-token", "steps": 500})   # more rows: another shuffle
    message = replay_error(run)
    assert "is not the one the run logged" in message and "the data order changed" in message


@pytest.mark.slow
def test_analyzing_a_run_the_callback_recorded_imports_neither_transformers_nor_torch(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "loss": 3 - s / 100}) + "\n"
                                                    for s in range(60)))
    (tmp_path / "manifest.json").write_text(json.dumps({"replay": {
        "entrypoint": "postmortem.integrations.hf:make_replay", "checkpoints": ".", "factory": "train:build_trainer"}}))
    code = ("import contextlib, io, sys\nfrom postmortem.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()): main(['analyze', {str(tmp_path)!r}])\n"
            "import postmortem.integrations\n"
            "print(sorted(m for m in ('torch', 'transformers', 'accelerate') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout


def test_the_callback_refuses_a_factory_that_is_not_module_colon_function():
    pytest.importorskip("transformers")
    from postmortem.integrations.hf import PostmortemCallback
    with pytest.raises(ValueError, match="expected 'module:function'"):
        PostmortemCallback(trainer_factory="train.build_trainer")
