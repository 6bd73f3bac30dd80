"""How tests/data/stores/mmengine-work-dir/ was written: mmengine 0.10.7's own Runner (its
LocalVisBackend writes <timestamp>/vis_data/scalars.json and the identical <timestamp>.json),
twice into one work dir, the second at a learning rate that diverges. mmengine is not a
dependency of postmortem (it needs OpenCV), so it ran outside .venv's packages:

    pip install --target /tmp/mm --no-deps mmengine==0.10.7 addict yapf termcolor opencv-python-headless
    PYTHONPATH=/tmp/mm python make_mmengine_work_dir.py 0.05 work_dir
    PYTHONPATH=/tmp/mm python make_mmengine_work_dir.py 2.0 work_dir

The checkpoint (epoch_1.pth, last_checkpoint) was deleted; the rest is as mmengine wrote it."""

import sys

import torch
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch import nn


class Tiny(BaseModel):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x, y, mode="tensor"):
        out = self.lin(x)
        if mode == "loss":
            return {"loss": nn.functional.mse_loss(out, y)}
        return out


class Data(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(64, 4, generator=g), torch.randn(64, 1, generator=g)

    def __len__(self):
        return 64

    def __getitem__(self, i):
        return dict(x=self.x[i], y=self.y[i])


if __name__ == "__main__":
    lr = float(sys.argv[1])
    runner = Runner(model=Tiny(), work_dir=sys.argv[2],
                    train_dataloader=dict(dataset=Data(), sampler=dict(type="DefaultSampler", shuffle=False),
                                          batch_size=4, collate_fn=dict(type="default_collate")),
                    train_cfg=dict(by_epoch=False, max_iters=40, val_interval=1000),
                    optim_wrapper=dict(optimizer=dict(type="SGD", lr=lr)),
                    default_hooks=dict(logger=dict(type="LoggerHook", interval=1),
                                       checkpoint=dict(type="CheckpointHook", interval=1000)),
                    visualizer=dict(type="Visualizer", vis_backends=[dict(type="LocalVisBackend")]),
                    randomness=dict(seed=0))
    runner.train()
