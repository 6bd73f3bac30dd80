"""The plain PyTorch loop example (examples/plain_loop): trained with each injected cause,
analyzed, replayed faithfully bit for bit on this CPU, the injected cause ranked first; and
what a user gets wrong with such a run said in one line."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import one_line_error, postmortem

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "plain_loop" / "train.py"
sys.path.insert(0, str(ROOT / "examples"))
import tinydata  # noqa: E402

pytestmark = pytest.mark.slow

# cause -> the steps where analyze may put the incident: the cause is at 250 (the LR's
# effect shows in the loss a step or two later; the crashed run resumes at 200)
WHERE = {"long-tail-token": range(250, 251), "lr-discontinuity": range(250, 256),
         "optimizer-reset": range(200, 204), "fp16-overflow": range(250, 252)}


def train(out: Path, cause: str, *extra: str) -> Path:
    r = subprocess.run([sys.executable, str(EXAMPLE), "--out", str(out), "--inject", cause, *extra],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each example run, trained once for the module."""
    made: dict[str, Path] = {}

    def get(cause: str) -> Path:
        if cause not in made:
            made[cause] = train(tmp_path_factory.mktemp("plain") / cause, cause)
        return made[cause]
    return get


# The arm that tests each cause: enough for it to come first, at a third of the time of every
# arm (fp16 is slow on a CPU); long-tail-token runs them all, to show the whole re-ranking.
ARMS = {"long-tail-token": None, "lr-discontinuity": "scheduled-lr", "optimizer-reset": "restored-moments",
        "fp16-overflow": "fp32"}


@pytest.mark.parametrize("cause", ["long-tail-token", "lr-discontinuity", "optimizer-reset", "fp16-overflow"])
def test_each_cause_is_found_replayed_bit_for_bit_and_ranked_first(runs, cause):
    if cause == "fp16-overflow" and tinydata.fp16_on_cpu():
        pytest.skip(tinydata.fp16_on_cpu())
    run = runs(cause)
    assert {p.name for p in run.iterdir()} >= {"manifest.json", "metrics.jsonl", "checkpoints", "train.py",
                                                "replay.py", "tinydata.py"}
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["replay"]["entrypoint"] == "replay:make_replay"
    assert manifest["dtype"] == ("fp16" if cause == "fp16-overflow" else "fp32")
    found = postmortem("analyze", run, "--json")
    assert found.returncode == 0, found.stderr
    incidents = json.loads(found.stdout)["incidents"]
    assert incidents and incidents[0]["step"] in WHERE[cause], [(i["kind"], i["step"]) for i in incidents]
    r = postmortem("replay", run, "--json", *(("--arms", ARMS[cause]) if ARMS[cause] else ()))
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout)
    assert result["incident_step"] == incidents[0]["step"]
    assert result["faithful"] and result["faithful_max_diff"] == 0.0, result["evidence"][:2]
    assert result["hypotheses"][0]["pattern"] == cause, [(h["pattern"], h["score"]) for h in result["hypotheses"]]


def test_the_replay_runs_the_code_copied_beside_the_run(runs, tmp_path):
    """The run folder is self-contained: moved away from the example, it still replays."""
    run = shutil.copytree(runs("long-tail-token"), tmp_path / "moved")
    r = postmortem("replay", run, "--arms", "faithful", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["faithful_max_diff"] == 0.0


# -- what a user gets wrong: one line, exit 2 ---------------------------------------------

def broken(runs, tmp_path) -> Path:
    return shutil.copytree(runs("long-tail-token"), tmp_path / "run")


def test_a_factory_that_cannot_be_imported(runs, tmp_path):
    run = broken(runs, tmp_path)
    (run / "replay.py").write_text("import the_users_missing_package\n")
    err = one_line_error(postmortem("replay", run, "--arms", "faithful"), after_progress=True)
    assert "cannot import the replay entry point replay:make_replay" in err and "the_users_missing_package" in err


def test_a_factory_that_raises(runs, tmp_path):
    run = broken(runs, tmp_path)
    source = (run / "replay.py").read_text()
    (run / "replay.py").write_text(source.replace("    args = train.settings(",
                                                  "    raise KeyError('dataset shard 3')\n    args = train.settings("))
    err = one_line_error(postmortem("replay", run, "--arms", "faithful"), after_progress=True)
    assert "the replay factory replay:make_replay failed: KeyError" in err and "dataset shard 3" in err


def test_a_checkpoint_of_another_model_names_the_first_tensor(runs, tmp_path):
    import torch

    from postmortem.minigpt.model import GPT, GPTConfig
    run = broken(runs, tmp_path)
    other = GPT(GPTConfig(tinydata.VOCAB, tinydata.BLOCK, n_layer=2, n_head=4, n_embd=32))
    torch.save({"model": other.state_dict()}, run / "checkpoints" / "step_000200.pt")
    err = one_line_error(postmortem("replay", run, "--arms", "faithful"), after_progress=True)
    assert "step_000200.pt: the checkpoint is of another model: wte.weight is (512, 32) there, (512, 48)" in err


def test_no_checkpoint_before_the_incident(runs, tmp_path):
    run = broken(runs, tmp_path)
    for step in (50, 100, 150, 200, 250):
        (run / "checkpoints" / f"step_{step:06d}.pt").unlink()
    err = one_line_error(postmortem("replay", run, "--arms", "faithful"), after_progress=True)
    assert "no checkpoint at or before step 249 (have: 300, 350, 400)" in err


def test_a_run_without_a_replay_entry_point(runs, tmp_path):
    run = broken(runs, tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["replay"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert "no replay entry point" in one_line_error(postmortem("replay", run), after_progress=True)


def test_another_data_order_is_refused(runs, tmp_path):
    """A changed seed gives other batches than those logged: the hashes say so."""
    run = broken(runs, tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["args"]["seed"] += 1
    (run / "manifest.json").write_text(json.dumps(manifest))
    err = one_line_error(postmortem("replay", run, "--arms", "faithful"), after_progress=True)
    assert "is not the one the run logged" in err and "--allow-data-drift" in err
