"""DeepSpeed's own words when `engine.load_checkpoint` restores a run (kept apart from
messages/deepspeed.py, its loss-scale messages).

Read from microsoft/DeepSpeed (mirrored here): v0.7.0 on (e669aaf, 2022-07) the checkpoint engine
logs each file it loads, `deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py`
(`TorchCheckpointEngine.load`: `logger.info(f"[Torch] Loading checkpoint from {path}...")`,
the same in v0.9.5, v0.14.0 and v0.16.4); v0.3.x `deepspeed/runtime/engine.py`
(`_load_checkpoint`: `logger.info(f'rank: {self.global_rank} loading checkpoint: {load_path}')`;
v0.4 to v0.6 log no such line). Every rank says it for every file it loads: before the
first step line it is the run's own start (a fine-tune from a checkpoint), after steps a
relaunch restored from the checkpoint.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("deepspeed.load_checkpoint", "DeepSpeed", "resume",
          "microsoft/DeepSpeed v0.7.0, v0.9.5, v0.14.0, v0.16.4 "
          "deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py (TorchCheckpointEngine.load); "
          "v0.3.16 deepspeed/runtime/engine.py (_load_checkpoint)",
          'logger.info(f"[Torch] Loading checkpoint from {path}...")  |  '
          "logger.info(f'rank: {self.global_rank} loading checkpoint: {load_path}')",
          r"\[Torch\] Loading checkpoint from (?P<path>\S+?)\.\.\.|rank: \d+ loading checkpoint: (?P<path3>\S+)",
          ("[2024-03-01 10:00:00,000] [INFO] [torch_checkpoint_engine.py:27:load] [Torch] Loading checkpoint "
           "from /ckpt/global_step300/mp_rank_00_model_states.pt...",
           "[2021-05-01 10:00:00,000] [INFO] [engine.py:1480:_load_checkpoint] rank: 0 loading checkpoint: "
           "/ckpt/global_step300/mp_rank_00_model_states.pt"),
          ("[Torch] Loading checkpoint", "loading checkpoint: ")),
)
