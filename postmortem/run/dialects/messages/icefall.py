"""icefall's loss-scale warnings: its recipes check GradScaler's scale every 100 batches.

Read from k2-fsa/icefall egs/librispeech/ASR/pruned_transducer_stateless7/train.py,
zipformer/train.py (and the recipes copied from them), `train_one_epoch`: below 0.01,
`logging.warning(f"Grad scale is small: {cur_grad_scale}")`; below 1e-5 the run stops,
`raise RuntimeError(f"grad_scale is too small, exiting: {cur_grad_scale}")` (later recipes:
icefall/err.py `raise_grad_scale_is_too_small_error`, the same words). The scale is
`scaler._scale.item()`, a float printed by `str`. Its batch lines print it too
(`grad_scale: 32.0`: the `grad_scale` column).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

_ICEFALL = ("k2-fsa/icefall at 5c142d4 (no tagged releases; the recipes since 2022 say the same words) "
            "egs/librispeech/ASR/pruned_transducer_stateless7/train.py, zipformer/train.py "
            "(train_one_epoch)")

register(
    entry("icefall.small", "icefall", "scale",
          _ICEFALL,
          'logging.warning(f"Grad scale is small: {cur_grad_scale}")',
          r"Grad scale is small: " + scale("scale"),
          (f"Grad scale is small: {0.0078125}", f"Grad scale is small: {2.0 ** -10}"),
          ("Grad scale is small",)),
    entry("icefall.too_small", "icefall", "skipped",
          _ICEFALL + "; icefall/err.py (raise_grad_scale_is_too_small_error): the run stops",
          'raise RuntimeError(f"grad_scale is too small, exiting: {cur_grad_scale}")',
          r"grad_scale is too small, exiting: " + scale("scale"),
          (f"RuntimeError: grad_scale is too small, exiting: {2.0 ** -17}",
           f"grad_scale is too small, exiting: {7.62939453125e-06}"),
          ("grad_scale is too small",)),
)
