"""Progress and eval lines, one module per framework (see postmortem.run.dialects)."""
