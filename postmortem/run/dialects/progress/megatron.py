"""Megatron-LM's progress and validation lines (Megatron-DeepSpeed prints the same words,
with `consumed tokens:` added; NeMo's Megatron path logs through Lightning instead).

Read from NVIDIA/Megatron-LM megatron/training.py `training_log` and `evaluate_and_print_results`
(v2.x; in megatron/training/training.py from core_r0.6 on), and microsoft/Megatron-DeepSpeed
megatron/training.py (`==> iteration`, `consumed tokens:`). Each field is `' {key}: {value} |'`;
the loss keys are the model's own (`lm loss`, `loss`), averaged over non-NaN iterations: a NaN
iteration is counted in `number of nan iterations`, not printed as the loss.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

_FMT = ("' iteration {:8d}/{:8d} |' ' consumed samples: {:12d} |' ' elapsed time per iteration (ms): {:.1f} |' "
        "' learning rate: {:.3E} |' ' global batch size: {:5d} |' ' {key}: {:.6E} |' ' loss scale: {:.1f} |' "
        "' grad norm: {:.3f} |' ' number of skipped iterations: {:3d} |' ' number of nan iterations: {:3d} |'")


def _line(it, lr, loss, scale, norm):
    return (" iteration {:8d}/{:8d} |".format(it, 500000) + " consumed samples: {:12d} |".format(it * 512)
            + " elapsed time per iteration (ms): {:.1f} |".format(812.4) + " learning rate: {:.3E} |".format(lr)
            + " global batch size: {:5d} |".format(512) + " {}: {:.6E} |".format("lm loss", loss)
            + " loss scale: {:.1f} |".format(scale) + " grad norm: {:.3f} |".format(norm)
            + " number of skipped iterations: {:3d} |".format(0) + " number of nan iterations: {:3d} |".format(0))


register(
    entry("megatron.iteration", "Megatron-LM", "progress",
          "NVIDIA/Megatron-LM v2.5 megatron/training.py; core_r0.6 megatron/training/training.py "
          "(training_log); microsoft/Megatron-DeepSpeed megatron/training.py",
          _FMT,
          r"\biteration\s+(?P<step>\d+)\s*/\s*\d+\s*\|(?P<fields>.*)$",
          (_line(10, 1.5e-4, 10.69, 65536.0, 12.5), _line(20, 3.0e-4, 9.873, 32768.0, 4.031),
           "==> iteration       30/  500000 | consumed samples:        15360 | consumed tokens:     31457280 |"
           " elapsed time per iteration (ms): 800.1 | learning rate: 4.500E-04 | global batch size:   512 |"
           " lm loss: 8.876543E+00 | loss scale: 32768.0 | number of skipped iterations:   0 |"
           " number of nan iterations:   0 |"),
          ("iteration",)),
    entry("megatron.validation", "Megatron-LM", "eval",
          "NVIDIA/Megatron-LM v2.5 megatron/training.py (evaluate_and_print_results)",
          "' validation loss at {} | '.format('iteration {}'.format(iteration)) + '{} value: {:.6E} | '"
          " + '{} PPL: {:.6E} | '",
          r"\b(?:validation|valid) loss at iteration\s+(?P<step>\d+)\s*(?:on [^|]*)?\|(?P<fields>.*)$",
          (" validation loss at {} | ".format("iteration {}".format(1000))
           + "{} value: {:.6E} | ".format("lm loss", 2.31)
           + "{} PPL: {:.6E} | ".format("lm loss", 10.07),),
          ("loss at iteration",)),
)
