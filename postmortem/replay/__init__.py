"""Replay: re-run the steps around an incident from a checkpoint, faithfully and in
counterfactual arms, with probes, to gather the evidence that tells the causes apart."""
