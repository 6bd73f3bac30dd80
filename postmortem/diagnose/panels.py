"""The panels in one table: DESIGN's panel ids, in the order they are listed, the run's
columns behind each, and how the charts of the run draw them. The catalog, the post-mortem's
check, the dashboard and the figure all read it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Panel:
    id: str                          # as hypotheses and evidence cite it
    columns: tuple[str, ...]         # the run's columns behind it; one ending in / is a family
    title: str = ""                  # a chart's title in the figure ("" : no chart of the run)
    log_scale: bool = False          # the dashboard's chart of the whole run
    figure_log_scale: bool = False   # the figure's chart of the steps around an incident


TABLE = (
    # the whole run's loss spans decades; around an incident a linear axis shows the rise as it is
    Panel("loss", ("loss",), "loss", log_scale=True, figure_log_scale=False),
    Panel("lr", ("lr",), "LR"),
    Panel("grad-norm", ("grad_norm",), "grad norm (pre-clip)", log_scale=True, figure_log_scale=True),
    Panel("loss-scale", ("loss_scale",), "loss scale", log_scale=True, figure_log_scale=True),
    Panel("activations", ("activations/",)),
    Panel("per-token-loss", ("per_token_loss", "unusual_tokens")),
    Panel("batch", ("batch_index", "batch_hash")),
    Panel("optimizer-moments", ("adam_m_norm/", "adam_v_norm/")),
    Panel("weight-norm", ("weight_norm/",)),
)
BY_ID = {panel.id: panel for panel in TABLE}
PANELS = tuple(panel.id for panel in TABLE)
CHARTS = tuple(panel for panel in TABLE if panel.title)     # a chart of one column of the run
