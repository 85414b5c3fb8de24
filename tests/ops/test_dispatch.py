import pytest
import torch

from icl.ops._dispatch import BackendError, Op, backend_status


def _make_op() -> Op:
    o = Op("double")
    o.register("reference")(lambda x: ("reference", x * 2))
    o.register("cpu", supports=lambda x: None if x.dtype == torch.float32 else f"cpu takes float32, got {x.dtype}")(
        lambda x: ("cpu", x * 2)
    )
    return o


def test_reference_always_available():
    assert backend_status("reference")[0]


def test_unknown_backend_raises():
    with pytest.raises(BackendError, match="unknown backend"):
        backend_status("metal")


def test_auto_prefers_cpu_and_falls_back_with_reason(monkeypatch):
    monkeypatch.delenv("ICL_BACKEND", raising=False)
    o = _make_op()
    x = torch.ones(2)
    cpu_ok = backend_status("cpu")[0]
    assert o("cpu", x)[0] == ("cpu" if cpu_ok else "reference")
    assert o("cpu", x.double())[0] == "reference"
    assert "float32" in o.refusal("cpu", "cpu", x.double())


def test_forced_backend_fails_loudly(monkeypatch):
    o = _make_op()
    monkeypatch.setenv("ICL_BACKEND", "triton")
    with pytest.raises(BackendError, match="triton"):
        o("cpu", torch.ones(2))
    monkeypatch.setenv("ICL_BACKEND", "reference")
    assert o("cpu", torch.ones(2))[0] == "reference"
    with pytest.raises(BackendError, match="cpu takes float32"):
        o("cpu", torch.ones(2).double(), backend="cpu")


def test_cpu_backend_refuses_cuda_tensors():
    o = _make_op()
    assert "CPU tensors" in o.refusal("cpu", "cuda", torch.ones(2)) or not backend_status("cpu")[0]


def test_missing_gpu_module_is_ignored_but_broken_one_raises():
    o = Op("x", gpu_module="icl.ops._gpu.does_not_exist")
    o.register("reference")(lambda: 1)
    assert o("cpu") == 1
