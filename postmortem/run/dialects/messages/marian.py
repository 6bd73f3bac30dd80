"""Marian NMT's cost scaling (its dynamic loss scale), its skipped updates and its restarts.

Read from marian-nmt/marian-dev. Releases: 1.11.0 and 1.12.0 src/training/graph_group.cpp
(`GraphGroup::increaseCostScaleFactor`, `decreaseCostScaleFactor`) and
graph_group_sync.cpp (`SyncGraphGroup::update`): a gradient with a NaN/Inf is not applied,
`LOG(debug, "Seen NaN in gradient, skipping update, resetting gradient")`, then the factor
is divided by the multiplier, `LOG(debug, "Seen NaN/Inf after {} gradient updates. Reduced
cost-scaling factor to {}")` (the skip and the reduction are one update: the skip is counted,
the reduction is the scale); every `freq` clean updates it is multiplied, `"No NaN/Inf after
{} gradient updates. Increasing cost-scaling factor to {}"`. These are `debug` lines: a log
shows them with `--log-level debug`. Before the 1.11.0 cleanup (14042019, 2021-10) master
printed `"NaN/Inf percentage {:.2f} in {} gradient updates, reducing cost-scaling factor to
{}"` (ba91b391, 2021-01, the fp16 merge); the fp16 branch before it (2496bd21 2018-12,
c91243e6 2019-02) printed the skip and the reduction in one `warn` line: `"Seen NaN/Inf in
gradient, skipping update, reducing cost-scaling factor to {}"`, `"NaN/Inf percentage {:.2f}
in gradients, skipping update, reducing cost-scaling factor to {}"`. 1.9.0 and 1.10.0 (no
cost scaling yet) skip an update whose loss is not finite: `"[training] skipping {}-th update
due to loss being {}"` with `scheduler_->numberOfBatches()` (the updates done: the skipped one
is the next, N+1). Restarts: 1.9.0-1.10.0 `"[training] Model reloaded from {}"`
(graph_group_sync.cpp `load`), 1.11.0+ `"[training] Master parameters and optimizers restored
from training checkpoint {} and {}"` (graph_group.cpp `restoreFromCheckpoint`); master after
1.12.0 restarts a diverged run from its checkpoint (`--throw-on-divergence`). The reader
(run/textlogs.py `_marian`) reads `Training with cost scaling - factor: {}` (the first scale)
and `Training started` (every launch: a relaunch where updates were read before it).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

_DEV = "marian-nmt/marian-dev"
_GG = f"{_DEV} 1.11.0, 1.12.0 src/training/graph_group.cpp"
_PCT = r"NaN/Inf percentage [\d.]+"

register(
    entry("marian.cost_scaling.reduced", "Marian", "scale",
          f"{_GG} (decreaseCostScaleFactor); ba91b391 (2021-01, master until 14042019) the percentage wording",
          'LOG(debug, "Seen NaN/Inf after {} gradient updates. Reduced cost-scaling factor to {}", total, '
          'costScalingFactor_)  |  "NaN/Inf percentage {:.2f} in {} gradient updates, reducing cost-scaling '
          'factor to {}"',
          r"(?:Seen NaN/Inf after \d+ gradient updates\. Reduced|" + _PCT
          + r" in \d+ gradient updates, reducing) cost-scaling factor to " + scale("scale") + r"(?!\S)",
          ("[2022-02-08 10:01:02] Seen NaN/Inf after 17 gradient updates. Reduced cost-scaling factor to 128",
           "NaN/Inf percentage 0.20 in 10 gradient updates, reducing cost-scaling factor to 16384"),
          ("cost-scaling factor to",)),
    entry("marian.cost_scaling.minimum", "Marian", "scale",
          f"{_GG} (decreaseCostScaleFactor at the minimum: NaNs pruned from then on, no more skips)",
          'LOG(debug, "Seen NaN/Inf after {} gradient updates, Reduced cost-scaling factor to minimum {}. '
          'Pruning NaNs now.", total, costScalingFactor_)',
          r"Seen NaN/Inf after \d+ gradient updates, Reduced cost-scaling factor to minimum " + scale("scale")
          + r"\. Pruning NaNs",
          ("Seen NaN/Inf after 3 gradient updates, Reduced cost-scaling factor to minimum 1. Pruning NaNs now.",),
          ("to minimum",)),
    entry("marian.cost_scaling.at_minimum", "Marian", "scale",
          f"{_DEV} ba91b391 (2021-01, master until 14042019) src/training/graph_group.cpp "
          f"(decreaseCostScaleFactor, warn)",
          'LOG(warn, "NaN/Inf percentage {:.2f} in {} gradient updates, but cost-scaling factor {} is already '
          'at minimum", nanPercent, total, costScaleFactor_)',
          _PCT + r" in \d+ gradient updates, but cost-scaling factor " + scale("scale") + r" is already at minimum",
          ("NaN/Inf percentage 0.30 in 10 gradient updates, but cost-scaling factor 1 is already at minimum",),
          ("is already at minimum",)),
    entry("marian.cost_scaling.increase", "Marian", "scale",
          f"{_GG} (increaseCostScaleFactor); ba91b391; fp16 branch 2496bd21 (2018-12), c91243e6 (2019-02)",
          'LOG(debug, "No NaN/Inf after {} gradient updates. Increasing cost-scaling factor to {}", total, '
          'costScalingFactor_)  |  "NaN/Inf percentage {:.2f} after {} [gradient ]updates. Increasing '
          'cost-scaling factor to {}"  |  "No NaN/Inf seen for {} updates. Increasing cost-scaling factor to {}"',
          r"(?:No NaN/Inf (?:after \d+ gradient|seen for \d+)|" + _PCT + r" after \d+(?: gradient)?) updates\. "
          r"Increasing cost-scaling factor to " + scale("scale"),
          ("[2022-02-08 10:03:00] No NaN/Inf after 1000 gradient updates. Increasing cost-scaling factor to 512",
           "NaN/Inf percentage 0.00 after 2000 gradient updates. Increasing cost-scaling factor to 65536",
           "No NaN/Inf seen for 2000 updates. Increasing cost-scaling factor to 65536"),
          ("Increasing cost-scaling factor",)),
    entry("marian.cost_scaling.skip", "Marian", "overflow",
          f"{_DEV} fp16 branch 2496bd21 (2018-12-24) src/training/graph_group.h; c91243e6 (2019-02-07), "
          f"ca25a4bf src/training/graph_group.cpp (decreaseCostScaleFactor, warn)",
          'LOG(warn, "Seen NaN/Inf in gradient, skipping update, reducing cost-scaling factor to {}", '
          'costScaleFactor_)  |  "NaN/Inf percentage {:.2f} in gradients, skipping update, reducing '
          'cost-scaling factor to {}"',
          r"(?:Seen NaN/Inf in gradient|NaN/Inf percentage [\d.]+ in gradients), skipping update, reducing "
          r"cost-scaling factor to " + scale("scale"),
          ("Seen NaN/Inf in gradient, skipping update, reducing cost-scaling factor to 16384",
           "NaN/Inf percentage 0.05 in gradients, skipping update, reducing cost-scaling factor to 32768"),
          ("skipping update, reducing",)),
    entry("marian.skip_nan_gradient", "Marian", "skipped",
          f"{_DEV} 1.11.0, 1.12.0 src/training/graph_group_sync.cpp (SyncGraphGroup::update); ba91b391",
          'LOG(debug, "Seen NaN in gradient, skipping update, resetting gradient")',
          r"Seen NaN in gradient, skipping update, resetting gradient",
          ("[2022-02-08 10:01:02] Seen NaN in gradient, skipping update, resetting gradient",),
          ("Seen NaN in gradient, skipping",)),
    entry("marian.skip_nan_loss", "Marian", "skipped",
          f"{_DEV} 1.9.0, 1.10.0 src/training/graph_group_sync.cpp (SyncGraphGroup::update)",
          'LOG(info, "[training] skipping {}-th update due to loss being {}", '
          'scheduler_->numberOfBatches(), localLoss.loss)',
          r"\[training\] skipping (?P<done>\d+)-th update due to loss being (?P<cost>\S+)",
          ("[2020-06-01 10:00:00] [training] skipping 1234-th update due to loss being nan",
           "[training] skipping 77-th update due to loss being -nan"),
          ("-th update due to loss",)),
    entry("marian.reloaded", "Marian", "resume",
          f"{_DEV} 1.9.0, 1.10.0 src/training/graph_group_sync.cpp (SyncGraphGroup::load)",
          'LOG(info, "[training] Model reloaded from {}", name)',
          r"\[training\] Model reloaded from (?P<path>\S+)",
          ("[2020-06-01 10:00:00] [training] Model reloaded from model/model.npz",),
          ("Model reloaded from",)),
    entry("marian.restored", "Marian", "resume",
          f"{_GG} (GraphGroup::restoreFromCheckpoint)",
          'LOG(info, "[training] Master parameters and optimizers restored from training checkpoint {} and {}", '
          'modelFileName, checkpointName)',
          r"\[training\] Master parameters and optimizers restored from training checkpoint (?P<path>\S+) and",
          ("[2022-02-08 10:00:00] [training] Master parameters and optimizers restored from training "
           "checkpoint model/model.npz and model/model.npz.optimizer.npz",),
          ("optimizers restored from training checkpoint",)),
    entry("marian.divergence_fallback", "Marian", "resume",
          f"{_DEV} c9f287db (master after 1.12.0, 2025-06) src/training/training.h (--throw-on-divergence "
          f"with --fallback-to-checkpoint: the run restarts from its last checkpoint)",
          'LOG(warn, "Training diverged, but fallback is enabled. Attempting restart from the last checkpoint '
          'with these options: {}", YAML::Dump(fallback))',
          r"Training diverged, but fallback is enabled\. Attempting restart from the last checkpoint",
          ("[2025-06-23 10:00:00] Training diverged, but fallback is enabled. Attempting restart from the last "
           "checkpoint with these options: precision:",),      # YAML::Dump's block style: the rest below
          ("Attempting restart from the last checkpoint",)),
)
