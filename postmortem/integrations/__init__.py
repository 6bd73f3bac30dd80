"""Recorders and replays for the training frameworks people use: `integrations.hf` (the
Hugging Face Trainer) and `integrations.lightning` (Lightning). Each module imports its
framework when it is imported; this package imports nothing."""
