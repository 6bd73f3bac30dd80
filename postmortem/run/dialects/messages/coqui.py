"""Coqui TTS's restarts: the trainer loads a checkpoint and says the step it was saved at.

Read from coqui-ai/Trainer v0.0.36 (7704b0f, 2023-12) trainer/trainer.py (`restore_model`):
`logger.info(" > Restoring from %s ...", os.path.basename(restore_path))` then
`logger.info(" > Model restored from step %i", checkpoint["step"])`, the steps going on from
`checkpoint["step"] + 1`; coqui-ai/TTS v0.0.x..v0.8 TTS/trainer.py and mozilla/TTS
TTS/bin/train_tts.py (`main`) print the same words (`print(" > Model restored from step %d" %
checkpoint['step'])`). The `amp_scaler` its step blocks print is the loss scale (run/aliases.py).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

_TRAINER = "coqui-ai/Trainer v0.0.36 (7704b0f) trainer/trainer.py (restore_model)"

register(
    entry("coqui.restored", "Coqui TTS", "resume",
          _TRAINER + "; coqui-ai/TTS v0.8.0 TTS/trainer.py; mozilla/TTS 2020 TTS/bin/train_tts.py (main)",
          'logger.info(" > Model restored from step %i", checkpoint["step"])  '
          '(mozilla/TTS: print(" > Model restored from step %d" % checkpoint[\'step\']))',
          r"\bModel restored from step (?P<step>\d+)",
          (" > Model restored from step %i" % 120000, " > Model restored from step %d" % 3400),
          ("Model restored from step",)),
    entry("coqui.restoring", "Coqui TTS", "checkpoint", _TRAINER,
          'logger.info(" > Restoring from %s ...", os.path.basename(restore_path))',
          r"\bRestoring from (?P<path>\S+) \.\.\.$",
          (" > Restoring from %s ..." % "checkpoint_120000.pth",),
          ("Restoring from",)),
)
