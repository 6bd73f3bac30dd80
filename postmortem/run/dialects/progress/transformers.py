"""HF Trainer's console dicts, as transformers, TRL, axolotl, LLaMA-Factory and unsloth print them.

transformers/trainer_callback.py `ProgressCallback.on_log`: `self.training_bar.write(str(logs))`
(v4.x; `{'loss': 2.3, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}`, an eval dict
`{'eval_loss': ...}`, the summary `{'train_runtime': ...}`). TRL's trainers log through it
(`rewards/chosen`, `logps/rejected`, `kl`, `reward`); axolotl and LLaMA-Factory print the same
dicts behind their logger prefix (`[INFO|trainer.py:...]`, `[INFO] [axolotl.train...]`);
unsloth's notebooks show the Trainer's table (`Step  Training Loss`), read by the general reader.
accelerate has no progress line of its own. ms-swift's dicts (modelscope/ms-swift 2.x/3.x
swift/trainers/callback.py `add_train_message`) carry their own step, `'global_step/max_steps':
'601/2161'` beside `'percentage': '27.81%'` and the times: its numerator is the dict's step.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

_KEYS = r"(?:loss|eval_loss|train_runtime|grad_norm|learning_rate)"

register(
    entry("hf-console.logs", "HF Trainer", "progress",
          "huggingface/transformers v4.40 src/transformers/trainer_callback.py (ProgressCallback.on_log); "
          "huggingface/trl trainer/*_trainer.py (log); axolotl-ai-cloud/axolotl; hiyouga/LLaMA-Factory; "
          "modelscope/ms-swift 2.x/3.x swift/trainers/callback.py (add_train_message)",
          "self.training_bar.write(str(logs))",
          # no nested braces in a logs dict: the match never runs past the dict's own end
          r"\{'" + _KEYS + r"'[^{}]*\}",
          (str({"loss": 2.3456, "grad_norm": 1.234, "learning_rate": 4.9e-05, "epoch": 0.12}),
           " 12%|█▏        | 120/1000 [01:02<07:40,  1.91it/s]" + str({"loss": 2.1, "learning_rate": 4.8e-05,
                                                                      "epoch": 0.13}),
           str({"eval_loss": 2.01, "eval_runtime": 12.3, "eval_samples_per_second": 81.2, "epoch": 0.5}),
           "[INFO|trainer.py:2345] 2024-05-01 10:00:00,000 >> " + str({"loss": 1.9, "learning_rate": 4.7e-05,
                                                                        "epoch": 0.2}),
           str({"loss": 0.66, "grad_norm": 0.23, "learning_rate": 4.3e-05, "epoch": 0.27,
                "global_step/max_steps": "601/2161", "percentage": "27.81%", "elapsed_time": "8h 8m 1s",
                "remaining_time": "21h 6m 44s", "memory(GiB)": 87.61, "train_speed(iter/s)": 0.0205})),
          ("{'",)),
)
