"""Bootstrap confidence intervals (icl.report.stats) beside scipy.stats.bootstrap (percentile
method) in the same process, on 10^5 scores.

- Accuracy-like scores (0/1, as VL-ICL and CoBSAT report) and judge-like scores (integers 1-10,
  VIF-Bench): 10^4 resamples. Resampling 10^5 units uniformly is drawn exactly as multinomial
  counts over the few distinct values, so ours costs resamples x distinct values. The peer runs
  500 resamples (10^4 would hold a 10^9 matrix or run for minutes here); its time is scaled by 20
  to 10^4 resamples (its cost is linear in the resamples) and the line says so.
- Continuous scores (10^5 distinct values, e.g. PSNR): both at 1,000 resamples, the same work;
  ours draws 10^8 indices in chunks. Our time for 10^4 resamples is 10x this (printed).

Floor: the discrete 10^5 x 10^4 case in under a second of CPU time (printed beside the wall time,
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


def test_bootstrap_1e5_continuous_scores_vs_scipy(benchmark):
    rng = np.random.default_rng(1)
    x = rng.normal(20.0, 5.0, N)
    resamples = 1_000
    ratio = compare(benchmark, lambda: _fresh(x, resamples),
                    lambda: _scipy_ci(x, resamples), peer_name=f"scipy.stats.bootstrap percentile ({resamples} "
                    "resamples, the same work)", rounds=1, peer_rounds=1)
    ours_s = benchmark.stats.stats.median
    report(f"[continuous] 10^5 distinct scores x {resamples} resamples: ours {ours_s:.2f} s (x10 for 10^4 "
           f"resamples: about {10 * ours_s:.0f} s), ratio {ratio:.1f}x")
