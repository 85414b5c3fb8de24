"""The repository as a fresh clone sees it: nothing in it shadows an installed distribution, and
it stands alone (no file points outside it).

Why: transformers 5.25 imports Hugging Face's ``kernels`` package
(``transformers.integrations.hub_kernels``); a top-level ``kernels/__init__.py`` here shadowed it
whenever the repository root was on ``sys.path`` (``python -m icl.run`` from the root, pytest's
``pythonpath = ["."]``) and broke every transformers/diffusers model family.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):  # an exported copy without .git
        return [p for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts and "build" not in p.parts]
    return [ROOT / name for name in out.decode().split("\0") if name]


def _module_names(folder: Path) -> dict[str, Path]:
    """Names that ``folder`` on ``sys.path`` makes importable as *regular* modules or packages.

    A folder without ``__init__.py`` is only a namespace portion: the import system takes it
    when no regular package of that name exists anywhere on ``sys.path``, so it cannot shadow an
    installed distribution."""
    names: dict[str, Path] = {}
    for entry in folder.iterdir():
        if entry.is_file() and entry.suffix == ".py" and entry.stem.isidentifier():
            names[entry.stem] = entry
        elif entry.is_dir() and entry.name.isidentifier() and (entry / "__init__.py").is_file():
            names[entry.name] = entry
    return names


def _path_entries() -> list[Path]:
    """The repository root (``python -m`` from it, ``pythonpath = ["."]``) and every folder
    pytest prepends to ``sys.path`` while collecting (rootdir-less "prepend" import mode: the
    folder of each test file without ``__init__.py``)."""
    folders = {ROOT}
    for top in ("tests", "bench", "tools"):
        for py in (ROOT / top).rglob("*.py"):
            folders.add(py.parent)
    return sorted(folders)


def test_no_name_importable_from_the_repository_shadows_an_installed_distribution() -> None:
    installed = importlib.metadata.packages_distributions()  # top-level module -> distributions
    clashes = []
    for folder in _path_entries():
        for name, path in _module_names(folder).items():
            if name == "conftest" or name == "icl":
                continue  # pytest's own plugin files; icl is this project (installed editable or not)
            if name in installed:
                clashes.append(f"{path.relative_to(ROOT)} shadows {name!r} of {installed[name]}")
    assert not clashes, "\n".join(clashes)


def test_kernels_folder_is_not_a_top_level_package() -> None:
    assert (ROOT / "kernels").is_dir()
    assert not (ROOT / "kernels" / "__init__.py").exists(), "kernels/ must stay a plain folder (see module doc)"
    spec = importlib.util.find_spec("kernels")
    if spec is not None and spec.origin is not None:  # a regular package: must not be ours
        assert ROOT / "kernels" not in Path(spec.origin).resolve().parents, spec.origin


def test_in_tree_kernels_load_as_icl_kernels() -> None:
    pytest.importorskip("triton")
    from icl.ops._gpu import kernels_module

    module = kernels_module("palette")
    assert module.__name__ == "icl.kernels.palette"
    assert Path(module.__file__).resolve().parent == ROOT / "kernels"
    top = sys.modules.get("kernels")  # Hugging Face's, when transformers imported it; never ours
    if top is not None:
        assert ROOT / "kernels" not in Path(getattr(top, "__file__", None) or "/").resolve().parents


@pytest.mark.parametrize("how", ["in-process", "python -c from the root"])
def test_transformers_hub_kernels_imports_from_the_root(how: str) -> None:
    """transformers >= 5.25 imports Hugging Face's ``kernels`` here (what broke)."""
    pytest.importorskip("transformers")
    if how == "in-process":
        assert str(ROOT) in [str(Path(p or ".").resolve()) for p in sys.path]
        importlib.import_module("transformers.integrations.hub_kernels")
        return
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    proc = subprocess.run([sys.executable, "-c", "import transformers.integrations.hub_kernels, diffusers"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


# Built by concatenation so that this file does not match itself.
_OUTSIDE = re.compile("|".join([
    re.escape(".." + "/shared"),
    r"(?<![\w.])/" + "work/",          # this workplace's checkout
    r"(?<![\w.])/" + r"home/\w+/",      # a person's home folder
    r"(?<![\w.])/" + "root/",           # root's home folder
]))


def test_no_file_points_outside_the_repository() -> None:
    """README, docs, code and tests name no path outside the repository: a clone stands alone."""
    offenders = []
    for path in _tracked_files():
        if path.suffix in {".png", ".npz", ".npy", ".so", ".gz", ".jpg", ".safetensors"} or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            if _OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()[:120]}")
    assert not offenders, "\n".join(offenders)
