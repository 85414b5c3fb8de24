"""Bootstrap confidence intervals (icl.report.stats) beside scipy.stats.bootstrap (percentile
method) in the same process, on 10^5 scores.

- Accuracy-like scores (0/1, as VL-ICL and CoBSAT report) and judge-like scores (integers 1-10,
  VIF-Bench): 10^4 resamples. Resampling 10^5 units uniformly is drawn exactly as multinomial
  counts over the few distinct values, so ours costs resamples x distinct values. The peer runs
  500 resamples (10^4 would hold a 10^9 matrix or run for minutes here); its time is scaled by 20
  to 10^4 resamples (its cost is linear in the resamples) and the line says so.
- Continuous scores (10^5 distinct values, e.g. PSNR): 10^4 resamples draw 10^9 indices from the
  counter-based stream of icl.ops.bootstrap (native kernel); beside it the stream's numpy
  reference (the same bits) and scipy, both at 500 resamples scaled by 20 (stated in the line).

Floor: every 10^5 x 10^4 case in under a second of CPU time (printed beside the wall time,
which on a shared machine counts the other processes too).
"""

from __future__ import annotations


import time

import numpy as np
import pytest

from bench._peer import compare, report
from icl.report import stats

N = 100_000
PEER_RESAMPLES = 500


def _fresh(x: np.ndarray, resamples: int = stats.RESAMPLES):
    """Our interval computed anew (not the one kept from an earlier call)."""
    stats.forget()
    return stats.mean_ci(x, identity="bench", resamples=resamples)


def _cpu(fn) -> float:
    """CPU seconds of one call of ``fn`` (this process; numpy here runs on one thread)."""
    start = time.process_time()
    fn()
    return time.process_time() - start


def _scipy_ci(x: np.ndarray, resamples: int):
    from scipy.stats import bootstrap

    return bootstrap((x,), np.mean, n_resamples=resamples, batch=50, method="percentile",
                     random_state=np.random.default_rng(0)).confidence_interval


@pytest.mark.parametrize("kind", ["binary", "judge-1-10"])
def test_bootstrap_1e5_discrete_scores_1e4_resamples_vs_scipy(benchmark, kind):
    rng = np.random.default_rng(0)
    x = (rng.random(N) < 0.37).astype(float) if kind == "binary" else rng.integers(1, 11, N).astype(float)
    ours = _fresh(x)
    peer = _scipy_ci(x, 2_000)
    width = peer.high - peer.low
    assert abs(ours.ci_low - peer.low) < 0.1 * width and abs(ours.ci_high - peer.high) < 0.1 * width
    scale = stats.RESAMPLES / PEER_RESAMPLES
    ratio = compare(benchmark, lambda: _fresh(x),
                    lambda: _scipy_ci(x, PEER_RESAMPLES),
                    peer_name=f"scipy.stats.bootstrap percentile ({PEER_RESAMPLES} resamples)", rounds=3,
                    peer_rounds=1)
    ours_s = benchmark.stats.stats.median
    cpu_s = _cpu(lambda: _fresh(x))
    report(f"[{kind}] 10^5 scores x 10^4 resamples: ours {ours_s:.3f} s wall, {cpu_s:.3f} s CPU; scipy at 10^4 resamples "
           f"(x{scale:.0f} of its {PEER_RESAMPLES}-resample time) about {scale * ratio * ours_s:.1f} s, "
           f"ratio about {scale * ratio:.0f}x")
    assert cpu_s < 1.0  # CPU time: the wall time of a shared machine counts the other processes too


def test_bootstrap_1e5_continuous_scores_1e4_resamples_native_vs_numpy_reference_and_scipy(benchmark):
    from icl.ops.bootstrap import bootstrap_totals

    rng = np.random.default_rng(1)
    x = rng.normal(20.0, 5.0, N)
    ours = _fresh(x)
    peer = _scipy_ci(x, PEER_RESAMPLES)
    width = peer.high - peer.low  # a 500-resample percentile is itself off by ~0.1 width
    assert abs(ours.ci_low - peer.low) < 0.25 * width and abs(ours.ci_high - peer.high) < 0.25 * width
    rows = np.sort(x)[:, None]
    scale = stats.RESAMPLES / PEER_RESAMPLES
    ratio = compare(benchmark, lambda: _fresh(x), lambda: _scipy_ci(x, PEER_RESAMPLES),
                    peer_name=f"scipy.stats.bootstrap percentile ({PEER_RESAMPLES} resamples)", rounds=3,
                    peer_rounds=1)
    ours_s = benchmark.stats.stats.median
    cpu_s = _cpu(lambda: _fresh(x))
    kernel_cpu_s = _cpu(lambda: bootstrap_totals(rows, 1, stats.RESAMPLES, backend="cpu"))
    reference_cpu_s = scale * _cpu(lambda: bootstrap_totals(rows, 1, PEER_RESAMPLES, backend="reference"))
    report(f"[continuous] 10^5 distinct scores x 10^4 resamples: ours {ours_s:.3f} s wall, {cpu_s:.3f} s CPU "
           f"(the native kernel alone {kernel_cpu_s:.3f} s CPU, all threads); its numpy reference (the same bits) "
           f"about {reference_cpu_s:.1f} s CPU (x{scale:.0f} of {PEER_RESAMPLES} resamples), ratio about "
           f"{reference_cpu_s / kernel_cpu_s:.0f}x; scipy at 10^4 resamples about {scale * ratio * ours_s:.1f} s, "
           f"ratio about {scale * ratio:.0f}x")
    assert cpu_s < 1.0  # CPU time: the wall time of a shared machine counts the other processes too
