"""Dataset registry: registered factories, and canonical directories on disk.

Benchmarks register their built-in (generated) datasets here when they are imported (the
visual benchmark's ``scenes-a``, ``scenes-b`` and ``photos``: ``icl.benchmarks.vibe.builtin``).

``get_dataset(name)`` resolves, in order: a registered factory (built-ins included), a
directory ``{root}/{name}`` holding ``meta.json``, or ``name`` itself as a path to such a
directory. The data root is ``root``, else ``$ICL_DATA_ROOT``, else ``~/.cache/icl/data``.

A dataset on disk is named by its ``meta.json`` ``name`` (the pattern ``[A-Za-z0-9][A-Za-z0-9._-]*``,
checked by the loader), and its folder carries that name (docs/data-format.md): a folder whose
name differs from its ``meta.json`` name is refused with a :class:`DataError` naming both, since
the name enters seeds and context lists and the folder's name would otherwise stand for it.

A folder named like a converter's output (``icl.data.convert.OUTPUTS``: ``suim``, ``cdd-haze``,
...) counts only with its completion manifest (:func:`converted_complete`): a conversion that
was killed or failed, or a folder written by hand under such a name without
``python -m icl.data convert``, is reported as incomplete rather than used. Hidden folders
(``.name.tmp-...``: conversions in progress) are never datasets.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from icl.data.dataset import DataError, Dataset, load_dataset
from icl.data.digest import manifest_summary
from icl.data.images import display_path

Factory = Callable[[Path, bool], Dataset]  # (data root, fast) -> Dataset

_FACTORIES: dict[str, Factory] = {}


def data_root(root: str | Path | None = None) -> Path:
    """The data root: ``root``, else ``$ICL_DATA_ROOT``, else ``~/.cache/icl/data``."""
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get("ICL_DATA_ROOT")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "icl" / "data"


def cache_root() -> Path:
    """icl's cache folder: ``$ICL_CACHE``, else ``~/.cache/icl``. Generated built-in data lives
    here (``builtin/``), never under a user's data root."""
    base = os.environ.get("ICL_CACHE")
    return Path(base).expanduser() if base else Path.home() / ".cache" / "icl"


def builtin_datasets() -> list[str]:
    """Names of the registered (generated, synthetic) datasets: they serve ``--fast`` or an
    explicit ``--datasets``, never a default real-data run."""
    return sorted(_FACTORIES)


def register_dataset(name: str, factory: Factory, *, overwrite: bool = False) -> None:
    """Register ``factory(root, fast) -> Dataset`` under ``name``."""
    if name in _FACTORIES and not overwrite:
        raise ValueError(f"dataset {name!r} is already registered (pass overwrite=True to replace it)")
    _FACTORIES[name] = factory


def converted_names() -> frozenset[str]:
    """Dataset names that only a converter writes (they need a completion manifest)."""
    from icl.data.convert import OUTPUTS

    return frozenset(n for names in OUTPUTS.values() for n in names)


def converted_complete(folder: Path) -> bool:
    """Whether a converter's output folder carries its completion manifest."""
    return manifest_summary(folder) is not None


def _usable(folder: Path) -> bool:
    if folder.name.startswith(("_", ".")) or not (folder / "meta.json").is_file():
        return False
    return folder.name not in converted_names() or converted_complete(folder)


def list_datasets(root: str | Path | None = None) -> list[str]:
    """Registered dataset names plus canonical directories found directly under the data root
    (a converter's output only when complete, see the module docstring)."""
    names = set(_FACTORIES)
    base = data_root(root)
    if base.is_dir():
        names.update(p.name for p in base.iterdir() if _usable(p))
    return sorted(names)


def get_dataset(name: str, root: str | Path | None = None, fast: bool = False) -> Dataset:
    """Open dataset ``name`` (see module docstring). ``fast`` selects the small variant of a
    built-in; datasets on disk have one size and ignore it."""
    base = data_root(root)
    factory = _FACTORIES.get(name)
    if factory is not None:
        return factory(base, fast)
    for candidate in (base / name, Path(name).expanduser()):
        if (candidate / "meta.json").is_file():
            if candidate.name in converted_names() and not converted_complete(candidate):
                raise DataError(f"dataset {name!r} is an incomplete conversion (no completion manifest): rerun "
                                f"python -m icl.data convert", path=candidate)
            ds = load_dataset(candidate)
            if ds.meta.name != candidate.name:
                raise DataError(f"meta.json names the dataset {ds.meta.name!r}, its folder is named "
                                f"'{display_path(candidate.name)}': a dataset's folder carries its meta.json name "
                                f"(docs/data-format.md); rename the folder, or the name (which enters seeds and "
                                f"context lists)", path=candidate / "meta.json")
            return ds
    raise DataError(
        f"unknown dataset {name!r}: not registered ({', '.join(sorted(_FACTORIES))}) and no meta.json "
        f"under {base / name}"
    )

