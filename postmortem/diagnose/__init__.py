"""Diagnosis: checks of tree A and tree B, incidents, symptoms and ranked hypotheses."""
