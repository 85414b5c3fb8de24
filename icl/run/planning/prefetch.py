"""``--prefetch``: download the Hub weights of a run's models and judges into the Hugging Face
cache, and the run's data where it comes from the Hub, and say how to run it offline. Nothing is
loaded or asked: on a cluster, run it on a login node (network), then the run itself with
``HF_HUB_OFFLINE=1`` on the compute nodes.

Each model is instantiated as the run would (:func:`icl.run.planning.models.make_model`), which resolves
every weight source it reports, so exactly the files the run will need come down.

Data: a benchmark whose published release ``python -m icl.data fetch NAME`` downloads from the
Hub (:data:`icl.run.planning.fetch.HUB_RELEASES`) is fetched into ``--data-root`` when that
folder is missing or empty (the same download and checks as ``fetch``); without ``--data-root``
the fetch command that provides one is printed. A release known not to be on the Hub
(:data:`icl.run.planning.fetch.NOT_PUBLISHED`) is said so. ``--fast`` runs use built-in data: nothing.
"""

from __future__ import annotations

import shlex
from typing import Sequence, TextIO

from icl.models import hub
from icl.run.planning.config import RunConfig, parse_models
from icl.run.errors import ConfigError
from icl.run.planning.models import make_model


def prefetch(config: RunConfig, typed: Sequence[str], stdout: TextIO) -> int:
    from icl.run.planning.setup import open_benchmark

    data = prefetch_data(config, stdout)  # first: the benchmark reads its data root when it plans
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
    if not found and not data:
        print("no model or judge of this run names Hub weights (weights=hf:...): nothing to prefetch", file=stdout)
        return 0
    command = [a for a in typed if a != "--prefetch"]
    print(f"cached in {hub.cache_dir()}; run offline (same HF_HOME / HF_HUB_CACHE):", file=stdout)
    print("HF_HUB_OFFLINE=1 " + shlex.join(command), file=stdout)
    return 0


def prefetch_data(config: RunConfig, stdout: TextIO) -> bool:
    """The run's data from the Hub (module docstring); True when it fetched the data."""
    from icl.run.planning import fetch as releases

    if config.fast:
        return False
    key = releases.ALIASES.get(config.benchmark.lower(), config.benchmark.lower())
    root = config.data_root
    missing = root is None or not root.is_dir() or not any(root.iterdir())
    if not missing:
        return False
    if key in releases.NOT_PUBLISHED:
        print(f"data: {config.benchmark}: {releases.NOT_PUBLISHED[key]}", file=stdout)
        return False
    if key not in releases.HUB_RELEASES:
        return False
    rel = releases.HUB_RELEASES[key]
    if root is None:
        print(f"data: {config.benchmark} reads the published release from --data-root, not given here; "
              f"python -m icl.data fetch {key} --out DIR downloads it ({rel.repo}@{(rel.commit or 'main')[:12]}, a Hub dataset), "
              f"then pass --data-root DIR", file=stdout)
        return False
    print(f"data: --data-root {root} is missing: python -m icl.data fetch {key} --out {root}", file=stdout)
    try:
        releases.fetch(key, root, stdout)
    except releases.FetchError as exc:
        raise ConfigError(f"--prefetch: data: {exc}") from None
    return True
