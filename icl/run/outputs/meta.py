"""Provenance recorded with every run: git revision and package versions."""

from __future__ import annotations

import platform
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Optional

_PACKAGES = ("numpy", "torch", "opencv-python-headless", "matplotlib", "tqdm", "scipy", "scikit-image")


def git_revision(path: Optional[Path] = None) -> Optional[str]:
    """``HEAD`` of the checkout holding ``icl`` (suffixed ``-dirty`` with local changes), or None."""
    where = path or Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


@lru_cache(maxsize=1)
def _versions() -> tuple[tuple[str, Optional[str]], ...]:
    """Versions of icl, Python and the packages that can change scores."""
    import icl

    out: dict[str, Optional[str]] = {"icl": icl.__version__, "python": sys.version.split()[0],
                                     "platform": platform.platform()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return tuple(out.items())


def package_versions() -> dict[str, Optional[str]]:
    """Versions of icl, Python and the packages that can change scores (read once)."""
    return dict(_versions())
