"""Tree B's detectors, one to a module: loss spikes, grad-norm spikes, loss-scale cascades,
divergence and resumes, with the Event they find (event.py) and what they share (windows.py:
histories, groups of flagged points, noise blocks, rolling windows). Each vectorised detector
has a plain `*_reference` beside it, a loop over the rows that a property test holds it equal
to (tests/diagnose/test_detectors_reference.py)."""
