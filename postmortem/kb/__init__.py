"""The knowledge base: post-mortems and lessons per learner, committed with git."""
