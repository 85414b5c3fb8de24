"""Run one of our kernels beside its peer in the same process and report the ratio.

Every comparison is also kept in :data:`RESULTS`; ``bench/conftest.py`` prints them in the
terminal summary, so ``pytest --benchmark-only bench/`` shows the ratios without ``-s``.
Ratios are always against a peer timed in the same run: a slower or busier machine slows
both, so an unchanged kernel keeps its ratio.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

RESULTS: list[str] = []


def time_call(fn: Callable[[], Any], rounds: int) -> float:
    """Median wall time of ``fn`` over ``rounds`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def report(line: str) -> None:
    """Print ``line`` (seen with ``-s``) and keep it for the terminal summary."""
    RESULTS.append(line)
    print("\n" + line)


def fast_run_seconds(benchmark: str, out: Any, ceiling_s: float = 30.0) -> float:
    """``python -m icl.run BENCHMARK --fast`` in this process (imports included), reported and
    held under ``ceiling_s``; returns its seconds."""
    from icl.run.__main__ import main

    t0 = time.perf_counter()
    assert main([benchmark, "--fast", "--out", str(out), "--no-progress"]) == 0
    seconds = time.perf_counter() - t0
    report(f"{benchmark} --fast: {seconds:.1f} s")
    assert seconds < ceiling_s, f"--fast took {seconds:.1f} s, ceiling {ceiling_s:.0f} s"
    return seconds


def compare(benchmark: Any, ours: Callable[[], Any], peer: Callable[[], Any], *, peer_name: str,
            items: int = 1, rounds: int = 5, peer_rounds: int | None = None, bytes_moved: int = 0,
            warmup_s: float = 0.0) -> float:
    """Benchmark ``ours`` with pytest-benchmark, time ``peer`` alike, print and record the ratio.

    ``items`` is the number of images (or pairs) one call processes; throughput is reported
    per item. ``bytes_moved`` (input read plus output written by one call), when given, adds
    our GB/s and its share of this machine's copy bandwidth, measured in the same process.
    ``warmup_s``: seconds of untimed calls first, for the steady state of a loop over images
    (a memory-bound kernel's first calls after other work ran up to 1.7x slower here).
    Returns peer_time / our_time (> 1 means we are faster).
    """
    until = time.perf_counter() + warmup_s
    while time.perf_counter() < until:
        ours()
    benchmark.pedantic(ours, rounds=rounds, iterations=1, warmup_rounds=1)
    ours_s = benchmark.stats.stats.median
    peer_s = time_call(peer, peer_rounds or rounds)
    ratio = peer_s / ours_s
    benchmark.extra_info.update(
        peer=peer_name,
        ours_median_s=ours_s,
        peer_median_s=peer_s,
        ratio_vs_peer=ratio,
        items_per_s=items / ours_s,
        peer_items_per_s=items / peer_s,
    )
    line = (f"[{benchmark.name}] ours {ours_s * 1e3:.2f} ms ({items / ours_s:.1f}/s), "
            f"{peer_name} {peer_s * 1e3:.2f} ms ({items / peer_s:.1f}/s), ratio {ratio:.1f}x")
    if bytes_moved:
        from bench._bandwidth import bandwidth_share, copy_bandwidth

        gbs, share = bandwidth_share(bytes_moved, ours_s)
        benchmark.extra_info.update(gb_per_s=gbs, copy_bandwidth_gb_per_s=copy_bandwidth() / 1e9,
                                    share_of_copy_bandwidth=share)
        line += f"; {gbs:.1f} GB/s = {100 * share:.0f}% of copy bandwidth ({copy_bandwidth() / 1e9:.1f} GB/s)"
    report(line)
    return ratio
