"""Benchmarks live outside tests/; the repository root is on sys.path via pyproject."""
