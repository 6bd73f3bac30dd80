"""Events: overflow, skipped step, loss scale, resume, checkpoint load; one module per framework."""
