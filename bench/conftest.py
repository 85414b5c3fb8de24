"""Benchmarks live outside tests/; the repository root is on sys.path via pyproject."""

from __future__ import annotations

from typing import Any

from bench._peer import RESULTS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The ratio of every kernel to its peer, measured in this run (no ``-s`` needed)."""
    if RESULTS:
        terminalreporter.section("icl kernels beside their peers (same process)")
        for line in RESULTS:
            terminalreporter.write_line(line)
