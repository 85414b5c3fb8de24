"""Planning and the preflight: the run's settings, its plan, the models it instantiates and their identities, `--check` (cost, context, checkpoints) and `--prefetch`."""
