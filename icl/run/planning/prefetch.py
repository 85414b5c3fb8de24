"""``--prefetch``: download the Hub weights of a run's models and judges into the Hugging Face
cache, and the run's data where it comes from the Hub, and say how to run it offline. Nothing is
loaded or asked: on a cluster, run it on a login node (network), then the run itself with
``HF_HUB_OFFLINE=1`` on the compute nodes.

Each model is instantiated as the run would (:func:`icl.run.planning.models.make_model`), which resolves
every weight source it reports, so exactly the files the run will need come down. Every cached
file is hashed against the Hub's listing meanwhile (:func:`icl.models.hub.verifying`): one
damaged in the cache is downloaded again (``--check`` hashes the small ones the same way,
:func:`icl.models.hub.verify_cached`, and judges the weights by their headers). Every reference that cannot be fetched is one line on stderr (all of them,
not only the first), and the exit status is then 2.

Data: a benchmark that declares a Hub release under its own name (``Benchmark.releases``, an
:class:`icl.data.release.HubRelease`: what ``python -m icl.data fetch NAME`` downloads) has it
fetched into ``--data-root`` when that folder is missing or empty, or, without ``--data-root``,
into the default data root (``$ICL_DATA_ROOT/NAME``, as ``fetch`` does), which the offline
command then names with ``--data-root`` (the same download and checks as ``fetch``). One it
declares not published, or published elsewhere, is said so. ``--fast`` runs use built-in data:
nothing.

The offline command printed last runs as printed: ``HF_HUB_OFFLINE=1``, ``ICL_HUB_DEFAULTS=1`` when
it is on, and the command typed without ``--prefetch``.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from pathlib import Path
from typing import Optional, Sequence, TextIO

from icl.data.release import Elsewhere, NotPublished
from icl.models import hub
from icl.run.planning.config import RunConfig, parse_models
from icl.run.errors import ConfigError
from icl.run.planning.models import make_model


def prefetch(config: RunConfig, typed: Sequence[str], stdout: TextIO, stderr: Optional[TextIO] = None) -> int:
    from icl.run.planning.setup import open_benchmark

    stderr = stderr or sys.stderr
    if not config.progress:  # as a run: no download bars (icl.models.hub reads it at each file)
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    bad: list[str] = []  # every reference that cannot be fetched (data and weights), each one line
    try:
        fetched, data_root = prefetch_data(config, stdout)  # first: the benchmark reads its data root
    except ConfigError as exc:
        bad.append(str(exc))
        fetched, data_root = False, config.data_root
    added = data_root if config.data_root is None else None  # fetched into the default data root
    if added is not None:
        config = dataclasses.replace(config, data_root=added)
    try:
        bench = open_benchmark(config)
    except ConfigError:
        if not bad:
            raise
        bench = None  # the data that could not be fetched is why: the models named are still fetched
    defaults = (bench.models_by_default(bench.config), bench.default_judges) if bench is not None else ((), ())
    specs = list(config.models) if config.models is not None else [s for m in defaults[0] for s in parse_models(m)]
    judges = list(config.judges) or [s for j in defaults[1] for s in parse_models(j)]
    hub.forget()
    found = 0
    with hub.verifying():  # the cache's files hashed, a damaged one downloaded again
        for spec in specs + judges:
            try:
                model = make_model(spec, "cpu")  # resolves (downloads) its weights; loads nothing
            except ConfigError as exc:  # every reference that fails is told, not only the first
                bad.append(str(exc))
                continue
            for key, value in model.identity["weights"].items():
                if not (isinstance(value, dict) and "commit" in value):
                    continue
                found += 1
                snap = hub.resolved(key)
                size = sum((snap.root / f).stat().st_size for f in snap.files)
                print(f"{spec.label}: {key}  {len(value['files'])} files, {size / 2**20:.1f} MiB", file=stdout)
    if bad:
        _tell(bad, stderr)
        return 2
    if not found and not fetched:
        print("no model or judge of this run names Hub weights (weights=hf:...): nothing to prefetch", file=stdout)
        return 0
    print(f"cached in {hub.cache_dir()}; run offline (same HF_HOME / HF_HUB_CACHE):", file=stdout)
    print(offline_command(typed, added), file=stdout)
    return 0


def _tell(bad: Sequence[str], stderr: TextIO) -> None:
    for message in bad:
        print(f"icl.run: {message}", file=stderr)


def offline_command(typed: Sequence[str], data_root: Optional[Path] = None) -> str:
    """The command typed, without ``--prefetch``, as it runs offline: ``HF_HUB_OFFLINE=1``, and
    ``ICL_HUB_DEFAULTS=1`` when it is on now (it decides which weights a model without ``weights=`` loads);
    ``--data-root`` added when the data was fetched into the default data root."""
    command = [a for a in typed if a != "--prefetch"]
    if data_root is not None and not any(a == "--data-root" or a.startswith("--data-root=") for a in command):
        command += ["--data-root", str(data_root)]
    env = ["HF_HUB_OFFLINE=1"]
    if hub.downloads_allowed():  # read as the run reads it: ICL_HUB_DEFAULTS=0 is off, not "set"
        env.append("ICL_HUB_DEFAULTS=1")
    return " ".join(env) + " " + shlex.join(command)


def prefetch_data(config: RunConfig, stdout: TextIO) -> tuple[bool, Optional[Path]]:
    """The run's data from the Hub (module docstring): whether it fetched the data, and the
    folder the run reads it from (``--data-root``, or the default data root it fetched into)."""
    from icl.run.planning import fetch as releases

    if config.fast:
        return False, config.data_root
    root = config.data_root
    missing = root is None or not root.is_dir() or not any(root.iterdir())
    if not missing:
        return False, root
    try:  # the release the benchmark declares under its own name
        found = releases.find(config.benchmark, benchmark=config.benchmark)
    except releases.FetchError:  # a benchmark that cannot be imported: opening it says why, in one line
        return False, root
    if found is None:
        return False, root
    key, rel = found.name, found.release
    if isinstance(rel, NotPublished):
        print(f"data: {config.benchmark}: {rel.why}", file=stdout)
        return False, root
    if isinstance(rel, Elsewhere):
        print(f"data: {releases.describe_elsewhere(key, rel)}", file=stdout)
        return False, root
    if root is None:
        from icl.data.registry import data_root

        root = data_root() / key
        print(f"data: no --data-root given: {config.benchmark}'s published release goes to the default data root, "
              f"as python -m icl.data fetch {key} --out {root}", file=stdout)
    else:
        print(f"data: --data-root {root} is missing: python -m icl.data fetch {key} --out {root}", file=stdout)
    try:
        releases.fetch(key, root, stdout)
    except releases.FetchError as exc:
        raise ConfigError(f"data: {exc}") from None
    return True, root
