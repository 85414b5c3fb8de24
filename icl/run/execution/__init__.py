"""Execution: the engine's batch loop, the model guard, evaluation on the device, the Ray pool and its watcher, compute accounting, stored responses."""
