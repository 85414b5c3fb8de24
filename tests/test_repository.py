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


# --- "No benchmark-specific code in icl/run/" ---------------------------------------------------
def _benchmark_words() -> set[str]:
    """The names of icl's own benchmarks, and of the releases and aliases each declares
    (``vl-icl`` also catches ``VL-ICL``): lower case."""
    from icl.benchmarks.registry import get_benchmark, list_benchmarks

    words: set[str] = set()
    for name in list_benchmarks():
        cls = get_benchmark(name)
        if cls.__module__.startswith("icl.benchmarks."):
            words |= {name, *cls.releases, *cls.release_aliases}
    return {w.lower() for w in words}


def benchmark_names_in_code(source: str, words: set[str]) -> list[tuple[int, str]]:
    """(line, what) for every benchmark name ``source`` uses in code: in a string literal (a whole
    word, any case) or as a part of an identifier (split at ``_`` and ``.``: ``VLICL_TASKS``,
    ``validate_cobsat``, ``icl.benchmarks.vif.render``). Docstrings and comments may name
    benchmarks (``python -m icl.run vibe`` in a usage example); code may not."""
    import ast

    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str)}
    in_text = re.compile(r"(?<![a-z0-9])(" + "|".join(map(re.escape, sorted(words, key=len, reverse=True)))
                         + r")(?![a-z0-9])")
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                found += [(line, f"string {node.value!r}") for _ in in_text.finditer(node.value.lower())][:1]
            continue
        identifiers = {ast.Name: lambda n: [n.id], ast.Attribute: lambda n: [n.attr], ast.arg: lambda n: [n.arg],
                       ast.FunctionDef: lambda n: [n.name], ast.AsyncFunctionDef: lambda n: [n.name],
                       ast.ClassDef: lambda n: [n.name], ast.keyword: lambda n: [n.arg or ""],
                       ast.alias: lambda n: [n.name, n.asname or ""], ast.ImportFrom: lambda n: [n.module or ""]}
        for kind, names in identifiers.items():
            if isinstance(node, kind):
                for ident in names(node):
                    if set(re.split(r"[_.]+", ident.lower())) & words:
                        found.append((line, f"identifier {ident}"))
    return sorted(set(found))


def test_the_runner_names_no_benchmark_in_code() -> None:
    """The project rule: no benchmark-specific code in ``icl/run/``. What a benchmark publishes,
    defaults to or checks is declared by the benchmark (``Benchmark.releases``, the registry),
    so a plugin benchmark gets the same treatment as a built-in one."""
    words = _benchmark_words()
    assert {"vibe", "best50", "vlicl", "cobsat", "vif", "vl-icl", "duke"} <= words
    offenders = [f"{path.relative_to(ROOT)}:{line}: {what}"
                 for path in sorted((ROOT / "icl" / "run").rglob("*.py"))
                 for line, what in benchmark_names_in_code(path.read_text(encoding="utf-8"), words)]
    assert not offenders, "\n".join(offenders)


def test_the_check_finds_a_benchmark_named_in_code_and_passes_docstrings_and_comments() -> None:
    """What the check above catches, as in the runner's fetch before releases moved into the
    benchmarks (``git show 08583c1:icl/run/planning/fetch.py``: 74 findings), and what it lets be."""
    source = '''"""Fetch vlicl and cobsat; the visual releases (duke, ...) print instructions."""
# huggingface.co/datasets/ys-zong/VL-ICL, tree at 6c63a33
HUB_RELEASES = {"vlicl": HubRelease("ys-zong/VL-ICL", "icl.run.planning.fetch:validate_vlicl")}
ALIASES = {"vl-icl": "vlicl"}
VLICL_IMAGE_TASKS = ("clevr",)


def validate_cobsat(root):
    """The checks ``cobsat`` makes (docstring: allowed)."""
    from icl.benchmarks.cobsat.data import ReleaseImages
    if "has no caption for" not in str(root):
        raise FetchError(f"CoBSAT release at {root}")
'''
    words = {"vibe", "vlicl", "cobsat", "vl-icl", "duke"}
    assert benchmark_names_in_code(source, words) == [
        (3, "string 'icl.run.planning.fetch:validate_vlicl'"), (3, "string 'vlicl'"), (3, "string 'ys-zong/VL-ICL'"),
        (4, "string 'vl-icl'"), (4, "string 'vlicl'"), (5, "identifier VLICL_IMAGE_TASKS"),
        (8, "identifier validate_cobsat"), (10, "identifier icl.benchmarks.cobsat.data"),
        (12, "string 'CoBSAT release at '")]


def test_every_test_module_has_a_name_of_its_own() -> None:
    """The tests folders are not packages: pytest imports each test file by its base name, so two
    files of one name (tests/models/test_requests.py beside tests/view/test_requests.py) stop the
    whole run at collection ("import file mismatch"), and only where both are collected."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    for path in sorted((ROOT / "bench").rglob("*.py")):
        if path.name.startswith(("test_", "bench_")):
            seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
