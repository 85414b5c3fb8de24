"""``--prefetch``: download the Hub weights of a run's models and judges into the Hugging Face
cache, and say how to run it offline. Nothing is loaded or asked: on a cluster, run it on a
login node (network), then the run itself with ``HF_HUB_OFFLINE=1`` on the compute nodes.

Each model is instantiated as the run would (:func:`icl.run.models.make_model`), which resolves
every weight source it reports, so exactly the files the run will need come down.
"""

from __future__ import annotations

import shlex
from typing import Sequence, TextIO

from icl.models import hub
from icl.run.config import RunConfig, parse_models
from icl.run.models import make_model


def prefetch(config: RunConfig, typed: Sequence[str], stdout: TextIO) -> int:
    from icl.run.runner import open_benchmark

    bench = open_benchmark(config)
    specs = list(config.models) if config.models is not None else [s for m in bench.default_models
                                                                   for s in parse_models(m)]
    judges = list(config.judges) or [s for j in bench.default_judges for s in parse_models(j)]
    hub.forget()
    found = 0
    for spec in specs + judges:
        model = make_model(spec, "cpu")  # resolves (downloads) its weights; loads nothing
        for key, value in model.identity["weights"].items():
            if not (isinstance(value, dict) and "commit" in value):
                continue
            found += 1
            snap = hub.resolved(key)
            size = sum((snap.root / f).stat().st_size for f in snap.files)
            print(f"{spec.label}: {key}  {len(value['files'])} files, {size / 2**20:.1f} MiB", file=stdout)
    if not found:
        print("no model or judge of this run names Hub weights (weights=hf:...): nothing to prefetch", file=stdout)
        return 0
    command = [a for a in typed if a != "--prefetch"]
    print(f"cached in {hub.cache_dir()}; run offline (same HF_HOME / HF_HUB_CACHE):", file=stdout)
    print("HF_HUB_OFFLINE=1 " + shlex.join(command), file=stdout)
    return 0

