"""TensorFlowTTS's trainer (TensorSpeech/TensorFlowTTS tensorflow_tts/trainers/base_trainer.py).

`_write_to_tensorboard` logs each metric on a line of its own under the step:
`logging.info(f"(Step: {self.steps}) {key} = {value:.4f}.")` (`base_trainer.py:831` in the 2020
releases), keys `train_duration_loss`, `train_f0_loss`, `train_energy_loss`,
`train_mel_loss_before`, `train_mel_loss_after` (FastSpeech2), `train_stop_token_loss` and
`train_guided_attention_loss` (Tacotron2): no total. Each example's trainer steps on their sum
(examples/fastspeech2/train_fastspeech2.py `compute_per_example_losses`: `per_example_losses =
duration_loss + f0_loss + energy_loss + mel_loss_before + mel_loss_after`; Tacotron2's the same
over its four), so the loss is their sum and a NaN in any part is a NaN of it.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry
from postmortem.run.dialects.progress import LOSS_IS_SUM_OF_PARTS

LOSS_IS_SUM_OF_PARTS.add("tensorflowtts")

register(
    entry("tensorflowtts.step", "TensorFlowTTS", "progress",
          "TensorSpeech/TensorFlowTTS 2020 tensorflow_tts/trainers/base_trainer.py (_write_to_tensorboard)",
          'logging.info(f"(Step: {self.steps}) {key} = {value:.4f}.")',
          r"\(Step: \d+\) (?:train|eval)_\w+ = (?:[-+]?[\d.]+(?:e[-+]?\d+)?|nan|inf|-inf)\.\s*$",
          ("2020-09-10 11:52:14,447 (base_trainer:831) INFO: (Step: 95400) train_duration_loss = 0.0353.",
           "2020-09-10 11:52:14,449 (base_trainer:831) INFO: (Step: 95400) train_mel_loss_before = nan.",
           "(Step: 95400) eval_mel_loss_after = 0.4123."),
          ("(Step: ",)),
)
