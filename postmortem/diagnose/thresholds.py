"""Every threshold of the checklists in one place; a user can override any of them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict


class Thresholds(BaseModel):
    """Named after what they bound; the tree nodes cite them by name."""

    model_config = ConfigDict(extra="forbid")
    # tree A: did the run start right
    start_loss_vs_ln_v: float = 0.5          # |loss[0] - ln V| at most this
    trained_start_below: float = 0.4         # loss[0] 40% below ln V: starts from a trained model
    first_grad_norm_min: float = 0.1
    first_grad_norm_max: float = 10.0
    first_grad_norm_params: float = 1e7      # ... for a model of this size (x sqrt of the ratio above)
    first_grad_norm_params_max: float = 1e11 # the largest model: a size unknown is judged up to its bound
    warmup_reach: float = 0.05               # LR at end of warmup within 5% of lr_max
    clipping_share_max: float = 0.9          # clipped on more than 90% of steps: always clipping
    dead_grad_norm: float = 1e-6
    early_window: int = 200                  # loss must move over the first 200 steps
    # a log starts at the start of training when its first step is at most this (or one
    # logging interval: a log every 50 steps first writes at step 49 or 50)
    log_start_max: int = 10
    early_min_drop: float = 0.05             # ... by at least 5%
    val_gap_max: float = 0.5                 # val - train above 50% of train: overfitting or leak
    # the train level a val loss is compared to: the median of the last few train losses
    # logged in the steps just before it (the last one before it where none is that near)
    val_train_window: int = 100
    val_train_points: int = 5
    # tree B: dynamics
    spike_window: int = 100                  # steps before the point
    # a spike stands out of the larger of the window's std and the series' own step-to-step
    # noise (robust, of the differences) by this many; single-batch losses are heavy-tailed:
    # 3 fires every few hundred steps on a clean noisy run; 7 leaves the heavy tail of real
    # single-batch and RL losses (up to 6.6 on a clean PPO log) and keeps real spikes (7.6+)
    spike_sigma: float = 7.0
    spike_min_rise: float = 0.10             # and at least 10% above the window mean
    spike_big_rise: float = 0.30             # or 30% above it (a positive loss) ...
    spike_sigma_big_rise: float = 4.0        # ... and this many times the noise
    spike_min_points: int = 10               # a sparse log's window widens to hold these
    sparse_rise: float = 0.3                 # too few points for a std: 30% above their median
    spike_min_history: int = 3               # fewer points before a rise: it cannot be judged
    # a log shorter than a window: its noise is the whole log's, estimated from few points, so
    # widened to the 90% upper bound of a std from that many differences (a rise must stand
    # `spike_sigma_big_rise` of it out); 4 points at least, else it cannot be told from the noise
    spike_short_log: int = 100
    spike_short_quantile: float = 0.9
    # a long log's one-batch excursion under `spike_sigma` is its batch noise's tail where the
    # log's own points rise over their local median by half as much this many times elsewhere
    spike_tail_share: float = 0.5
    spike_tail_peers: int = 8
    # the bump as warmup ends: an LR that rose from under this share of its peak
    warmup_bump_start: float = 0.1
    recovery_window: int = 50
    recovery_points: int = 3                 # ... or this many logged points (a sparse log)
    recovery_sigma: float = 0.5
    merge_gap: int = 10                      # spike points this close are one incident
    grad_spike_sigma: float = 3.0            # robust z (median, MAD) of log10(grad norm)
    grad_spike_min_ratio: float = 5.0        # and at least 5x the recent median
    sparse_grad_ratio: float = 100.0         # a handful of rows: 100x their median
    cascade_halvings: int = 3                # 8x down (or 3 skips) ...
    cascade_gap: int = 10                    # ... each within 10 steps of the one before
    cascade_stable_before: int = 50          # after a stable scale (not the start-up calibration)
    scaler_initial_min: float = 2.0 ** 7     # the lowest default initial scale (fairseq's)
    cascade_loss_jump: float = 3.0           # 2 halvings close together while the loss x3: a cascade
    divergence_window: int = 200
    divergence_smooth: int = 50
    divergence_min_points: int = 20          # a sparse log's windows widen to hold these
    short_log_points: int = 8                # fewer losses than this: the rise cannot be judged
    # ... except a loss that at least doubles its lowest earlier value, above every earlier
    # one, with the validation loss doing the same at that row (two series agreeing)
    short_log_rise: float = 2.0
    divergence_rising_share: float = 0.6     # of the smoothed loss's steps going up (not all)
    divergence_min_rise: float = 0.1         # 10% of the level
    divergence_sigma: float = 5.0            # and this many of the smoothed loss's own noise
    weight_norm_change: float = 2.0
    resume_gap_factor: float = 20.0          # a wall-clock gap 20x the median step is a restart
    # hypotheses
    long_tail_grad_ratio: float = 30.0       # grad norm at the spike over its rolling mean
    lr_jump_ratio: float = 1.5               # LR step-to-step change that is not a schedule
    after_resume_steps: int = 20
    near_steps: int = 20                     # "around the incident": this many steps ...
    near_lines: float = 1.5                  # ... or this many logging intervals (a sparse log)
    cross_run_steps: int = 2                 # another run's spike this close is at the same step
    batch_repeat_window: int = 50            # the incident's batch hash seen again this many steps before
    batch_index_window: int = 100            # batch indexes repeated in this many steps up to it
    low_confidence_score: float = 0.5
    low_confidence_margin: float = 0.15
    low_confidence_support: float = 2.5      # one weak observation is not a diagnosis
    # weights of the patterns' rules (postmortem/diagnose/catalog.py), by what they weigh
    w_grad_ratio_big: float = 2.0            # grad norm long_tail_grad_ratio x its rolling mean
    w_grad_ratio: float = 1.0                # ... a third of that
    w_recovers: float = 1.5                  # a short loss spike back inside the recovery window
    w_not_finite_spike: float = 1.0
    w_unique_batch: float = 0.5
    w_cascade_against: float = 1.5          # a loss-scale cascade speaks against the data
    w_cross_run: float = 2.0                 # another run over the same data spikes there too
    w_dtype_rules_out: float = 5.0           # bf16 / fp32: no fp16 overflow
    w_dtype: float = 1.0
    w_cascade: float = 2.5
    w_no_cascade: float = 1.5
    w_skipped: float = 1.0
    w_finite_again: float = 1.0
    w_lr_jump: float = 3.0                   # an LR off its own trend
    w_lr_smooth: float = 1.5
    w_lr_schedule_off: float = 2.0
    w_lr_schedule_on: float = 1.0
    w_after_restart: float = 3.0
    w_no_restart: float = 2.0
    w_cross_run_reset: float = 1.0
    w_moments: float = 0.5
    w_all_finite: float = 2.0
    w_inf_first: float = 2.0
    w_never_finite: float = 1.0
    w_finite_later: float = 1.0
    w_no_scaler: float = 1.0
    w_repeated_batch: float = 3.0
    w_new_batch: float = 1.0
    w_repeated_index: float = 2.0
    w_cross_run_data: float = 1.0
    w_divergence: float = 1.0
    w_grad_regime: float = 1.0
    w_lr_smooth_spike: float = 0.5
    w_lr_rising: float = 3.0                 # B4.1 / A4.1: the LR climbs where it should decay
    w_schedule_check: float = 2.0
    w_lr_not_rising: float = 1.5
    w_weight_norm: float = 2.0
    w_late: float = 2.0
    w_start_loss: float = 3.0
    w_first_grad: float = 2.0
    w_dead_grad: float = 1.0                 # A5: a gradient dead on most steps, nothing learns
    w_weight_growth: float = 1.0

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Sequence[str] = ()) -> "Thresholds":
        data = json.loads(Path(path).read_text()) if path else {}
        for item in overrides:
            key, _, value = item.partition("=")
            data[key.strip()] = float(value)
        return cls.model_validate(data)
