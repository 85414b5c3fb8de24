import subprocess
import sys

from icl.info import collect


def test_collect_lists_every_backend_with_a_reason():
    info = collect()
    assert set(info["backends"]) == {"reference", "cpu", "triton", "cuda"}
    for state in info["backends"].values():
        assert isinstance(state["available"], bool) and state["why"]


def test_native_module_is_built():
    # CI builds icl._C; a missing build must show up as a failure, not a silent fallback.
    info = collect()
    assert "error" not in info["native"], info["native"]
    assert info["backends"]["cpu"]["available"]


def test_cli_prints_backends():
    out = subprocess.run([sys.executable, "-m", "icl.info"], capture_output=True, text=True, check=True).stdout
    assert "backends:" in out and "reference" in out
