"""The mini-GPT lab: real training on CPU, what a healthy run looks like (tree A), each
injected failure's signature in the committed sample runs, exact replays from checkpoints."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import recorded_here

from postmortem.minigpt.config import TrainConfig
from postmortem.minigpt.replay import make_replay
from postmortem.minigpt.samples import SAMPLES
from postmortem.minigpt.train import Trainer, train
from postmortem.run import read_run

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_RUNS = ROOT / "sample_runs"


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    cfg = TrainConfig(run_id="short", steps=60, warmup_steps=20, layer_every=10, eval_every=20)
    torch.set_num_threads(1)
    return cfg, read_run(train(cfg, tmp_path_factory.mktemp("run") / "short"))


def test_healthy_start_as_tree_a_expects(short_run):
    cfg, log = short_run
    f = log.frame
    assert abs(f.loss.iloc[0] - math.log(cfg.vocab_size)) < 0.5          # loss at step 0 ~ ln V
    assert 0.1 <= f.grad_norm.iloc[0] <= 10                               # first grad norm
    lr_end_warmup = f.loc[f.step == cfg.warmup_steps - 1, "lr"].item()
    assert lr_end_warmup == pytest.approx(cfg.lr_max, rel=0.05)           # warmup reaches lr_max
    assert f.loss.iloc[-10:].mean() < f.loss.iloc[0] - 1.0                 # it learns
    assert log.manifest.config.lr_max == cfg.lr_max and log.manifest.replay.entrypoint


def test_adam_moments_accumulate(short_run):
    _, log = short_run
    f = log.frame
    m = f["adam_m_norm/blocks.0.mlp.fc"].dropna()
    v = f["adam_v_norm/blocks.0.mlp.fc"].dropna()
    assert len(m) >= 4 and (m > 0).all() and (v > 0).all()
    assert f["grad_norm/blocks.0.mlp.fc"].notna().sum() >= 5
    assert f["weight_norm/wte"].notna().sum() >= 5


def test_weight_decay_groups_split_2d_from_1d():
    t = Trainer(TrainConfig(steps=1), torch.device("cpu"))
    decay, no_decay = t.optimizer.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() == 2 for p in decay["params"]) and all(p.dim() == 1 for p in no_decay["params"])
    assert t.model.head.weight is t.model.wte.weight                     # tied embeddings


def test_bf16_autocast_trains():
    t = Trainer(TrainConfig(steps=20, dtype="bf16"), torch.device("cpu"))
    rows = []
    for step in range(20):
        row = t.train_step(step)
        t.finish_step(row)
        rows.append(row["loss"])
    assert all(np.isfinite(rows)) and rows[-1] < rows[0]


def spike_z(f, step, window=100):
    """How far the loss at `step` is above mean + 3 std of the previous `window` logged steps."""
    prev = f[(f.step < step) & (f.step >= step - window)].loss.dropna()
    return (f.loc[f.step == step, "loss"].max() - prev.mean()) / prev.std()


def sample(name):
    path = SAMPLE_RUNS / name
    assert (path / "metrics.jsonl").exists(), "run `postmortem sample make`"
    return read_run(path)


def test_every_sample_has_readme_with_pattern_and_replay_checkpoints():
    for name, (cfg, _) in SAMPLES.items():
        d = SAMPLE_RUNS / name
        assert f"Pattern id: `{cfg.injection.kind}`" in (d / "README.md").read_text()
        assert list((d / "checkpoints").glob("step_*.pt")), name
        manifest = json.loads((d / "manifest.json").read_text())
        assert manifest["replay"]["entrypoint"] == "postmortem.minigpt.replay:make_replay"
        assert cfg.injection.kind not in json.dumps(manifest["config"])   # no answer in the config


def test_healthy_sample_has_no_spike():
    f = sample("healthy").frame
    assert max(spike_z(f, s) for s in range(150, 400)) < 3


def test_long_tail_token_spike():
    f = sample("long-tail-token").frame
    assert spike_z(f, 250) > 3
    assert f.loc[f.step == 250, "loss"].item() > 3 * f.loc[f.step == 249, "loss"].item()
    assert f.loc[f.step == 260, "loss"].item() < 1.5                     # it recovers


def test_fp16_overflow_collapses_the_loss_scale():
    f = sample("fp16-overflow").frame
    w = f[(f.step >= 250) & (f.step < 262)]
    assert (w.skipped == 1).all() and w.loss.isna().all()
    scales = f[(f.step >= 249) & (f.step <= 262)].loss_scale.to_numpy()
    assert scales[0] / scales[-1] >= 2 ** 10                               # halved step after step
    assert np.isfinite(f.loc[f.step == 270, "loss"].item())


def test_lr_discontinuity():
    f = sample("lr-discontinuity").frame
    lr = f.set_index("step").lr
    assert lr[250] / lr[249] == pytest.approx(25, rel=0.02)
    assert max(spike_z(f, s) for s in range(250, 256)) > 3


def test_optimizer_reset_on_resume():
    log = sample("optimizer-reset")
    segs = log.segments()
    assert [(s["first_step"], s["last_step"]) for s in segs] == [(0, 249), (200, 399)]
    f = log.frame
    before = f[(f.segment == 0) & (f.step < 200) & (f.step >= 100)].loss
    after = f[(f.segment == 1) & (f.step <= 205)].loss
    assert after.max() > before.mean() + 3 * before.std()
    first_time = f[(f.segment == 0) & (f.step >= 200) & (f.step <= 205)].loss
    assert after.max() > first_time.max() + 0.5          # the same steps, the first time round


def test_numerics_log_zero():
    log = sample("numerics")
    f = log.frame
    assert np.isinf(f.loc[f.step == 250, "loss"].item())
    assert log.nan_mask("loss")[f.step.to_numpy() > 250].all()
    assert f[f.step < 250].loss.notna().all()


def test_bad_init():
    f = sample("bad-init").frame
    assert f.loss.iloc[0] > math.log(512) + 5 and f.grad_norm.iloc[0] > 10


def test_inverted_cosine_diverges_slowly():
    f = sample("schedule-misconfigured").frame
    lr = f.lr.to_numpy()
    assert (np.diff(lr[40:]) >= 0).all() and lr[-1] > 50 * lr[40]
    smooth = f.loss.rolling(25).mean().to_numpy()
    assert smooth[-1] > smooth[150] + 1.0


def test_duplicated_batch():
    f = sample("bad-data").frame
    dup = f[(f.step >= 200) & (f.step < 240)]
    assert dup.batch_hash.nunique() == 1 and (dup.batch_index == 200).all()
    assert f[(f.step < 200) | (f.step >= 240)].batch_hash.nunique() == 400 - 40


def test_checkpoint_replay_reproduces_the_logged_losses_exactly(made_here):
    torch.set_num_threads(1)
    d = made_here("long-tail-token")       # bit for bit holds on the machine that recorded it
    log = read_run(d)
    replay = make_replay(log.manifest, d)
    replay.load(d / "checkpoints" / "step_000200.pt")
    logged = log.frame.set_index("step").loss
    for step in range(200, 260):
        assert replay.train_step(step)["loss"] == logged[step], step   # bit for bit on CPU
    assert logged[250] > 4


def test_sample_make_is_deterministic(tmp_path, made_here):
    from postmortem.cli import main
    assert main(["sample", "make", "long-tail-token", "--out", str(tmp_path), "--jobs", "1"]) == 0
    again = made_here("long-tail-token")
    made = tmp_path / "long-tail-token"
    assert (made / "metrics.jsonl").read_bytes() == (again / "metrics.jsonl").read_bytes()
    committed = SAMPLE_RUNS / "long-tail-token"
    assert sorted(p.name for p in (made / "checkpoints").iterdir()) == \
        sorted(p.name for p in (committed / "checkpoints").iterdir())
    if recorded_here(committed):      # the committed sample is what this code makes
        assert (made / "metrics.jsonl").read_bytes() == \
            (committed / "metrics.jsonl").read_bytes()
    else:                             # made elsewhere: the same run to within rounding
        ours = read_run(made).frame.loss.to_numpy()
        theirs = read_run(committed).frame.loss.to_numpy()
        assert np.allclose(ours, theirs, rtol=1e-3, atol=1e-3), np.abs(ours - theirs).max()


def test_recorder_in_a_users_own_loop(tmp_path):
    from postmortem.run.record import Recorder, batch_hash
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(0)
    with Recorder(tmp_path, {"run_id": "mine", "seed": 0, "dtype": "fp32"}, layer_every=5) as rec:
        for step in range(20):
            x = torch.randn(32, 8, generator=gen)
            loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if rec.wants_layers(step):
                rec.layers(step, model, opt)
            opt.step()
            opt.zero_grad()
            rec.log(step, loss=loss.item(), grad_norm=gn.item(), lr=1e-2, batch_hash=batch_hash(x),
                    val_loss=float("nan") if step == 7 else None)
    log = read_run(tmp_path)
    assert log.run_id == "mine" and len(log.frame) == 20
    assert log.frame["grad_norm/0"].notna().sum() == 4 and log.frame["adam_v_norm/2"].notna().sum() == 3
    assert log.nan_mask("val_loss").sum() == 1 and log.frame.batch_hash.nunique() == 20
    # what a bit-for-bit replay will be judged against: this torch build and its CPU kernels
    assert log.manifest.versions["torch"] == torch.__version__
    assert log.manifest.versions["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
