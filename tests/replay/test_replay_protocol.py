"""The replay protocol from a user's side: a factory of their own, beside the run, and what
happens when it or their code misbehaves (one line and exit code 2, stdout kept for --json)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import one_line_error

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_runs" / "long-tail-token"

# The sample's own factory, wrapped: each test changes one thing about it.
FACTORY = """
import sys
from postmortem.minigpt.replay import make_replay as sample_factory
from postmortem.replay import Replayable

def make_replay(manifest, run_dir, device):
    r = sample_factory(manifest, run_dir, device)
{body}
    return r
"""


def run_with(tmp_path, body: str = "", module: str | None = None) -> Path:
    """A copy of the sample run whose manifest names `myfactory:make_replay` beside it."""
    run = tmp_path / "run"
    shutil.copytree(SAMPLE, run)
    (run / "myfactory.py").write_text(module if module is not None else FACTORY.format(body=body or "    pass"))
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["replay"]["entrypoint"] = "myfactory:make_replay"
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def replay(run: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "postmortem", "replay", str(run), "--arms", "faithful", *extra],
                          capture_output=True, text=True, timeout=600)


def test_a_factory_that_cannot_be_imported(tmp_path):
    err = one_line_error(replay(run_with(tmp_path, module="import not_a_module_anywhere\n")), after_progress=True)
    assert "cannot import the replay entry point myfactory:make_replay" in err and "not_a_module_anywhere" in err


def test_a_factory_that_raises(tmp_path):
    err = one_line_error(replay(run_with(tmp_path, "    raise ValueError('no GPU named cuda:7')")), after_progress=True)
    assert "the replay factory myfactory:make_replay failed: ValueError: no GPU named cuda:7" in err


def test_a_factory_that_returns_something_else(tmp_path):
    err = one_line_error(replay(run_with(tmp_path, "    r = {'model': r.model}")), after_progress=True)
    assert "returned dict, not a postmortem.replay.Replayable" in err


def test_a_checkpoint_of_another_model_shape_names_the_first_tensor(tmp_path):
    module = FACTORY.format(body="    pass").replace(
        "r = sample_factory(manifest, run_dir, device)",
        "import json, pathlib\n"
        "    cfg = json.loads((pathlib.Path(run_dir) / 'minigpt.json').read_text())\n"
        "    cfg['n_embd'] = 64\n"
        "    (pathlib.Path(run_dir) / 'wider.json').write_text(json.dumps(cfg))\n"
        "    manifest.replay.config = 'wider.json'\n"
        "    r = sample_factory(manifest, run_dir, device)")
    err = one_line_error(replay(run_with(tmp_path, module=module)), after_progress=True)
    assert "the checkpoint is of another model: wte.weight is" in err, err
    assert "(512, 48) there, (512, 64) in the model" in err


def test_sys_exit_in_the_runs_code_is_an_error_not_a_silent_success(tmp_path):
    body = ("    loss = r.loss\n"
            "    def exiting(step, batch):\n"
            "        if step == 201:\n"
            "            sys.exit(3)\n"
            "        return loss(step, batch)\n"
            "    r.loss = exiting")
    err = one_line_error(replay(run_with(tmp_path, body)), after_progress=True)
    assert "the run's code called sys.exit(3)" in err


@pytest.mark.slow
def test_what_the_runs_code_prints_does_not_corrupt_json(tmp_path):
    body = ("    loss = r.loss\n"
            "    def chatty(step, batch):\n"
            "        print('step', step, 'loss computing...')\n"
            "        return loss(step, batch)\n"
            "    r.loss = chatty")
    r = replay(run_with(tmp_path, body), "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)              # stdout is the JSON document and nothing else
    assert result["faithful"] and "loss computing..." in r.stderr


@pytest.mark.slow
def test_batches_that_are_not_the_logged_ones_are_refused_unless_allowed(tmp_path):
    body = ("    batch_at = r.batch_at\n"
            "    r.batch_at = lambda step: batch_at(step + 1)     # the data order moved by one")
    run = run_with(tmp_path, body)
    err = one_line_error(replay(run), after_progress=True)
    assert "the batch the replay factory gives for step 200 is not the one the run logged" in err
    assert "--allow-data-drift" in err
    r = replay(run, "--allow-data-drift", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert any("replayed anyway (--allow-data-drift)" in e["observation"] for e in result["evidence"])
    assert not result["faithful"]          # another run's batches: the logged losses are not reproduced


def test_a_step_with_no_checkpoint_before_it(tmp_path):
    run = run_with(tmp_path)
    for ckpt in (run / "checkpoints").iterdir():
        ckpt.rename(ckpt.with_name("step_000900.pt"))
    err = one_line_error(replay(run), after_progress=True)
    assert "no checkpoint at or before step" in err and "have: 900" in err


def test_the_panel_sends_a_run_trained_on_several_processes_to_the_command_line(tmp_path):
    from postmortem.replay.worker import what_is_missing
    from postmortem.run import read_run
    run = run_with(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["config"]["world_size"] = 2
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert what_is_missing(read_run(run)) == (f"the run was trained on 2 processes: replay it from the command "
                                              f"line with `postmortem replay {run} --nproc 2`")
