"""The replay factory that docs/architecture.md shows is code that works: a plain PyTorch loop
trains a run the way the example's factory rebuilds it, and `postmortem replay` with that
factory, copied from the docs as it stands, reproduces the logged losses: to 1e-6, not bit for
bit, because the loop's cross_entropy(reduction="mean") sums in another order than the mean of
the per-token losses the protocol takes."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from postmortem.minigpt.model import GPT, GPTConfig
from postmortem.run.record import Recorder, batch_hash

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import tinydata  # noqa: E402  (the examples' corpus: learnable bigrams, rare tokens kept out)

VOCAB, N, STEPS, SPIKE = tinydata.VOCAB, 1200, 90, 60


def docs_factory() -> str:
    """The first Python block of the docs' replay-protocol section."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("## The replay protocol"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def train_plainly(run: Path) -> None:
    """A user's own loop, written without the protocol: what the factory must rebuild."""
    cfg = {"lr_max": 3e-3, "weight_decay": 0.1, "warmup_steps": 20, "clip": 1.0,
           "schedule": "constant", "total_steps": STEPS}
    data = tinydata.sequences(N)
    order = torch.randperm(N, generator=torch.Generator().manual_seed(0))
    data[order[(SPIKE * 16) % N:][:16]] = tinydata.rare(16)      # one batch of rare tokens
    torch.save(data, run / "tokens.pt")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=VOCAB, n_embd=64))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr_max"], weight_decay=cfg["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / cfg["warmup_steps"]))
    (run / "checkpoints").mkdir()
    manifest = {"run_id": "docs-example", "seed": 0, "dtype": "fp32", "vocab_size": VOCAB, "config": cfg,
                "replay": {"entrypoint": "factory:make_replay", "checkpoints": "checkpoints/"}}
    with Recorder(run, manifest, layer_every=0) as rec:
        for step in range(STEPS):
            rows = order[(step * 16) % N:][:16]
            x, y = data[rows, :-1], data[rows, 1:]
            lr = opt.param_groups[0]["lr"]
            loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip"])
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            rec.log(step, loss=loss.item(), grad_norm=gn.item(), lr=lr, batch_hash=batch_hash(x))
            if (step + 1) % 20 == 0:
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                            "scheduler": sched.state_dict(), "rng": torch.get_rng_state()},
                           run / "checkpoints" / f"step_{step + 1}.pt")


@pytest.mark.slow
def test_the_docs_factory_replays_a_plain_loop_faithfully(tmp_path):
    torch.set_num_threads(1)
    run = tmp_path / "run"
    run.mkdir()
    train_plainly(run)
    (run / "factory.py").write_text(docs_factory())
    r = subprocess.run([sys.executable, "-m", "postmortem", "replay", str(run), "--arms", "faithful,swap-batch",
                        "--json"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["incident_step"] == SPIKE and result["checkpoint"] == 40
    assert result["faithful"] and result["faithful_max_diff"] < 1e-5
    assert result["hypotheses"][0]["pattern"] == "long-tail-token"
