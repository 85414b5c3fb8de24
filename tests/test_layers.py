"""The layers of docs/design.md, held by import-linter's contracts in pyproject.toml (``make test``
runs ``lint-imports`` on the tree): the tree keeps every contract, and each contract breaks when
a forbidden import is added to a copy of the package (a contract that cannot fail proves nothing).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")
pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed (requirements/lock.txt)")

#: contract id -> (module that gains the import, the forbidden import it gains)
FORBIDDEN = {
    "layers": ("icl/store/sqlite.py", "import icl.run.runner"),
    "ops": ("icl/ops/_numpy_core.py", "import icl.data.images"),
    "benchmarks": ("icl/benchmarks/vif/schema.py", "import icl.benchmarks.vibe.plan"),
    "families": ("icl/models/vlm/prompt.py", "import icl.models.vicl.canvas"),
}


def lint(root: Path) -> tuple[int, str]:
    proc = subprocess.run([str(LINT), "--no-cache", "--config", "pyproject.toml"], cwd=root, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    return proc.returncode, proc.stdout + proc.stderr


def contract_lines(output: str) -> dict[str, str]:
    """Contract name -> KEPT or BROKEN, from lint-imports' summary lines."""
    return {m.group(1).strip(): m.group(2) for m in re.finditer(r"^(.+?) (KEPT|BROKEN)\b", output, re.M)}


def names() -> dict[str, str]:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["id"]: c["name"] for c in config["tool"]["importlinter"]["contracts"]}


@pytest.mark.slow
def test_the_tree_keeps_every_contract():
    rc, out = lint(ROOT)
    status = contract_lines(out)
    assert set(status) == set(names().values()), out
    assert rc == 0 and set(status.values()) == {"KEPT"}, out


@pytest.mark.slow
def test_each_contract_breaks_on_a_forbidden_import(tmp_path):
    assert set(FORBIDDEN) == set(names()), "every contract needs a forbidden import here"
    shutil.copytree(ROOT / "icl", tmp_path / "icl", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for module, line in FORBIDDEN.values():
        path = tmp_path / module
        path.write_text(path.read_text(encoding="utf-8") + f"\n{line}  # added by tests/test_layers.py\n",
                        encoding="utf-8")
    rc, out = lint(tmp_path)
    status = contract_lines(out)
    assert rc != 0
    for cid, name in names().items():
        assert status.get(name) == "BROKEN", f"{cid}: {name} did not break on {FORBIDDEN[cid]}\n{out}"
        importer = FORBIDDEN[cid][0][:-3].replace("/", ".")
        assert importer in out, out
