"""``--device auto`` without importing torch when the installed build has no CUDA/ROCm.

The build is read from ``torch/version.py``, which torch's build writes
(``pytorch/pytorch tools/generate_torch_version.py``: ``cuda: Optional[str] = None`` /
``hip: Optional[str] = None`` on builds without them, the version string otherwise)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROBE = textwrap.dedent("""
    import json, sys
    from icl.run.planning.models import _cpu_only_torch, resolve_device
    cpu_only = _cpu_only_torch()
    device = resolve_device("auto") if RESOLVE else None
    print(json.dumps({"cpu_only": cpu_only, "device": device, "torch": "torch" in sys.modules}))
""")


def _probe(extra_path: str = "", resolve: bool = True) -> dict:
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (extra_path, str(root)) if p)}
    code = PROBE.replace("RESOLVE", str(resolve))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # fresh interpreters
def test_auto_on_the_installed_build_agrees_with_torch() -> None:
    import torch

    got = _probe()
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        assert got == {"cpu_only": True, "device": "cpu", "torch": False}
    else:
        assert got["cpu_only"] is False and got["device"] == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.slow
@pytest.mark.parametrize("cuda, hip, cpu_only", [("None", "None", True), ("'12.4'", "None", False),
                                                 ("None", "'6.2.41133'", False)])
def test_a_cuda_or_rocm_build_is_asked(tmp_path, cuda, hip, cpu_only) -> None:
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('never imported by the check')\n")
    (package / "version.py").write_text(f"from typing import Optional\n__version__ = '2.5.0'\n"
                                        f"cuda: Optional[str] = {cuda}\nhip: Optional[str] = {hip}\n")
    assert _probe(str(tmp_path), resolve=False) == {"cpu_only": cpu_only, "device": None, "torch": False}
