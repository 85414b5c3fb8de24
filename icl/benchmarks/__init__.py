"""Benchmarks: one package per benchmark, each composing data, tasks and scoring.

``icl.benchmarks.vibe`` (PROTOCOL §1), ``best50`` (§2), ``vlicl`` (§3); plugins through the
``icl.benchmarks`` entry-point group (``docs/plugins.md``). ``check_benchmark(cls)`` checks a
plugin's benchmark against what the runner relies on (:mod:`icl.benchmarks.check`).
"""

from icl._lazy import lazy_getattr

__all__ = ["check_benchmark", "BenchmarkCheckError"]
__getattr__ = lazy_getattr(__name__, {"check_benchmark": "check", "BenchmarkCheckError": "check"}, globals())
