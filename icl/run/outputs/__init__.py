"""Outputs of a run folder: the common files, samples.jsonl, the folder's lock, provenance."""
