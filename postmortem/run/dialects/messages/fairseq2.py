"""fairseq2's loss-scaler and resume messages (its own words, not fairseq's).

Read from facebookresearch/fairseq2 at v0.2.0 (src/fairseq2/optim/dynamic_loss_scaler.py,
`%s` formatting, no step), v0.3.0 / v0.4.0 (optim/[_]dynamic_loss_scaler.py `update_scale`,
`{:g}` and `at step {}`), v0.5.2 / v0.6.0 (src/fairseq2/recipe/trainer.py) and v0.8.1 /
027bdeb (2026-04, src/fairseq2/trainer.py `_inspect_fp16_scale_result`, `_maybe_restore_state`).
`{:g}` prints six significant digits (`1.04858e+06`): read as printed.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

_F2 = "facebookresearch/fairseq2"
_AT = r"(?: at step (?P<step>\d+))?"

register(
    entry("fairseq2.overflow", "fairseq2", "overflow",
          f"{_F2} v0.2.0 optim/dynamic_loss_scaler.py; v0.3.0, v0.4.0 optim/[_]dynamic_loss_scaler.py "
          f"(update_scale); v0.5.2, v0.6.0 recipe/trainer.py; v0.8.1, 027bdeb trainer.py "
          f"(_inspect_fp16_scale_result)",
          'log.info("Overflow detected at step {}, ignoring gradient, decreasing loss scale from {:g} to '
          '{:g}.", step_nr, old_scale, new_scale)  (v0.2: "Overflow detected, ignoring gradient, '
          'decreasing loss scale from %s to %s."; v0.2-v0.4 at the floor: "... to {:g} (minimum). Your '
          'loss is probably exploding. ...")',
          r"Overflow detected" + _AT + r", ignoring gradient, decreasing loss scale from "
          + scale("prev_scale") + " to " + scale("scale"),
          ("Overflow detected at step 120, ignoring gradient, decreasing loss scale from 128 to 64.",
           "Overflow detected at step 7, ignoring gradient, decreasing loss scale from 0.0002 to 0.0001 "
           "(minimum). Your loss is probably exploding. Try lowering the learning rate, using gradient "
           "clipping, or increasing the batch size.",
           "Overflow detected, ignoring gradient, decreasing loss scale from 2.0 to 1.0."),
          ("Overflow detected",)),
    entry("fairseq2.minimum", "fairseq2", "skipped",
          f"{_F2} v0.2.0..027bdeb (the same modules; MinimumLossScaleReachedError follows: the run stops)",
          'log.error("Overflow detected at step {}, ignoring gradient, loss scale is already at minimum '
          '({:g}). Your loss is probably exploding. ...", step_nr, min_scale)',
          r"Overflow detected" + _AT + r", ignoring gradient, loss scale is already at minimum \("
          + scale("scale") + r"\)",
          ("Overflow detected at step 300, ignoring gradient, loss scale is already at minimum (0.0001). "
           "Your loss is probably exploding. Try lowering the learning rate, using gradient clipping, or "
           "increasing the batch size.",),
          ("Overflow detected",)),
    entry("fairseq2.increase", "fairseq2", "scale",
          f"{_F2} v0.2.0..027bdeb (the same modules)",
          'log.info("No gradient overflow detected in the last {} step(s) after step {}, increasing loss '
          'scale from {:g} to {:g}.", scale_window, step_nr, old_scale, new_scale)  (v0.2: no "after step")',
          r"No gradient overflow detected in the last \d+ step\(s\)(?: after step (?P<step>\d+))?, "
          r"increasing loss scale from " + scale("prev_scale") + " to " + scale("scale"),
          ("No gradient overflow detected in the last 2000 step(s) after step 4000, increasing loss scale "
           "from 64 to 128.",
           "No gradient overflow detected in the last 2000 step(s), increasing loss scale from 1.04858e+06 "
           "to 2.09715e+06."),
          ("increasing loss scale",)),
    entry("fairseq2.restoring", "fairseq2", "checkpoint",
          f"{_F2} v0.5.2, v0.6.0 recipe/trainer.py; v0.8.1, 027bdeb trainer.py (_maybe_restore_state)",
          'log.info("Restoring training from the last checkpoint at step {}.", step_nr)',
          r"Restoring training from the last checkpoint at step (?P<step>\d+)",
          ("Restoring training from the last checkpoint at step 5000.",),
          ("Restoring training from",)),
    entry("fairseq2.resumed", "fairseq2", "resume",
          f"{_F2} v0.5.2, v0.6.0 recipe/trainer.py; v0.8.1, 027bdeb trainer.py (_maybe_restore_state)",
          'log.info("Training restored. Resuming from step {}.", step_nr)',
          r"Training restored\. Resuming from step (?P<step>\d+)",
          ("Training restored. Resuming from step 5000.",),
          ("Training restored",)),
)

register(
    entry("fairseq2.validation", "fairseq2", "eval_boundary",
          f"{_F2} v0.4.0 recipes/trainer.py; v0.6.0 recipe/trainer.py; 027bdeb trainer.py (_validate)",
          'log.info("Starting validation after step {}.", self._step_nr)  |  '
          'log.info("Starting pre-validation before training.")',
          r"Starting (?:validation after step (?P<step>\d+)|pre-validation before training)",
          ("Starting validation after step 1000.", "Starting pre-validation before training."),
          ("Starting validation after step", "Starting pre-validation")),
)
